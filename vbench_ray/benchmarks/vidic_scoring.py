"""ViDiC-1K: the question table and the accuracies Sim, Diff and Avg (the three judge phases' requests and parsers
are in ``vidic_requests``, re-exported here; the checklist's questions are read in ``vidic_questions``).

Spec: ViDiC paper §3.3.2 (accuracy, Eq. 1), Table 2 (Avg, Diff, Sim and the seven class columns), §F (error
analysis); official code NJU-LINK/ViDiC-1K b7aeefd.

Scoring: a question is correct when the judge's answer equals ``correct_answer`` (case-insensitive).
``Sim`` / ``Diff`` are the accuracy over similarity / difference questions, ``Avg`` the accuracy over all
questions pooled (Table 2's Avg is *not* the mean of Sim and Diff: Human 94.46 vs (92.99 + 98.57) / 2), all
in percent. Questions whose description is missing or unusable, whose judge answer never became valid,
or whose case lost its videos are counted wrong (as the official code's ``"error"`` answer is); they are
reported as ``n_invalid``. CIs resample whole cases (a case's questions share one description).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from vbench_ray.benchmarks.vidic_questions import ANSWERS, CLASSES, SECTIONS, item_questions
from vbench_ray.benchmarks.vidic_requests import (
    ERROR_TYPES,
    JUDGE_PARSER,
    JUDGE_SYSTEM,
    ORDERS,
    PARSE_MODES,
    VIDEO_PARAMS,
    describe_id,
    describe_request,
    describe_text,
    error_category,
    error_request,
    error_requests,
    fill,
    judge_request,
    judge_requests,
    official_judge_answer,
    parse_error_type,
    parse_free_text,
    parse_judge,
    parse_judge_official,
    prompt,
    request_id,
    scorable,
    variant_params,
)
from vbench_ray.stats import ratio_ci

__all__ = [  # the scoring's public names, whichever of its two modules holds them
    "ANSWERS",
    "CLASSES",
    "ERROR_TYPES",
    "JUDGE_PARSER",
    "JUDGE_SYSTEM",
    "JUDGMENT_SCHEMA",
    "METRICS",
    "ORDERS",
    "PARSE_MODES",
    "SECTIONS",
    "VIDEO_PARAMS",
    "accuracy",
    "by_class",
    "describe_id",
    "describe_request",
    "describe_text",
    "error_category",
    "error_request",
    "error_requests",
    "error_type_counts",
    "fill",
    "judge_request",
    "judge_requests",
    "judgment_rows",
    "official_judge_answer",
    "parse_error_type",
    "parse_free_text",
    "parse_judge",
    "parse_judge_official",
    "prompt",
    "request_id",
    "scorable",
    "section_metrics",
    "variant_params",
]

METRICS = ("Sim", "Diff", "Avg")

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
