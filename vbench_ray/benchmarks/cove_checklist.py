"""CoVEBench checklist judging and its metrics UAS, IFS, VRS, SEM (the requests and question routing: ``cove_requests``,
re-exported here).

Spec: CoVEBench paper §3.1 and App. F.1 (IFS, VRS, UAS), App. F.3 (SEM); the judge's prompt rules (paper
appendix) and the official request layout and aggregation (NJU-LINK/CoVEBench, metrics/subjective/mllm_checklist):

* ``judge.parse=official`` (default): the official extraction, validation and literal matching (``"Yes."``
  or ``"Option A"`` is wrong; NJU-LINK/CoVEBench 4fe1c2f eval_checklist.py, 31673ca / db270d6a
  aggregate_subjective.py). ``score.validity=request`` (default, official): a request failing validation
  after its re-asks leaves all its questions unanswered; an answer's value is never checked ("Unclear" is
  wrong); ids match as ``str`` without stripping. ``question``: each answer valid on its own (stripped ids,
  Score-MCQ integers 1-10 only), valid siblings kept. A question without an answer is dropped from the
  denominator, as the official aggregation skips questions without ``model_answer``. ``lenient``:
  normalised answers, and an unanswered question counts wrong (Score-MCQ: the lowest score, 1). Every
  metric reports ``n_scored_differently`` and its value under the other parse mode.
* non-score questions: stripped, case-insensitive exact match with the gold answer found through the
  official fallback chain (``expected_answer``, ``answer``, ``label``, ``ground_truth``, ``target_answer``,
  ``correct_answer``, then ``options``); no gold: not scored. Score-MCQ: ``float()`` of the answer
  (official: 7.5, 11 and ``true`` count; its ``expected_answer`` is a placeholder and ignored).
* IFS, VRS: accuracy in percent; SEM: mean value x 10 of every question routed to SEM (a TF question
  there counts 1 or 0, as the official code; ``score.sem_questions=score_mcq``: Score-MCQ only); UAS: an
  edit point (evaluation group) scores 1 only if all its IFS and VRS questions are right; groups without
  such questions are not counted.
* aggregation ``pooled`` (paper, official README, code at db270d6a): over all questions / groups of the
  run; ``per_task`` (official code at 31673ca): the mean of per-task means; as there, a task without both
  IFS and VRS questions has no UAS and is left out of UAS's mean. ``uas_unit=task`` makes a whole task the
  UAS unit (also the official per-task code). SEM is always reported x 10 (0-100); the official per-task
  CSV defaults to the raw 1-10 scale (``scale_note`` says so).
* an edited video that is missing, misnamed or undecodable is not judged: ``score.missing_output``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from vbench_ray.benchmarks.cove_requests import (
    DIMENSION_METRIC,
    SEES_SOURCE,
    STAGE,
    TYPE_FORM,
    VALIDITY_RULES,
    build_requests,
    iter_questions,
    route,
    system_prompt,
)
from vbench_ray.judges.base import request_id
from vbench_ray.judges.parsing import ANSWER_FORMS, PARSE_MODES
from vbench_ray.stats import bootstrap_ci, ratio_ci

__all__ = [  # the checklist's public names, whichever of its two modules holds them
    "CHECKLIST_METRICS",
    "CoveScoreConfig",
    "DIMENSION_METRIC",
    "GOLD_KEYS",
    "GOLD_OPTION_KEYS",
    "JUDGMENT_SCHEMA",
    "LOWEST_SCORE",
    "MISSING_OUTPUT_RULES",
    "NOT_ASKED",
    "NO_OUTPUT",
    "SEES_SOURCE",
    "SEM_QUESTION_RULES",
    "STAGE",
    "TYPE_FORM",
    "VALIDITY_RULES",
    "aggregate",
    "build_requests",
    "by_category",
    "case_units",
    "gold_answer",
    "iter_questions",
    "judgment_rows",
    "metric_rows",
    "official_float",
    "route",
    "row_value",
    "score_answer",
    "system_prompt",
]

CHECKLIST_METRICS = ("UAS", "IFS", "VRS", "SEM")
LOWEST_SCORE = 1
MISSING_OUTPUT_RULES = ("wrong", "exclude")
SEM_QUESTION_RULES = ("routed", "score_mcq")
NO_OUTPUT = "no_output"  # judgment status of a question whose edited video is missing or cannot be decoded
NOT_ASKED = "not_asked"  # judgment status of a question of a type the official code does not ask (skipped)


@dataclass
class CoveScoreConfig:
    aggregation: str = "pooled"  # pooled (paper, official README) | per_task (official code, commit 31673ca)
    uas_unit: str = "group"  # group: one edit point (paper) | task: the whole task (official code)
    # edited video missing, misnamed or undecodable (not judged): wrong (all its questions wrong, Score-MCQ 1)
    # | exclude
    missing_output: str = "wrong"
    # request: official, a request failing validation loses all its answers | question: each answer on its own
    validity: str = "request"
    sem_questions: str = (
        "routed"  # routed: official, every question routed to SEM (TF: 0/1) | score_mcq: Score-MCQ only
    )


# the official gold answer's keys, tried in order with ``or`` (a falsy value such as "" falls through), then
# the question's ``options`` dict under these keys (``score_question``, same file and commits as above)
GOLD_KEYS = ("expected_answer", "answer", "label", "ground_truth", "target_answer", "correct_answer")
GOLD_OPTION_KEYS = ("answer", "correct", "target")


def gold_answer(question: dict):
    """A non-Score question's gold answer through the official fallback chain, or None (not scored)."""
    gold = next((question.get(k) for k in GOLD_KEYS if question.get(k)), None)
    if gold is None:
        gold = question.get(GOLD_KEYS[-1])  # ``a or ... or z`` is z when all are falsy
    if gold is None and isinstance(question.get("options"), dict):
        opts = question["options"]
        gold = next((opts.get(k) for k in GOLD_OPTION_KEYS if opts.get(k)), None)
        if gold is None:
            gold = opts.get(GOLD_OPTION_KEYS[-1])
    return gold


