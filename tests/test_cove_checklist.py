"""CoVEBench checklist: request layout and UAS/IFS/VRS/SEM on a hand-computed checklist."""

import json
from types import SimpleNamespace

import pytest

from vbench_ray.benchmarks import cove_checklist as ck
from vbench_ray.judges.stage import JudgeResult


def q(qid, qtype, dim, expected, **extra):
    return {"id": qid, "type": qtype, "dimension": dim, "question": f"question {qid}?", "expected_answer": expected, **extra}


OPTS = {"options": {"A": "red", "B": "blue"}}
TASK1 = {"id": 1, "editing_instruction": "edit one", "videoA_path": "data/a.mp4", "category": [{"Level 1": "Subject"}],
         "evaluation_groups": [
             {"target_element": "recolour", "category": [{"Question IDs": ["Q1"], "Level 1": "Subject"}],
              "questions": [q("Q1", "AB-MCQ", "Execution Accuracy", "B", **OPTS),
                            q("Q2", "Single-TF", "Execution Accuracy", "No"),
                            q("Q3", "Single-TF", "Physical Logic", "Yes")]},
             {"target_element": "camera", "category": [{"Question IDs": ["Q4"], "Level 1": "Camera"}],
              "questions": [q("Q4", "Dual-TF", "Execution Accuracy", "Yes")]},
             {"target_element": "preserve", "questions": [q("Q5", "Score-MCQ", "Semantic Preservation", "5"),
                                                          q("Q6", "Score-MCQ", "Semantic Preservation", "5")]}]}
TASK2 = {"id": 2, "editing_instruction": "edit two", "videoA_path": "data/b.mp4", "category": [{"Level 1": "Background"}],
         "evaluation_groups": [
             {"target_element": "bg", "questions": [q("Q1", "AB-MCQ", "Execution Accuracy", "A", **OPTS),
                                                    q("Q2", "Single-TF", "Physical Logic", "No")]},
             {"target_element": "preserve", "questions": [q("Q3", "Score-MCQ", "Semantic Preservation", "5")]}]}


def case(task, cats):
    return {"case_id": str(task["id"]), "variant": "base", "annotations": json.dumps(task), "categories": cats,
            "instruction": task["editing_instruction"], "source_path": f"/data/src{task['id']}.mp4",
            "edited_path": f"/data/ed{task['id']}.mp4"}


CASES = [case(TASK1, ["Subject", "Camera"]), case(TASK2, ["Background"])]
OK = "ok"
# T1: Q1 right, Q2 right, Q3 wrong, Q4 right, scores 8 and 6. T2: Q1 wrong, Q2 right, its Score-MCQ request invalid.
RESULTS = {
    "cove/1/base/checklist/AB-MCQ": JudgeResult("", OK, {"Q1": "B"}),
    "cove/1/base/checklist/Single-TF": JudgeResult("", OK, {"Q2": "No", "Q3": "No"}),
    "cove/1/base/checklist/Dual-TF": JudgeResult("", OK, {"Q4": "Yes"}),
    "cove/1/base/checklist/Score-MCQ": JudgeResult("", OK, {"Q5": 8, "Q6": 6}),
    "cove/2/base/checklist/AB-MCQ": JudgeResult("", OK, {"Q1": "B"}),
    "cove/2/base/checklist/Single-TF": JudgeResult("", OK, {"Q2": "no"}),
    "cove/2/base/checklist/Score-MCQ": JudgeResult("", "invalid", None, 4, "no parsable JSON"),
}
ROWS = [r for c in CASES for r in ck.judgment_rows(c, RESULTS)]


def score_cfg(aggregation="pooled", uas_unit="group"):
    return SimpleNamespace(aggregation=aggregation, uas_unit=uas_unit)


def value(metric, **kw):
    return ck.aggregate(ROWS, metric, score_cfg(**kw), seed=0, n_resamples=200, confidence=0.95)


