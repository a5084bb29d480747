"""Stages: declared outputs, per-row error capture, rows never dropped; locally and on Ray."""

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


STAGES = [Stage("square", square_unless_three, {"sq": "float"}),
          Stage("offset", AddOffset, {"plus": "float"}, init_kwargs={"offset": 0.5}, workers=2)]


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


def slow_second_case(row):
    if row["x"] == 1:
        time.sleep(4.0)
    return {"sq": float(row["x"] ** 2), "done_at": time.time()}


@pytest.mark.ray
def test_a_finished_case_reaches_the_driver_without_waiting_for_the_next(ray_local):
    """``iter_blocks`` hands a block over as soon as it is done; Ray Data's default (one batch prefetched) held the
    quick first case until the slow second one had finished too."""
    stage = Stage("slow", slow_second_case, {"sq": "float", "done_at": "float"}, batch_size=1)
    ds = build_dataset(ROWS[:2], [stage], SCHEMA, parallelism=2)
    arrived = {}
    for block in iter_blocks(ds):
        arrived.update({row["case_id"]: (time.time(), row) for row in block.to_pylist()})
    assert set(arrived) == {"0", "1"}
    assert arrived["0"][0] < arrived["1"][1]["done_at"]  # case 0 was in hand while case 1 was still running


def test_all_null_outputs_keep_their_declared_type():
    table = run_local(ROWS[3:4], STAGES, SCHEMA)
    assert table.schema.field("plus").type == pa.float64()
    assert table.column("plus").null_count == 1


@pytest.mark.ray
def test_prewarm_imports_cpu_stage_modules_in_workers(ray_local):
    """The workers import the CPU stages' modules ahead of the stream; a pool stage's module is left to its actors."""
    import ray

    from vbench_ray.ray_start import prewarm
    from vbench_ray.video.frames import FrameMetricsStage

    stages = [Stage("frames", FrameMetricsStage, {"SSIM": "float"},
                    init_kwargs={"metrics": {"SSIM": {}, "MF": {}}, "video_backend": "decord"}),
              Stage("offset", AddOffset, {"plus": "float"}, kind="pool")]
    refs = prewarm(stages, {"CPU": 3.0, "GPU": 0.0})
    assert len(refs) == 3  # one per CPU
    done = ray.get(refs, timeout=120)
    # the stage's module, then what it declares: SSIM's and MF's libraries and the video reader
    assert all(mods == ["vbench_ray.video.frames", "skimage.metrics", "scipy.optimize", "decord"] for _, mods in done)
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
