"""Bounded driver memory at benchmark scale (issue 16): the checklist is parsed a task at a time, the case table
is Arrow chunks handed to the stream (not a list of dicts plus a table), input blocks ramp up so the first rows
come after one batch, and the sink's final read gathers rows a column at a time. The numbers at 1k-100k cases
come from ``tests/perf/memory.py``; these tests pin the mechanisms on small inputs."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.common import REPO, cove_overrides
from vbench_ray import case_table
from vbench_ray.benchmarks.base import DataError
from vbench_ray.benchmarks.json_array import NotAnArray, iter_json_array
from vbench_ray.configure import load_config
from vbench_ray.pipeline import Stage, _take_blocks, block_sizes, build_dataset
from vbench_ray.sinks import CaseSink

COVE = REPO / "configs" / "cove.yaml"


# ----------------------------------------------------------------------------- the checklist, a task at a time


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        " [ 1 , 2.5e10 ,-3, true, null, \"a,]\" ] \n",
        '[{"a": [1, {"b": "x,]"}]}, [], "s\\"]"]',
        "{not json",
        '{"id": 1}',
        '"str"',
        "[1,,2]",
        "[1 2]",
        "[1,2] x",
        "[1,2",
        "",
        "[1,]",
        "[NaN, -Infinity]",
    ],
)
@pytest.mark.parametrize("chunk", [1, 2, 5, 1 << 20])
def test_json_array_reads_what_json_loads_reads(tmp_path, text, chunk):
    """Same elements, or the same error message, as ``json.loads`` of the whole file, however the chunks cut it
    (a number cut at a chunk's end, ``2.5e10`` read as ``2.5``, is the case that needs care)."""
    path = tmp_path / "a.json"
    path.write_text(text)
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError) as got:
            list(iter_json_array(path, chunk))
        assert str(got.value) == str(exc)
        return
    if not isinstance(expected, list):
        with pytest.raises(NotAnArray, match=type(expected).__name__):
            list(iter_json_array(path, chunk))
        return
    assert list(iter_json_array(path, chunk)) == expected


def test_json_array_holds_one_element_not_the_file(tmp_path):
    tasks = [{"id": i, "questions": [{"q": "x" * 200, "n": j} for j in range(8)]} for i in range(3000)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(tasks))  # 5.6 MB
    tracemalloc.start()
    try:
        n = sum(1 for _ in iter_json_array(path, chunk_chars=1 << 16))
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole = len(json.loads(path.read_text()))
        _, parsed = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == whole == 3000
    assert streamed < parsed / 20, (streamed, parsed)


# ----------------------------------------------------------------------------- the CoVEBench loader


def _many_tasks(cove_copy: dict, n: int, bad_at: int | None = None) -> dict:
    """The synthetic checklist's tasks repeated to ``n`` (new ids, edited videos hard-linked); ``bad_at``: the
    file is cut into invalid JSON after that many tasks."""
    tasks = json.loads(Path(cove_copy["checklist"]).read_text())
    edited = Path(cove_copy["edited_dir"])
    out = []
    for i in range(n):
        t = dict(tasks[i % len(tasks)], id=1000 + i)
        os.link(edited / f"{tasks[i % len(tasks)]['id']}.mp4", edited / f"{t['id']}.mp4")
        out.append(t)
    text = json.dumps(out)
    if bad_at is not None:
        text = json.dumps(out[:bad_at])[:-1] + ", {oops"
    Path(cove_copy["checklist"]).write_text(text)
    return cove_copy


def test_cove_cases_stream_out_before_the_checklist_is_read(cove_copy, tmp_path):
    """Rows come out while the file is still being read: invalid JSON near its end is raised after them (and
    still before anything is computed, as the runner reads every case first)."""
    from vbench_ray.benchmarks.cove import CoveBench

    data = _many_tasks(cove_copy, 600, bad_at=560)
    cases = CoveBench(load_config(COVE, cove_overrides(data, tmp_path / "o"))).iter_cases()
    first = [next(cases) for _ in range(300)]
    assert [r["case_id"] for r in first[:2]] == ["1000", "1001"] and not any(r.get("error_load") for r in first)
    with pytest.raises(DataError, match="is not valid JSON"):
        list(cases)


