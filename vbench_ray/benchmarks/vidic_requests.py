"""ViDiC-1K's three judge phases: their requests and the parsers of their answers.

Spec: ViDiC paper App. G.3 (prompt of the model under test), G.4 (judge protocol), G.5 (error analyst); official
code NJU-LINK/ViDiC-1K b7aeefd:

* **describe**: the model under test sees the G.3 prompt, then Video A (``video1_path``) and Video B
  (``video2_path``), and writes a free-text comparison. Request id ``vidic/{index}/{variant}/describe/response``.
* **judge**: a text-only judge answers each checklist question from that description alone, one request
  per question: system ``"You are a rigorous video analysis assistant. This is a {section} problem."``
  (section = ``Similarities`` | ``Differences``, as in the official code), user = the G.4 protocol with the
  description and the question. Ids ``.../judge/sim{k}`` and ``.../judge/diff{k}`` (k = position in its
  list, from 0). ``judge.parse`` (how an answer is read):

  - ``official`` (default; Table 2 was computed with it): the official chain exactly: a fenced
    ```json block, then the whole text as JSON, then the regex ``answer\\s*[:：]\\s*(yes|no|unsure)``,
    else ``"error"``; no ``</think>`` stripping (the regex takes the first ``answer: X`` it meets) and
    no re-asks; the answer is compared literally, so ``"Yes."`` is wrong and JSON inside prose is
    ``"error"`` (wrong).
  - ``lenient``: the same order after ``</think>``, a fenced block in any case, a quoted JSON key also
    found by the regex, ``"Yes."`` normalised to ``yes``; ``unsure`` or anything else is invalid and
    re-asked; after the retries the question counts wrong.

  Both are computed on every answer: each metric reports ``n_scored_differently`` and its value under
  the other mode.
* **error** (optional, G.5): for each question the judge answered wrongly, an analyst names one of five
  error categories. Ids ``.../error/sim{k}`` / ``.../error/diff{k}``.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from vbench_ray.benchmarks.vidic_questions import ANSWERS, Question, item_questions
from vbench_ray.judges.base import JudgeRequest, request_id as judge_request_id
from vbench_ray.judges.parsing import Parsed, extract_json, register_parser, strip_thinking

ERROR_TYPES = ("Hallucination", "Missed Detection", "Self-Contradiction", "Vague / Imprecise", "Reasoning Error")
ORDERS = ("forward", "reverse")
# variant_params keys that change the frame sampling of the model under test (JudgeRequest.video)
VIDEO_PARAMS = ("fps", "max_frames", "max_pixels")

JUDGE_SYSTEM = "You are a rigorous video analysis assistant. This is a {section} problem."


@lru_cache(maxsize=None)
def prompt(name: str) -> str:
    return resources.files("vbench_ray.judges.prompts").joinpath("vidic", f"{name}.txt").read_text(encoding="utf-8")


def fill(template: str, **values: str) -> str:
    """``{name}`` placeholders replaced in one pass (a description containing ``{question}`` stays as is)."""
    return re.sub(r"\{(" + "|".join(values) + r")\}", lambda m: values[m.group(1)], template)


# ----------------------------------------------------------------------------- request ids


def request_id(case: dict, stage: str, group: str) -> str:
    """``vidic/{case}/{variant}/{stage}/{group}`` (``judges.base.request_id``)."""
    return judge_request_id("vidic", case["case_id"], case["variant"], stage, group)


def describe_id(case: dict) -> str:
    return request_id(case, "describe", "response")


# ----------------------------------------------------------------------------- describe (G.3)


def _video_part(path: str) -> dict:
    return {"type": "video_url", "video_url": {"url": Path(path).resolve().as_uri()}}


def variant_params(case: dict) -> dict:
    raw = case.get("variant_params")
    if not raw:
        return {}
    params = json.loads(raw) if isinstance(raw, str) else dict(raw)
    if not isinstance(params, dict):
        raise ValueError(f"case {case['case_id']} variant {case['variant']}: variant_params must be a JSON object")
    return params


def describe_request(case: dict) -> JudgeRequest:
    """The G.3 prompt, then ``Video A:`` + video1 and ``Video B:`` + video2.

    ``variant_params.order == "reverse"`` presents Video B first; each video keeps its own label, so the
    description still speaks of Video A and Video B as the checklist does (the paper's order study, §4.2:
    "Reverse (inputting Video B followed by Video A)"). ``fps`` / ``max_frames`` / ``max_pixels`` set the
    request's frame sampling (``JudgeRequest.video``).
    """
    params = variant_params(case)
    order = params.get("order", "forward")
    if order not in ORDERS:
        raise ValueError(
            f"case {case['case_id']} variant {case['variant']}: variant_params.order must be one of "
            f"{list(ORDERS)}, got {order!r}"
        )
    a = [{"type": "text", "text": "Video A:"}, _video_part(case["source_path"])]
    b = [{"type": "text", "text": "Video B:"}, _video_part(case["edited_path"])]
    videos = b + a if order == "reverse" else a + b
    video = {k: params[k] for k in VIDEO_PARAMS if k in params} or None
    return JudgeRequest.build(
        "vidic",
        case["case_id"],
        case["variant"],
        "describe",
        "response",
        messages=[{"role": "user", "content": [{"type": "text", "text": prompt("describe")}, *videos]}],
        parser="free_text",
        video=video,
    )


@register_parser("free_text")
def parse_free_text(text: str, expected: Any = None) -> Parsed:
    """Any non-empty text (after a reasoning model's ``</think>``); the value is that text, stripped."""
    body = strip_thinking(text or "").strip()
    if not body:
        return Parsed(False, error="the answer is empty")
    return Parsed(True, value=body)


# ----------------------------------------------------------------------------- judge (G.4)

PARSE_MODES = ("official", "lenient")
JUDGE_PARSER = {"official": "vidic_judge_official", "lenient": "vidic_judge"}


def judge_request(case: dict, q: Question, description: str, parse: str = "official") -> JudgeRequest:
    if parse not in PARSE_MODES:
        raise ValueError(f"judge.parse must be one of {PARSE_MODES}, got {parse!r}")
    return JudgeRequest.build(
        "vidic",
        case["case_id"],
        case["variant"],
        "judge",
        q.tag,
        messages=[
            {"role": "system", "content": JUDGE_SYSTEM.format(section=q.section)},
            {"role": "user", "content": fill(prompt("judge"), description=description, question=q.question)},
        ],
        parser=JUDGE_PARSER[parse],
    )


_FENCED_JSON = re.compile(r"```json\s*(.*?)\s*```", re.DOTALL | re.IGNORECASE)
# The official pattern, also matching a JSON key's closing quote (`"answer": "yes"` outside a fence).
_ANSWER_RE = re.compile(r"answer[\"']?\s*[:：]\s*[\"']?(yes|no|unsure)", re.IGNORECASE)


def _judge_answer(text: str) -> tuple[Any, str, str]:
    """(answer, explanation, how) by the official order: fenced json, whole text as JSON, regex."""
    m = _FENCED_JSON.search(text)
    if m:
        try:
            data = json.loads(m.group(1))
            if isinstance(data, dict):
                return data.get("answer"), str(data.get("explanation", "")), "json block"
        except json.JSONDecodeError:
            pass
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            return data.get("answer"), str(data.get("explanation", "")), "json"
    except json.JSONDecodeError:
        pass
    m = _ANSWER_RE.search(text)
    if m:
        reason = re.search(r"(explanation|because|reason)[:：]?\s*(.*)", text, re.IGNORECASE | re.DOTALL)
        return m.group(1), (reason.group(2).strip() if reason else text.strip()), "regex"
    return None, "", "none"


_OFFICIAL_FENCE = re.compile(r"```json\s*(.*?)\s*```", re.DOTALL)  # case-sensitive, as the official code
_OFFICIAL_ANSWER_RE = re.compile(r"answer\s*[:：]\s*(yes|no|unsure)", re.IGNORECASE)


def official_judge_answer(text: str | None) -> str:
    """The official ``parse_judge_response`` answer (NJU-LINK/ViDiC-1K b7aeefd ``judge/judge.py``): a ```json
    block's ``answer``, else the whole text's (a JSON object), else the first ``answer: yes|no|unsure``
    (lower-cased), else ``"error"``. A JSON answer is kept literally (``"Yes."`` stays ``"Yes."``)."""
    if text is None:
        return "error"
    for candidate in ([m.group(1)] if (m := _OFFICIAL_FENCE.search(text)) else []) + [text]:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict):
            answer = data.get("answer", "error")
            return answer if isinstance(answer, str) else json.dumps(answer)
    m = _OFFICIAL_ANSWER_RE.search(text)
    return m.group(1).lower() if m else "error"


