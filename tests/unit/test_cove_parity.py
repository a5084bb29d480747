"""Issue 24: ``judge.parse=official`` gives the official CoVEBench numbers on messy judge output.

The official chain is transcribed in ``cove_official_oracle`` (commits and files cited there); the project's
side runs its real judge stage, parse and scoring (``cove_messy.run_project``). Both read the same recorded
replies (first ask and re-asks); both aggregation modes must agree to 1e-9.
"""

import random
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import cove_official_oracle as official
from helpers.cove_messy import case_of, messy_set, project_values, run_project
from vbench_ray.benchmarks import cove_checklist as ck
from vbench_ray.judges.stage import JudgeResult

MODES = {"pooled": ("pooled", "group", official.pooled), "per_task": ("per_task", "task", official.per_task)}


def _same(a, b):
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-9)


def _compare(tasks, replies):
    rows = run_project(tasks, replies)
    judged = official.judge(tasks, replies)
    for mode, (aggregation, uas_unit, oracle) in MODES.items():
        want = oracle(judged)
        got = project_values(rows, aggregation, uas_unit)
        assert all(_same(got[m], want[m]) for m in want), (mode, got, want)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(1, 4))
def test_official_parse_matches_the_official_code_on_messy_replies(rng, n_tasks):
    tasks, replies = messy_set(rng, n_tasks)
    _compare(tasks, replies)


def test_a_fixed_messy_set_matches_in_both_modes():
    """The set the README's side-by-side table was made from (seed 24, 30 tasks)."""
    tasks, replies = messy_set(random.Random(24), 30)
    assert len(replies) > 60
    _compare(tasks, replies)


# ----------------------------------------------------------------------------- the numbered items


def q(qid, qtype, dim, expected=None, **extra):
    out = {"id": qid, "type": qtype, "question": f"{qid}?", **extra}
    if dim is not None:
        out["dimension"] = dim
    if expected is not None:
        out["expected_answer"] = expected
    return out


def _rows(task, results, **kw):
    return ck.judgment_rows(case_of(task), results, "official", **kw)


def _value(rows, metric, aggregation="pooled", uas_unit="group", sem_questions="routed"):
    cfg = SimpleNamespace(aggregation=aggregation, uas_unit=uas_unit, sem_questions=sem_questions)
    return ck.aggregate(rows, metric, cfg, seed=0, n_resamples=20, confidence=0.95)["value"]


def _answered(answers):
    return {k: {"official": v, "lenient": None} for k, v in answers.items()}


def test_item1_unknown_dimension_and_other_gold_key_are_scored():
    """An unknown ``dimension`` routes by its keywords (``physical_logic`` -> VRS) and a gold stored as
    ``correct_answer`` is found; the task is scored, not failed."""
    from vbench_ray.benchmarks.cove_data import validate_task

    task = {
        "id": 1,
        "editing_instruction": "e",
        "videoA_path": "a.mp4",
        "evaluation_groups": [
            {
                "questions": [
                    q("Q1", "Single-TF", "physical_logic", None, correct_answer="No"),
                    q("Q2", "Single-TF", "Execution Accuracy", "Yes"),
                ]
            }
        ],
    }
    assert validate_task(task, "t") == []
    rows = _rows(task, {"cove/1/base/checklist/Single-TF": JudgeResult("", "ok", _answered({"Q1": "no", "Q2": "Yes"}))})
    by = {r["question_id"]: r for r in rows}
    assert by["Q1"]["metric"] == "VRS" and by["Q1"]["correct"] is True and by["Q1"]["expected"] == "No"
    assert _value(rows, "VRS") == 100.0 and _value(rows, "UAS") == 100.0


def test_item1_unknown_question_type_is_skipped_not_fatal():
    task = {
        "id": 1,
        "evaluation_groups": [
            {"questions": [q("Q1", "Ranking", None, "1"), q("Q2", "AB-MCQ", "Execution Accuracy", "A")]}
        ],
    }
    reqs = ck.build_requests(case_of(task))
    assert [r.group for r in reqs] == ["AB-MCQ"]  # the official code never asks a Ranking question
    rows = _rows(task, {"cove/1/base/checklist/AB-MCQ": JudgeResult("", "ok", _answered({"Q2": "A"}))})
    by = {r["question_id"]: r for r in rows}
    assert by["Q1"]["status"] == ck.NOT_ASKED and by["Q1"]["correct"] is None
    assert _value(rows, "IFS") == 100.0
    stats = ck.aggregate(rows, "IFS", SimpleNamespace(aggregation="pooled", uas_unit="group"), 0, 20, 0.95)
    assert stats["n_invalid"] == 0


TF_TASK = {
    "id": 1,
    "evaluation_groups": [
        {
            "questions": [
                q("Q1", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q2", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q6", "Single-TF", "Execution Accuracy", "Yes"),
            ]
        }
    ],
}