def test_cove_limit_still_checks_every_id(cove_copy, tmp_path):
    from vbench_ray.benchmarks.cove import CoveBench

    tasks = json.loads(Path(cove_copy["checklist"]).read_text())
    Path(cove_copy["checklist"]).write_text(json.dumps(tasks + [dict(tasks[0])]))  # a duplicate, past the limit
    with pytest.raises(DataError, match=rf"duplicate task ids: '{int(tasks[0]['id'])}' \(2x\)"):
        CoveBench(load_config(COVE, cove_overrides(cove_copy, tmp_path / "o", "run.limit=2"))).load_cases()


def test_case_table_is_built_without_every_case_as_dicts(cove_copy, tmp_path):
    """3000 tasks into the case table: the Python objects alive at once are about one chunk of rows, a small
    part of what parsing the checklist whole and holding every row as a dict took (the old loader)."""
    from vbench_ray.benchmarks.cove import CoveBench

    data = _many_tasks(cove_copy, 3000)
    cfg = load_config(COVE, cove_overrides(data, tmp_path / "o"))
    bench = CoveBench(cfg)
    schema = bench.schema()
    case_table.case_chunks(_rows(3), SCHEMA)  # modules Arrow imports on first use are not the loader's memory
    tracemalloc.start()
    try:
        chunks = case_table.case_chunks(bench.iter_cases(), schema, chunk_rows=256)
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        tasks = json.loads(Path(data["checklist"]).read_text())  # what the old loader held, at the least
        rows = bench.load_cases()
        _, listed = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert case_table.num_rows(chunks) == len(rows) == len(tasks) == 3000
    assert streamed < listed / 4, (streamed, listed)  # measured: 5.2 MB (the file window, the video index) vs 41
    # the same table a list of dicts gives
    table = pa.concat_tables(chunks)
    filled = pa.schema([f for f in schema if f.name in {k for r in rows for k in r}])  # the columns rows fill
    assert table.equals(pa.Table.from_pylist(rows, schema=filled))
    assert table.column("annotations")[5].as_py() == json.dumps(tasks[5], ensure_ascii=False)


# ----------------------------------------------------------------------------- the case table

SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("variant", pa.string()),
        ("x", pa.int64()),
        ("note", pa.string()),
        ("out", pa.float64()),
    ]
)


def _rows(n: int) -> list[dict]:
    return [
        {
            "case_id": str(i),
            "variant": "base" if i % 3 else "v",
            "x": i,
            **({"note": "n"} if i == 4 else {}),
            "unknown": 1,
        }
        for i in range(n)
    ]


def test_case_chunks_keys_and_resume_filter():
    rows = _rows(10)
    chunks = case_table.case_chunks(iter(rows), SCHEMA, chunk_rows=4)
    assert [c.num_rows for c in chunks] == [4, 4, 2]
    # the columns some row fills, in schema order ("note" only in the second chunk; "out" in none)
    assert all(c.schema.names == ["case_id", "variant", "x", "note"] for c in chunks)
    assert pa.concat_tables(chunks).to_pylist()[4] == {"case_id": "4", "variant": "base", "x": 4, "note": "n"}
    keys = case_table.keys_of(chunks)
    assert keys.column_names == ["case_id", "variant"] and keys.num_rows == 10
    todo = case_table.without_keys(chunks, {("1", "base"), ("2", "base"), ("3", "base"), ("5", "base")})
    assert [c.column("case_id").to_pylist() for c in todo] == [["0", "3"], ["4", "6", "7"], ["8", "9"]]  # 3 is "v"
    assert todo[2] is chunks[2]  # nothing done there: the chunk itself, not a copy
    on_disk = pa.table({"case_id": ["9", "3", "42", "3"], "variant": ["v", "base", "base", "v"], "y": [1, 2, 3, 4]})
    assert case_table.with_keys(on_disk, keys).column("y").to_pylist() == [1, 4]  # ("3", "base"), "42": not cases


