"""ViDiC-1K's numbers from hand-made judgment rows (no run): Sim / Diff / Avg, the class table and Table 6's error
types, with wrong, invalid and describe-failed questions mixed in (issue 29, item 4). Expected values worked out by
hand below; paper §4 (Sim, Diff, Avg pooled over questions), App. G.5 (error types)."""

import pytest

from vbench_ray.benchmarks import vidic_scoring as scoring


def row(case, section, cls, correct, status="ok", error_type=None, alt=None):
    return {
        "case_id": case,
        "section": section,
        "class": cls,
        "correct": correct,
        "status": status,
        "error_type": error_type,
        "parse": "official",
        "alt_correct": correct if alt is None else alt,
    }


SIM, DIFF = "Similarities", "Differences"
ROWS = [
    row("a", SIM, "Subject", True),
    row("a", SIM, "Style", False, error_type="Hallucination"),
    row("a", DIFF, "Subject", True),
    row("a", DIFF, "Motion", False),  # wrong, its error type not analysed
    row("b", DIFF, "Motion", False, status="describe_error"),  # no description: counts wrong, never answered
    row("b", SIM, "Camera", False, status="invalid"),  # no valid answer: counts wrong
    row("b", DIFF, "Camera", True, alt=False),  # right here, wrong under the other parse
]
ARGS = (0, 1000, 0.95)


def test_avg_pools_questions_and_counts_failures_wrong():
    avg = scoring.accuracy(ROWS, *ARGS)
    # a: 2 of 4, b: 1 of 3 -> 3 of 7
    assert avg["value"] == pytest.approx(300 / 7)
    assert (avg["n"], avg["n_cases"], avg["n_correct"], avg["n_invalid"]) == (7, 2, 3, 2)
    assert avg["n_scored_differently"] == 1 and avg["parse"] == "official"
    assert avg["other_parse"] == {"parse": "lenient", "value": pytest.approx(200 / 7)}
    # two cases: resamples are (a, a) 50 %, (b, b) 33.3 %, or mixed 42.9 %; each of the ends has 25 % mass
    assert avg["ci95"] == [pytest.approx(100 / 3), pytest.approx(50.0)]
    assert avg["scale"] == "percent"


def test_sim_and_diff():
    m = scoring.section_metrics(ROWS, *ARGS)
    assert m["Sim"]["value"] == pytest.approx(100 / 3) and (m["Sim"]["n"], m["Sim"]["n_invalid"]) == (3, 1)
    assert m["Diff"]["value"] == pytest.approx(50.0) and (m["Diff"]["n"], m["Diff"]["n_invalid"]) == (4, 1)
    assert m["Avg"]["value"] == pytest.approx(300 / 7)
    empty = scoring.accuracy([], *ARGS)
    assert (empty["value"], empty["ci95"], empty["n"], empty["n_cases"]) == (None, None, 0, 0)
    one = scoring.accuracy(ROWS[:1], *ARGS)
    assert one["value"] == 100.0 and one["ci95"] is None  # one case: no interval


def test_classes():
    c = scoring.by_class(ROWS, *ARGS)
    assert list(c) == list(scoring.CLASSES)
    assert c["Subject"]["Avg"]["value"] == 100.0 and c["Subject"]["Avg"]["n"] == 2
    assert c["Style"]["Sim"]["value"] == 0.0 and c["Style"]["Diff"]["value"] is None and c["Style"]["Diff"]["n"] == 0
    assert c["Motion"]["Avg"]["value"] == 0.0 and (c["Motion"]["Avg"]["n"], c["Motion"]["Avg"]["n_invalid"]) == (2, 1)
    assert c["Camera"]["Avg"]["value"] == 50.0 and c["Camera"]["Avg"]["n_scored_differently"] == 1
    assert c["Camera"]["Sim"]["value"] == 0.0 and c["Camera"]["Diff"]["value"] == 100.0
    assert all(c[k]["Avg"]["n"] == 0 for k in ("Background", "Position", "Playback Technique"))
    assert set(c["Subject"]["Avg"]) == {"value", "ci95", "n", "n_cases", "n_invalid", "n_scored_differently"}


def test_error_types_count_judged_wrong_answers_only():
    e = scoring.error_type_counts(ROWS)
    # wrong answers the judge gave: a/Style (Hallucination) and a/Motion (not analysed); b's two never answered
    assert (e["n_wrong"], e["n_analysed"], e["n_unanalysed"]) == (2, 1, 1)
    assert e["counts"] == {
        "Hallucination": 1,
        "Missed Detection": 0,
        "Self-Contradiction": 0,
        "Vague / Imprecise": 0,
        "Reasoning Error": 0,
    }
    assert e["percent"] == {
        "Hallucination": 100.0,
        "Missed Detection": 0.0,
        "Self-Contradiction": 0.0,
        "Vague / Imprecise": 0.0,
        "Reasoning Error": 0.0,
    }
    assert e["by_section"] == {"Sim": {**e["counts"]}, "Diff": dict.fromkeys(scoring.ERROR_TYPES, 0)}
    none = scoring.error_type_counts([r for r in ROWS if r["error_type"] is None])
    assert none["n_analysed"] == 0 and set(none["percent"].values()) == {None}
