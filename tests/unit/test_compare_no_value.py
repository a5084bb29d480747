"""`vbench-ray compare`: a metric a run has no value for (no valid judge answer, a dead judge) earns that run no
rank, no pair test and no forest point, whatever fallback units its rows hold; the runs that have a value are
still ranked and paired among themselves."""

from __future__ import annotations

import json
import re

from helpers.toy_compare import EDGE, HITS, ToyRank, _compare, toy_run
from vbench_ray.benchmarks import BENCHMARKS


def _no_value(run, metric: str) -> None:
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    summary["metrics"][metric].update(value=None, ci95=None, note="no valid judge answer: no number")
    path.write_text(json.dumps(summary))


def test_a_metric_without_a_value_gets_no_rank_and_no_pair(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(BENCHMARKS, "toyrank", ToyRank)
    a = toy_run(tmp_path, "A", EDGE["A"], HITS["A"])
    b = toy_run(tmp_path, "B", EDGE["B"], HITS["B"])
    c = toy_run(tmp_path, "C", EDGE["B"], HITS["A"])
    _no_value(b, "Hit")  # B's judged items are on disk, but its summary earned no Hit
    rc, err = _compare(capsys, str(a), str(b), str(c), "--out", str(tmp_path / "board"), "--rank-by", "Edge")
    assert rc == 0, err
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    hit = {r["label"]: r["metrics"]["Hit"] for r in board["rows"]}
    assert hit["B"]["value"] is None and hit["B"]["rank"] is None and hit["B"]["rank_ci95"] is None
    assert hit["A"]["rank"] is not None and hit["C"]["rank"] is not None  # ranked between the two with a value
    assert {frozenset((p["a"], p["b"])) for p in board["pairs"] if p["metric"] == "Hit"} == {frozenset("AC")}
    assert len([p for p in board["pairs"] if p["metric"] == "Edge"]) == 3  # Edge has a value in every run
    page = (tmp_path / "board" / "leaderboard.html").read_text()
    forest = re.search(r'<svg class="forest" data-metric="Hit".*?</svg>', page, re.S)
    assert forest is None or 'data-model="B"' not in forest.group(0)
