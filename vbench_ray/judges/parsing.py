"""Turning judge text into answers, and deciding whether an answer is usable.

CoVEBench's official parsing (NJU-LINK/CoVEBench 4fe1c2f ``eval_checklist.py``): drop everything up to
``</think>``; take a fenced ```json block, else the first ``[...]``, else the first ``{...}``; ``json.loads``; the
result must be a list of items with an ``id`` and an answer under ``final_answer`` / ``final_score`` / ``answer``
/ ``score``, with every expected id present. We also check each answer is in the allowed set of its question type
(the prompts demand it), so a "Maybe" is retried rather than silently counted wrong.

``judge.parse`` picks which of two parses decides validity for CoVEBench checklists:
``official`` (default; the official code's extraction and literal answers, so "Yes." or "Option A"
score wrong) or ``lenient`` (the balanced-span extraction above and normalised answers: "True" -> Yes,
"Option A" -> A). Both are computed on every answer so a run reports how many answers the two modes
score differently. ``expected["validity"]`` (``score.validity``): ``request`` (default) is the
official ``validate_llm_output`` (NJU-LINK/CoVEBench 4fe1c2f, metrics/subjective/mllm_checklist/
eval_checklist.py): the whole request is valid or not, ids compared as ``str`` without stripping, the
answer's value never checked; ``question`` judges each answer on its own (stripped ids, a Score-MCQ
answer must be an integer 1-10).

A parser returns ``Parsed(ok, value, error)``; ``error`` says what was wrong, in words a retry prompt
can quote back to the judge. A failed parse may still carry the answers that were valid in ``value``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

ANSWER_KEYS = ("final_answer", "final_score", "answer", "score")


@dataclass
class Parsed:
    ok: bool
    value: Any = None
    error: str | None = None
    note: str | None = None  # something tolerated (e.g. extra ids), recorded in the judge log


def strip_thinking(text: str) -> str:
    """Everything after the last ``</think>`` (reasoning models put their answer there)."""
    return text.rsplit("</think>", 1)[-1] if "</think>" in text else text


def _balanced(text: str, open_ch: str, close_ch: str) -> str | None:
    """The first balanced ``open_ch ... close_ch`` span, honouring JSON strings."""
    start = text.find(open_ch)
    while start != -1:
        depth, in_str, escape = 0, False, False
        for i in range(start, len(text)):
            c = text[i]
            if in_str:
                escape = (c == "\\") and not escape
                if c == '"' and not escape:
                    in_str = False
                continue
            if c == '"':
                in_str = True
            elif c == open_ch:
                depth += 1
            elif c == close_ch:
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find(open_ch, start + 1)
    return None


def extract_json(text: str) -> Any:
    """The JSON value in a judge's answer: fenced block, then first array, then first object."""
    text = strip_thinking(text or "")
    candidates = re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    candidates += [s for s in (_balanced(text, "[", "]"), _balanced(text, "{", "}")) if s]
    for candidate in candidates:
        try:
            return json.loads(candidate.strip())
        except json.JSONDecodeError:
            continue
    raise ValueError("no parsable JSON array or object in the answer")


# ----------------------------------------------------------------------------- answer normalisation


def _norm_ab(value: Any) -> str | None:
    v = re.sub(r"[\s.\"']+", " ", str(value)).strip().upper()
    v = re.sub(r"^(OPTION|ANSWER)\s*:?\s*", "", v)
    if v in ("A", "B"):
        return v
    if v in ("A AND B", "A & B", "A, B", "A,B", "BOTH", "A B"):
        return "A and B"
    return None


def _norm_tf(value: Any) -> str | None:
    v = str(value).strip().strip(".\"' ").lower()
    return {"yes": "Yes", "no": "No", "true": "Yes", "false": "No"}.get(v)


def _norm_score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        f = float(str(value).strip())
    except ValueError:
        m = re.fullmatch(r"\s*(\d+)\s*(?:/\s*10)?\s*", str(value))
        if not m:
            return None
        f = float(m.group(1))
    return int(f) if f.is_integer() and 1 <= f <= 10 else None


