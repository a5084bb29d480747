"""CoVEBench checklist judging and its metrics UAS, IFS, VRS, SEM.

Spec: CoVEBench paper §3.1 and App. F.1 (IFS, VRS, UAS), App. F.3 (SEM); the judge's prompt rules
(seeds/003 appendix) and the official request layout and aggregation (ANCHORS.md §1):

* one request per (task, question type), returning a JSON array; AB-MCQ and Single-TF see only the
  edited video (Video B), Dual-TF and Score-MCQ see the source (Video A) then the edited video; the
  editing instruction is always given. Request ids: ``cove/{case_id}/{variant}/checklist/{type}``.
* routing by the question's ``dimension``: Execution Accuracy -> IFS, Physical Logic -> VRS,
  Semantic Preservation -> SEM. Without one of these, the official code's keyword routing: Score-MCQ
  -> SEM; else keywords in the question's and its group's metadata (SEM words, then VRS words such as
  "physics" or "artifact", then IFS words); else AB-MCQ / TF -> IFS (``route``).
* ``judge.parse=official`` (default, issue 10): the official parse and literal matching (``"Yes."`` or
  ``"Option A"`` is wrong), and a question never validly answered is dropped from the denominator, as
  the official aggregation skips questions without ``model_answer``. ``lenient``: normalised answers,
  and a never-valid question counts wrong (Score-MCQ: the lowest score, 1). Either way each answer is
  valid on its own: one invalid answer no longer voids its siblings. Every metric reports
  ``n_scored_differently`` (answers the two modes score differently) and its value under the other mode.
* non-score questions: case-insensitive exact match with ``expected_answer``; Score-MCQ: the integer
  1-10 itself (its ``expected_answer`` is a placeholder and ignored; 7.5 or 11 are off the paper's
  scale and invalid for that question).
* IFS, VRS: accuracy in percent; SEM: mean score x 10; UAS: an edit point (evaluation group) scores
  1 only if all its Execution Accuracy and Physical Logic questions are correct; groups without such
  questions are not counted.
* aggregation ``pooled`` (paper, official README): over all questions / groups of the run;
  ``per_task`` (official code at commit 31673ca): the mean of per-task means; as there, a task without
  both IFS and VRS questions has no UAS and is left out of UAS's mean. ``uas_unit=task`` makes a whole
  task the UAS unit (also the official code).
* questions never validly answered are counted as ``n_invalid`` (see ``judge.parse`` for how they score).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Iterable

import numpy as np
import pyarrow as pa

from vbench_ray.judges.base import JudgeRequest, request_id
from vbench_ray.judges.parsing import ANSWER_FORMS, PARSE_MODES, official_score_value
from vbench_ray.stats import bootstrap_ci, ratio_ci

STAGE = "checklist"  # the judge stage of every request id (cove/{case}/{variant}/checklist/{question type})
TYPE_FORM = {"AB-MCQ": "AB", "Single-TF": "TF", "Dual-TF": "TF", "Score-MCQ": "SCORE"}
SEES_SOURCE = {"Dual-TF", "Score-MCQ"}
DIMENSION_METRIC = {"Execution Accuracy": "IFS", "Physical Logic": "VRS", "Semantic Preservation": "SEM"}
CHECKLIST_METRICS = ("UAS", "IFS", "VRS", "SEM")
LOWEST_SCORE = 1
MISSING_OUTPUT_RULES = ("wrong", "exclude")
NO_OUTPUT = "no_output"  # judgment status of a question whose edited video cannot be decoded (not judged)


@dataclass
class CoveScoreConfig:
    aggregation: str = "pooled"  # pooled (paper, official README) | per_task (official code, commit 31673ca)
    uas_unit: str = "group"  # group: one edit point (paper) | task: the whole task (official code)
    missing_output: str = "wrong"  # edited video cannot be decoded (not judged): wrong (all its questions wrong, Score-MCQ 1) | exclude


def system_prompt(qtype: str) -> str:
    return resources.files("vbench_ray.judges.prompts").joinpath("cove", f"{qtype}.txt").read_text()


# Keyword routing of questions without a known dimension, in the official aggregation's order
# (ANCHORS.md §1): looked for in the lower-cased metadata below with runs of other characters as "_".
ROUTE_KEYS = ("metric", "dimension", "category", "score_type", "sub_category", "group", "name", "type", "tag",
              "tags", "question_type")
ROUTE_KEYWORDS = (
    ("SEM", ("sem", "semantic", "preservation", "consistency", "unedited", "unchanged")),
    ("VRS", ("vrs", "realism", "quality", "plausibility", "artifact", "artifacts", "natural", "physics", "logic")),
    ("IFS", ("ifs", "instruction", "execution", "following", "compliance", "accuracy", "edit_success")),
)


def _words(value) -> list[str]:
    """Keys and values of nested metadata, in order (what the official ``str()`` of it contains)."""
    if isinstance(value, dict):
        return [w for k, v in value.items() for w in [str(k), *_words(v)]]
    if isinstance(value, (list, tuple)):
        return [w for v in value for w in _words(v)]
    return [] if value is None else [str(value)]


def route(question: dict, group: dict | None = None) -> str | None:
    """IFS, VRS or SEM for a question (App. F.1, F.3), or None when nothing routes it (not scored).

    By its ``dimension`` (case-insensitive); else a Score-MCQ is SEM; else by keywords in the
    group's and the question's metadata fields ``ROUTE_KEYS``; else an AB-MCQ / TF question is IFS."""
    dim = str(question.get("dimension") or "").strip().lower()
    for name, metric in DIMENSION_METRIC.items():
        if dim == name.lower():
            return metric
    if question.get("type") == "Score-MCQ":
        return "SEM"
    words = [w for obj in (group or {}, question) for key in ROUTE_KEYS for w in _words(obj.get(key))]
    compact = re.sub(r"[^a-z0-9]+", "_", " ".join(words).lower())
    for metric, tokens in ROUTE_KEYWORDS:
        if any(t in compact for t in tokens):
            return metric
    return "IFS" if question.get("type") in ("AB-MCQ", "Single-TF", "Dual-TF") else None


def iter_questions(task: dict) -> Iterable[tuple[int, dict, dict]]:
    for g, group in enumerate(task.get("evaluation_groups") or []):
        for question in group.get("questions") or []:
            yield g, group, question


def _video_part(path: str) -> dict:
    from pathlib import Path

    return {"type": "video_url", "video_url": {"url": Path(path).resolve().as_uri()}}


def build_requests(case: dict, parse: str = "official") -> list[JudgeRequest]:
    """One request per question type present in the task (official grouping); ``parse`` is
    ``judge.parse`` (which parse decides validity and re-asks; both are recorded)."""
    if parse not in PARSE_MODES:
        raise ValueError(f"judge.parse must be one of {PARSE_MODES}, got {parse!r}")
    task = json.loads(case["annotations"])
    params = json.loads(case.get("variant_params") or "{}")
    video = {"fps": params["fps"]} if "fps" in params else None  # an fps sweep variant
    by_type: dict[str, list[dict]] = {}
    for _, _, q in iter_questions(task):
        by_type.setdefault(q["type"], []).append(q)
    requests = []
    for qtype, questions in by_type.items():
        listed = [{"id": q["id"], "question": q["question"], **({"options": q["options"]} if q.get("options") else {})}
                  for q in questions]
        content: list[dict] = []
        if qtype in SEES_SOURCE:
            content += [{"type": "text", "text": "Video A (Original Source):"}, _video_part(case["source_path"]),
                        {"type": "text", "text": "Video B (Edited/Generated):"}, _video_part(case["edited_path"])]
        else:
            content += [{"type": "text", "text": "Video for evaluation:"}, _video_part(case["edited_path"])]
        content += [
            {"type": "text", "text": f"Editing Instruction:\n{case['instruction']}"},
            {"type": "text", "text": "Here are the questions to answer, as a JSON array:\n"
                                     + json.dumps(listed, ensure_ascii=False, indent=1)},
            {"type": "text", "text": "CRITICAL: Output STRICTLY a valid JSON array with one object per question "
                                     "and nothing else."},
        ]
        requests.append(JudgeRequest.build(
            "cove", case["case_id"], case["variant"], STAGE, qtype,
            messages=[{"role": "system", "content": system_prompt(qtype)}, {"role": "user", "content": content}],
            parser=f"checklist_{parse}", expected={"ids": [q["id"] for q in questions], "form": TYPE_FORM[qtype]},
            video=video))
    return requests


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

    ``answer`` is the mode's own answer (None: never validly answered). official: literal,
    case-insensitive match, a Score-MCQ answer as a float, unanswered dropped. lenient: normalised
    match, unanswered wrong (Score-MCQ: the lowest score)."""
    expected = str(question.get("expected_answer")).strip().lower()
    if question["type"] == "Score-MCQ":
        if answer is None:
            return None, (None if mode == "official" else float(LOWEST_SCORE))
        value = official_score_value(answer) if mode == "official" else ANSWER_FORMS["SCORE"][0](answer)
        return None, (float(value) if value is not None else (None if mode == "official" else float(LOWEST_SCORE)))
    if answer is None:
        return (None if mode == "official" else False), None
    if mode == "lenient":
        answer = ANSWER_FORMS[TYPE_FORM[question["type"]]][0](answer)
        if answer is None:
            return False, None
    return str(answer).strip().lower() == expected, None