def test_block_sizes_ramp_up_and_down():
    # hand-computed: 1000 rows, 2 CPUs, batches of 2, at most 128 blocks -> blocks of ceil(1000/128) = 8 rows,
    # reached by one wave (one block per CPU) of 2 rows, then one of 4; the same waves close the run
    assert block_sizes(1000, 2, 2, 128) == [2, 2, 4, 4] + [8] * 122 + [4, 4, 2, 2]
    assert block_sizes(7, 4, 2, 3) == [3, 3, 1]  # no room for a ramp: the plain split
    assert block_sizes(5, 4, 2, 256) == [1] * 5  # small runs: a row per block, as before
    assert block_sizes(0, 4, 2, 256) == []
    big = block_sizes(100_000, 4, 2, 256)
    assert sum(big) == 100_000 and big[:4] == [2, 2, 2, 2] and big[-4:] == [2, 2, 2, 2] and max(big) == 391
    assert len(big) < 256 + 2 * 4 * 8  # the ramp adds a few waves, not thousands of blocks


def test_take_blocks_cuts_across_chunks_and_empties_the_list():
    chunks = case_table.case_chunks(_rows(10), SCHEMA, chunk_rows=4)
    expected = pa.concat_tables(chunks).column("x").to_pylist()
    blocks = list(_take_blocks(chunks, [3, 3, 3, 1]))
    assert chunks == []  # handed over: the caller keeps no reference to the case table
    assert [b.num_rows for b in blocks] == [3, 3, 3, 1]
    assert [x for b in blocks for x in b.column("x").to_pylist()] == expected


@pytest.mark.ray
def test_build_dataset_takes_the_chunks(ray_local):
    chunks = case_table.case_chunks(_rows(30), SCHEMA, chunk_rows=7)
    schema = chunks[0].schema
    stage = Stage("double", lambda row: {"out": 2.0 * row["x"]}, {"out": "float"})
    ds = build_dataset(chunks, [stage], schema, parallelism=30)
    assert chunks == []
    rows = sorted(
        pa.concat_tables(list(ds.iter_batches(batch_size=None, batch_format="pyarrow"))).to_pylist(),
        key=lambda r: r["x"],
    )
    assert [r["out"] for r in rows] == [2.0 * i for i in range(30)]
    assert [r["note"] for r in rows[3:6]] == [None, "n", None]


# ----------------------------------------------------------------------------- the sink's final read


def test_read_all_keeps_the_newest_row_of_each_key_sorted(tmp_path):
    schema = pa.schema(
        [("case_id", pa.string()), ("variant", pa.string()), ("v", pa.int64()), ("error_x", pa.string())]
    )
    sink = CaseSink(tmp_path, schema)
    shards = [  # written in this order; a later shard supersedes, and so does a later row of the same shard
        [("2", "base", 1, "boom"), ("10", "base", 2, None), ("1", "b", 3, None)],
        [("2", "base", 4, None), ("1", "a", 5, None), ("1", "a", 6, None)],
        [("10", "base", 7, None)],
    ]
    for k, rows in enumerate(shards):
        t = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
        pq.write_table(t, tmp_path / "cases" / f"part-{k:05d}-x.parquet")
    out = sink.read_all()
    assert out.schema == schema
    assert [(r["case_id"], r["variant"], r["v"]) for r in out.to_pylist()] == [
        ("1", "a", 6),
        ("1", "b", 3),
        ("10", "base", 7),
        ("2", "base", 4),
    ]  # string order, as Arrow sorts
