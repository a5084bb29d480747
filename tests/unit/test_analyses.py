"""Agreement statistics and CoVEBench analyses on small tables computed by hand."""

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from vbench_ray.analyses.agreement import adaptive_tau, cohen_kappa, fleiss_kappa, preference_alignment, rating_table
from vbench_ray.analyses.cove import human_alignment, judge_human_agreement, judge_stability


def test_cohen_kappa_by_hand():
    a = list("yynnynyyny")
    b = list("ynnnyyyynn")
    # p_o = 7/10; marginals a: 6 y / 4 n, b: 5 y / 5 n -> p_e = .6*.5 + .4*.5 = .5; kappa = .2/.5
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa(["y"] * 4, ["y"] * 4) is None  # chance agreement 1: undefined


def test_fleiss_kappa_by_hand():
    # 3 items x 3 raters, 2 categories. P_i = 1, 1/3, 1 -> P_bar 7/9; p_j = 5/9, 4/9 -> P_e 41/81
    assert fleiss_kappa([[3, 0], [2, 1], [0, 3]]) == pytest.approx((7 / 9 - 41 / 81) / (1 - 41 / 81))
    assert fleiss_kappa([[3, 0], [2, 1], [0, 3]]) == pytest.approx(22 / 40)
    table, cats = rating_table([["yes", "yes", "no"], ["no", "no", "no"]])
    assert cats == ["no", "yes"] and table.tolist() == [[1, 2], [3, 0]]
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0], [1, 2]])  # unequal raters per item


def test_adaptive_tau_is_the_tie_share_percentile():
    # 2 of 5 judgments are ties -> the 40th percentile of |differences| 0.1 0.2 0.3 0.5 0.9:
    # position 0.4 * 4 = 1.6 -> 0.2 + 0.6 * (0.3 - 0.2)
    assert adaptive_tau([0.1, -0.5, 0.2, 0.9, -0.3], 0.4) == pytest.approx(0.26)


def test_preference_alignment_on_a_constructed_example():
    a = [0.9, 0.4, 0.5, 0.7, 0.6]
    b = [0.8, 0.9, 0.3, 0.75, 0.3]
    human = ["A", "B", "tie", "tie", "B"]
    # differences .1 -.5 .2 -.05 .3; ties 2/5 -> tau = 40th pct of .05 .1 .2 .3 .5 = .1 + .6 * .1 = .16
    # A/A right, B/B right, tie with |.2| > tau no, tie with |.05| <= tau yes, B while the metric prefers A wrong
    out = preference_alignment(a, b, human)
    assert out["tau"] == pytest.approx(0.16)
    assert (out["n_correct"], out["n_incorrect"], out["n_unclear"], out["n_unclear_as_tie"]) == (2, 1, 2, 1)
    assert out["agreement"] == pytest.approx(3 / 5)
    # lower-is-better metrics prefer the smaller score
    assert preference_alignment([1.0], [2.0], ["A"], higher_is_better=False)["n_correct"] == 1


def _run(label, judgments=None, units=None, metrics=None):
    return SimpleNamespace(
        label=label,
        path=Path(label),
        judgments=judgments,
        units=units or {},
        summary={"run_name": label, "metrics": metrics or {}},
    )


def test_human_alignment_reads_the_preference_file(tmp_path):
    runs = {
        "x": _run("x", units={"UAS": {"1": (100.0, 1.0), "2": (0.0, 1.0)}}),
        "y": _run("y", units={"UAS": {"1": (0.0, 1.0), "2": (0.0, 1.0)}}),
    }
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"case_id": "1", "model_a": "x", "model_b": "y", "preference": "A"},
                {"case_id": "2", "model_a": "x", "model_b": "y", "preference": "tie", "metric": "UAS"},
            ]
        )
        + "\n"
    )
    out = human_alignment(runs, prefs)
    # tie share 1/2 -> tau = median of |100|, |0| = 50; case 2 differs by 0 <= 50
    assert out["UAS"]["tau"] == pytest.approx(50.0) and out["UAS"]["agreement"] == 1.0
    prefs.write_text(json.dumps({"case_id": "1", "model_a": "x", "model_b": "nobody", "preference": "A"}))
    with pytest.raises(ValueError, match="nobody"):
        human_alignment(runs, prefs)


def _judgments(answers: dict[str, str], types: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "case_id": "1",
            "question_id": list(answers),
            "answer": list(answers.values()),
            "type": [types[q] for q in answers],
        }
    )


