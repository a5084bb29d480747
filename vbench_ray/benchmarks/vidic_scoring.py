"""ViDiC-1K: the three judge phases' requests and parsers, the question table, and the accuracies Sim, Diff and
Avg (the checklist's questions are read in ``vidic_questions``).

Spec: ViDiC paper §3.3.2 (accuracy, Eq. 1), Table 2 (Avg, Diff, Sim and the seven class
columns), App. G.3 (prompt of the model under test), G.4 (judge protocol), G.5 (error analyst), §F
(error analysis); official code NJU-LINK/ViDiC-1K b7aeefd:

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

Scoring: a question is correct when the judge's answer equals ``correct_answer`` (case-insensitive).
``Sim`` / ``Diff`` are the accuracy over similarity / difference questions, ``Avg`` the accuracy over all
questions pooled (Table 2's Avg is *not* the mean of Sim and Diff: Human 94.46 vs (92.99 + 98.57) / 2), all
in percent. Questions whose description is missing or unusable, whose judge answer never became valid,
or whose case lost its videos are counted wrong (as the official code's ``"error"`` answer is); they are
reported as ``n_invalid``. CIs resample whole cases (a case's questions share one description).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from vbench_ray.benchmarks.vidic_questions import ANSWERS, CLASSES, SECTIONS, Question, item_questions
from vbench_ray.judges.base import JudgeRequest, request_id as judge_request_id
from vbench_ray.judges.parsing import Parsed, extract_json, register_parser, strip_thinking
from vbench_ray.stats import ratio_ci

METRICS = ("Sim", "Diff", "Avg")
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


# ----------------------------------------------------------------------------- question table

JUDGMENT_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("variant", pa.string()),
        ("section", pa.string()),
        ("k", pa.int64()),
        ("class", pa.string()),
        ("question", pa.string()),
        ("correct_answer", pa.string()),
        ("answer", pa.string()),
        ("correct", pa.bool_()),
        ("status", pa.string()),
        ("request_id", pa.string()),
        ("explanation", pa.string()),
        ("error_type", pa.string()),
        ("parse", pa.string()),
        ("alt_answer", pa.string()),
        ("alt_correct", pa.bool_()),
        ("error", pa.string()),  # why no usable answer: the judge's (or the describing model's) last error
    ]
)


def _correct(answer, gold: str) -> bool:
    return answer is not None and str(answer).lower() == gold.lower()


def judgment_rows(case: dict, results: dict, parse: str = "official", rules: str = "official") -> list[dict]:
    """One row per checklist question. ``status``: the judge request's final status (``ok``, ``invalid``,
    ``error``), or why no judge request was sent: ``describe_invalid`` / ``describe_error`` /
    ``describe_missing`` (no usable description) or ``load_error`` (the case's videos failed to load).
    ``answer`` / ``correct``: under ``parse``; ``alt_answer`` / ``alt_correct``: under the other mode."""
    questions = item_questions(case, rules)
    if not questions:
        return []
    upstream_error = None
    if not scorable(case):
        upstream = "load_error"
    else:
        d = results.get(describe_id(case))
        upstream = None if d is not None and d.status == "ok" else f"describe_{d.status if d else 'missing'}"
        upstream_error = d.error if d is not None and upstream else None
    other = next(m for m in PARSE_MODES if m != parse)
    rows = []
    for q in questions:
        rid = request_id(case, "judge", q.tag)
        answer = alt = explanation = error_type = None
        error = upstream_error
        if upstream:
            status = upstream
        else:
            r = results.get(rid)
            status = r.status if r is not None else "missing"
            error = r.error if r is not None and status != "ok" else None
            value = r.value if r is not None and isinstance(r.value, dict) else {}
            if status == "ok":
                answer, explanation = value.get("answer"), value.get("explanation")
            alt = value.get(other)
        if answer is not None and str(answer).lower() in ANSWERS and str(answer).lower() != q.correct_answer.lower():
            e = results.get(request_id(case, "error", q.tag))
            error_type = e.value["error_type"] if e is not None and e.status == "ok" else None
        rows.append(
            {
                "case_id": case["case_id"],
                "variant": case["variant"],
                "section": q.section,
                "k": q.k,
                "class": q.cls,
                "question": q.question,
                "correct_answer": q.correct_answer,
                "answer": None if answer is None else str(answer),
                "correct": _correct(answer, q.correct_answer),
                "status": status,
                "request_id": rid,
                "explanation": explanation,
                "error_type": error_type,
                "parse": parse,
                "alt_answer": None if alt is None else str(alt),
                "alt_correct": _correct(alt, q.correct_answer),
                "error": error,
            }
        )
    return rows


# ----------------------------------------------------------------------------- metrics


def accuracy(rows: list[dict], seed: int, n_resamples: int, confidence: float) -> dict:
    """Pooled accuracy in percent over ``rows`` (questions), with a case-resampling bootstrap CI."""
    per_case: dict[str, list[int]] = {}
    for r in rows:
        c = per_case.setdefault(r["case_id"], [0, 0])
        c[0] += bool(r["correct"])
        c[1] += 1
    n = sum(c[1] for c in per_case.values())
    parse = rows[0].get("parse") if rows else None
    out = {
        "value": None,
        "ci95": None,
        "n": n,
        "n_cases": len(per_case),
        "n_correct": sum(c[0] for c in per_case.values()),
        "n_invalid": sum(1 for r in rows if r["status"] != "ok"),
        "scale": "percent",
        # judge.parse: answers the official and lenient parses score differently, and the other's value
        "parse": parse,
        "n_scored_differently": sum(1 for r in rows if bool(r["correct"]) != bool(r.get("alt_correct"))),
        "other_parse": {
            "parse": next((m for m in PARSE_MODES if m != parse), None) if parse else None,
            "value": 100.0 * sum(bool(r.get("alt_correct")) for r in rows) / n if n else None,
        },
    }
    if n == 0:
        return out
    cases = sorted(per_case)
    sums = np.array([100.0 * per_case[c][0] for c in cases])
    counts = np.array([float(per_case[c][1]) for c in cases])
    out["value"] = float(sums.sum() / counts.sum())
    out["ci95"] = ratio_ci(sums, counts, seed=seed, n_resamples=n_resamples, confidence=confidence)
    return out


def section_metrics(rows: list[dict], seed: int, n_resamples: int, confidence: float) -> dict[str, dict]:
    """``Sim`` (similarity questions), ``Diff`` (difference questions), ``Avg`` (all of them pooled)."""
    args = (seed, n_resamples, confidence)
    return {
        "Sim": accuracy([r for r in rows if r["section"] == "Similarities"], *args),
        "Diff": accuracy([r for r in rows if r["section"] == "Differences"], *args),
        "Avg": accuracy(rows, *args),
    }


def by_class(rows: list[dict], seed: int, n_resamples: int, confidence: float) -> dict[str, dict]:
    """Sim / Diff / Avg per class (Table 2's class columns are the Avg): all seven classes listed, then any
    other class the checklist names (``data.questions=official``: ``calculate.py`` reports every class)."""
    keep = ("value", "ci95", "n", "n_cases", "n_invalid", "n_scored_differently")
    out = {}
    for cls in CLASSES + tuple(sorted({r["class"] for r in rows} - set(CLASSES))):
        metrics = section_metrics([r for r in rows if r["class"] == cls], seed, n_resamples, confidence)
        out[cls] = {m: {k: v for k, v in s.items() if k in keep} for m, s in metrics.items()}
    return out


def error_type_counts(rows: list[dict]) -> dict:
    """Counts of the G.5 categories over the wrongly answered questions (Table 6)."""
    wrong = [r for r in rows if r["status"] == "ok" and not r["correct"]]
    typed = [r for r in wrong if r["error_type"]]

    def counts(subset: list[dict]) -> dict[str, int]:
        return {t: sum(1 for r in subset if r["error_type"] == t) for t in ERROR_TYPES}

    total = counts(typed)
    return {
        "counts": total,
        "percent": {t: (100.0 * v / len(typed) if typed else None) for t, v in total.items()},
        "n_wrong": len(wrong),
        "n_analysed": len(typed),
        "n_unanalysed": len(wrong) - len(typed),
        "by_section": {
            metric: counts([r for r in typed if r["section"] == section]) for section, _, metric in SECTIONS
        },
    }