def judgment_rows(case: dict, results: dict, parse: str = "official", unusable: str | None = None,
                  missing_output: str = "wrong") -> list[dict]:
    """One row per checklist question: the judge's answer, correctness and score under ``parse``
    (``correct`` / ``score``; None when the question is dropped) and under the other mode (``alt_*``).

    ``unusable``: why the case's edited video cannot be decoded (it was not judged): every question gets
    status ``no_output`` and is wrong (Score-MCQ: the lowest score) under ``missing_output=wrong``, or left
    out of every metric under ``exclude`` (correct and score null); ``error`` holds the reason."""
    task = json.loads(case["annotations"])
    other = _other(parse)
    rows = []
    for g, group, q in iter_questions(task):
        rid = request_id("cove", case["case_id"], case["variant"], STAGE, q["type"])
        result = None if unusable else results.get(rid)
        value = result.value if result is not None and isinstance(result.value, dict) else {}
        entry = value.get(str(q["id"]))
        entry = entry if isinstance(entry, dict) else {}
        answer, alt_answer = entry.get(parse), entry.get(other)
        if answer is not None:
            status = "ok"
        else:
            status = "invalid" if result is not None and result.status == "ok" else (
                result.status if result is not None else "missing")
        correct, score = score_answer(q, answer, parse)
        alt_correct, alt_score = score_answer(q, alt_answer, other)
        error = result.error if result is not None and status != "ok" else None
        if unusable:
            status, error = NO_OUTPUT, unusable
            wrong = missing_output == "wrong"
            is_score = q["type"] == "Score-MCQ"
            correct = alt_correct = (False if wrong and not is_score else None)
            score = alt_score = (float(LOWEST_SCORE) if wrong and is_score else None)
        row = {"case_id": case["case_id"], "variant": case["variant"], "group": g,
               "target_element": group.get("target_element"), "question_id": q["id"], "type": q["type"],
               "metric": route(q, group), "expected": str(q.get("expected_answer")),
               "answer": None if answer is None else str(answer), "status": status, "request_id": rid,
               "correct": correct, "score": score, "parse": parse, "error": error,
               "alt_answer": None if alt_answer is None else str(alt_answer),
               "alt_correct": alt_correct, "alt_score": alt_score,
               "categories": _question_categories(q, group, case.get("categories") or []),
               "group_categories": _question_categories({"id": None}, group, case.get("categories") or [])}
        rows.append(row)
    return rows