ANSWER_FORMS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "AB": (_norm_ab, '"A", "B" or "A and B"'),
    "TF": (_norm_tf, '"Yes" or "No"'),
    "SCORE": (_norm_score, "an integer from 1 to 10"),
}


def _lenient_answers(text: str, form: str) -> tuple[dict, list[str], str | None]:
    """(valid normalised answers by id, per-question problems, fatal error) of the lenient parse."""
    try:
        data = extract_json(text)
    except ValueError as exc:
        return {}, [], str(exc)
    if isinstance(data, dict):  # a single item, or {"answers": [...]}
        inner = [v for v in data.values() if isinstance(v, list)]
        data = inner[0] if len(inner) == 1 and "id" not in data else [data]
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        return {}, [], "expected a JSON array of objects"
    normalise, allowed = ANSWER_FORMS[form]
    answers: dict[str, Any] = {}
    problems = []
    for item in data:
        qid = str(item.get("id", "")).strip()
        key = next((k for k in ANSWER_KEYS if k in item), None)
        if not qid or key is None:
            problems.append(f"item {json.dumps(item)[:80]} lacks an id or an answer field ({', '.join(ANSWER_KEYS)})")
            continue
        value = normalise(item[key])
        if value is None:
            problems.append(f"{qid}: answer {item[key]!r} is not {allowed}")
            continue
        answers[qid] = value
    return answers, problems, None


# ----------------------------------------------------------------------------- the official CoVEBench parse


def official_extract(text: str) -> Any:
    """The official CoVEBench extraction (4fe1c2f ``eval_checklist.py``): the text after the last ``</think>``; the
    first fenced block (```json or ```), else the span from the first ``[`` to the *last* ``]``, else from the
    first ``{`` to the last ``}``, else the whole text; one ``json.loads``, no fallback to other spans."""
    text = text or ""
    if "</think>" in text:
        text = text.split("</think>")[-1].strip()
    for pattern, flags in (
        (r"```(?:json)?(.*?)```", re.DOTALL | re.IGNORECASE),
        (r"\[.*\]", re.DOTALL),
        (r"\{.*\}", re.DOTALL),
    ):
        m = re.search(pattern, text, flags)
        if m:
            candidate = (m.group(1) if m.groups() else m.group(0)).strip()
            break
    else:
        candidate = text.strip()
    try:
        return json.loads(candidate)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON where the official parser looks ({exc.msg})") from None


def official_score_value(value: Any) -> float | None:
    """A Score-MCQ answer as the 1-10 integer scale of the paper (§3.1, App. F.3), else None.

    The official aggregation takes ``float(answer)`` of anything; a 7.5 or an 11 is outside the scale the
    prompt asks for, so here it is invalid *for that question* (re-asked, and dropped if never valid)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f.is_integer() and 1 <= f <= 10 else None


def official_answer(item: dict) -> Any:
    """The first non-null of ``final_answer`` / ``final_score`` / ``answer`` / ``score`` (official
    ``extract_answer_from_dict``), else None."""
    return next((item[k] for k in ANSWER_KEYS if item.get(k) is not None), None)


def official_validate(data: Any, expected_ids: list) -> str | None:
    """Why a parsed answer fails the official ``validate_llm_output`` (CoVEBench 4fe1c2f,
    metrics/subjective/mllm_checklist/eval_checklist.py), or None when it passes: a list of objects, each
    with a non-empty ``str(id)``, a ``reasoning`` key and a non-null answer; every expected id (as ``str``,
    not stripped) among the answers' ids. The first failing item fails the whole request."""
    if not isinstance(data, list):
        return "Output is not a JSON array."
    ids = []
    for item in data:
        if not isinstance(item, dict):
            return "Item in array is not an object."
        qid = str(item.get("id", ""))
        if not qid:
            return "Missing id in one answer."
        if "reasoning" not in item:
            return f"Missing reasoning for ID {qid}."
        if official_answer(item) is None:
            return f"Missing final answer/score for ID {qid}."
        ids.append(qid)
    missing = [str(i) for i in expected_ids if str(i) not in ids]
    return f"Missing answers for IDs: {missing}" if missing else None


