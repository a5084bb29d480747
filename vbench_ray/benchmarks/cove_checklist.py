"""CoVEBench checklist judging and its metrics UAS, IFS, VRS, SEM.

Spec: CoVEBench paper §3.1 and App. F.1 (IFS, VRS, UAS), App. F.3 (SEM); the judge's prompt rules
(seeds/003 appendix) and the official request layout and aggregation (ANCHORS.md §1):

* one request per (task, question type), returning a JSON array; AB-MCQ and Single-TF see only the
  edited video (Video B), Dual-TF and Score-MCQ see the source (Video A) then the edited video; the
  editing instruction is always given. Request ids: ``cove/{case_id}/{variant}/checklist/{type}``.
* routing by the question's ``dimension``: Execution Accuracy -> IFS, Physical Logic -> VRS,
  Semantic Preservation -> SEM (a missing dimension: Score-MCQ -> SEM, other types -> IFS).
* non-score questions: case-insensitive exact match with ``expected_answer``; Score-MCQ: the integer
  1-10 itself (its ``expected_answer`` is a placeholder and ignored).
* IFS, VRS: accuracy in percent; SEM: mean score x 10; UAS: an edit point (evaluation group) scores
  1 only if all its Execution Accuracy and Physical Logic questions are correct; groups without such
  questions are not counted.
* aggregation ``pooled`` (paper, official README): over all questions / groups of the run;
  ``per_task`` (official code at commit 31673ca): the mean of per-task means. ``uas_unit=task`` makes a
  whole task the UAS unit (also the official code).
* a request that never yields a valid answer counts its questions wrong (Score-MCQ: the lowest score,
  1) and they are counted as ``n_invalid``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Iterable

import numpy as np
import pyarrow as pa

from vbench_ray.judges.base import JudgeRequest
from vbench_ray.stats import bootstrap_ci, ratio_ci

TYPE_FORM = {"AB-MCQ": "AB", "Single-TF": "TF", "Dual-TF": "TF", "Score-MCQ": "SCORE"}
SEES_SOURCE = {"Dual-TF", "Score-MCQ"}
DIMENSION_METRIC = {"Execution Accuracy": "IFS", "Physical Logic": "VRS", "Semantic Preservation": "SEM"}
CHECKLIST_METRICS = ("UAS", "IFS", "VRS", "SEM")
LOWEST_SCORE = 1


@dataclass
class CoveScoreConfig:
    aggregation: str = "pooled"  # pooled (paper, official README) | per_task (official code, commit 31673ca)
    uas_unit: str = "group"  # group: one edit point (paper) | task: the whole task (official code)


def system_prompt(qtype: str) -> str:
    return resources.files("vbench_ray.judges.prompts").joinpath("cove", f"{qtype}.txt").read_text()


def route(question: dict) -> str:
    """IFS, VRS or SEM for a question, by its dimension (App. F.1, F.3)."""
    dim = question.get("dimension")
    if dim in DIMENSION_METRIC:
        return DIMENSION_METRIC[dim]
    return "SEM" if question.get("type") == "Score-MCQ" else "IFS"


def iter_questions(task: dict) -> Iterable[tuple[int, dict, dict]]:
    for g, group in enumerate(task.get("evaluation_groups") or []):
        for question in group.get("questions") or []:
            yield g, group, question


def _video_part(path: str) -> dict:
    from pathlib import Path

    return {"type": "video_url", "video_url": {"url": Path(path).resolve().as_uri()}}


def build_requests(case: dict) -> list[JudgeRequest]:
    """One request per question type present in the task (official grouping)."""
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
        requests.append(JudgeRequest(
            request_id=f"cove/{case['case_id']}/{case['variant']}/checklist/{qtype}",
            messages=[{"role": "system", "content": system_prompt(qtype)}, {"role": "user", "content": content}],
            case_id=case["case_id"], variant=case["variant"], stage="checklist", group=qtype,
            parser="checklist_items", expected={"ids": [q["id"] for q in questions], "form": TYPE_FORM[qtype]},
            video=video))
    return requests


# ----------------------------------------------------------------------------- question table

def _question_categories(question: dict, group: dict, task_categories: list[str]) -> list[str]:
    """Level-1 categories of a question: its group's entries naming it, else the group's, else the task's."""
    entries = [c for c in group.get("category") or [] if isinstance(c, dict) and c.get("Level 1")]
    own = [c["Level 1"] for c in entries if question["id"] in (c.get("Question IDs") or [])]
    cats = own or [c["Level 1"] for c in entries] or list(task_categories)
    return list(dict.fromkeys(cats))


