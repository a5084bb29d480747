"""Bootstrap CIs and the resumable parquet sink."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vbench_ray.sinks import CaseSink, write_json
from vbench_ray.stats import bootstrap_ci, describe

SCHEMA = pa.schema([("case_id", pa.string()), ("variant", pa.string()), ("SSIM", pa.float64())])


def test_describe_drops_missing_values_and_scales():
    d = describe([0.2, None, float("nan"), 0.4, 0.6], scale=100)
    assert d["n"] == 3 and d["value"] == pytest.approx(40.0)
    assert d["ci95"][0] <= 40.0 <= d["ci95"][1]
    assert describe([None]) == {"value": None, "ci95": None, "n": 0}
    assert describe([0.5])["ci95"] is None  # no interval from one value
    assert describe([0.5, 0.5])["ci95"] == [0.5, 0.5]


def test_bootstrap_is_seeded_and_covers_the_mean():
    values = np.random.default_rng(1).normal(0.7, 0.1, size=50)
    a = bootstrap_ci(values, seed=3)
    assert a == bootstrap_ci(values, seed=3)
    assert a != bootstrap_ci(values, seed=4)
    assert a[0] < values.mean() < a[1]
    # the 95% percentile interval of the mean is about +-1.96 * sd / sqrt(n) wide
    half = 1.96 * values.std(ddof=1) / np.sqrt(len(values))
    assert (a[1] - a[0]) / 2 == pytest.approx(half, rel=0.25)


def test_sink_resumes_and_never_duplicates(tmp_path):
    sink = CaseSink(tmp_path, SCHEMA)
    batch = pa.table({"case_id": ["1", "2"], "variant": ["base", "base"], "SSIM": [0.5, 0.6]})
    assert sink.write(batch) == 2
    assert sink.write(batch) == 0  # already there
    again = CaseSink(tmp_path, SCHEMA)
    assert again.done_keys == {("1", "base"), ("2", "base")}
    more = pa.table({"case_id": ["2", "3"], "variant": ["base", "base"], "extra": [1, 2]})  # SSIM missing
    assert again.write(more) == 1
    table = again.read_all()
    assert table.column("case_id").to_pylist() == ["1", "2", "3"]
    assert table.column("SSIM").to_pylist() == [0.5, 0.6, None]
    assert table.schema == SCHEMA


def test_sink_drops_partial_and_corrupt_shards(tmp_path):
    sink = CaseSink(tmp_path, SCHEMA)
    sink.write(pa.table({"case_id": ["1"], "variant": ["base"], "SSIM": [0.5]}))
    (tmp_path / "cases" / "part-99999-dead.parquet.tmp").write_bytes(b"half a shard")
    (tmp_path / "cases" / "part-00007-bad.parquet").write_bytes(b"not parquet")
    again = CaseSink(tmp_path, SCHEMA)
    assert again.done_keys == {("1", "base")}
    assert not list((tmp_path / "cases").glob("*.tmp"))
    assert (tmp_path / "corrupt_shards" / "part-00007-bad.parquet").exists()
    assert pq.read_table(tmp_path / "cases").num_rows == 1


def test_json_has_no_nan(tmp_path):
    write_json(tmp_path / "s.json", {"a": float("nan"), "b": [np.float64(1.5), float("inf")]})
    assert (tmp_path / "s.json").read_text().split() == ['{', '"a":', 'null,', '"b":', '[', '1.5,', 'null', ']', '}']