def _official_request(text: str, wanted: list[str]) -> tuple[dict, list[str], str | None]:
    """The official parse with whole-request validity: any validation failure is fatal; answers are
    written back in array order to the question whose ``str(id)`` equals the answer's (a repeated id:
    the last one wins; unknown ids ignored), as the official ``write_answers``."""
    try:
        data = official_extract(text)
    except ValueError as exc:
        return {}, [], str(exc)
    problem = official_validate(data, wanted)
    if problem:
        return {}, [], problem
    answers = {}
    for item in data:
        if str(item["id"]) in wanted:
            answers[str(item["id"])] = official_answer(item)
    return answers, [], None


def _official_answers(text: str, form: str) -> tuple[dict, list[str], str | None]:
    """(valid literal answers by id, per-question problems, fatal error) of the official parse.

    Per item (official ``validate_llm_output``): an ``id``, a ``reasoning`` key and a non-null answer
    under the first of ``final_answer`` / ``final_score`` / ``answer`` / ``score``. The answer is kept
    literally ("Yes." stays "Yes." and scores wrong); a Score-MCQ answer must be on the 1-10 scale."""
    try:
        data = official_extract(text)
    except ValueError as exc:
        return {}, [], str(exc)
    if not isinstance(data, list):
        return {}, [], "Output is not a JSON array."
    answers: dict[str, Any] = {}
    problems = []
    for item in data:
        if not isinstance(item, dict):
            problems.append("an item in the array is not an object")
            continue
        qid = str(item.get("id", "")).strip()
        if not qid:
            problems.append("an answer has no id")
            continue
        if "reasoning" not in item:
            problems.append(f"{qid}: missing reasoning")
            answers.pop(qid, None)
            continue
        value = next((item[k] for k in ANSWER_KEYS if item.get(k) is not None), None)
        if value is None:
            problems.append(f"{qid}: missing final answer/score")
            answers.pop(qid, None)
            continue
        if form == "SCORE" and official_score_value(value) is None:
            problems.append(f"{qid}: score {value!r} is not an integer from 1 to 10")
            answers.pop(qid, None)
            continue
        answers[qid] = value  # a repeated id: the last one wins, as the official write-back does
    return answers, problems, None


PARSE_MODES = ("official", "lenient")


def parse_checklist(text: str, expected: dict, mode: str) -> Parsed:
    """Both parses of one CoVEBench checklist answer; ``mode`` decides validity (and so re-asks).

    ``value = {qid: {"official": literal answer | None, "lenient": normalised answer | None}}`` for
    every expected id either parse answered. An invalid or missing answer makes the request invalid
    (re-asked); the valid siblings stay in ``value`` and the judge stage keeps them if the request never
    becomes valid, for ``score.validity=question`` (under ``request`` the scoring ignores them)."""
    if mode not in PARSE_MODES:
        raise ValueError(f"judge.parse must be one of {PARSE_MODES}, got {mode!r}")
    form = expected["form"]
    wanted = [str(i) for i in expected["ids"]]
    official = (
        _official_answers(text, form)
        if expected.get("validity", "request") == "question"
        else _official_request(text, wanted)
    )
    both = {"official": official, "lenient": _lenient_answers(text, form)}
    value = {}
    for qid in wanted:
        entry = {m: both[m][0].get(qid) for m in PARSE_MODES}
        if any(v is not None for v in entry.values()):
            value[qid] = entry
    answers, problems, fatal = both[mode]
    if fatal:
        return Parsed(False, value=value or None, error=fatal)
    missing = [i for i in wanted if i not in answers]
    problems = [p for p in problems if not any(p.startswith(f"{i}:") for i in answers)]
    if missing and not problems:
        problems.append(f"missing answers for ids {missing}")
    if missing:
        return Parsed(False, value=value, error="; ".join(problems))
    extra = sorted(set(answers) - set(wanted))
    return Parsed(True, value=value, note=f"ignored answers for unknown ids {extra}" if extra else None)


