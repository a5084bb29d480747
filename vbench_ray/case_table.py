"""The run's case table in the driver, as Arrow chunks, so its memory stays bounded at benchmark scale.

A loader's rows (a list, or a generator such as ``CoveBench.iter_cases``) become Arrow tables of
``CHUNK_ROWS`` rows as they come, so the driver never holds every case as Python dicts: about 3.5 KB per
CoVEBench case (mostly the task's JSON in ``annotations``) instead of about 5 KB of dicts plus a table
built from them. What the run needs of the cases later is their keys (``keys_of``: a few bytes per case);
the chunks themselves go to ``pipeline.build_dataset``, which moves them into the object store.
"""

from __future__ import annotations

from itertools import islice
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from vbench_ray.driver_memory import release_memory
from vbench_ray.sinks import conform

CHUNK_ROWS = 2048
KEY_COLUMNS = ("case_id", "variant")
_KEY_SEPARATOR = "\x1f"  # (ASCII unit separator) between case id and variant in a joined key


def case_chunks(rows: Iterable[dict], schema: pa.Schema, chunk_rows: int = CHUNK_ROWS) -> list[pa.Table]:
    """``rows`` as Arrow tables of up to ``chunk_rows`` rows, typed by ``schema``, with the columns some row
    fills (stage outputs are added by the stages; as ``pa.Table.from_pylist(rows, schema=...)`` of the
    fields named in any row, keys outside ``schema`` ignored)."""
    chunks, seen = [], set()
    rows = iter(rows)
    while batch := list(islice(rows, chunk_rows)):
        names = {k for r in batch for k in r}
        seen |= names
        fields = [f for f in schema if f.name in names]
        chunks.append(pa.Table.from_pylist(batch, schema=pa.schema(fields)))
    filled = pa.schema([f for f in schema if f.name in seen])
    chunks = [conform(c, filled) for c in chunks]
    release_memory()
    return chunks


def num_rows(chunks: list[pa.Table]) -> int:
    return sum(c.num_rows for c in chunks)


def keys_of(chunks: list[pa.Table]) -> pa.Table:
    """``(case_id, variant)`` of every row; these columns' buffers only, not the rest of the case table."""
    if not chunks:
        return pa.table({k: pa.array([], pa.string()) for k in KEY_COLUMNS})
    return pa.concat_tables([c.select(list(KEY_COLUMNS)) for c in chunks])


def without_keys(chunks: list[pa.Table], done: set[tuple[str, str]]) -> list[pa.Table]:
    """The rows whose ``(case_id, variant)`` is not in ``done`` (a resumed run's finished rows); a chunk with
    nothing done is kept as it is, not copied."""
    if not done:
        return list(chunks)
    out = []
    for chunk in chunks:
        keep = [k not in done for k in zip(*(chunk.column(c).to_pylist() for c in KEY_COLUMNS))]
        if all(keep):
            out.append(chunk)
        elif any(keep):
            out.append(chunk.filter(pa.array(keep, type=pa.bool_())))
    return out


def with_keys(table: pa.Table, keys: pa.Table) -> pa.Table:
    """The rows of ``table`` whose ``(case_id, variant)`` is one of ``keys``' rows, in ``table``'s order."""
    if not table.num_rows:
        return table
    mask = pc.is_in(_joined(table), value_set=_joined(keys).combine_chunks())
    return table if pc.all(mask).as_py() else table.filter(mask)  # (a filter copies every column)


def to_rows(chunks: list[pa.Table]) -> list[dict]:
    """The chunks as row dicts (for the few callers that need them: sweeps, a judge phase's ``prepare``)."""
    return [row for chunk in chunks for row in chunk.to_pylist()]


def _joined(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(*(table.column(c).cast(pa.string()) for c in KEY_COLUMNS), _KEY_SEPARATOR)
