"""CoVEBench checklist: request layout and UAS/IFS/VRS/SEM on a hand-computed checklist."""

import json

import pytest

from helpers.cove_checklist_data import CASES, OK, OPTS, ROWS, both, case, q, score_cfg, value
from vbench_ray.benchmarks import cove_checklist as ck
from vbench_ray.judges.stage import JudgeResult


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
