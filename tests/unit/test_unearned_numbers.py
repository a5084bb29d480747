"""Issue 24, "no number where none was earned": a missing deliverable scores (a run: test_unearned_numbers_run.py),
an empty metric is n/a."""

from __future__ import annotations

import json

import pytest


def _rows(results, parse="lenient"):
    from helpers.cove_messy import case_of
    from vbench_ray.benchmarks import cove_checklist as ck

    task = {
        "id": 1,
        "evaluation_groups": [
            {
                "category": [{"Level 1": "Subject"}],
                "questions": [
                    {
                        "id": "Q1",
                        "type": "Single-TF",
                        "dimension": "Execution Accuracy",
                        "question": "?",
                        "expected_answer": "Yes",
                    },
                    {
                        "id": "Q2",
                        "type": "Score-MCQ",
                        "dimension": "Semantic Preservation",
                        "question": "?",
                        "expected_answer": "5",
                    },
                ],
            }
        ],
    }
    return ck.judgment_rows({**case_of(task), "categories": ["Subject"]}, results, parse)


def test_c_a_metric_with_no_valid_answer_is_na_in_headline_and_categories():
    """(c) lenient parse, every answer never valid: the fallbacks (wrong, lowest score 1) are no number; SEM
    printed 10 and IFS 0 before, in the headline and in the category bars."""
    from types import SimpleNamespace

    from vbench_ray.benchmarks import cove_checklist as ck
    from vbench_ray.judges.stage import JudgeResult

    dead = {
        f"cove/1/base/checklist/{t}": JudgeResult("", "invalid", None, 4, "no JSON") for t in ("Single-TF", "Score-MCQ")
    }
    rows = _rows(dead)
    cfg = SimpleNamespace(aggregation="pooled", uas_unit="group")
    for metric in ("IFS", "SEM", "UAS"):
        stats = ck.aggregate(rows, metric, cfg, 0, 20, 0.95)
        assert stats["value"] is None and stats["note"] == "no valid judge answer: no number", metric
        assert ck.by_category(rows, [metric], cfg, 0, 20, 0.95)["Subject"][metric]["value"] is None
    ok = {**dead, "cove/1/base/checklist/Score-MCQ": JudgeResult("", "ok", {"Q2": {"official": 9, "lenient": 9}})}
    assert ck.aggregate(_rows(ok), "SEM", cfg, 0, 20, 0.95)["value"] == 90.0  # an earned number stays


def test_c_unavailable_metrics_are_null_in_every_breakdown():
    """(c) the headline says unavailable (a dead judge): categories, NRV's by_method and its cross-judge methods
    were still 0 / 0.0001."""
    from vbench_ray.benchmarks.nrv_summary import blank_unavailable_nrv

    summary = {
        "metrics": {"NRVE_Acc": {"value": None, "unavailable": "dead judge"}, "PSNR": {"value": 30.0}},
        "by_method": {"m1": {"NRVE_Acc": {"value": 0.0001, "ci95": [0, 0.001]}, "PSNR": {"value": 31.0}}},
        "by_category": {"c": {"NRVE_Acc": {"value": 0.0}}},
        "cross_judge": {"by_method": {"m1": {"NRVE_Acc": {"mean": 0.0001, "std": 0.0}}}},
    }
    blank_unavailable_nrv(summary)
    assert summary["by_method"]["m1"]["NRVE_Acc"] == {"value": None, "ci95": None, "unavailable": True}
    assert summary["by_method"]["m1"]["PSNR"] == {"value": 31.0}
    assert summary["by_category"]["c"]["NRVE_Acc"]["value"] is None
    assert summary["cross_judge"]["by_method"]["m1"]["NRVE_Acc"]["mean"] is None


