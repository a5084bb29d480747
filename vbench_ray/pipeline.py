"""Compose stages into one streaming Ray Data pipeline (docs/architecture.md, "Data flow").

A ``Stage`` declares the columns it writes (with Arrow types, so every block has the same schema), the
columns it reads (``inputs``, for documentation and checks), its resources, and its *kind*:

* ``cpu``: stateless tasks (decode, classical metrics). Concurrency is bounded only by the cluster's
  CPUs unless ``workers`` caps it. A class ``fn`` is instantiated once per worker *process* and reused
  by later tasks there (so a metric object with a lookup table is not rebuilt per batch).
* ``pool``: an actor pool hosting a model, loaded once per actor (metric models, editors). Its own
  ``num_gpus`` (fractions allowed) and an autoscaling size ``(min, max)`` whose default comes from the
  cluster's resources (``ray.cluster_resources()``), planned together with the other pools so that all of
  them, the judge engines and a decode task fit at once (``vbench_ray.pool_plan``).
* ``judge``: light CPU tasks (at most ``workers`` at once) that send a batch's judge requests to an engine
  shared by the whole run (``vbench_ray.judges.engines``); they never host the model themselves. They run in
  the stream's task worker processes, warm already, like ``cpu`` stages (their class built once per process):
  an actor pool of their own would start fresh worker processes per phase and run (each importing Ray Data)
  only to wait on the engine.

``build_dataset`` turns each stage into one ``Dataset.map_batches`` of the same dataset, so Ray Data
runs them all at once and rows reach the sink as they finish. Stages never drop rows: an exception on
a row becomes text in the row's ``error_<stage>`` column and the stage's outputs stay null; rows that
already failed an earlier stage pass through untouched. ``drop`` names transient columns (decoded
frames handed to a pool) that the stage consumes and removes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
import traceback
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

from vbench_ray.pool_plan import StagePlan, plan_stages

log = logging.getLogger(__name__)

# Arrow types by the short names stages use to declare their outputs.
ARROW_TYPES = {
    "float": pa.float64(),
    "int": pa.int64(),
    "str": pa.string(),
    "bool": pa.bool_(),
    "bytes": pa.large_binary(),
    "list<str>": pa.list_(pa.string()),
}
STAGE_KINDS = ("cpu", "pool", "judge")
MAX_BLOCKS_PER_CPU = 64


@dataclass
class Stage:
    """One pipeline step.

    ``fn`` is a function ``row -> dict`` or a class whose instances are such callables (built with
    ``init_kwargs``: once per actor for ``pool`` stages, once per worker process for ``cpu`` and ``judge``
    stages). The returned dict may hold any of ``outputs``; missing ones become null.
    """

    name: str
    fn: Callable[..., dict] | type
    outputs: dict[str, str]
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    kind: str = "cpu"
    inputs: tuple[str, ...] = ()  # columns the stage reads (beyond the case fields)
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory: int | None = None  # bytes per worker, for Ray's scheduler
    workers: int | None = None  # cap on tasks at once (cpu, judge) or the pool's max size; None: from the cluster
    min_workers: int | None = None  # pool's min size; None: 1 (CPU pools) or the max (GPU pools)
    gpu_cost: float = 1.0  # a GPU pool's cost per case relative to the other pools': its part of the GPUs (pool_plan)
    cost_group: str | None = (
        None  # pools whose gpu_cost share one scale (the metrics' ms a case): the cheaper keep their part
    )
    batch_size: int = 2
    timed: bool = True  # add a `seconds_<stage>` column
    drop: tuple[str, ...] = ()  # transient input columns removed after this stage
    skip_failed: bool = True  # rows with an error_* column pass through untouched
    batched: bool = False  # fn takes the batch's rows (a list) and returns one dict per row (judges batch requests)
    transient: tuple[str, ...] = ()  # outputs that only later stages read: never written to the case table
    runtime_env: dict | None = None
    cpu_setting: str | None = None  # the override that runs this pool without a GPU, for messages (metrics: device=cpu)
    token: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False)  # identity across processes

    def __post_init__(self):
        if self.kind not in STAGE_KINDS:
            raise ValueError(f"stage {self.name}: kind must be one of {STAGE_KINDS}, got {self.kind!r}")
        if self.kind == "pool" and not isinstance(self.fn, type):
            raise ValueError(f"stage {self.name}: a {self.kind} stage needs a class (loaded once per actor)")

    @property
    def is_actor(self) -> bool:
        return self.kind == "pool"

    @property
    def error_column(self) -> str:
        return f"error_{self.name}"

    def schema_fields(self) -> list[pa.Field]:
        fields = [pa.field(col, ARROW_TYPES[t]) for col, t in self.outputs.items()]
        fields.append(pa.field(self.error_column, pa.string()))
        if self.timed:  # how long the row took here, when it left (a timeline of the stream), and on which node
            fields += [
                pa.field(f"seconds_{self.name}", pa.float64()),
                pa.field(f"at_{self.name}", pa.float64()),
                pa.field(f"node_{self.name}", pa.string()),
            ]
        return fields

    def persisted_fields(self) -> list[pa.Field]:
        """The fields that belong in the case table (transient columns and frame payloads are not)."""
        return [f for f in self.schema_fields() if f.type != pa.large_binary() and f.name not in self.transient]


def has_error(row: dict) -> bool:
    return any(v for k, v in row.items() if k.startswith("error_"))


def format_exception(exc: BaseException) -> str:
    """One line a user can act on: the exception type and message, plus where it was raised."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