JUDGMENT_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("variant", pa.string()), ("group", pa.int64()), ("target_element", pa.string()),
    ("question_id", pa.string()), ("type", pa.string()), ("metric", pa.string()), ("expected", pa.string()),
    ("answer", pa.string()), ("status", pa.string()), ("request_id", pa.string()), ("correct", pa.bool_()),
    ("score", pa.float64()), ("parse", pa.string()), ("alt_answer", pa.string()), ("alt_correct", pa.bool_()),
    ("alt_score", pa.float64()), ("categories", pa.list_(pa.string())), ("group_categories", pa.list_(pa.string())),
    ("error", pa.string()),  # why the question has no usable answer: the judge's last error, or the unusable video
])


# ----------------------------------------------------------------------------- metrics

def _scored(r: dict, metric: str) -> bool:
    return r["score"] is not None if metric == "SEM" else r["correct"] is not None


def case_units(rows: list[dict], metric: str, uas_unit: str, per_task: bool = False) -> dict[str, list[tuple[float, float]]]:
    """Per case: (value, weight) pairs of the metric's scoring units, from scored questions only
    (a question dropped under ``judge.parse=official`` is no unit).

    IFS/VRS: one unit per question (1 if correct); SEM: one per Score-MCQ question (score x 10);
    UAS: one per evaluation group (or per task) holding scored Execution Accuracy or Physical Logic
    questions. ``per_task``: a task gets UAS only if it has both IFS and VRS questions scored (official
    per-task code)."""
    per_case: dict[str, list[tuple[float, float]]] = {}
    if metric in ("IFS", "VRS"):
        for r in rows:
            if r["metric"] == metric and _scored(r, metric):
                per_case.setdefault(r["case_id"], []).append((100.0 * bool(r["correct"]), 1.0))
    elif metric == "SEM":
        for r in rows:
            if r["metric"] == "SEM" and _scored(r, metric):
                per_case.setdefault(r["case_id"], []).append((10.0 * r["score"], 1.0))
    elif metric == "UAS":
        units: dict[tuple, bool] = {}
        kinds: dict[str, set] = {}
        for r in rows:
            if r["metric"] in ("IFS", "VRS") and _scored(r, r["metric"]):
                key = (r["case_id"], r["group"] if uas_unit == "group" else "task")
                units[key] = units.get(key, True) and bool(r["correct"])
                kinds.setdefault(r["case_id"], set()).add(r["metric"])
        for (case_id, _), ok in units.items():
            if per_task and kinds[case_id] != {"IFS", "VRS"}:
                continue
            per_case.setdefault(case_id, []).append((100.0 * ok, 1.0))
    return per_case