def test_c_leaderboard_category_levels_skip_dropped_answers_and_dead_runs():
    """(c) Table 8's UAS by category: a dropped question (official parse, no answer) is no part of its edit point
    (it counted wrong: 0 where the headline UAS was 100), and a run whose UAS has no value gives no levels."""
    from types import SimpleNamespace

    import pandas as pd

    from vbench_ray.analyses.cove import category_levels

    task = {"evaluation_groups": [{"category": [{"Level 1": "Subject"}], "questions": []}]}
    cases = pd.DataFrame([{"case_id": "1", "annotations": json.dumps(task)}])
    judged = pd.DataFrame(
        [
            {"case_id": "1", "group": 0, "metric": "IFS", "correct": True},
            {"case_id": "1", "group": 0, "metric": "VRS", "correct": None},
        ]
    )
    run = SimpleNamespace(judgments=judged, cases=cases, config={}, summary={"metrics": {"UAS": {"value": 100.0}}})
    assert category_levels(run, n_resamples=20)["level1"]["Subject"]["value"] == 100.0
    run.summary = {"metrics": {"UAS": {"value": None, "unavailable": "dead judge"}}}
    assert "level1" not in category_levels(run, n_resamples=20)


def test_d_each_metric_is_drawn_on_its_own_scale():
    """(d) SEM (0-100) of 10 was a full bar (the axis went to the largest value); IFS in percent too."""
    import re

    from vbench_ray.report import _bar_chart

    def bar_width(scale, value):
        svg = _bar_chart("M", {"a": {"value": value, "n": 3}}, scale)
        return float(re.search(r'class="bar"[^>]*width="([\d.]+)"', svg).group(1))

    full = bar_width("[0,1]", 1.0)
    assert bar_width("0-100", 10.0) == pytest.approx(full / 10, abs=0.5)
    assert bar_width("percent", 50.0) == pytest.approx(full / 2, abs=0.5)


def test_e_cli_line_says_why_a_metric_has_no_number(capsys):
    """(e) the demo's random judge: a metric with no valid answer prints n/a and why, never a fallback 10."""
    from types import SimpleNamespace

    from vbench_ray.cli import _print_result

    summary = {
        "metrics": {
            "SEM": {"value": None, "ci95": None, "n": 8, "n_invalid": 8, "note": "no valid judge answer: no number"}
        }
    }
    _print_result(
        SimpleNamespace(summary=summary, run_dir="r", summary_path="s", report_path="p", n_computed=1, seconds=1.0)
    )
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("SEM"))
    assert "n/a" in line and "no valid judge answer" in line and " 10" not in line


def test_e_a_number_made_partly_of_fallbacks_says_so_on_its_line(capsys):
    """(e) lenient parse, one Score-MCQ answer valid (9) and one never valid (scored 1): SEM 50 is printed with
    what it is made of, not as a plain score."""
    from types import SimpleNamespace

    from helpers.cove_messy import case_of
    from vbench_ray.benchmarks import cove_checklist as ck
    from vbench_ray.cli import _print_result
    from vbench_ray.judges.stage import JudgeResult

    task = {
        "id": 1,
        "evaluation_groups": [
            {
                "questions": [
                    {"id": f"Q{k}", "type": "Score-MCQ", "dimension": "Semantic Preservation", "question": "?"}
                    for k in (1, 2)
                ]
            }
        ],
    }
    value = {"Q1": {"official": 9, "lenient": 9}}
    rows = ck.judgment_rows(
        case_of(task),
        {"cove/1/base/checklist/Score-MCQ": JudgeResult("", "invalid", value)},
        "lenient",
        validity="question",
    )
    sem = ck.aggregate(rows, "SEM", SimpleNamespace(aggregation="pooled", uas_unit="group"), 0, 20, 0.95)
    assert sem["value"] == pytest.approx(50.0) and sem["n_fallback"] == 1  # (9 + 1) / 2 x 10
    _print_result(
        SimpleNamespace(
            summary={"metrics": {"SEM": sem}}, run_dir="r", summary_path="s", report_path="p", n_computed=1, seconds=1.0
        )
    )
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("SEM"))
    assert "includes 1 never-valid answers scored wrong / Score-MCQ 1" in line