def official_float(value) -> float | None:
    """A Score-MCQ answer as the official ``as_float``: None or "" -> None, else ``float(value)`` (7.5,
    11, ``true`` -> 1.0, "nan" -> NaN), None when that raises."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------- question table


def _question_categories(question: dict, group: dict, task_categories: list[str]) -> list[str]:
    """Level-1 categories of a question: its group's entries naming it, else the group's, else the task's."""
    entries = [c for c in group.get("category") or [] if isinstance(c, dict) and c.get("Level 1")]
    own = [c["Level 1"] for c in entries if question["id"] in (c.get("Question IDs") or [])]
    cats = own or [c["Level 1"] for c in entries] or list(task_categories)
    return list(dict.fromkeys(cats))


def _other(mode: str) -> str:
    return next(m for m in PARSE_MODES if m != mode)


def score_answer(question: dict, answer, mode: str) -> tuple[bool | None, float | None]:
    """(correct, score) of one answer under a parse mode; (None, None) when the question is dropped.

    ``answer`` is the mode's own answer (None: never validly answered). official (``score_question`` of
    the official aggregation): a Score-MCQ answer through ``float()``; else a stripped, case-insensitive
    match with the gold answer of the fallback chain (``gold_answer``); no answer or no gold: dropped.
    lenient: normalised match, unanswered wrong (Score-MCQ: the lowest score)."""
    if question.get("type") == "Score-MCQ":
        if answer is None:
            return None, (None if mode == "official" else float(LOWEST_SCORE))
        if mode == "official":
            return None, official_float(answer)
        value = ANSWER_FORMS["SCORE"][0](answer)
        return None, float(value if value is not None else LOWEST_SCORE)
    gold = gold_answer(question)
    if gold is None:
        return None, None
    expected = str(gold).strip().lower()
    if answer is None:
        return (None if mode == "official" else False), None
    if mode == "lenient":
        answer = ANSWER_FORMS[TYPE_FORM.get(question.get("type"), "TF")][0](answer)
        if answer is None:
            return False, None
    return str(answer).strip().lower() == expected, None