# cpu and judge stages: one instance of a class fn per worker process, by stage token; the most recent
# PROCESS_CALLABLES_KEPT (a long-lived Ray's workers serve run after run: an old run's judge client goes)
_PROCESS_CALLABLES: dict[str, Any] = {}
PROCESS_CALLABLES_KEPT = 16


class _BatchRunner:
    """Applies a per-row callable to an Arrow batch, capturing each row's failure in its error column."""

    def __init__(self, stage: Stage, call: Callable | None = None):
        self.stage = stage
        self.call = (
            call if call is not None else (stage.fn(**stage.init_kwargs) if isinstance(stage.fn, type) else stage.fn)
        )

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        results = self._run_batch(rows) if self.stage.batched else [self._run_row(row) for row in rows]
        for f in self.stage.schema_fields():
            if f.name in batch.column_names:  # a value the stage did not return stays as it was
                before = batch.column(f.name).to_pylist()
                column = pa.array([r[f.name] if f.name in r else old for r, old in zip(results, before)], type=f.type)
                batch = batch.set_column(batch.column_names.index(f.name), f, column)
            else:
                batch = batch.append_column(f, pa.array([r.get(f.name) for r in results], type=f.type))
        return batch.drop_columns([c for c in self.stage.drop if c in batch.column_names])

    def _run_batch(self, rows: list[dict]) -> list[dict]:
        """A batched stage: one call for the rows that have not failed; an exception fails those rows."""
        todo = [i for i, row in enumerate(rows) if not (self.stage.skip_failed and has_error(row))]
        results: list[dict] = [{} for _ in rows]
        start = time.perf_counter()
        try:
            outs = list(self.call([rows[i] for i in todo])) if todo else []
        except Exception as exc:  # the whole call failed: each of its rows records why
            log.warning("stage %s failed on a batch of %d: %s", self.stage.name, len(todo), exc)
            outs = [{self.stage.error_column: format_exception(exc)} for _ in todo]
        seconds = (time.perf_counter() - start) / max(1, len(todo))
        for i, out in zip(todo, outs):
            results[i] = dict(out or {})
            if self.stage.timed:
                results[i].update(
                    {
                        f"seconds_{self.stage.name}": seconds,
                        f"at_{self.stage.name}": time.time(),
                        f"node_{self.stage.name}": _node(),
                    }
                )
        return results

    def _run_row(self, row: dict) -> dict:
        if self.stage.skip_failed and has_error(row):
            return {}
        start = time.perf_counter()
        try:
            out = dict(self.call(row) or {})
        except Exception as exc:  # a bad case must not end the run
            log.warning("stage %s failed on case %s: %s", self.stage.name, row.get("case_id"), exc)
            out = {self.stage.error_column: format_exception(exc)}
        if self.stage.timed:
            out.update(
                {
                    f"seconds_{self.stage.name}": time.perf_counter() - start,
                    f"at_{self.stage.name}": time.time(),
                    f"node_{self.stage.name}": _node(),
                }
            )
        return out