def _judge(tmp_path, task, texts, validity="request"):
    from helpers.cove_messy import ScriptedJudge
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    stage = JudgeStage(ScriptedJudge(texts), JudgeLog(tmp_path / validity), max_retries=3)
    results = stage.run(ck.build_requests(case_of(task), "official", validity))
    return results, _rows(task, results, validity=validity)


def test_item2_one_item_without_reasoning_voids_the_whole_request(tmp_path):
    """Official: after its re-asks the request is invalid and none of its answers count; the project's
    per-question validity keeps the valid siblings (``score.validity=question``)."""
    text = (
        '[{"id": "Q1", "reasoning": "r", "final_answer": "Yes"}, {"id": "Q2", "final_answer": "Yes"},'
        ' {"id": "Q6", "reasoning": "r", "final_answer": "Yes"}]'
    )
    results, rows = _judge(tmp_path, TF_TASK, {(1, "Single-TF"): [text]})
    assert results["cove/1/base/checklist/Single-TF"].attempts == 4  # the first ask and 3 re-asks
    assert all(r["correct"] is None for r in rows) and _value(rows, "IFS") is None
    _, kind = _judge(tmp_path, TF_TASK, {(1, "Single-TF"): [text]}, validity="question")
    assert _value(kind, "IFS") == 100.0  # Q1 and Q6 kept


def test_item2_out_of_set_answers_are_accepted_and_scored_wrong(tmp_path):
    text = (
        '[{"id": "Q1", "reasoning": "r", "final_answer": "Unclear"}, {"id": "Q2", "reasoning": "r", '
        '"final_answer": "Yes"}, {"id": "Q6", "reasoning": "r", "final_answer": "C"}]'
    )
    results, rows = _judge(tmp_path, TF_TASK, {(1, "Single-TF"): [text, "never asked again"]})
    assert results["cove/1/base/checklist/Single-TF"].attempts == 1  # no re-ask
    assert _value(rows, "IFS") == pytest.approx(100 / 3)


def test_item3_an_id_with_spaces_is_a_missing_id(tmp_path):
    text = (
        '[{"id": "Q1", "reasoning": "r", "final_answer": "Yes"}, {"id": "Q2", "reasoning": "r", '
        '"final_answer": "Yes"}, {"id": " Q6 ", "reasoning": "r", "final_answer": "Yes"}]'
    )
    results, rows = _judge(tmp_path, TF_TASK, {(1, "Single-TF"): [text]})
    assert results["cove/1/base/checklist/Single-TF"].status == "invalid"
    assert _value(rows, "IFS") is None
    _, kind = _judge(tmp_path, TF_TASK, {(1, "Single-TF"): [text]}, validity="question")
    assert _value(kind, "IFS") == 100.0  # stripped: all three right


def test_item4_scores_go_through_float(tmp_path):
    task = {
        "id": 1,
        "evaluation_groups": [
            {
                "questions": [
                    q("Q1", "Score-MCQ", "Semantic Preservation", "5"),
                    q("Q2", "Score-MCQ", "Semantic Preservation", "5"),
                    q("Q3", "Score-MCQ", "Semantic Preservation", "5"),
                ]
            }
        ],
    }
    text = (
        '[{"id": "Q1", "reasoning": "r", "final_score": 7.5}, {"id": "Q2", "reasoning": "r", "final_score": "11"},'
        ' {"id": "Q3", "reasoning": "r", "final_score": true}]'
    )
    _, rows = _judge(tmp_path, task, {(1, "Score-MCQ"): [text]})
    # (7.5 + 11 + 1.0) / 3 x 10
    assert _value(rows, "SEM") == pytest.approx(65.0)


def test_item5_a_tf_question_routed_to_sem_is_averaged_into_sem():
    task = {
        "id": 1,
        "evaluation_groups": [
            {
                "questions": [
                    q("Q1", "Score-MCQ", "Semantic Preservation", "5"),
                    q("Q2", "Dual-TF", "semantic preservation", "Yes"),
                ]
            }
        ],
    }
    results = {
        "cove/1/base/checklist/Score-MCQ": JudgeResult("", "ok", _answered({"Q1": 8})),
        "cove/1/base/checklist/Dual-TF": JudgeResult("", "ok", _answered({"Q2": "Yes"})),
    }
    rows = _rows(task, results)
    assert _value(rows, "SEM") == pytest.approx(45.0)  # mean(8, 1) x 10
    assert _value(rows, "SEM", sem_questions="score_mcq") == pytest.approx(80.0)


def test_item6_per_task_sem_says_its_scale():
    task = {"id": 1, "evaluation_groups": [{"questions": [q("Q1", "Score-MCQ", "Semantic Preservation", "5")]}]}
    rows = _rows(task, {"cove/1/base/checklist/Score-MCQ": JudgeResult("", "ok", _answered({"Q1": 8}))})
    cfg = SimpleNamespace(aggregation="per_task", uas_unit="task")
    stats = ck.aggregate(rows, "SEM", cfg, 0, 20, 0.95)
    assert stats["value"] == pytest.approx(80.0) and "raw 1-10" in stats["scale_note"]
