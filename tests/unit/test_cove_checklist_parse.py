"""CoVEBench checklist: the parse modes (official, lenient), the validity rules (request, question), the official
extraction and per-task UAS, and the official keyword routing of questions without a dimension."""

import pytest

from helpers.cove_checklist_data import OK, ROWS, both, case, q, value
from vbench_ray.benchmarks import cove_checklist as ck
from vbench_ray.judges.stage import JudgeResult


# ------------------------------------------------------------------ parse modes, validity, routing


class Scripted:
    """A judge backend answering every attempt of a request with the same text."""

    name = "scripted"
    model_label = "scripted"

    def __init__(self, texts):
        self.texts = texts

    def generate(self, requests):
        from vbench_ray.judges.base import JudgeResponse

        yield [JudgeResponse(r.request_id, text=self.texts[r.group]) for r in requests]


TF_TASK = {
    "id": 7,
    "editing_instruction": "edit",
    "videoA_path": "data/a.mp4",
    "category": [],
    "evaluation_groups": [
        {
            "target_element": "x",
            "questions": [
                q("Q1", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q2", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q3", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q4", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q5", "Score-MCQ", "Semantic Preservation", "5"),
                q("Q6", "Score-MCQ", "Semantic Preservation", "5"),
                q("Q7", "Score-MCQ", "Semantic Preservation", "5"),
            ],
        }
    ],
}
# Q1 "Yes." and Q2 "True": literal official answers that score wrong, normalised to Yes by the lenient parse;
# Q3 lacks the "reasoning" key the official validator requires; Q4 is plain right.
# Scores: 7.5 and 11 are off the paper's 1-10 integer scale (invalid for that question only); 8 is fine.
TF_TEXT = (
    '[{"id": "Q1", "reasoning": "r", "final_answer": "Yes."}, {"id": "Q2", "reasoning": "r", "final_answer": "True"},'
    ' {"id": "Q3", "final_answer": "Yes"}, {"id": "Q4", "reasoning": "r", "final_answer": "Yes"}]'
)
SCORE_TEXT = (
    '[{"id": "Q5", "reasoning": "r", "final_score": 7.5}, {"id": "Q6", "reasoning": "r", "final_score": "11"},'
    ' {"id": "Q7", "reasoning": "r", "final_score": 8}]'
)


def judged_rows(tmp_path, parse, validity="question"):
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    c = case(TF_TASK, [])
    stage = JudgeStage(
        Scripted({"Single-TF": TF_TEXT, "Score-MCQ": SCORE_TEXT}),
        JudgeLog(tmp_path / f"{parse}-{validity}"),
        max_retries=1,
    )
    results = stage.run(ck.build_requests(c, parse, validity))
    return results, ck.judgment_rows(c, results, parse, validity=validity)


def test_invalid_answers_keep_their_valid_siblings(tmp_path):
    """Issue 10 item 3, now ``score.validity=question``: an invalid answer (no reasoning, a 7.5 or an 11) is
    re-asked, but the request's valid answers are kept when it never becomes valid as a whole."""
    results, rows = judged_rows(tmp_path, "official")
    assert results["cove/7/base/checklist/Single-TF"].status == "invalid"
    assert results["cove/7/base/checklist/Single-TF"].attempts == 2  # re-asked once (max_retries=1)
    by = {r["question_id"]: r for r in rows}
    assert by["Q4"]["correct"] is True and by["Q4"]["status"] == "ok"  # a valid sibling still counts right
    assert by["Q3"]["status"] == "invalid" and by["Q3"]["correct"] is None  # missing reasoning: dropped
    # scores: Q7 = 8 kept; Q5 = 7.5 and Q6 = 11 invalid for themselves only
    assert by["Q7"]["score"] == 8.0 and by["Q5"]["score"] is None and by["Q6"]["score"] is None
    _, lenient = judged_rows(tmp_path, "lenient")
    by = {r["question_id"]: r for r in lenient}
    assert by["Q7"]["score"] == 8.0 and by["Q5"]["score"] == 1.0 and by["Q6"]["score"] == 1.0  # lowest, as before