def _node() -> str | None:
    """The Ray node this worker runs on (its id), or None outside Ray (``run_local``)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # never let bookkeeping fail a row
        return None


class _TaskRunner:
    """A picklable task function; a class ``fn`` is built on first use in each worker process."""

    def __init__(self, stage: Stage):
        self.stage = stage

    def __call__(self, batch: pa.Table) -> pa.Table:
        return _BatchRunner(self.stage, process_callable(self.stage))(batch)


def process_callable(stage: Stage) -> Callable | None:
    """This process's instance of a class ``fn`` (None for a function): built on first use, kept for later tasks."""
    if not isinstance(stage.fn, type):
        return None
    call = _PROCESS_CALLABLES.pop(stage.token, None)  # re-inserted: the dict's order is least recently used first
    if call is None:
        call = stage.fn(**stage.init_kwargs)
    _PROCESS_CALLABLES[stage.token] = call
    while len(_PROCESS_CALLABLES) > PROCESS_CALLABLES_KEPT:
        del _PROCESS_CALLABLES[next(iter(_PROCESS_CALLABLES))]
    return call


def _task_runner(stage: Stage) -> _TaskRunner:
    """The stage's task function, its class named after the stage (Ray Data's progress shows
    ``MapBatches(Stage_<name>)``)."""
    named = type(f"Stage_{stage.name}", (_TaskRunner,), {"__module__": __name__})
    return named(stage)


def _actor_runner(stage: Stage) -> type:
    """A class Ray can instantiate per actor, closing over the stage definition."""

    class StageActor(_BatchRunner):
        def __init__(self):
            super().__init__(stage)

    StageActor.__name__ = StageActor.__qualname__ = f"Stage_{stage.name}"
    return StageActor


def cluster_capacity() -> dict[str, float | bool]:
    """The cluster's CPUs and GPUs (what pool sizes default to), and whether it can add nodes (``autoscales``)."""
    import ray

    resources = ray.cluster_resources() if ray.is_initialized() else {}
    return {
        "CPU": float(resources.get("CPU", 1.0)),
        "GPU": float(resources.get("GPU", 0.0)),
        "autoscales": ray.is_initialized() and _autoscales(),
    }


def _autoscales() -> bool:
    try:  # Ray Data's own test (the cluster config's node groups); Ray internals: if they move, assume not
        from ray.data._internal.cluster_autoscaler.util import is_autoscaling_enabled

        return bool(is_autoscaling_enabled())
    except Exception:  # noqa: BLE001
        return False


def apply_stage(ds, stage: Stage, plan: StagePlan):
    """Append one stage to a ``ray.data.Dataset``, with the resources and pool size ``plan`` gives it."""
    import ray.data

    resources: dict[str, Any] = {"num_cpus": plan.num_cpus}
    num_gpus = stage.num_gpus if plan.num_gpus is None else plan.num_gpus  # a pool's ask fitted to the GPUs
    if num_gpus:
        resources["num_gpus"] = num_gpus
    if stage.memory:
        resources["memory"] = stage.memory
    if stage.runtime_env:
        resources["runtime_env"] = stage.runtime_env
    if stage.is_actor:
        log.info(
            "stage %s (%s): pool of %d-%d actor(s), %.2f CPU and %.2f GPU each",
            stage.name,
            stage.kind,
            plan.min_size,
            plan.max_size,
            plan.num_cpus,
            num_gpus,
        )
        return ds.map_batches(
            _actor_runner(stage),
            batch_format="pyarrow",
            batch_size=stage.batch_size,
            compute=ray.data.ActorPoolStrategy(
                min_size=plan.min_size, max_size=plan.max_size, initial_size=plan.min_size
            ),
            udf_modifying_row_count=False,
            **resources,
        )
    workers = stage.workers
    if stage.kind == "judge":  # its cap is planned (trimmed to its calls: ``for_calls``)
        workers = plan.max_size
        resources.update(_own_operator(stage))
        # the cap is a bound, not a target: a later phase may get its rows in fewer blocks than the cap, and Ray
        # Data's warning about it would tell the user to repartition, which there is no reason to do
        warnings.filterwarnings(
            "ignore",
            message=rf"The maximum number of concurrent tasks for 'MapBatches\(Stage_{re.escape(stage.name)}\)'",
        )
    return ds.map_batches(
        _task_runner(stage),
        batch_format="pyarrow",
        batch_size=stage.batch_size,
        compute=ray.data.TaskPoolStrategy(size=workers),
        udf_modifying_row_count=False,
        **resources,
    )


