"""`vbench-ray compare`: leaderboards over hand-made run directories (fast) and over three real synthetic
CoVEBench runs of known quality order judged by a replay judge (end to end, local Ray, headless Chromium)."""

from __future__ import annotations

import filecmp
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from vbench_ray.compare import CompareError, compare, write_outputs


# ----------------------------------------------------------------------------- hand-made run directories


def fake_run(
    root: Path,
    name: str,
    ssim: dict[str, float],
    ifs: dict[str, list[bool]],
    benchmark: str = "cove",
    score: dict | None = None,
    summary_override: dict | None = None,
) -> Path:
    """A minimal finished CoVEBench run: SSIM per case in cases/, IFS questions in judgments.parquet."""
    run = root / name
    (run / "cases").mkdir(parents=True)
    config = {
        "benchmark": benchmark,
        "run": {"name": None, "seed": 0},
        "stats": {"confidence": 0.95},
        "score": score or {"aggregation": "pooled", "uas_unit": "group"},
        "judge": {
            "backend": "replay",
            "model": "/models/judge-x",
            "name": None,
            "temperature": 0.0,
            "max_tokens": 100,
            "video": {"fps": 2.0},
        },
        "metrics": {
            "enabled": ["SSIM", "IFS"],
            "SSIM": {"frames": 10, "size": 224, "device": "cpu"},
            "exclude": {"SSIM": {"categories": ["Background"]}},
        },
        "output": {"dir": str(run)},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    cases = sorted(set(ssim) | set(ifs), key=int)
    pd.DataFrame({"case_id": cases, "variant": "base", "SSIM": [ssim.get(c) for c in cases]}).to_parquet(
        run / "cases" / "part-00000.parquet"
    )
    rows = [
        {
            "case_id": c,
            "variant": "base",
            "group": 0,
            "question_id": f"Q{k + 1}",
            "metric": "IFS",
            "correct": ok,
            "score": None,
            "status": "ok",
        }
        for c, oks in ifs.items()
        for k, ok in enumerate(oks)
    ]
    pd.DataFrame(rows).to_parquet(run / "judgments.parquet")
    n_ok = sum(sum(v) for v in ifs.values())
    n_q = sum(len(v) for v in ifs.values())
    summary = {
        "benchmark": benchmark,
        "run_name": name,
        "n_cases": len(cases),
        "metrics": {
            "SSIM": {
                "value": float(np.mean(list(ssim.values()))),
                "ci95": [0.0, 1.0],
                "n": len(ssim),
                "higher_is_better": True,
            },
            "IFS": {"value": 100.0 * n_ok / n_q, "ci95": [0.0, 100.0], "n": n_q, "higher_is_better": True},
        },
    }
    for k, v in (summary_override or {}).items():
        summary["metrics"][k].update(v)
    (run / "summary.json").write_text(json.dumps(summary))
    return run


SSIM_A = {"1": 0.9, "2": 0.8, "3": 0.7, "4": 0.95, "5": 0.6}
SSIM_B = {"2": 0.5, "3": 0.75, "4": 0.7, "5": 0.55, "6": 0.9}
IFS_A = {"1": [True, True], "2": [True, False, True], "3": [False], "4": [True, True], "5": [True]}
IFS_B = {"1": [False, True], "2": [False, False, True], "3": [False], "4": [True, False], "5": [False], "6": [True]}


def _pair(board, metric, a, b):
    [p] = [p for p in board["pairs"] if p["metric"] == metric and {p["a"], p["b"]} == {a, b}]
    return p


def test_shared_and_missing_cases_and_paired_values(tmp_path):
    a = fake_run(tmp_path, "A", SSIM_A, IFS_A)
    b = fake_run(tmp_path, "B", SSIM_B, IFS_B)
    board = compare([a, b], seed=0, n_resamples=200)
    assert board["checks"] == [] and board["mixed_options"] == {}
    p = _pair(board, "SSIM", "A", "B")
    assert (p["n_shared"], p["n_only_a"], p["n_only_b"]) == (4, 1, 1)
    sign = 1 if p["a"] == "A" else -1
    assert sign * p["diff"] == pytest.approx(np.mean([0.8 - 0.5, 0.7 - 0.75, 0.95 - 0.7, 0.6 - 0.55]))
    rows = {r["label"]: r for r in board["rows"]}
    assert rows["A"]["metrics"]["SSIM"]["n_missing"] == 1 and rows["B"]["metrics"]["SSIM"]["n_missing"] == 1
    assert rows["A"]["metrics"]["SSIM"]["n_ranked"] == 4
    # IFS: pooled over questions on the 5 shared cases; McNemar over the 9 shared questions
    q = _pair(board, "IFS", "A", "B")
    assert sign * q["diff"] == pytest.approx(100 * 7 / 9 - 100 * 3 / 9)
    assert (q["mcnemar"]["b"], q["mcnemar"]["c"]) == ((4, 0) if sign == 1 else (0, 4))
    assert q["mcnemar"]["p"] == pytest.approx(2 / 16)
    # a single pair: Holm leaves p alone
    assert q["p_perm_holm"] == pytest.approx(q["p_perm"])
    assert [r["label"] for r in board["rows"]] == ["A", "B"]  # ranked by the headline (UAS absent: first metric)


def test_a_run_against_its_copy_is_never_significant(tmp_path):
    a = fake_run(tmp_path, "A", SSIM_A, IFS_A)
    shutil.copytree(a, tmp_path / "copy")
    summary = json.loads((tmp_path / "copy" / "summary.json").read_text())
    summary["run_name"] = "A-again"
    (tmp_path / "copy" / "summary.json").write_text(json.dumps(summary))
    board = compare([a, tmp_path / "copy"], n_resamples=100)
    assert board["pairs"]
    for p in board["pairs"]:
        assert p["diff"] == 0 and p["p_perm"] == 1.0 and not p["significant"]
        assert p["mcnemar"] is None or (p["mcnemar"]["p"] == 1.0 and not p["mcnemar"]["significant"])
    for row in board["rows"]:
        assert row["metrics"]["SSIM"]["rank"] == 1 and row["metrics"]["SSIM"]["rank_ci95"] == [1, 1]


def test_mixed_scoring_options_are_refused_unless_allowed(tmp_path):
    a = fake_run(tmp_path, "A", SSIM_A, IFS_A)
    b = fake_run(
        tmp_path,
        "B",
        SSIM_B,
        IFS_B,
        score={"aggregation": "per_task", "uas_unit": "group"},
        summary_override={"IFS": {"value": 100 * np.mean([0.5, 1 / 3, 0, 0.5, 0, 1])}},
    )
    with pytest.raises(CompareError, match=r"score\.aggregation: A=\"pooled\", B=\"per_task\""):
        compare([a, b])
    board = compare([a, b], allow_mixed=True, n_resamples=50)
    assert board["mixed_options"] == {"score.aggregation": {"A": "pooled", "B": "per_task"}}
    assert board["checks"] == []  # per_task units reproduce B's summary value
    rows = {r["label"]: r for r in board["rows"]}
    assert rows["B"]["options"] == {"score.aggregation": "per_task"}
    assert rows["B"]["metrics"]["IFS"]["options"] == {"score.aggregation": "per_task"}
    assert rows["B"]["metrics"]["SSIM"]["options"] == {}  # aggregation does not touch objective metrics
    paths = write_outputs(board, tmp_path / "out", wandb_mode="disabled")
    page = paths["html"].read_text()
    assert "aggregation=per_task" in page and 'id="warnings"' in page
    assert "option:score.aggregation" in paths["csv"].read_text().splitlines()[0]


def test_runtime_settings_do_not_count_as_mixed_but_the_judge_does(tmp_path):
    a = fake_run(tmp_path, "A", SSIM_A, IFS_A)
    b = fake_run(tmp_path, "B", SSIM_B, IFS_B)
    cfg = yaml.safe_load((b / "config.yaml").read_text())
    cfg["metrics"]["SSIM"]["device"] = "cuda"  # where it ran
    cfg["metrics"]["SSIM"]["gpu_fraction"] = 0.1  # its GPU share: how it ran, not what it scored
    cfg["judge"]["model"] = "/elsewhere/judge-x"  # the same model in another folder
    (b / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert compare([a, b], n_resamples=20)["mixed_options"] == {}
    cfg["judge"]["model"] = "/models/judge-y"
    (b / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(CompareError, match="judge: A=\"judge-x\", B=\"judge-y\""):
        compare([a, b])


def test_refusals_and_consistency_check(tmp_path):
    a = fake_run(tmp_path, "A", SSIM_A, IFS_A)
    v = fake_run(tmp_path, "V", SSIM_B, IFS_B, benchmark="vidic")
    with pytest.raises(CompareError, match="different benchmarks"):
        compare([a, v])
    with pytest.raises(CompareError, match="at least two"):
        compare([a])
    bad = fake_run(tmp_path, "Bad", SSIM_B, IFS_B, summary_override={"SSIM": {"value": 0.1}})
    board = compare([a, bad], n_resamples=20)
    assert any("Bad SSIM" in c for c in board["checks"])


# ----------------------------------------------------------------------------- end to end


class _Rows(HTMLParser):
    """data-model of each row of table#leaderboard, and the forest-plot markers per metric."""

    def __init__(self):
        super().__init__()
        self.models: list[str] = []
        self.markers: dict[str, list[str]] = {}
        self._table = False
        self._svg: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id") == "leaderboard"
        elif tag == "tr" and self._table and "data-model" in a:
            self.models.append(a["data-model"])
        elif tag == "svg" and "forest" in (a.get("class") or "") and "ranks" not in (a.get("class") or ""):
            self._svg = a.get("data-metric")
        elif tag == "circle" and self._svg and "data-model" in a:
            self.markers.setdefault(self._svg, []).append(a["data-model"])

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = False
        elif tag == "svg":
            self._svg = None


def _model_dirs(data: dict, root: Path) -> dict[str, Path]:
    """oracle: the synthetic edits; identity: each task's source video unchanged; half: the edits of the even
    task ids, the source for the odd ones."""
    tasks = json.loads(Path(data["checklist"]).read_text())
    dirs = {name: root / name for name in ("oracle", "half", "identity")}
    for d in dirs.values():
        d.mkdir(parents=True)
    for t in tasks:
        tid = int(t["id"])
        edit = Path(data["edited_dir"]) / f"{tid}.mp4"
        source = Path(data["source_dir"]) / t["videoA_path"]
        shutil.copy(edit, dirs["oracle"] / f"{tid}.mp4")
        shutil.copy(source, dirs["identity"] / f"{tid}.mp4")
        shutil.copy(edit if tid % 2 == 0 else source, dirs["half"] / f"{tid}.mp4")
    return dirs


def _wrong(question: dict) -> str:
    expected = str(question["expected_answer"])
    if question["type"] == "AB-MCQ":
        return next(k for k in question["options"] if k != expected)
    return "No" if expected.lower() == "yes" else "Yes"


def _judge_file(cfg, data: dict, path: Path) -> None:
    """A replay judge that 'sees' whether the video holds the edit: a case whose edited video is the oracle edit
    gets every expected answer; an unedited one fails the Execution Accuracy questions (Physical Logic and
    preservation answers stay right: nothing broke)."""
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.benchmarks.cove_checklist import build_requests

    lines = []
    for case in CoveBench(cfg).load_cases():
        task = json.loads(case["annotations"])
        edited = filecmp.cmp(case["edited_path"], Path(data["edited_dir"]) / f"{case['case_id']}.mp4", shallow=False)
        questions = {q["id"]: q for g in task["evaluation_groups"] for q in g["questions"]}
        for request in build_requests(case):
            items = []
            for qid in request.expected["ids"]:
                q = questions[qid]
                if q["type"] == "Score-MCQ":
                    items.append({"id": qid, "reasoning": "r", "final_score": 10})
                else:
                    ok = edited or q.get("dimension") != "Execution Accuracy"
                    items.append(
                        {"id": qid, "reasoning": "r", "final_answer": q["expected_answer"] if ok else _wrong(q)}
                    )
            lines.append(json.dumps({"request_id": request.request_id, "text": json.dumps(items)}))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.ray
def test_three_models_rank_in_quality_order_and_the_page_renders(cove_data, tmp_path, ray_local):
    from helpers.common import REPO, cove_overrides
    from helpers.chromium import chromium_exe, run_chromium
    from vbench_ray.cli import main
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    dirs = _model_dirs(cove_data, tmp_path / "models")
    runs = []
    for name, edited in dirs.items():
        data = {**cove_data, "edited_dir": edited}
        out = tmp_path / "runs" / name
        base = cove_overrides(data, out, "metrics.enabled=[SSIM,UAS,IFS,VRS,SEM]", "judge.backend=replay")
        answers = tmp_path / f"{name}.jsonl"
        _judge_file(load_config(REPO / "configs" / "cove.yaml", base), cove_data, answers)
        run(load_config(REPO / "configs" / "cove.yaml", [*base, f"judge.replay_path={answers}"]))
        runs.append(out)

    board_dir = tmp_path / "board"
    rc = main(
        [
            "compare",
            str(runs[2]),
            str(runs[0]),
            str(runs[1]),
            "--out",
            str(board_dir),
            "--reference",
            "identity",
            "--wandb-mode",
            "offline",
        ]
    )
    assert rc == 0
    board = json.loads((board_dir / "leaderboard.json").read_text())
    assert board["rank_by"] == "UAS" and board["reference"] == "identity" and board["checks"] == []
    assert [r["label"] for r in board["rows"]] == ["oracle", "half", "identity"]
    uas = [r["metrics"]["UAS"] for r in board["rows"]]
    assert [e["rank"] for e in uas] == [1, 2, 3]
    assert [e["value"] for e in uas][0] == 100.0 and uas[2]["value"] == 0.0
    intervals = [e["rank_ci95"] for e in uas]
    assert all(intervals[i][1] < intervals[i + 1][0] for i in range(2)), intervals  # non-overlapping
    ifs = [r["metrics"]["IFS"]["rank_ci95"] for r in board["rows"]]
    assert all(ifs[i][1] < ifs[i + 1][0] for i in range(2)), ifs
    # oracle beats identity on UAS everywhere: exact permutation p = 2/256, times 3 pairs (Holm) < 0.05
    p = _pair(board, "UAS", "oracle", "identity")
    assert p["n_shared"] == 8 and abs(p["diff"]) == 100.0 and p["significant"]
    assert p["p_perm"] == pytest.approx(2 / 256) and p["mcnemar"]["significant"]
    # SSIM rewards doing nothing: the identity "model" ranks first there
    assert {r["label"]: r["metrics"]["SSIM"]["rank"] for r in board["rows"]}["identity"] == 1
    # CoVEBench analyses: Table 8 levels and Figure 4 bins follow the same order
    levels = board["analyses"]["category_levels"]
    assert (
        levels["oracle"]["level1"]["Subject"]["value"] == 100.0
        and levels["identity"]["level1"]["Subject"]["value"] == 0.0
    )
    edit_bins = board["analyses"]["breakdowns"]["edit_points"]["runs"]
    assert edit_bins["oracle"][0]["value"] > edit_bins["half"][0]["value"] > edit_bins["identity"][0]["value"]
    csv_rows = (board_dir / "leaderboard.csv").read_text().splitlines()
    assert len(csv_rows) == 4 and csv_rows[1].startswith("oracle,")
    assert list((board_dir / "wandb").glob("offline-run-*/run-*.wandb"))

    exe = chromium_exe()
    dom = run_chromium(exe, tmp_path / "profile", "--dump-dom", (board_dir / "leaderboard.html").resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    doc = _Rows()
    doc.feed(dom.stdout)
    assert doc.models == ["oracle", "half", "identity"]
    assert sorted(doc.markers["UAS"]) == ["half", "oracle"]  # each model minus the reference
    assert 'id="analyses"' in dom.stdout and 'class="heatmap"' in dom.stdout
    shot = tmp_path / "board.png"
    res = run_chromium(
        exe,
        tmp_path / "profile-shot",
        f"--screenshot={shot}",
        "--window-size=1200,1400",
        "--hide-scrollbars",
        (board_dir / "leaderboard.html").resolve().as_uri(),
    )
    assert res.returncode == 0 and shot.stat().st_size > 10_000


def test_terminal_prints_the_whole_table_and_ranks_by_a_metric_the_runs_have(tmp_path, capsys):
    """Issue 26 item 2: every metric with its CI, rank interval and marks; UAS n/a (no judge) is not the ranking."""
    from vbench_ray.cli import main

    a = fake_run(tmp_path, "A", SSIM_A, IFS_A)
    b = fake_run(tmp_path, "B", SSIM_B, IFS_B)
    for run in (a, b):  # a run without a judge: UAS is in summary.json with no value
        s = json.loads((run / "summary.json").read_text())
        s["metrics"] = {"UAS": {"value": None, "ci95": None, "n": 0}, **s["metrics"]}
        (run / "summary.json").write_text(json.dumps(s))
    rc = main(
        [
            "compare",
            str(a),
            str(b),
            "--out",
            str(tmp_path / "board"),
            "--n-resamples",
            "200",
            "--wandb-mode",
            "disabled",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert board["rank_by"] == "SSIM"
    assert "ranked by SSIM" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.strip().startswith("rank"))
    for col in ("UAS", "SSIM", "SSIM 95% CI", "SSIM rank", "IFS", "IFS 95% CI", "IFS rank"):
        assert col in header
    # A: SSIM mean of its 5 cases 0.79, IFS 7 of 9 correct... over its own 9 questions: 100*7/9 = 77.78
    row_a = next(line for line in lines if line.split()[1:2] == ["A"])
    assert "0.79" in row_a and "77.78" in row_a and "[0, 1]" in row_a and "[0, 100]" in row_a
    row_b = next(line for line in lines if line.split()[1:2] == ["B"])
    rows = {r["label"]: r for r in board["rows"]}
    rci = rows["B"]["metrics"]["SSIM"]["rank_ci95"]
    assert f"{rci[0]}-{rci[1]}" in row_b
    assert "paired permutation, Holm-adjusted" in out  # the marks' legend
    assert "n_missing" in out and "A SSIM: 1" in out  # case 6 only B scored


def test_terminal_marks_a_significant_difference_from_the_reference():
    from vbench_ray.board_text import format_board

    entry = {"value": 0.5, "ci95": [0.4, 0.6], "rank": 2, "rank_ci95": [2, 2], "n_missing": 0}
    board = {
        "benchmark": "cove",
        "rank_by": "SSIM",
        "metrics": ["SSIM"],
        "reference": "A",
        "checks": [],
        "settings": {"alpha": 0.05},
        "rows": [
            {"label": "A", "metrics": {"SSIM": {**entry, "value": 0.9, "rank": 1, "rank_ci95": [1, 1]}}},
            {"label": "B", "metrics": {"SSIM": entry}},
        ],
        "pairs": [{"metric": "SSIM", "a": "A", "b": "B", "significant": True, "mcnemar": {"significant": True}}],
    }
    text = format_board(board)
    assert [line.split()[2] for line in text.splitlines() if line.split()[1:2] in (["A"], ["B"])] == ["0.9", "0.5*^"]
