"""CoVEBench checklist: request layout and UAS/IFS/VRS/SEM on a hand-computed checklist."""

import json
from types import SimpleNamespace

import pytest

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


def test_requests_follow_the_official_layout():
    reqs = {r.group: r for r in ck.build_requests(CASES[0])}
    assert {r.parser for r in reqs.values()} == {"checklist_official"}  # judge.parse default
    assert sorted(reqs) == ["AB-MCQ", "Dual-TF", "Score-MCQ", "Single-TF"]
    assert reqs["AB-MCQ"].request_id == "cove/1/base/checklist/AB-MCQ"
    videos = {
        g: [p["video_url"]["url"] for p in r.messages[1]["content"] if p["type"] == "video_url"]
        for g, r in reqs.items()
    }
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
    # UAS groups per task: T1 1/2, T2 0/1 -> 25 (both tasks have IFS and VRS questions)
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


# ------------------------------------------------------------------ issue 10: parse modes, validity, routing


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


# ------------------------------------------------------------------ issue 29, item 4: categories that differ
# Group 0 of task 11 names Q1 "Subject" and Q2 "Motion" (Level 1): its UAS unit belongs to both categories, while
# its questions belong to one each (Q3, named by no entry, to both). Wrong, invalid and dropped answers mixed in.
MIXED_TASK = {
    "id": 11,
    "editing_instruction": "e",
    "videoA_path": "data/m.mp4",
    "category": [{"Level 1": "Style"}],
    "evaluation_groups": [
        {
            "target_element": "mixed",
            "category": [{"Question IDs": ["Q1"], "Level 1": "Subject"}, {"Question IDs": ["Q2"], "Level 1": "Motion"}],
            "questions": [
                q("Q1", "AB-MCQ", "Execution Accuracy", "A", **OPTS),
                q("Q2", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q3", "Single-TF", "Physical Logic", "No"),
            ],
        },
        {
            "target_element": "cam",
            "category": [{"Question IDs": ["Q4"], "Level 1": "Camera"}],
            "questions": [q("Q4", "Dual-TF", "Execution Accuracy", "No"), q("Q5", "Dual-TF", "Physical Logic", "Yes")],
        },
        {"target_element": "keep", "questions": [q("Q6", "Score-MCQ", "Semantic Preservation", "5")]},
    ],
}
MOTION_TASK = {
    "id": 12,
    "editing_instruction": "e",
    "videoA_path": "data/n.mp4",
    "category": [{"Level 1": "Motion"}],
    "evaluation_groups": [
        {
            "target_element": "move",
            "category": [{"Question IDs": ["Q1"], "Level 1": "Motion"}],
            "questions": [
                q("Q1", "Single-TF", "Execution Accuracy", "Yes"),
                q("Q2", "Single-TF", "Physical Logic", "Yes"),
            ],
        }
    ],
}
MIXED_RESULTS = {
    "cove/11/base/checklist/AB-MCQ": JudgeResult("", OK, both({"Q1": "B"})),  # wrong
    "cove/11/base/checklist/Single-TF": JudgeResult("", OK, both({"Q2": "Yes", "Q3": "No"})),  # both right
    "cove/11/base/checklist/Dual-TF": JudgeResult("", "invalid", None, 2, "no parsable JSON"),  # Q4, Q5 dropped
    "cove/11/base/checklist/Score-MCQ": JudgeResult("", OK, both({"Q6": 7})),
    "cove/12/base/checklist/Single-TF": JudgeResult("", OK, both({"Q1": "Yes", "Q2": "Yes"})),  # both right
}


def mixed_rows():
    cases = [case(MIXED_TASK, ["Style"]), case(MOTION_TASK, ["Motion"])]
    return [r for c in cases for r in ck.judgment_rows(c, MIXED_RESULTS, "official")]


def test_question_and_group_categories_differ():
    by = {(r["case_id"], r["question_id"]): r for r in mixed_rows()}
    assert by[("11", "Q1")]["categories"] == ["Subject"] and by[("11", "Q2")]["categories"] == ["Motion"]
    assert by[("11", "Q3")]["categories"] == ["Subject", "Motion"]
    assert all(by[("11", k)]["group_categories"] == ["Subject", "Motion"] for k in ("Q1", "Q2", "Q3"))
    assert by[("11", "Q6")]["categories"] == by[("11", "Q6")]["group_categories"] == ["Style"]  # the task's


def test_uas_by_category_counts_whole_edit_points_by_their_group_categories():
    cats = ck.by_category(mixed_rows(), ["UAS", "IFS", "VRS", "SEM"], score_cfg(), 0, 50, 0.95)
    assert sorted(cats) == ["Camera", "Motion", "Style", "Subject"]
    # UAS units: 11/g0 = 0 (Q1 wrong; Q2, Q3 right), 11/g1 none (Q4, Q5 dropped), 12/g0 = 100.
    # Motion holds 11/g0 (its group names Motion) and 12/g0: (0 + 100) / 2. Keyed on question categories it
    # would see only Q2, Q3 of 11/g0 (both right): 100.
    assert cats["Motion"]["UAS"]["value"] == pytest.approx(50.0) and cats["Motion"]["UAS"]["n"] == 2
    assert cats["Subject"]["UAS"]["value"] == 0.0 and cats["Subject"]["UAS"]["n"] == 1
    assert cats["Camera"]["UAS"]["value"] is None and cats["Camera"]["UAS"]["n"] == 0
    assert cats["Style"]["UAS"]["n"] == 0
    # questions by their own categories: IFS Subject = Q1 (wrong); Motion = 11/Q2, 12/Q1 (right)
    assert cats["Subject"]["IFS"]["value"] == 0.0 and cats["Subject"]["IFS"]["n"] == 1
    assert cats["Motion"]["IFS"]["value"] == 100.0 and cats["Motion"]["IFS"]["n"] == 2
    assert cats["Camera"]["IFS"]["n"] == 0 and cats["Camera"]["VRS"]["n"] == 0  # dropped, not counted wrong
    # VRS: 11/Q3 in Subject and Motion, 12/Q2 in Motion
    assert (cats["Subject"]["VRS"]["n"], cats["Motion"]["VRS"]["n"]) == (1, 2)
    assert cats["Style"]["SEM"]["value"] == pytest.approx(70.0) and cats["Style"]["SEM"]["n"] == 1


def test_headline_counts_with_wrong_and_invalid_answers():
    rows = mixed_rows()
    ifs = value("IFS", rows)  # 11/Q1 wrong, 11/Q2 right, 12/Q1 right; 11/Q4 invalid and dropped
    assert ifs["value"] == pytest.approx(200 / 3) and (ifs["n"], ifs["n_invalid"], ifs["n_dropped"]) == (3, 1, 1)
    vrs = value("VRS", rows)  # 11/Q3, 12/Q2 right; 11/Q5 invalid and dropped
    assert vrs["value"] == 100.0 and (vrs["n"], vrs["n_invalid"], vrs["n_dropped"]) == (2, 1, 1)
    uas = value("UAS", rows)  # 11/g0 0, 12/g0 100; the invalid Q4, Q5 (all of 11/g1) make no unit
    assert uas["value"] == pytest.approx(50.0) and (uas["n"], uas["n_cases"], uas["n_invalid"]) == (2, 2, 2)
    sem = value("SEM", rows)
    assert sem["value"] == pytest.approx(70.0) and sem["n"] == 1


def test_gold_answer_falls_back_to_the_last_key_as_the_official_or_chain():
    # ``a or ... or z`` is z when every key is falsy: the last key's own value, not None
    assert ck.gold_answer({"expected_answer": "", "answer": None, "correct_answer": 0}) == 0
    assert ck.gold_answer({"expected_answer": "", "answer": "", "correct_answer": ""}) == ""
    assert ck.gold_answer({"options": {"answer": "", "correct": None, "target": 0}}) == 0
    assert ck.gold_answer({"options": {"correct": "B"}}) == "B"


def test_a_group_category_that_names_no_asked_question_still_has_its_uas_unit():
    task = {
        "id": 13,
        "editing_instruction": "e",
        "videoA_path": "data/o.mp4",
        "category": [],
        "evaluation_groups": [
            {
                "target_element": "x",
                "category": [
                    {"Question IDs": ["Q1"], "Level 1": "Subject"},
                    {"Question IDs": ["Q9"], "Level 1": "Camera"},
                ],  # no Q9 asked
                "questions": [q("Q1", "Single-TF", "Execution Accuracy", "Yes")],
            }
        ],
    }
    results = {"cove/13/base/checklist/Single-TF": JudgeResult("", OK, both({"Q1": "Yes"}))}
    rows = ck.judgment_rows(case(task, []), results, "official")
    cats = ck.by_category(rows, ["UAS", "IFS"], score_cfg(), 0, 50, 0.95)
    assert sorted(cats) == ["Camera", "Subject"]
    assert cats["Camera"]["UAS"]["value"] == 100.0 and cats["Camera"]["IFS"]["n"] == 0  # the unit, not the question


def test_by_category_is_reproducible_and_keeps_the_table_fields():
    rows = mixed_rows()
    first = ck.by_category(rows, ["UAS", "IFS"], score_cfg(), 3, 200, 0.95)
    assert first == ck.by_category(rows, ["UAS", "IFS"], score_cfg(), 3, 200, 0.95)  # seeded CIs
    assert set(first["Motion"]["UAS"]) == {"value", "ci95", "n", "n_cases"}
    assert first["Motion"]["UAS"]["n_cases"] == 2 and first["Motion"]["UAS"]["ci95"] == [0.0, 100.0]


def test_row_value_and_answer_scoring_by_mode():
    assert ck.row_value({"score": 7.0, "correct": None}) == 7.0  # a Score-MCQ row written without its type
    assert ck.row_value({"type": "Single-TF", "correct": False, "score": None}) == 0.0
    assert ck.row_value({"correct": None}) is None
    tf = {"type": "Single-TF", "expected_answer": "Yes"}
    assert ck.score_answer(tf, None, "official") == (None, None)  # never answered: dropped
    assert ck.score_answer(tf, None, "lenient") == (False, None)  # counted wrong
    assert ck.score_answer(tf, "maybe", "lenient") == (False, None)  # no Yes/No in it
    assert ck.score_answer(tf, "True", "lenient") == (True, None)
    assert ck.score_answer(tf, "True", "official") == (False, None)
    odd = {"type": "Quad-TF", "expected_answer": "Yes"}  # a type without a form: read as TF
    assert ck.score_answer(odd, "True", "lenient") == (True, None)
    score = {"type": "Score-MCQ", "expected_answer": "5"}
    assert ck.score_answer(score, "garbage", "lenient") == (None, 1.0)  # the lowest score
    assert ck.score_answer(score, "7", "official") == (None, 7.0)


def test_category_entries_without_a_level_1_are_ignored():
    group = {"category": [{"Question IDs": ["Q1"]}, "Subject", {"Question IDs": ["Q1"], "Level 1": "Camera"}]}
    assert ck._question_categories({"id": "Q1"}, group, ["Style"]) == ["Camera"]
    assert ck._question_categories({"id": "Q2"}, group, ["Style"]) == ["Camera"]  # the group's
    assert ck._question_categories({"id": "Q2"}, {"category": [{"Question IDs": ["Q1"]}]}, ["Style"]) == ["Style"]


def test_aggregate_reports_every_field_by_hand():
    rows = mixed_rows()
    # IFS: 11/Q1 wrong, 11/Q2 right, 12/Q1 right; 11/Q4 dropped (official), wrong under lenient -> 2 of 4
    # CI over the two cases: 11 alone 50, 12 alone 100
    assert value("IFS", rows) == {
        "value": pytest.approx(200 / 3),
        "ci95": [50.0, 100.0],
        "n": 3,
        "n_cases": 2,
        "n_invalid": 1,
        "n_dropped": 1,
        "n_fallback": 0,
        "n_missing_output": 0,
        "scale": "percent",
        "parse": "official",
        "n_scored_differently": 1,
        "other_parse": {"parse": "lenient", "value": 50.0},
    }
    sem = value("SEM", rows)
    assert (sem["value"], sem["scale"], sem["ci95"], sem["other_parse"]) == (
        70.0,
        "0-100",
        None,
        {"parse": "lenient", "value": 70.0},
    )
    lenient = [
        r
        for c in (case(MIXED_TASK, ["Style"]), case(MOTION_TASK, ["Motion"]))
        for r in ck.judgment_rows(c, MIXED_RESULTS, "lenient")
    ]
    assert value("IFS", lenient)["n_fallback"] == 1 and value("IFS", lenient)["value"] == 50.0  # 11/Q4 counted wrong
    assert [r["question_id"] for r in ck.metric_rows(rows, "SEM", "score_mcq")] == ["Q6"]
    assert len(ck.metric_rows(rows, "IFS", "score_mcq")) == 4  # the Score-MCQ-only rule is SEM's alone