def judgment_rows(
    case: dict,
    results: dict,
    parse: str = "official",
    unusable: str | None = None,
    missing_output: str = "wrong",
    validity: str = "request",
) -> list[dict]:
    """One row per checklist question: the judge's answer, correctness and score under ``parse``
    (``correct`` / ``score``; None when the question is dropped) and under the other mode (``alt_*``).

    ``validity=request`` (official): a request that never passed validation gives none of its questions an
    answer; ``question`` keeps the valid answers of such a request. ``unusable``: why the case's edited
    video is missing or cannot be decoded (it was not judged): every question gets status ``no_output``
    and is wrong (Score-MCQ: the lowest score) under ``missing_output=wrong``, or left out of every metric
    under ``exclude`` (correct and score null); ``error`` holds the reason. A question of a type the
    official code does not ask gets status ``not_asked`` and no score."""
    task = json.loads(case["annotations"])
    other = _other(parse)
    rows = []
    for g, group, q in iter_questions(task):
        asked = q.get("type") in TYPE_FORM
        rid = request_id("cove", case["case_id"], case["variant"], STAGE, str(q.get("type")))
        result = None if unusable or not asked else results.get(rid)
        usable = result is not None and (validity == "question" or result.status == "ok")
        value = result.value if usable and isinstance(result.value, dict) else {}
        entry = value.get(str(q["id"]))
        entry = entry if isinstance(entry, dict) else {}
        answer, alt_answer = entry.get(parse), entry.get(other)
        if answer is not None:
            status = "ok"
        else:
            status = (
                "invalid"
                if result is not None and result.status == "ok"
                else (result.status if result is not None else "missing")
            )
        correct, score = score_answer(q, answer, parse)
        alt_correct, alt_score = score_answer(q, alt_answer, other)
        error = result.error if result is not None and status != "ok" else None
        if not asked:
            status, error = NOT_ASKED, f"question type {q.get('type')!r} is not asked (the official code skips it)"
            correct = alt_correct = score = alt_score = None
        elif unusable:
            status, error = NO_OUTPUT, unusable
            wrong = missing_output == "wrong"
            is_score = q["type"] == "Score-MCQ"
            correct = alt_correct = False if wrong and not is_score else None
            score = alt_score = float(LOWEST_SCORE) if wrong and is_score else None
        gold = gold_answer(q) if q.get("type") != "Score-MCQ" else q.get("expected_answer")
        row = {
            "case_id": case["case_id"],
            "variant": case["variant"],
            "group": g,
            "target_element": group.get("target_element"),
            "question_id": str(q["id"]),
            "type": str(q.get("type")),
            "metric": route(q, group),
            "expected": None if gold is None else str(gold),
            "answer": None if answer is None else str(answer),
            "status": status,
            "request_id": rid,
            "correct": correct,
            "score": score,
            "parse": parse,
            "error": error,
            "alt_answer": None if alt_answer is None else str(alt_answer),
            "alt_correct": alt_correct,
            "alt_score": alt_score,
            "categories": _question_categories(q, group, case.get("categories") or []),
            "group_categories": _question_categories({"id": None}, group, case.get("categories") or []),
        }
        rows.append(row)
    return rows


JUDGMENT_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("variant", pa.string()),
        ("group", pa.int64()),
        ("target_element", pa.string()),
        ("question_id", pa.string()),
        ("type", pa.string()),
        ("metric", pa.string()),
        ("expected", pa.string()),
        ("answer", pa.string()),
        ("status", pa.string()),
        ("request_id", pa.string()),
        ("correct", pa.bool_()),
        ("score", pa.float64()),
        ("parse", pa.string()),
        ("alt_answer", pa.string()),
        ("alt_correct", pa.bool_()),
        ("alt_score", pa.float64()),
        ("categories", pa.list_(pa.string())),
        ("group_categories", pa.list_(pa.string())),
        ("error", pa.string()),  # why the question has no usable answer: the judge's last error, or the unusable video
    ]
)


# ----------------------------------------------------------------------------- metrics


