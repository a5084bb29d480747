"""A CoVEBench checklist computed by hand: two tasks (their questions, categories and the judge's answers), the
rows they score to under the lenient parse, and the aggregation the checklist tests call."""

import json
from types import SimpleNamespace

from vbench_ray.benchmarks import cove_checklist as ck
from vbench_ray.judges.stage import JudgeResult


def q(qid, qtype, dim, expected, **extra):
    return {
        "id": qid,
        "type": qtype,
        "dimension": dim,
        "question": f"question {qid}?",
        "expected_answer": expected,
        **extra,
    }


OPTS = {"options": {"A": "red", "B": "blue"}}
TASK1 = {
    "id": 1,
    "editing_instruction": "edit one",
    "videoA_path": "data/a.mp4",
    "category": [{"Level 1": "Subject"}],
    "evaluation_groups": [
        {
            "target_element": "recolour",
            "category": [{"Question IDs": ["Q1"], "Level 1": "Subject"}],
            "questions": [
                q("Q1", "AB-MCQ", "Execution Accuracy", "B", **OPTS),
                q("Q2", "Single-TF", "Execution Accuracy", "No"),
                q("Q3", "Single-TF", "Physical Logic", "Yes"),
            ],
        },
        {
            "target_element": "camera",
            "category": [{"Question IDs": ["Q4"], "Level 1": "Camera"}],
            "questions": [q("Q4", "Dual-TF", "Execution Accuracy", "Yes")],
        },
        {
            "target_element": "preserve",
            "questions": [
                q("Q5", "Score-MCQ", "Semantic Preservation", "5"),
                q("Q6", "Score-MCQ", "Semantic Preservation", "5"),
            ],
        },
    ],
}
TASK2 = {
    "id": 2,
    "editing_instruction": "edit two",
    "videoA_path": "data/b.mp4",
    "category": [{"Level 1": "Background"}],
    "evaluation_groups": [
        {
            "target_element": "bg",
            "questions": [
                q("Q1", "AB-MCQ", "Execution Accuracy", "A", **OPTS),
                q("Q2", "Single-TF", "Physical Logic", "No"),
            ],
        },
        {"target_element": "preserve", "questions": [q("Q3", "Score-MCQ", "Semantic Preservation", "5")]},
    ],
}


def case(task, cats):
    return {
        "case_id": str(task["id"]),
        "variant": "base",
        "annotations": json.dumps(task),
        "categories": cats,
        "instruction": task["editing_instruction"],
        "source_path": f"/data/src{task['id']}.mp4",
        "edited_path": f"/data/ed{task['id']}.mp4",
    }


CASES = [case(TASK1, ["Subject", "Camera"]), case(TASK2, ["Background"])]
OK = "ok"
# T1: Q1 right, Q2 right, Q3 wrong, Q4 right, scores 8 and 6. T2: Q1 wrong, Q2 right, its Score-MCQ request invalid.


def both(answers):
    """A parsed value whose answers are the same under both parse modes."""
    return {k: {"official": v, "lenient": v} for k, v in answers.items()}


RESULTS = {
    "cove/1/base/checklist/AB-MCQ": JudgeResult("", OK, both({"Q1": "B"})),
    "cove/1/base/checklist/Single-TF": JudgeResult("", OK, both({"Q2": "No", "Q3": "No"})),
    "cove/1/base/checklist/Dual-TF": JudgeResult("", OK, both({"Q4": "Yes"})),
    "cove/1/base/checklist/Score-MCQ": JudgeResult("", OK, both({"Q5": 8, "Q6": 6})),
    "cove/2/base/checklist/AB-MCQ": JudgeResult("", OK, both({"Q1": "B"})),
    "cove/2/base/checklist/Single-TF": JudgeResult("", OK, both({"Q2": "no"})),
    "cove/2/base/checklist/Score-MCQ": JudgeResult("", "invalid", None, 4, "no parsable JSON"),
}
# the hand-computed tables below were written for the lenient mode (a never-valid answer counts wrong)
ROWS = [r for c in CASES for r in ck.judgment_rows(c, RESULTS, "lenient")]


def score_cfg(aggregation="pooled", uas_unit="group"):
    return SimpleNamespace(aggregation=aggregation, uas_unit=uas_unit)


def value(metric, rows=None, **kw):
    return ck.aggregate(
        ROWS if rows is None else rows, metric, score_cfg(**kw), seed=0, n_resamples=200, confidence=0.95
    )