def build_dataset(
    rows: list,
    stages: list[Stage],
    schema: pa.Schema,
    parallelism: int,
    reserved: dict[str, float] | None = None,
    plans: dict[str, StagePlan] | None = None,
):
    """``rows`` through every stage, as one lazy ``ray.data.Dataset``, the stages sized together to the cluster
    less what the judge engines hold (``reserved``; ``vbench_ray.pool_plan``), or as ``plans`` says when the
    caller has planned them already (the runner does, before its judge engines load).

    ``rows`` is a list of dicts (typed by ``schema``), or a list of Arrow tables with ``schema`` (the runner's
    case table in chunks, ``vbench_ray.case_table``). A list of tables is consumed: each table leaves the list
    once its rows are in the object store, so a caller that passed its only reference keeps no second copy of
    the case table in the driver."""
    import ray

    from vbench_ray.driver_memory import release_memory

    if rows and isinstance(rows[0], pa.Table):
        chunks = rows
    else:
        chunks = [pa.Table.from_pylist(rows, schema=schema)]
    n = sum(c.num_rows for c in chunks)
    capacity = cluster_capacity()
    if plans is None:  # before any block is put: a plan that cannot run is refused
        plans = plan_stages(stages, capacity, reserved)
    # one block per input slice: parallelism without a repartition task competing with the actors for CPUs
    sizes = block_sizes(
        n,
        int(capacity["CPU"]),
        stages[0].batch_size if stages else 1,
        min(parallelism, int(capacity["CPU"] * MAX_BLOCKS_PER_CPU)),
    )
    refs, metadata, left = [], [], len(chunks)
    for block in _take_blocks(chunks, sizes) if n else [schema.empty_table()]:
        metadata.append(block_metadata(block))
        refs.append(ray.put(block))
        if len(chunks) < left:  # a chunk is all in the object store: the heap it held goes back to the OS
            del block
            release_memory()
            left = len(chunks)
    ds = dataset_of_blocks(refs, metadata)
    for stage in stages:
        ds = apply_stage(ds, stage, for_calls(plans[stage.name], stage, n))
    return ds


def _own_operator(stage: Stage) -> dict:
    """Task options that keep a judge stage an operator of its own: Ray Data fuses consecutive task stages whose
    options and task caps are equal, and two judge phases on one engine would then run one after the other in a
    single task, capped together (half the requests in flight that each phase's own cap allows). A task label
    naming the stage (Ray's ``_labels`` option, merged with Ray Data's own; it labels the tasks, nothing else)
    makes their options differ. Without that option (another Ray) the phases fuse, which changes speed only."""
    try:
        from ray._common.ray_option_utils import task_options
    except ImportError:
        return {}
    return {"_labels": {"vbench_ray.stage": stage.name}} if "_labels" in task_options else {}


def for_calls(plan: StagePlan, stage: Stage, n: int) -> StagePlan:
    """``plan`` with an actor pool, or a judge stage's cap on tasks at once, no larger than the stage's calls on ``n``
    rows (``batch_size`` rows a call): a small run starts no actor that would never get a row (the plan fills the
    GPUs: ``vbench_ray.pool_plan``), and a judge stage asks for no more tasks at once than it has calls."""
    if not stage.is_actor and stage.kind != "judge":
        return plan
    calls = max(1, math.ceil(n / max(1, stage.batch_size or 1)))
    if plan.max_size <= calls:
        return plan
    return dataclasses.replace(plan, min_size=min(plan.min_size, calls), max_size=calls)