def row_value(r: dict) -> float | None:
    """A scored question's number as the official ``score_question`` gives it: a Score-MCQ's score, else
    1.0 / 0.0 for right / wrong; None when dropped. May be NaN (a "nan" score)."""
    if r.get("type", "Score-MCQ" if r.get("score") is not None else None) == "Score-MCQ":
        return r["score"]
    return None if r["correct"] is None else float(r["correct"])


def _scored(r: dict, metric: str = "") -> bool:
    return row_value(r) is not None


def _sem_rule(score_cfg) -> str:
    return getattr(score_cfg, "sem_questions", "routed")


def case_units(
    rows: list[dict], metric: str, uas_unit: str, per_task: bool = False, sem_questions: str = "routed"
) -> dict[str, list[tuple[float, float]]]:
    """Per case: (value, weight) pairs of the metric's scoring units, from scored questions only
    (a dropped question is no unit). As the official aggregation (CoVEBench db270d6a pooled, 31673ca per
    task; metrics/subjective/mllm_checklist/aggregate_subjective.py):

    IFS/VRS: one unit per question, pooled 100 if its value is 1.0 (a NaN counts wrong), per task its value
    x 100 (NaN left out of the task's mean); SEM: every question routed to SEM (``sem_questions=score_mcq``:
    Score-MCQ only), its value x 10, NaN left out; UAS: one per evaluation group (or per task) holding scored
    IFS or VRS questions, 100 if all their values are 1.0. ``per_task``: a task gets UAS only if it has both
    IFS and VRS questions scored (official per-task code)."""
    per_case: dict[str, list[tuple[float, float]]] = {}
    if metric in ("IFS", "VRS"):
        for r in rows:
            v = row_value(r) if r["metric"] == metric else None
            if v is None or (per_task and math.isnan(v)):
                continue
            per_case.setdefault(r["case_id"], []).append((100.0 * v if per_task else 100.0 * (v == 1.0), 1.0))
    elif metric == "SEM":
        for r in rows:
            v = row_value(r) if r["metric"] == "SEM" else None
            if v is None or math.isnan(v) or (sem_questions == "score_mcq" and r.get("type") != "Score-MCQ"):
                continue
            per_case.setdefault(r["case_id"], []).append((10.0 * v, 1.0))
    elif metric == "UAS":
        units: dict[tuple, bool] = {}
        kinds: dict[str, set] = {}
        for r in rows:
            v = row_value(r) if r["metric"] in ("IFS", "VRS") else None
            if v is not None:
                key = (r["case_id"], r["group"] if uas_unit == "group" else "task")
                units[key] = units.get(key, True) and v == 1.0
                kinds.setdefault(r["case_id"], set()).add(r["metric"])
        for (case_id, _), ok in units.items():
            if per_task and kinds[case_id] != {"IFS", "VRS"}:
                continue
            per_case.setdefault(case_id, []).append((100.0 * ok, 1.0))
    return per_case


def metric_rows(rows: list[dict], metric: str, sem_questions: str = "routed") -> list[dict]:
    """The questions a metric is computed from (UAS: the IFS and VRS questions); not-asked ones left out."""
    rows = [r for r in rows if r["status"] != NOT_ASKED]
    if metric == "UAS":
        return [r for r in rows if r["metric"] in ("IFS", "VRS")]
    return [
        r
        for r in rows
        if r["metric"] == metric and not (metric == "SEM" and sem_questions == "score_mcq" and r["type"] != "Score-MCQ")
    ]


def _value(per_case: dict, aggregation: str) -> float | None:
    if not per_case:
        return None
    if aggregation == "per_task":
        return float(np.mean([np.mean([v for v, _ in units]) for units in per_case.values()]))
    return float(sum(v * w for u in per_case.values() for v, w in u) / sum(w for u in per_case.values() for _, w in u))


def _swap(r: dict) -> dict:
    return {**r, "correct": r.get("alt_correct"), "score": r.get("alt_score")}


