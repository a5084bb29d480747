"""`vbench-ray compare` knows a benchmark only through its class's compare hooks: a toy benchmark (defined in
tests/helpers/toy_compare.py, registered by this test alone; no library module touched) is ranked by its own headline
metric, its judged metric's units (from judgments.parquet) drive the paired test and McNemar, its own option is
compared, its text-only judge's video settings are not, its analyses fill leaderboard.json, and without analyses their
inputs are refused."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers.toy_compare import EDGE, HITS, ToyRank, _compare, toy_run
from vbench_ray.benchmarks import BENCHMARKS


def test_a_toy_benchmark_compares_by_its_own_hooks(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(BENCHMARKS, "toyrank", ToyRank)  # the registration, undone after the test
    a = toy_run(tmp_path, "A", EDGE["A"], HITS["A"])
    b = toy_run(tmp_path, "B", EDGE["B"], HITS["B"])

    rc, err = _compare(capsys, str(a), str(b), "--out", str(tmp_path / "board"))
    assert rc == 0, err
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert board["rank_by"] == "Hit"  # its primary_metric, not Edge (the first metric)
    assert [r["label"] for r in board["rows"]] == ["B", "A"]
    assert board["checks"] == []  # Hit recomputed from its units equals each summary.json's value
    rows = {r["label"]: r for r in board["rows"]}
    assert rows["B"]["metrics"]["Hit"]["paired"] and rows["B"]["metrics"]["Hit"]["n_cases"] == 3
    [hit] = [p for p in board["pairs"] if p["metric"] == "Hit"]
    assert (hit["a"], hit["b"], hit["n_shared"]) == ("B", "A", 3)
    assert hit["diff"] == pytest.approx(6 / 6 - 2 / 6)  # pooled over items: B 6 of 6, A 2 of 6
    # McNemar over the 6 items: B hit and A missed on 4 (c1#1, c2#0, c2#1, c3#0), never the reverse;
    # exact two-sided p = 2 * P(X <= 0), X ~ Binomial(4, 1/2) = 2/16
    assert (hit["mcnemar"]["b"], hit["mcnemar"]["c"]) == (4, 0)
    assert hit["mcnemar"]["p"] == pytest.approx(2 / 16)
    [edge] = [p for p in board["pairs"] if p["metric"] == "Edge"]
    assert edge["mcnemar"] is None  # a per-case column has no binary units

    # its own option (comparison_options) is compared; a model.* option tags only its judged metrics
    c = toy_run(tmp_path, "C", EDGE["B"], HITS["B"], prompt="v2")
    rc, err = _compare(capsys, str(a), str(c), "--out", str(tmp_path / "mixed"))
    assert rc == 2 and "model.prompt: A=\"v1\", C=\"v2\"" in err
    rc, err = _compare(capsys, str(a), str(c), "--out", str(tmp_path / "mixed"), "--allow-mixed")
    assert rc == 0, err
    rows = {r["label"]: r for r in json.loads((tmp_path / "mixed" / "leaderboard.json").read_text())["rows"]}
    assert rows["C"]["metrics"]["Hit"]["options"] == {"model.prompt": "v2"}
    assert rows["C"]["metrics"]["Edge"]["options"] == {}

    # its judge reads no video (judge_reads_video = False): judge.video.fps differing is not a mixed option
    d = toy_run(tmp_path, "D", EDGE["B"], HITS["B"], fps=8.0)
    rc, err = _compare(capsys, str(a), str(d), "--out", str(tmp_path / "fps"))
    assert rc == 0, err
    assert json.loads((tmp_path / "fps" / "leaderboard.json").read_text())["mixed_options"] == {}

    # its analyses: the compared runs in leaderboard order and the judge-repeat runs, loaded
    assert board["analyses"] == {"runs": ["B", "A"], "repeats": 0}
    rc, err = _compare(capsys, str(a), str(b), "--out", str(tmp_path / "rep"), "--judge-repeats", str(a), str(b))
    assert rc == 0, err
    assert json.loads((tmp_path / "rep" / "leaderboard.json").read_text())["analyses"]["repeats"] == 2

    # no analyses: an analysis input is refused, naming the benchmark
    monkeypatch.setattr(ToyRank, "analyses", None)
    shutil.rmtree(tmp_path / "board")
    rc, err = _compare(capsys, str(a), str(b), "--out", str(tmp_path / "board"), "--judge-repeats", str(a))
    assert rc == 2 and "these runs are toyrank, which has none" in err
    assert not (tmp_path / "board").exists()
