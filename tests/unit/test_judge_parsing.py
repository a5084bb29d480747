"""Judge answer parsing as the official CoVEBench code does it, plus answer-set validation."""

import pytest

from vbench_ray.judges.parsing import extract_json, parse, parse_checklist_items, strip_thinking

AB = {"ids": ["Q1", "Q2"], "form": "AB"}


def test_strip_thinking_keeps_what_follows_the_last_think_tag():
    assert strip_thinking("<think>[1]</think> [2]") == " [2]"
    assert strip_thinking("no tags") == "no tags"


@pytest.mark.parametrize(
    "text,expected",
    [
        ('```json\n[{"id": "Q1"}]\n```', [{"id": "Q1"}]),
        ('Sure! [{"id": "Q1", "note": "a ] inside"}] trailing', [{"id": "Q1", "note": "a ] inside"}]),
        ('{"id": "Q1", "final_answer": "A"}', {"id": "Q1", "final_answer": "A"}),
        ('<think>[{"id": "bad"}]</think>```\n[{"id": "Q2"}]\n```', [{"id": "Q2"}]),
        ('[broken json ] then {"id": "Q3"}', {"id": "Q3"}),
    ],
)
def test_extract_json_order(text, expected):
    assert extract_json(text) == expected


def test_extract_json_gibberish_fails():
    with pytest.raises(ValueError):
        extract_json("I cannot help with that.")


def test_valid_answers_are_normalised():
    text = '[{"id": "Q1", "reasoning": "r", "final_answer": "b"}, {"id": "Q2", "answer": "A and B"}]'
    p = parse_checklist_items(text, AB)
    assert p.ok and p.value == {"Q1": "B", "Q2": "A and B"}
    p = parse_checklist_items(
        '[{"id": "Q1", "final_answer": "yes."}, {"id": "Q2", "final_answer": "No"}]',
        {"ids": ["Q1", "Q2"], "form": "TF"},
    )
    assert p.value == {"Q1": "Yes", "Q2": "No"}
    p = parse_checklist_items(
        '[{"id": "Q1", "final_score": "7"}, {"id": "Q2", "score": 10}]', {"ids": ["Q1", "Q2"], "form": "SCORE"}
    )
    assert p.value == {"Q1": 7, "Q2": 10}


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("I refuse to answer.", "no parsable JSON"),
        ('[{"id": "Q1", "final_answer": "A"}, {"id": "Q2", "fin', "missing answers for ids ['Q2']"),  # truncated
        ('[{"id": "Q1", "final_answer": "A"}]', "missing answers for ids ['Q2']"),
        ('[{"id": "Q1", "final_answer": "Maybe"}, {"id": "Q2", "final_answer": "A"}]', "Q1: answer 'Maybe' is not"),
        ('[{"id": "Q1"}, {"id": "Q2", "final_answer": "A"}]', "lacks an id or an answer field"),
        ('["A", "B"]', "expected a JSON array of objects"),
    ],
)
def test_invalid_answers_say_why(text, fragment):
    p = parse_checklist_items(text, AB)
    assert not p.ok and fragment in p.error


def test_scores_outside_one_to_ten_are_invalid():
    for bad in ("0", "11", "7.5", "true"):
        p = parse_checklist_items(f'[{{"id": "Q1", "final_score": "{bad}"}}]', {"ids": ["Q1"], "form": "SCORE"})
        assert not p.ok, bad


def test_extra_ids_are_tolerated_and_noted():
    text = '[{"id": "Q1", "final_answer": "A"}, {"id": "Q2", "final_answer": "B"}, {"id": "Q9", "final_answer": "B"}]'
    p = parse_checklist_items(text, AB)
    assert p.ok and p.value == {"Q1": "A", "Q2": "B"} and "Q9" in p.note


def test_parse_dispatch():
    assert not parse("checklist_items", None, AB).ok
    with pytest.raises(KeyError):
        parse("nope", "x", None)
