"""`vbench-ray compare` knows a benchmark only through its class's compare hooks: a toy benchmark defined and
registered in this test alone (no other module touched) is ranked by its own headline metric, its judged metric's
units (from judgments.parquet) drive the paired test and McNemar, its own option is compared, its text-only judge's
video settings are not, its analyses fill leaderboard.json, and without analyses their inputs are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from vbench_ray.benchmarks import BENCHMARKS, Benchmark
from vbench_ray.cli import main


def _hit_units(j: pd.DataFrame, config: dict, binary: dict) -> dict:
    """Hit: the share of a case's rubric items the judge marked hit, pooled over items; each item a binary unit."""
    per_case: dict[str, list[bool]] = {}
    for r in j.to_dict("records"):
        per_case.setdefault(str(r["case_id"]), []).append(bool(r["hit"]))
        binary.setdefault("Hit", {})[(str(r["case_id"]), str(r["item"]))] = bool(r["hit"])
    return {"Hit": {c: (float(sum(v)), float(len(v))) for c, v in per_case.items()}}


class ToyRank(Benchmark):
    name = "toyrank"
    primary_metric = "Hit"
    judged_metrics = ("Hit",)
    compare_units = staticmethod(_hit_units)
    comparison_options = staticmethod(lambda config: {"model.prompt": (config.get("model") or {}).get("prompt")})
    judge_reads_video = False
    analyses = staticmethod(lambda runs, **inputs: {"runs": list(runs), "repeats": len(inputs["judge_repeats"])})


# Edge (a per-case column of cases/) favours A; Hit (judged items) favours B
EDGE = {"A": {"c1": 0.9, "c2": 0.8, "c3": 0.7}, "B": {"c1": 0.5, "c2": 0.6, "c3": 0.4}}
HITS = {
    "A": {"c1": [True, False], "c2": [False, False, True], "c3": [False]},
    "B": {"c1": [True, True], "c2": [True, True, True], "c3": [True]},
}


def toy_run(root: Path, name: str, edge: dict, hits: dict, prompt: str = "v1", fps: float = 2.0) -> Path:
    """A finished toyrank run folder: config.yaml, summary.json, cases/ with Edge, judgments.parquet with Hit."""
    run = root / name
    (run / "cases").mkdir(parents=True)
    config = {
        "benchmark": "toyrank",
        "stats": {"confidence": 0.95},
        "model": {"prompt": prompt},
        "judge": {"model": "toy-judge", "video": {"fps": fps}},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    pd.DataFrame({"case_id": list(edge), "variant": "base", "Edge": list(edge.values())}).to_parquet(
        run / "cases" / "part-00000.parquet"
    )
    items = [
        {"case_id": c, "variant": "base", "item": k, "hit": hit} for c, v in hits.items() for k, hit in enumerate(v)
    ]
    pd.DataFrame(items).to_parquet(run / "judgments.parquet")
    n_hit = sum(i["hit"] for i in items)
    summary = {
        "benchmark": "toyrank",
        "run_name": name,
        "n_cases": len(edge),
        "metrics": {  # Edge first: without the benchmark's headline, compare ranks by the first metric
            "Edge": {"value": sum(edge.values()) / len(edge), "ci95": [0, 1], "n": len(edge), "higher_is_better": True},
            "Hit": {"value": n_hit / len(items), "ci95": [0, 1], "n": len(items), "higher_is_better": True},
        },
    }
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def _compare(capsys, *args: str) -> tuple[int, str]:
    rc = main(["compare", *args, "--wandb-mode", "disabled", "--n-resamples", "200", "--n-permutations", "500"])
    return rc, capsys.readouterr().err


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