def test_official_parse_is_literal_and_drops_never_valid_answers(tmp_path):
    """Issue 10 item 6 (with ``score.validity=question``): official literal matching, dropped answers, the count
    of answers the modes score differently."""
    _, rows = judged_rows(tmp_path, "official")
    ifs = value("IFS", rows)
    # official: Q1 "Yes." wrong, Q2 "True" wrong, Q3 dropped, Q4 right -> 1/3
    assert ifs["value"] == pytest.approx(100 / 3) and ifs["n"] == 3 and ifs["n_dropped"] == 1
    # lenient on the same answers: Q1..Q4 all Yes -> 4/4
    assert ifs["other_parse"] == {"parse": "lenient", "value": pytest.approx(100.0)}
    assert ifs["parse"] == "official" and ifs["n_scored_differently"] == 3  # Q1, Q2, Q3
    sem = value("SEM", rows)
    # official: only Q7 = 8 -> 80; lenient: 7.5 and 11 never valid -> lowest 1: (1 + 1 + 8) / 3 * 10
    assert sem["value"] == pytest.approx(80.0) and sem["n"] == 1
    assert sem["other_parse"]["value"] == pytest.approx(100 / 3) and sem["n_scored_differently"] == 2
    _, lenient = judged_rows(tmp_path, "lenient")
    ifs = value("IFS", lenient)
    assert ifs["value"] == pytest.approx(100.0) and ifs["other_parse"]["value"] == pytest.approx(100 / 3)
    assert ifs["n_scored_differently"] == 3


def test_official_extraction_is_greedy_and_tolerates_no_second_chance():
    from vbench_ray.judges.parsing import parse

    tf = {"ids": ["Q1"], "form": "TF"}
    # the official regex spans the first "[" to the last "]": two arrays in prose are not JSON
    text = 'First [{"id": "Q1", "reasoning": "r", "final_answer": "Yes"}] and again [1]'
    assert not parse("checklist_official", text, tf).ok
    lenient = parse("checklist_lenient", text, tf)
    assert lenient.ok and lenient.value == {"Q1": {"official": None, "lenient": "Yes"}}
    # "Option A" is kept literally by the official parse (and scores wrong), normalised to A by the lenient one
    ab = parse(
        "checklist_official",
        '[{"id": "Q1", "reasoning": "r", "final_answer": "Option A"}]',
        {"ids": ["Q1"], "form": "AB"},
    )
    assert ab.ok and ab.value == {"Q1": {"official": "Option A", "lenient": "A"}}
    question = q("Q1", "AB-MCQ", "Execution Accuracy", "A")
    assert ck.score_answer(question, "Option A", "official") == (False, None)
    assert ck.score_answer(question, "A", "lenient") == (True, None)


PER_TASK = {
    "id": 3,
    "editing_instruction": "e",
    "videoA_path": "data/c.mp4",
    "category": [],
    "evaluation_groups": [{"target_element": "only EA", "questions": [q("Q1", "AB-MCQ", "Execution Accuracy", "A")]}],
}


def test_per_task_uas_skips_tasks_without_both_ifs_and_vrs():
    """Item 4: the official per-task code gives no UAS to a task lacking IFS or VRS questions."""
    rows = ROWS + ck.judgment_rows(
        case(PER_TASK, []), {"cove/3/base/checklist/AB-MCQ": JudgeResult("", OK, both({"Q1": "A"}))}, "lenient"
    )
    # per task: T1 groups 0 and 1 -> 1/2, T2 0/1, T3 (IFS only) no UAS -> (50 + 0) / 2
    per_task = value("UAS", rows, aggregation="per_task")
    assert per_task["value"] == pytest.approx(25.0) and per_task["n_cases"] == 2
    # task unit, per task (the official code exactly): T1 0, T2 0, T3 none -> 0 over 2 tasks
    assert value("UAS", rows, aggregation="per_task", uas_unit="task")["n_cases"] == 2
    # pooled (paper): T3's group is an edit point like any other: (0 + 1 + 0 + 1) / 4
    assert value("UAS", rows)["value"] == pytest.approx(50.0)


@pytest.mark.parametrize(
    "question,group,metric",
    [
        ({"type": "Single-TF", "dimension": "physical logic"}, {}, "VRS"),  # case-insensitive dimension
        ({"type": "Single-TF", "tags": ["Physics check"]}, {}, "VRS"),
        ({"type": "Dual-TF"}, {"category": [{"Question IDs": ["Q1"], "Level 1": "Artifacts"}]}, "VRS"),
        ({"type": "Single-TF", "category": "Unchanged regions"}, {}, "SEM"),
        ({"type": "AB-MCQ", "dimension": "Instruction compliance"}, {}, "IFS"),
        ({"type": "AB-MCQ"}, {"target_element": "physics"}, "IFS"),  # target_element is not a routing field
        ({"type": "Single-TF"}, {}, "IFS"),
        ({"type": "Score-MCQ", "tags": ["physics"]}, {}, "SEM"),  # Score-MCQ goes to SEM before keywords
        ({"type": "Ranking"}, {}, None),
    ],
)
def test_questions_without_dimension_route_by_the_official_keywords(question, group, metric):
    """Item 5: no (known) dimension -> SEM words, then VRS words, then IFS words, then the type."""
    assert ck.route(question, group) == metric