def _lenient(text: str) -> tuple[str | None, str, str, str | None]:
    """(normalised yes/no or None, explanation, how, error) of the lenient parse."""
    answer, explanation, how = _judge_answer(strip_thinking(text or ""))
    if answer is None:
        if how == "none":
            return None, explanation, how, 'no JSON object with an "answer" and no "answer: yes/no" in the reply'
        return None, explanation, how, 'the JSON object has no "answer" field'
    norm = str(answer).strip().strip(".!\"' ").lower()
    if norm not in ANSWERS:
        return None, explanation, how, f'the answer must be "yes" or "no", got {str(answer)[:40]!r}'
    return norm, explanation, how, None


@register_parser("vidic_judge")
def parse_judge(text: str, expected: Any = None) -> Parsed:
    """Lenient: ``{"answer": "yes"|"no", "explanation"}``; ``unsure``, a missing answer or anything else is
    invalid (re-asked). ``value["official"]`` is the official chain's answer to the same text."""
    norm, explanation, how, error = _lenient(text)
    official = official_judge_answer(text)
    if error:
        return Parsed(False, value={"official": official}, error=error)
    return Parsed(
        True,
        value={"answer": norm, "explanation": explanation, "official": official},
        note=None if how != "regex" else "answer found by the answer: pattern",
    )


