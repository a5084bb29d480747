"""Stages: declared outputs, per-row error capture, rows never dropped; locally and on Ray."""

import os
import time

import pyarrow as pa
import pytest

from vbench_ray.pipeline import Stage, build_dataset, iter_blocks, run_local

SCHEMA = pa.schema([("case_id", pa.string()), ("variant", pa.string()), ("x", pa.int64())])
ROWS = [{"case_id": str(i), "variant": "base", "x": i} for i in range(7)]


def square_unless_three(row):
    if row["x"] == 3:
        raise ValueError("three is not allowed")
    return {"sq": float(row["x"] ** 2)}


class AddOffset:
    """An actor stage: state set once in the constructor."""

    def __init__(self, offset: float):
        self.offset = offset

    def __call__(self, row):
        return {"plus": row["sq"] + self.offset}


STAGES = [
    Stage("square", square_unless_three, {"sq": "float"}),
    Stage("offset", AddOffset, {"plus": "float"}, init_kwargs={"offset": 0.5}, workers=2),
]


def _check(table: pa.Table):
    rows = sorted(table.to_pylist(), key=lambda r: int(r["case_id"]))
    assert len(rows) == 7  # nothing dropped
    for r in rows:
        if r["x"] == 3:
            assert r["sq"] is None and r["plus"] is None
            assert r["error_square"].startswith("ValueError: three is not allowed")
            assert r["error_offset"] is None  # the later stage skipped the failed row
        else:
            assert r["sq"] == r["x"] ** 2 and r["plus"] == r["x"] ** 2 + 0.5
            assert r["error_square"] is None and r["error_offset"] is None
            assert r["seconds_square"] >= 0
    assert table.schema.field("sq").type == pa.float64()
    assert table.schema.field("error_square").type == pa.string()


def test_stages_in_process():
    _check(run_local(ROWS, STAGES, SCHEMA))


@pytest.mark.ray
def test_stages_on_ray(ray_local):
    ds = build_dataset(ROWS, STAGES, SCHEMA, parallelism=3)
    _check(pa.concat_tables(list(ds.iter_batches(batch_size=4, batch_format="pyarrow"))))


@pytest.mark.ray
def test_input_blocks_need_no_metadata_tasks(ray_local, monkeypatch):
    """The stream's input is described from the tables in hand: no per-block metadata task (``from_arrow_refs``
    queues one per block, each waiting behind the workers' first imports before the first case starts)."""
    import ray.data

    def refuse(*args, **kwargs):
        raise AssertionError("from_arrow_refs was called: one metadata task per input block")

    monkeypatch.setattr(ray.data, "from_arrow_refs", refuse)
    ds = build_dataset(ROWS, STAGES, SCHEMA, parallelism=7)
    _check(pa.concat_tables(list(ds.iter_batches(batch_size=None, batch_format="pyarrow"))))
    empty = build_dataset([], STAGES[:1], SCHEMA, parallelism=1)
    assert sum(b.num_rows for b in empty.iter_batches(batch_size=None, batch_format="pyarrow")) == 0


WAIT_S = 60.0  # how long the second case waits for the driver to hold the first (a bound, not a margin)


def second_case_waits_for_the_first(marker: str):
    """A stage whose second case finishes only once the driver has the first in hand (``marker`` exists), or after
    ``WAIT_S``, saying which: an order of events, not a comparison of two processes' clocks."""

    def stage(row):
        seen = True
        if row["x"] == 1:
            deadline = time.monotonic() + WAIT_S
            while not os.path.exists(marker):
                if time.monotonic() > deadline:
                    seen = False
                    break
                time.sleep(0.02)
        return {"sq": float(row["x"] ** 2), "first_was_in_hand": seen}

    return stage


@pytest.mark.ray
def test_a_finished_case_reaches_the_driver_without_waiting_for_the_next(ray_local, tmp_path):
    """``iter_blocks`` hands a block over as soon as it is done; Ray Data's default (one batch prefetched) held the
    quick first case until the slow second one had finished too. Here the second case cannot finish before the
    driver has the first (it waits for the driver's marker): held back, it would give up after ``WAIT_S``."""
    marker = tmp_path / "case-0-in-driver"
    stage = Stage(
        "slow", second_case_waits_for_the_first(str(marker)), {"sq": "float", "first_was_in_hand": "bool"}, batch_size=1
    )
    ds = build_dataset(ROWS[:2], [stage], SCHEMA, parallelism=2)
    arrived = []
    for block in iter_blocks(ds):
        for row in block.to_pylist():
            arrived.append(row)
            if row["case_id"] == "0":
                marker.touch()
    assert [r["case_id"] for r in arrived] == ["0", "1"]
    assert arrived[1]["first_was_in_hand"] is True  # case 1 finished only after case 0 had reached the driver


def test_all_null_outputs_keep_their_declared_type():
    table = run_local(ROWS[3:4], STAGES, SCHEMA)
    assert table.schema.field("plus").type == pa.float64()
    assert table.column("plus").null_count == 1


@pytest.mark.ray
def test_prewarm_imports_cpu_stage_modules_in_workers(ray_local):
    """The workers import the CPU stages' modules ahead of the stream; a pool stage's module is left to its actors."""
    import ray

    from vbench_ray.ray_start import prewarm
    from vbench_ray.metrics.stage import FrameMetricsStage

    stages = [
        Stage(
            "frames",
            FrameMetricsStage,
            {"SSIM": "float"},
            init_kwargs={"metrics": {"SSIM": {}, "MF": {}}, "video_backend": "decord"},
        ),
        Stage("offset", AddOffset, {"plus": "float"}, kind="pool"),
    ]
    refs = prewarm(stages, {"CPU": 3.0, "GPU": 0.0})
    assert len(refs) == 3  # one per CPU
    done = ray.get(refs, timeout=120)
    # the stage's module, then what it declares: SSIM's and MF's libraries and the video reader; then Ray Data's
    wanted = ["vbench_ray.metrics.stage", "skimage.metrics:structural_similarity", "scipy.optimize", "decord"]
    assert all(mods == [*wanted, "ray.data"] for _, mods in done)
    assert prewarm([Stage("offset", AddOffset, {"plus": "float"}, kind="pool")], {"CPU": 3.0, "GPU": 0.0}) == []


def test_live_progress_display_only_on_a_terminal(monkeypatch):
    """A terminal gets Ray Data's live progress display; a log file (ray job submit, CI) keeps plain lines."""
    import sys

    from ray.data import DataContext

    from vbench_ray.runner import _progress_on_terminals

    ctx = DataContext.get_current()
    monkeypatch.setattr(ctx, "enable_rich_progress_bars", False)
    monkeypatch.setattr(ctx, "use_ray_tqdm", True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    _progress_on_terminals()
    assert (ctx.enable_rich_progress_bars, ctx.use_ray_tqdm) == (False, True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    _progress_on_terminals()
    assert (ctx.enable_rich_progress_bars, ctx.use_ray_tqdm) == (True, False)