def metric_rows(rows: list[dict], metric: str) -> list[dict]:
    """The questions a metric is computed from (UAS: the IFS and VRS questions)."""
    return [r for r in rows if (r["metric"] in ("IFS", "VRS") if metric == "UAS" else r["metric"] == metric)]


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
    per_case = case_units(rows, metric, score_cfg.uas_unit, per_task)
    cases = sorted(per_case)
    mine = metric_rows(rows, metric)
    n_invalid = sum(1 for r in mine if r["status"] not in ("ok", NO_OUTPUT))
    n_dropped = sum(1 for r in mine if not _scored(r, r["metric"]) and r["status"] != NO_OUTPUT)
    differ = sum(1 for r in mine if (r["correct"], r["score"]) != (r.get("alt_correct"), r.get("alt_score")))
    parse = rows[0].get("parse") if rows else None
    out = {"value": None, "ci95": None, "n": sum(len(v) for v in per_case.values()), "n_cases": len(cases),
           "n_invalid": n_invalid, "n_dropped": n_dropped,
           "n_missing_output": len({r["case_id"] for r in mine if r["status"] == NO_OUTPUT}), "scale": "percent" if metric != "SEM" else "0-100",
           "parse": parse, "n_scored_differently": differ,
           "other_parse": {"parse": _other(parse) if parse in PARSE_MODES else None,
                           "value": _value(case_units([_swap(r) for r in rows], metric, score_cfg.uas_unit, per_task),
                                           score_cfg.aggregation)}}
    if not cases:
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


def by_category(rows: list[dict], metrics: list[str], score_cfg, seed: int, n_resamples: int,
                confidence: float) -> dict[str, dict]:
    """Per Level-1 category (paper Table 8): questions by their own categories, UAS units by their group's."""
    categories = sorted({c for r in rows for c in (r["categories"] or []) + (r["group_categories"] or [])})
    out = {}
    for cat in categories:
        out[cat] = {}
        for m in metrics:
            key = "group_categories" if m == "UAS" else "categories"
            members = [r for r in rows if cat in (r[key] or [])]
            out[cat][m] = {k: v for k, v in aggregate(members, m, score_cfg, seed, n_resamples, confidence).items()
                           if k in ("value", "ci95", "n", "n_cases")}
    return out