@register_parser("vidic_judge_official")
def parse_judge_official(text: str, expected: Any = None) -> Parsed:
    """Official: always usable (an unparsable reply is the answer ``"error"``, as the official code; no
    re-ask). ``value["lenient"]`` is the lenient parse's answer to the same text (None if invalid)."""
    official = official_judge_answer(text)
    norm, explanation, _, _ = _lenient(text)
    return Parsed(True, value={"answer": official, "explanation": explanation, "lenient": norm})


# ----------------------------------------------------------------------------- error analysis (G.5)


def error_request(case: dict, q: Question, description: str, judged: dict) -> JudgeRequest:
    user = (
        f"[Question]\n{q.question}\n\n[Correct Answer]\n{q.correct_answer}\n\n"
        f"[Model's Description]\n{description}\n\n[Model's Predicted Answer]\n{judged['answer']}\n\n"
        f"[Judge's Reason]\n{judged.get('explanation') or '(none)'}"
    )
    return JudgeRequest.build(
        "vidic",
        case["case_id"],
        case["variant"],
        "error",
        q.tag,
        messages=[{"role": "system", "content": prompt("error_analysis")}, {"role": "user", "content": user}],
        parser="vidic_error_type",
    )


_ERROR_KEYWORDS = (  # first match wins; checked on the lower-cased label
    ("self contradiction", "Self-Contradiction"),
    ("contradict", "Self-Contradiction"),
    ("hallucinat", "Hallucination"),
    ("non existent", "Hallucination"),
    ("missed", "Missed Detection"),
    ("incomplete", "Missed Detection"),
    ("omission", "Missed Detection"),
    ("vague", "Vague / Imprecise"),
    ("imprecise", "Vague / Imprecise"),
    ("reasoning", "Reasoning Error"),
)


def error_category(label: Any) -> str | None:
    """One of ``ERROR_TYPES`` for a label like ``"Missed Detection (Incomplete)"`` or ``"2"``."""
    text = re.sub(r"[\s_\-/]+", " ", str(label).strip().lower())
    if re.fullmatch(r"[1-5]\.?", text):
        return ERROR_TYPES[int(text[0]) - 1]
    for key, category in _ERROR_KEYWORDS:
        if key in text:
            return category
    return None


@register_parser("vidic_error_type")
def parse_error_type(text: str, expected: Any = None) -> Parsed:
    try:
        data = extract_json(text)
    except ValueError as exc:
        return Parsed(False, error=str(exc))
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict) or "error_type" not in data:
        return Parsed(False, error='expected a JSON object with "error_type" and "explanation"')
    category = error_category(data["error_type"])
    if category is None:
        return Parsed(False, error=f"error_type {str(data['error_type'])[:60]!r} is not one of {list(ERROR_TYPES)}")
    return Parsed(True, value={"error_type": category, "explanation": str(data.get("explanation", ""))})


# ----------------------------------------------------------------------------- building the phases


def scorable(case: dict) -> bool:
    return not case.get("error_load")


def describe_text(case: dict, results: dict) -> str | None:
    result = results.get(describe_id(case))
    return result.value if result is not None and result.status == "ok" else None


def judge_requests(
    cases: Iterable[dict], results: dict, parse: str = "official", rules: str = "official"
) -> list[JudgeRequest]:
    """One request per question of every case whose description came back usable."""
    out = []
    for case in cases:
        text = describe_text(case, results) if scorable(case) else None
        if text is not None:
            out += [judge_request(case, q, text, parse) for q in item_questions(case, rules)]
    return out


def error_requests(cases: Iterable[dict], results: dict, rules: str = "official") -> list[JudgeRequest]:
    """One request per question the judge answered validly but wrongly."""
    out = []
    for case in cases:
        text = describe_text(case, results) if scorable(case) else None
        if text is None:
            continue
        for q in item_questions(case, rules):
            r = results.get(request_id(case, "judge", q.tag))
            answer = str(r.value.get("answer")).lower() if r is not None and r.status == "ok" else None
            if answer in ANSWERS and answer != q.correct_answer.lower():  # a judged yes/no that is wrong
                out.append(error_request(case, q, text, r.value))
    return out