def test_requests_follow_the_official_layout():
    reqs = {r.group: r for r in ck.build_requests(CASES[0])}
    assert sorted(reqs) == ["AB-MCQ", "Dual-TF", "Score-MCQ", "Single-TF"]
    assert reqs["AB-MCQ"].request_id == "cove/1/base/checklist/AB-MCQ"
    videos = {g: [p["video_url"]["url"] for p in r.messages[1]["content"] if p["type"] == "video_url"]
              for g, r in reqs.items()}
    assert videos["AB-MCQ"] == videos["Single-TF"] == ["file:///data/ed1.mp4"]  # Video B only
    assert videos["Dual-TF"] == videos["Score-MCQ"] == ["file:///data/src1.mp4", "file:///data/ed1.mp4"]  # A then B
    texts = [p["text"] for p in reqs["AB-MCQ"].messages[1]["content"] if p["type"] == "text"]
    assert "Editing Instruction:\nedit one" in texts
    listed = json.loads(texts[2].split("\n", 1)[1])
    assert listed == [{"id": "Q1", "question": "question Q1?", "options": {"A": "red", "B": "blue"}}]
    assert "expected_answer" not in json.dumps(reqs["AB-MCQ"].messages)
    assert reqs["Single-TF"].expected == {"ids": ["Q2", "Q3"], "form": "TF"}
    assert '"A and B"' in reqs["AB-MCQ"].messages[0]["content"]
    assert "1-2" in reqs["Score-MCQ"].messages[0]["content"]


def test_question_rows():
    by = {(r["case_id"], r["question_id"]): r for r in ROWS}
    assert by[("1", "Q3")]["correct"] is False and by[("2", "Q2")]["correct"] is True  # case-insensitive
    assert by[("1", "Q5")]["score"] == 8.0
    assert by[("2", "Q3")]["score"] == 1.0 and by[("2", "Q3")]["status"] == "invalid"  # lowest score
    assert by[("1", "Q1")]["categories"] == ["Subject"]
    assert by[("1", "Q3")]["categories"] == ["Subject"]  # uncategorised: its group's categories
    assert by[("1", "Q5")]["categories"] == ["Subject", "Camera"]  # no group category: the task's


def test_pooled_scores_by_hand():
    # IFS: EA questions T1 Q1 ok, Q2 ok, Q4 ok, T2 Q1 wrong -> 3/4
    assert value("IFS")["value"] == pytest.approx(75.0)
    # VRS: T1 Q3 wrong, T2 Q2 ok -> 1/2
    assert value("VRS")["value"] == pytest.approx(50.0)
    # SEM: scores 8, 6 and 1 (invalid -> lowest) -> mean 5 -> x10
    sem = value("SEM")
    assert sem["value"] == pytest.approx(50.0) and sem["n"] == 3 and sem["n_invalid"] == 1
    # UAS per edit point: T1 g0 (Q3 wrong) 0, T1 g1 1, T2 g0 (Q1 wrong) 0; preservation groups not counted
    uas = value("UAS")
    assert uas["value"] == pytest.approx(100 / 3) and uas["n"] == 3 and uas["n_cases"] == 2


def test_per_task_and_task_unit_options():
    # per-task means: IFS T1 3/3, T2 0/1 -> (100 + 0) / 2
    assert value("IFS", aggregation="per_task")["value"] == pytest.approx(50.0)
    # SEM: T1 (80 + 60) / 2 = 70, T2 10 -> 40
    assert value("SEM", aggregation="per_task")["value"] == pytest.approx(40.0)
    # UAS groups per task: T1 1/2, T2 0/1 -> 25
    assert value("UAS", aggregation="per_task")["value"] == pytest.approx(25.0)
    # whole task as the unit: both tasks have a wrong EA/PL answer -> 0
    assert value("UAS", uas_unit="task")["value"] == 0.0


def test_categories_table8_style():
    cats = ck.by_category(ROWS, ["UAS", "IFS"], score_cfg(), 0, 200, 0.95)
    assert cats["Camera"]["UAS"]["value"] == 100.0 and cats["Camera"]["UAS"]["n"] == 1
    assert cats["Subject"]["UAS"]["value"] == 0.0
    assert cats["Background"]["IFS"]["value"] == 0.0
    assert cats["Subject"]["IFS"]["value"] == 100.0  # Q1 and Q2 of T1


def test_pooled_ci_resamples_cases():
    ci = value("IFS")["ci95"]
    # two cases: per-case ratios 3/3 and 0/1; resamples give 100, 0, or 75
    assert ci[0] >= 0.0 and ci[1] <= 100.0 and ci[0] <= 75.0 <= ci[1]
