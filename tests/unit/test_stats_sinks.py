"""Bootstrap CIs and the resumable parquet sink."""

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vbench_ray.sinks import CaseSink, write_json
from vbench_ray.stats import bootstrap_ci, describe, ratio_ci

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


def percentile_bootstrap(data, statistic, seed, n_resamples, **kw):
    """scipy.stats.bootstrap's 95 % percentile interval, as ``stats`` documents it."""
    from scipy.stats import bootstrap

    res = bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(seed),
        vectorized=True,
        **kw,
    )
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def test_a_constant_sample_gives_its_value_exactly():
    """Every resample of seven 0.1s has the same mean, so the CI is [0.1, 0.1]; resampling would give
    0.09999999999999999, the float sum of seven 0.1s over 7."""
    assert bootstrap_ci(np.array([0.1] * 7)) == [0.1, 0.1]
    assert describe([0.1] * 7)["ci95"] == [0.1, 0.1]


def test_describe_passes_its_seed_and_resample_count_on():
    values = [0.2, 0.9, 0.4, 0.7, 0.1, 0.5, 0.8, 0.3]
    got = describe(values, seed=7, n_resamples=200)["ci95"]
    assert got == percentile_bootstrap((np.array(values),), np.mean, seed=7, n_resamples=200)
    assert got != describe(values)["ci95"]  # seed 0 and 1000 resamples: another interval


def test_a_pooled_ratio_whose_cases_agree_is_the_pooled_ratio():
    # case ratios 0.1 / 1 = 0.2 / 2 = 0.1: every resample's pooled ratio is 0.1 up to rounding, so no bootstrap;
    # the value is sum(num) / sum(den) = (0.1 + 0.2) / (1 + 2) = 0.30000000000000004 / 3 in floats
    assert ratio_ci([0.1, 0.2], [1.0, 2.0]) == [(0.1 + 0.2) / 3] * 2
    assert ratio_ci([1.0, 2.0], [4.0, 8.0]) == [0.25, 0.25]  # 3 / 12


def test_a_case_without_questions_is_resampled_without_a_division_by_zero():
    """A case whose denominator is 0 (no questions) has no ratio of its own; its cases are still resampled, with no
    warning (0 / 0 is never computed for it; ten cases, so no resample is that case alone)."""
    num = [1.0, 2.0, 0.0, 3.0, 1.0, 2.0, 1.0, 4.0, 2.0, 1.0]
    den = [2.0, 4.0, 0.0, 5.0, 2.0, 3.0, 2.0, 6.0, 4.0, 2.0]
    pooled = lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ratio_ci(num, den)
    assert got == percentile_bootstrap((np.array(num), np.array(den)), pooled, seed=0, n_resamples=1000, paired=True)
    assert got[0] <= 17 / 30 <= got[1]  # the pooled ratio itself


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