def parse_checklist_items(text: str, expected: dict) -> Parsed:
    """A JSON array answering every expected question id, each answer in its allowed set.

    ``expected = {"ids": ["Q1", ...], "form": "AB" | "TF" | "SCORE"}``. ``value`` maps id -> normalised
    answer (``"A"``, ``"Yes"``, ``7`` ...).
    """
    answers, problems, fatal = _lenient_answers(text, expected["form"])
    if fatal:
        return Parsed(False, error=fatal)
    wanted = [str(i) for i in expected["ids"]]
    missing = [i for i in wanted if i not in answers]
    if missing and not problems:
        problems.append(f"missing answers for ids {missing}")
    if problems:
        return Parsed(False, value=answers, error="; ".join(problems))
    extra = sorted(set(answers) - set(wanted))
    return Parsed(
        True, value={i: answers[i] for i in wanted}, note=f"ignored answers for unknown ids {extra}" if extra else None
    )


# ----------------------------------------------------------------------------- VisualQuality-R1 (CoVEBench VQR)

VQR_SCALE = (1.0, 5.0)  # VisualQuality-R1's rating scale: "a float between 1 and 5"
_VQR_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_VQR_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_vqr_score(text: str, expected: Any) -> Parsed:
    """VisualQuality-R1's answer -> ``{"score": float, "answer": str}``, valid when the score is on the scale.

    ``expected = {"low": 1.0, "high": 5.0}``. As in the model's published usage and the official CoVEBench VQR
    script: the last ``<answer> </answer>`` span (a reasoning trace may quote earlier ones), its first number.
    Without tags: the text after the last ``</think>`` (the official script reads the whole reply). Unlike the
    official script, a number off the scale (or a negative one) is invalid and re-asked, not averaged in."""
    low, high = (
        (float(expected.get("low", VQR_SCALE[0])), float(expected.get("high", VQR_SCALE[1])))
        if isinstance(expected, dict)
        else VQR_SCALE
    )
    spans = _VQR_ANSWER.findall(text or "")
    answer = spans[-1].strip() if spans else strip_thinking(text or "").strip()
    m = _VQR_NUMBER.search(answer)
    if not m:
        where = "inside <answer> </answer>" if spans else "in the answer (no <answer> </answer> tags)"
        return Parsed(False, error=f"no score {where}")
    score = float(m.group())
    if not low <= score <= high:
        return Parsed(False, error=f"score {m.group()} is outside the scale {low:g} to {high:g}")
    return Parsed(
        True,
        value={"score": score, "answer": answer[:200]},
        note=None if spans else "no <answer> tags; score taken from the text",
    )


PARSERS: dict[str, Callable[[str, Any], Parsed]] = {
    "checklist_items": parse_checklist_items,
    "checklist_official": lambda text, expected: parse_checklist(text, expected, "official"),
    "checklist_lenient": lambda text, expected: parse_checklist(text, expected, "lenient"),
    "vqr_score": parse_vqr_score,
}


def register_parser(name: str):
    """Decorator: make ``fn(text, expected) -> Parsed`` available to requests as ``parser=name``."""

    def decorate(fn: Callable[[str, Any], Parsed]):
        PARSERS[name] = fn
        return fn

    return decorate


def parse(parser: str, text: str | None, expected: Any) -> Parsed:
    if text is None:
        return Parsed(False, error="no answer")
    if parser not in PARSERS:
        raise KeyError(f"unknown judge parser {parser!r}; known: {sorted(PARSERS)}")
    return PARSERS[parser](text, expected)