def judgment_rows(case: dict, results: dict) -> list[dict]:
    """One row per checklist question with the judge's answer, correctness and score."""
    task = json.loads(case["annotations"])
    rows = []
    for g, group, q in iter_questions(task):
        rid = f"cove/{case['case_id']}/{case['variant']}/checklist/{q['type']}"
        result = results.get(rid)
        status = result.status if result is not None else "missing"
        answer = result.value.get(q["id"]) if status == "ok" else None
        metric = route(q)
        row = {"case_id": case["case_id"], "variant": case["variant"], "group": g,
               "target_element": group.get("target_element"), "question_id": q["id"], "type": q["type"],
               "metric": metric, "expected": str(q.get("expected_answer")), "answer": None if answer is None else str(answer),
               "status": status, "request_id": rid, "correct": None, "score": None,
               "categories": _question_categories(q, group, case.get("categories") or []),
               "group_categories": _question_categories({"id": None}, group, case.get("categories") or [])}
        if q["type"] == "Score-MCQ":
            row["score"] = float(answer) if answer is not None else float(LOWEST_SCORE)
        else:
            row["correct"] = answer is not None and str(answer).strip().lower() == str(q.get("expected_answer")).strip().lower()
        rows.append(row)
    return rows


JUDGMENT_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("variant", pa.string()), ("group", pa.int64()), ("target_element", pa.string()),
    ("question_id", pa.string()), ("type", pa.string()), ("metric", pa.string()), ("expected", pa.string()),
    ("answer", pa.string()), ("status", pa.string()), ("request_id", pa.string()), ("correct", pa.bool_()),
    ("score", pa.float64()), ("categories", pa.list_(pa.string())), ("group_categories", pa.list_(pa.string())),
])


# ----------------------------------------------------------------------------- metrics

def _units(rows: list[dict], metric: str, uas_unit: str) -> dict[str, list[tuple[float, float]]]:
    """Per case: (value, weight) pairs of the metric's scoring units.

    IFS/VRS: one unit per question (1 if correct); SEM: one per Score-MCQ question (score x 10);
    UAS: one per evaluation group (or per task) holding Execution Accuracy or Physical Logic questions.
    """
    per_case: dict[str, list[tuple[float, float]]] = {}
    if metric in ("IFS", "VRS"):
        for r in rows:
            if r["metric"] == metric:
                per_case.setdefault(r["case_id"], []).append((100.0 * bool(r["correct"]), 1.0))
    elif metric == "SEM":
        for r in rows:
            if r["metric"] == "SEM":
                per_case.setdefault(r["case_id"], []).append((10.0 * r["score"], 1.0))
    elif metric == "UAS":
        units: dict[tuple, bool] = {}
        for r in rows:
            if r["metric"] in ("IFS", "VRS"):
                key = (r["case_id"], r["group"] if uas_unit == "group" else "task")
                units[key] = units.get(key, True) and bool(r["correct"])
        for (case_id, _), ok in units.items():
            per_case.setdefault(case_id, []).append((100.0 * ok, 1.0))
    return per_case


def aggregate(rows: list[dict], metric: str, score_cfg, seed: int, n_resamples: int, confidence: float) -> dict:
    """``{"value", "ci95", "n", "n_cases", "n_invalid"}``; CIs resample whole cases (questions of a case
    are not independent)."""
    per_case = _units(rows, metric, score_cfg.uas_unit)
    cases = sorted(per_case)
    n_invalid = sum(1 for r in rows if r["status"] != "ok" and (metric == "UAS" and r["metric"] in ("IFS", "VRS")
                                                                  or r["metric"] == metric))
    out = {"value": None, "ci95": None, "n": sum(len(v) for v in per_case.values()), "n_cases": len(cases),
           "n_invalid": n_invalid, "scale": "percent" if metric != "SEM" else "0-100"}
    if not cases:
        return out
    if score_cfg.aggregation == "per_task":
        means = np.array([np.mean([v for v, _ in per_case[c]]) for c in cases])
        out["value"] = float(means.mean())
        out["ci95"] = bootstrap_ci(means, seed=seed, n_resamples=n_resamples, confidence=confidence)
    else:
        sums = np.array([sum(v * w for v, w in per_case[c]) for c in cases])
        counts = np.array([sum(w for _, w in per_case[c]) for c in cases])
        out["value"] = float(sums.sum() / counts.sum())
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
