"""Compose stages into a Ray Data pipeline (DESIGN.md, "Data flow").

A ``Stage`` declares the columns it reads and writes (with Arrow types, so every block has the same
schema), its resources, and whether it is a stateless task or an actor pool hosting a model. The
builder turns each into one ``Dataset.map_batches``. Stages never drop rows: an exception on a row
becomes text in the row's ``error_<stage>`` column and the stage's outputs stay null; rows that
already failed an earlier stage pass through untouched.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

log = logging.getLogger(__name__)

# Arrow types by the short names stages use to declare their outputs.
ARROW_TYPES = {
    "float": pa.float64(),
    "int": pa.int64(),
    "str": pa.string(),
    "bool": pa.bool_(),
    "list<str>": pa.list_(pa.string()),
}


@dataclass
class Stage:
    """One pipeline step.

    ``fn`` is either a function ``row -> dict`` (a task stage) or a class whose instances are
    callables ``row -> dict`` (an actor-pool stage: the constructor loads the model once per actor,
    with ``init_kwargs``). The returned dict may hold any of ``outputs``; missing ones become null.
    """

    name: str
    fn: Callable[..., dict] | type
    outputs: dict[str, str]
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory: int | None = None  # bytes per worker, for Ray's scheduler
    workers: int = 1  # actor pool size (actor stages) or max concurrent tasks (task stages)
    batch_size: int = 2
    timed: bool = True  # add a `seconds_<stage>` column

    @property
    def is_actor(self) -> bool:
        return isinstance(self.fn, type)

    @property
    def error_column(self) -> str:
        return f"error_{self.name}"

    def schema_fields(self) -> list[pa.Field]:
        fields = [pa.field(col, ARROW_TYPES[t]) for col, t in self.outputs.items()]
        fields.append(pa.field(self.error_column, pa.string()))
        if self.timed:
            fields.append(pa.field(f"seconds_{self.name}", pa.float64()))
        return fields


def has_error(row: dict) -> bool:
    return any(v for k, v in row.items() if k.startswith("error_"))


def format_exception(exc: BaseException) -> str:
    """One line a user can act on: the exception type and message, plus where it was raised."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


class _BatchRunner:
    """Applies a per-row callable to an Arrow batch, capturing each row's failure in its error column."""

    def __init__(self, stage: Stage):
        self.stage = stage
        self.call = stage.fn(**stage.init_kwargs) if stage.is_actor else stage.fn

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        results = [self._run_row(row) for row in rows]
        for f in self.stage.schema_fields():
            column = pa.array([r.get(f.name) for r in results], type=f.type)
            if f.name in batch.column_names:
                batch = batch.set_column(batch.column_names.index(f.name), f, column)
            else:
                batch = batch.append_column(f, column)
        return batch

    def _run_row(self, row: dict) -> dict:
        if has_error(row):
            return {}
        start = time.perf_counter()
        try:
            out = dict(self.call(row) or {})
        except Exception as exc:  # a bad case must not end the run
            log.warning("stage %s failed on case %s: %s", self.stage.name, row.get("case_id"), exc)
            out = {self.stage.error_column: format_exception(exc)}
        if self.stage.timed:
            out[f"seconds_{self.stage.name}"] = time.perf_counter() - start
        return out


def _actor_runner(stage: Stage) -> type:
    """A class Ray can instantiate per actor, closing over the stage definition."""

    class StageActor(_BatchRunner):
        def __init__(self):
            super().__init__(stage)

    StageActor.__name__ = StageActor.__qualname__ = f"Stage_{stage.name}"
    return StageActor


def apply_stage(ds, stage: Stage):
    """Append one stage to a ``ray.data.Dataset``."""
    import ray.data

    resources: dict[str, Any] = {"num_cpus": stage.num_cpus}
    if stage.num_gpus:
        resources["num_gpus"] = stage.num_gpus
    if stage.memory:
        resources["memory"] = stage.memory
    if stage.is_actor:
        return ds.map_batches(_actor_runner(stage), batch_format="pyarrow", batch_size=stage.batch_size,
                              compute=ray.data.ActorPoolStrategy(min_size=1, max_size=stage.workers),
                              udf_modifying_row_count=False, **resources)
    runner = _BatchRunner(stage)
    return ds.map_batches(runner, batch_format="pyarrow", batch_size=stage.batch_size,
                          compute=ray.data.TaskPoolStrategy(size=stage.workers),
                          udf_modifying_row_count=False, **resources)


def build_dataset(rows: list[dict], stages: list[Stage], schema: pa.Schema, parallelism: int):
    """``rows`` (already typed by ``schema``) through every stage, as a lazy ``ray.data.Dataset``."""
    import ray.data

    table = pa.Table.from_pylist(rows, schema=schema)
    # one block per slice: parallelism without a repartition task competing with the actors for CPUs
    n_blocks = max(1, min(parallelism, table.num_rows))
    size = -(-table.num_rows // n_blocks)
    ds = ray.data.from_arrow([table.slice(i, size) for i in range(0, table.num_rows, size)] or [table])
    for stage in stages:
        ds = apply_stage(ds, stage)
    return ds


def run_local(rows: list[dict], stages: list[Stage], schema: pa.Schema) -> pa.Table:
    """The same stages in this process, without Ray: for debugging and unit tests of stage logic."""
    table = pa.Table.from_pylist(rows, schema=schema)
    for stage in stages:
        table = _BatchRunner(stage)(table)
    return table