def test_judge_human_accuracy_and_kappa(tmp_path):
    types = {"Q1": "Single-TF", "Q2": "Single-TF", "Q3": "AB-MCQ", "Q4": "AB-MCQ", "Q5": "Score-MCQ"}
    runs = {"m": _run("m", judgments=_judgments({"Q1": "Yes", "Q2": "No", "Q3": "A", "Q4": "B", "Q5": "7"}, types))}
    human = tmp_path / "answers.jsonl"
    human.write_text(
        "\n".join(
            json.dumps({"model": "m", "case_id": "1", "question_id": q, "answer": a})
            for q, a in [("Q1", "yes"), ("Q2", "Yes"), ("Q3", "A"), ("Q4", "B"), ("Q5", "7")]
        )
    )
    out = judge_human_agreement(runs, human)["m"]
    # pairs (yes,yes) (no,yes) (a,a) (b,b): p_o 3/4; p_e = 1/4*2/4 + 1/4*1/4 + 1/4*1/4 = 1/4 -> kappa 2/3
    assert out["n"] == 4 and out["n_unmatched"] == 1  # the Score-MCQ is not an objective question
    assert out["accuracy"] == pytest.approx(0.75) and out["kappa"] == pytest.approx(2 / 3)


def test_judge_stability_agreement_and_fleiss():
    types = {q: "Single-TF" for q in ("Q1", "Q2", "Q3", "Q4")}
    answers = [
        {"Q1": "yes", "Q2": "no", "Q3": "A", "Q4": "no"},
        {"Q1": "yes", "Q2": "no", "Q3": "A", "Q4": "no"},
        {"Q1": "yes", "Q2": "yes", "Q3": "A", "Q4": "no"},
    ]
    runs = [
        _run(f"s{i}", judgments=_judgments(a, types), metrics={"IFS": {"value": v}})
        for i, (a, v) in enumerate(zip(answers, [80.0, 80.0, 75.0]))
    ]
    out = judge_stability(runs)
    # counts per question over (a, no, yes): [0,0,3] [0,2,1] [3,0,0] [0,3,0]: P_bar 5/6, P_e 50/144
    assert out["agreement"] == pytest.approx(3 / 4)
    assert out["fleiss_kappa"] == pytest.approx(70 / 94)
    assert out["metrics"]["IFS"]["range"] == pytest.approx(5.0)


def test_judge_stability_leaves_vqr_frame_rows_out():
    """judgments.parquet holds the checklist's answers and VQR's per-frame scores (another model, sampled at
    temperature 1): only the checklist's categorical answers enter the agreement and Fleiss' kappa."""
    from vbench_ray.benchmarks import cove_vqr as vqr
    from vbench_ray.judges.stage import JudgeResult

    types = {q: "Single-TF" for q in ("Q1", "Q2", "Q3", "Q4")}
    answers = [
        {"Q1": "yes", "Q2": "no", "Q3": "A", "Q4": "no"},
        {"Q1": "yes", "Q2": "no", "Q3": "A", "Q4": "no"},
        {"Q1": "yes", "Q2": "yes", "Q3": "A", "Q4": "no"},
    ]
    case = {
        "case_id": "1",
        "variant": "base",
        "categories": ["Subject"],
        "vqr_frames": json.dumps([f"/run/vqr_frames/base/1/frame_{i:06d}.jpg" for i in (0, 5, 11)]),
    }
    runs = []
    for i, a in enumerate(answers):
        requests = vqr.build_requests(case)
        results = {
            r.request_id: JudgeResult(r.request_id, "ok", {"score": 1.0 + i + k, "answer": f"{1.0 + i + k:.2f}"})
            for k, r in enumerate(requests)
        }  # every run scores every frame differently
        frames = pd.DataFrame(vqr.frame_rows(case, results))
        assert set(frames["type"]) == {"VQR"} and frames["answer"].nunique() == 3
        j = pd.concat([_judgments(a, types), frames[["case_id", "question_id", "answer", "type"]]], ignore_index=True)
        runs.append(_run(f"s{i}", judgments=j, metrics={"IFS": {"value": 80.0}, "VQR": {"value": 2.0 + i}}))
    out = judge_stability(runs)
    assert out["n_questions"] == 4 and out["agreement"] == pytest.approx(3 / 4)
    assert out["fleiss_kappa"] == pytest.approx(70 / 94)  # as over the checklist answers alone (test above)
    assert "3.00" not in out["categories"] and set(out["categories"]) == {"a", "no", "yes"}
    assert out["metrics"]["VQR"]["range"] == pytest.approx(2.0)  # VQR's spread is still reported as a metric's