def iter_blocks(ds):
    """The stream's output blocks (Arrow tables), each as soon as it is done.

    ``prefetch_batches=0``: with Ray Data's default of 1 the iterator holds a finished block until the next one
    is done too, so the first row would wait for the second case (docs/performance.md)."""
    return ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0)


def block_metadata(block: pa.Table):
    """Ray Data's metadata of one input block (rows, bytes, schema), read here from the table in hand."""
    from ray.data.block import BlockExecStats, BlockMetadataWithSchema

    return BlockMetadataWithSchema.from_block(block, block_exec_stats=BlockExecStats.builder().build())


def dataset_of_blocks(refs: list, metadata: list):
    """A dataset over Arrow tables already in the object store, whose metadata the driver computed as it put them.

    ``ray.data.from_arrow_refs`` learns each block's row count and schema by one remote task per block and waits
    for all of them before the dataset exists: with a block per case that is hundreds of tasks queued behind the
    workers' first imports, seconds before the first case starts. The same logical
    plan (``FromArrow``, an ``InputDataBuffer`` at execution, as ``from_arrow_refs`` builds) made from the metadata
    in hand starts at once. These are Ray Data internals of the pinned Ray: if they move, the public call is used."""
    import ray.data

    try:
        from ray.data._internal.logical.interfaces import LogicalPlan
        from ray.data._internal.logical.operators.from_operators import FromArrow
        from ray.data._internal.stats import DatasetStats
        from ray.data.context import DataContext
        from ray.data.dataset import MaterializedDataset
    except ImportError:  # another Ray: the documented way, with its metadata tasks
        return ray.data.from_arrow_refs(refs)
    context = DataContext.get_current().copy()
    stats = DatasetStats(metadata={"FromArrow": metadata}, parent=None)
    return MaterializedDataset(LogicalPlan(FromArrow(refs, metadata), context), context, stats)


def block_sizes(n: int, cpus: int, first: int, max_blocks: int) -> list[int]:
    """Rows per input block for ``n`` rows.

    At most about ``max_blocks`` blocks of ``cap = ceil(n / max_blocks)`` rows: past ``MAX_BLOCKS_PER_CPU`` blocks
    per CPU the per-block bookkeeping (100k one-row blocks) costs more than it buys. A map task returns its rows
    when its whole block is done, so a run of ``cap``-row blocks would show its first row only after ``cap``
    cases (391 at 100k cases on 4 CPUs: minutes). When the blocks are bigger than ``first`` (the first stage's
    batch), the run starts with one wave of ``first``-row blocks per CPU, doubling each wave up to ``cap``,
    and ends with the same waves in reverse, so the first rows come after one batch and no CPU is left with
    a large block while the others idle at the end."""
    if n <= 0:
        return []
    max_blocks = max(1, min(max_blocks, n))
    cap = -(-n // max_blocks)
    cpus = max(1, cpus)
    ramp, size, ramped = [], max(1, min(first, cap)), 0
    while size < cap and 2 * (ramped + size * cpus) <= n:
        ramp += [size] * cpus
        ramped += size * cpus
        size *= 2
    middle = n - 2 * ramped
    return ramp + [cap] * (middle // cap) + ([middle % cap] if middle % cap else []) + ramp[::-1]


def _take_blocks(chunks: list[pa.Table], sizes: list[int]):
    """Blocks of ``sizes`` rows cut from ``chunks`` in order (zero-copy slices). The list is consumed (reversed,
    then popped): each chunk leaves it once all its rows have been handed out, so it is freed with its blocks."""
    chunks.reverse()  # the next rows are at the end: pop() is cheap
    for size in sizes:
        parts = []
        while size and chunks:
            head = chunks[-1]
            part = head.slice(0, size)
            parts.append(part)
            size -= part.num_rows
            if part.num_rows == head.num_rows:
                chunks.pop()
            else:
                chunks[-1] = head.slice(part.num_rows)
        yield parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def run_local(rows: list[dict], stages: list[Stage], schema: pa.Schema) -> pa.Table:
    """The same stages in this process, without Ray: for debugging and unit tests of stage logic."""
    table = pa.Table.from_pylist(rows, schema=schema)
    for stage in stages:
        table = _BatchRunner(stage)(table)
    return table
