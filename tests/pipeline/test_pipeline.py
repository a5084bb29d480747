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


class InFlightJudge:
    """A ``judge`` stage that records, for each call, its process and how many calls were in flight (a file per call
    in ``folder`` while it runs), and each instance it builds (a file per instance)."""

    def __init__(self, folder: str):
        import uuid

        self.folder, self.me = folder, f"{os.getpid()}-{uuid.uuid4().hex}"
        open(os.path.join(folder, f"built-{self.me}"), "w").close()

    def __call__(self, rows: list[dict]) -> list[dict]:
        running = os.path.join(self.folder, f"running-{self.me}-{rows[0]['case_id']}")
        open(running, "w").close()
        time.sleep(0.3)
        in_flight = sum(name.startswith("running-") for name in os.listdir(self.folder))
        os.remove(running)
        return [{"in_flight": in_flight, "pid": os.getpid()} for _ in rows]


@pytest.mark.ray
def test_a_judge_stage_runs_as_tasks_capped_by_its_plan_one_instance_per_process(ray_local, tmp_path):
    """A ``judge`` stage holds no model: it runs in the stream's task workers (no actor pool of its own), at most its
    plan's ``max_size`` calls at once, its class built once per worker process and reused by later calls there."""
    import ray

    stage = Stage(
        "judge_x",
        InFlightJudge,
        {"in_flight": "int", "pid": "int"},
        init_kwargs={"folder": str(tmp_path)},
        kind="judge",
        batched=True,
        num_cpus=0.25,
        workers=2,
        batch_size=1,
    )
    actors_before = set(ray._private.state.actors())  # the GCS's table (this Ray runs no dashboard)
    ds = build_dataset(ROWS, [stage], SCHEMA, parallelism=7)
    rows = [r for block in iter_blocks(ds) for r in block.to_pylist()]
    assert sorted(r["case_id"] for r in rows) == [str(i) for i in range(7)]
    assert max(r["in_flight"] for r in rows) <= 2  # the plan's cap (workers=2), on a 4-CPU Ray that would run 16
    pids = {r["pid"] for r in rows}
    built = [name for name in os.listdir(tmp_path) if name.startswith("built-")]
    assert sorted(int(name.split("-")[1]) for name in built) == sorted(pids)  # one instance per process
    started = [a["ActorClassName"] for k, a in ray._private.state.actors().items() if k not in actors_before]
    assert not [name for name in started if "MapWorker" in name]  # no actor pool: Ray Data's map actors
    assert "MapBatches(Stage_judge_x)" in ds.stats()  # the progress display and stats name the stage


def _phase_a(rows: list[dict]) -> list[dict]:
    return [{"a": 1} for _ in rows]


def _phase_b(rows: list[dict]) -> list[dict]:
    return [{"b": 2} for _ in rows]


@pytest.mark.ray
def test_consecutive_judge_phases_stay_operators_of_their_own(ray_local):
    """Two judge phases with equal options and caps (one engine): Ray Data would fuse them into one task per batch,
    capped together; each keeps its own operator and cap, as each had its own actor pool."""
    phases = [
        Stage(name, fn, {col: "int"}, kind="judge", batched=True, num_cpus=0.25, workers=2)
        for name, fn, col in (("judge_a", _phase_a, "a"), ("judge_b", _phase_b, "b"))
    ]
    ds = build_dataset(ROWS, phases, SCHEMA, parallelism=7)
    rows = [r for block in iter_blocks(ds) for r in block.to_pylist()]
    assert sorted((r["a"], r["b"]) for r in rows) == [(1, 2)] * 7
    operators = [line.split(":")[0] for line in ds.stats().splitlines() if line.startswith("Operator ")]
    assert operators[1:] == ["Operator 1 MapBatches(Stage_judge_a)", "Operator 2 MapBatches(Stage_judge_b)"]


def test_a_judge_stage_on_fewer_calls_than_its_cap_asks_for_no_more_tasks():
    """A judge stage's cap on tasks at once is trimmed to its calls on the run's rows, as a pool's size is."""
    from vbench_ray.pipeline import for_calls
    from vbench_ray.pool_plan import StagePlan

    stage = Stage("judge_a", _phase_a, {"a": "int"}, kind="judge", batched=True, num_cpus=0.25, workers=4)
    assert for_calls(StagePlan(0.25, 1, 4), stage, 1) == StagePlan(0.25, 1, 1)  # one case: one call (batch of 2)
    assert for_calls(StagePlan(0.25, 1, 4), stage, 5) == StagePlan(0.25, 1, 3)  # ceil(5 / 2)
    assert for_calls(StagePlan(0.25, 1, 4), stage, 100) == StagePlan(0.25, 1, 4)


@pytest.mark.ray
def test_a_judge_phase_fed_fewer_blocks_than_its_cap_warns_the_user_of_nothing(ray_local):
    """A later judge phase may get its rows in fewer blocks than its cap (here the first phase answers all four rows
    in one call, the second is capped at four): Ray Data warns that the operator can launch fewer tasks than its
    limit and suggests repartitioning, which the user has no reason to do; the run shows no such warning."""
    import warnings

    first = Stage("judge_a", _phase_a, {"a": "int"}, kind="judge", batched=True, num_cpus=0.25, workers=1, batch_size=4)
    second = Stage(
        "judge_b", _phase_b, {"b": "int"}, kind="judge", batched=True, num_cpus=0.25, workers=4, batch_size=1
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # every warning recorded, but those the stream's stages filter out
        ds = build_dataset(ROWS[:4], [first, second], SCHEMA, parallelism=4)
        rows = [r for block in iter_blocks(ds) for r in block.to_pylist()]
    assert sorted((r["a"], r["b"]) for r in rows) == [(1, 2)] * 4
    assert not [w for w in seen if "maximum number of concurrent tasks" in str(w.message)], [
        str(w.message) for w in seen
    ]


def test_a_worker_process_keeps_its_most_recent_stage_instances():
    """A long-lived Ray's task workers serve run after run: a process keeps the instances of its
    ``PROCESS_CALLABLES_KEPT`` most recently used stages (an old run's judge client goes) and builds one again if
    its stage comes back."""
    from vbench_ray import pipeline

    built = []

    class Recorder:
        def __init__(self, n):
            built.append(n)

        def __call__(self, row):
            return {}

    stages = [Stage(f"s{n}", Recorder, {}, init_kwargs={"n": n}) for n in range(pipeline.PROCESS_CALLABLES_KEPT + 1)]
    first = pipeline.process_callable(stages[0])
    assert pipeline.process_callable(stages[0]) is first and built == [0]  # reused, not built again
    for stage in stages[1:-1]:
        pipeline.process_callable(stage)
    assert pipeline.process_callable(stages[0]) is first  # used again: now the most recent
    pipeline.process_callable(stages[-1])  # one more than kept: the least recently used (s1) goes
    assert stages[1].token not in pipeline._PROCESS_CALLABLES and stages[0].token in pipeline._PROCESS_CALLABLES
    pipeline.process_callable(stages[1])
    assert built == list(range(len(stages))) + [1]
    function = Stage("f", square_unless_three, {"sq": "float"})
    assert pipeline.process_callable(function) is None  # a function: nothing to build


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