def aggregate(rows: list[dict], metric: str, score_cfg, seed: int, n_resamples: int, confidence: float) -> dict:
    """``{"value", "ci95", "n", "n_cases", "n_invalid", "n_dropped", "parse", "n_scored_differently",
    "other_parse"}``; CIs resample whole cases (questions of a case are not independent).

    ``n_scored_differently``: questions of this metric that the two parse modes score differently
    (right in one and wrong or dropped in the other, a different score, or dropped vs counted wrong);
    ``other_parse``: the metric's value had the run used the other ``judge.parse`` mode."""
    per_task = score_cfg.aggregation == "per_task"
    sem_rule = _sem_rule(score_cfg)
    per_case = case_units(rows, metric, score_cfg.uas_unit, per_task, sem_rule)
    cases = sorted(per_case)
    mine = metric_rows(rows, metric, sem_rule)
    n_invalid = sum(1 for r in mine if r["status"] not in ("ok", NO_OUTPUT))
    n_dropped = sum(1 for r in mine if not _scored(r, r["metric"]) and r["status"] != NO_OUTPUT)
    # judge.parse=lenient: never-valid answers scored as wrong / the lowest score (fallbacks, not the judge's)
    n_fallback = sum(1 for r in mine if _scored(r, r["metric"]) and r["status"] not in ("ok", NO_OUTPUT))
    differ = sum(1 for r in mine if (r["correct"], r["score"]) != (r.get("alt_correct"), r.get("alt_score")))
    parse = rows[0].get("parse") if rows else None
    out = {
        "value": None,
        "ci95": None,
        "n": sum(len(v) for v in per_case.values()),
        "n_cases": len(cases),
        "n_invalid": n_invalid,
        "n_dropped": n_dropped,
        "n_fallback": n_fallback,
        "n_missing_output": len({r["case_id"] for r in mine if r["status"] == NO_OUTPUT}),
        "scale": "percent" if metric != "SEM" else "0-100",
        "parse": parse,
        "n_scored_differently": differ,
        "other_parse": {
            "parse": _other(parse) if parse in PARSE_MODES else None,
            "value": _value(
                case_units([_swap(r) for r in rows], metric, score_cfg.uas_unit, per_task, sem_rule),
                score_cfg.aggregation,
            ),
        },
    }
    if metric == "SEM":  # the official per-task code (31673ca) writes SEM on the raw 1-10 scale by default
        out["scale_note"] = "mean score x 10 (0-100)" + (
            "; the official per-task CSV (31673ca) is on the raw 1-10 scale by default (--sem-scale raw): this / 10"
            if per_task
            else ""
        )
    if not cases:
        return out
    if not any(r["status"] in ("ok", NO_OUTPUT) for r in mine):
        # every unit is a fallback (never-valid answers counted wrong under judge.parse=lenient): no number
        out["note"] = "no valid judge answer: no number"
        return out
    out["value"] = _value(per_case, score_cfg.aggregation)
    if per_task:
        means = np.array([np.mean([v for v, _ in per_case[c]]) for c in cases])
        out["ci95"] = bootstrap_ci(means, seed=seed, n_resamples=n_resamples, confidence=confidence)
    else:
        sums = np.array([sum(v * w for v, w in per_case[c]) for c in cases])
        counts = np.array([sum(w for _, w in per_case[c]) for c in cases])
        out["ci95"] = ratio_ci(sums, counts, seed=seed, n_resamples=n_resamples, confidence=confidence)
    return out


def by_category(
    rows: list[dict], metrics: list[str], score_cfg, seed: int, n_resamples: int, confidence: float
) -> dict[str, dict]:
    """Per Level-1 category (paper Table 8): questions by their own categories, UAS units by their group's."""
    categories = sorted({c for r in rows for c in (r["categories"] or []) + (r["group_categories"] or [])})
    out = {}
    for cat in categories:
        out[cat] = {}
        for m in metrics:
            key = "group_categories" if m == "UAS" else "categories"
            members = [r for r in rows if cat in (r[key] or [])]
            out[cat][m] = {
                k: v
                for k, v in aggregate(members, m, score_cfg, seed, n_resamples, confidence).items()
                if k in ("value", "ci95", "n", "n_cases")
            }
    return out
