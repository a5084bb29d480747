"""Test oracle: the official CoVEBench checklist chain, transcribed rule by rule for side-by-side tests.

Written from the official code, read at these commits (NJU-LINK/CoVEBench):

* extraction, validation, retries, write-back: 4fe1c2fc32b09c5b06e0eadbbc7ccef125185865,
  ``metrics/subjective/mllm_checklist/eval_checklist.py`` (``extract_json_from_text``,
  ``extract_answer_from_dict``, ``validate_llm_output``, ``build_pending_tasks``, ``write_answers``,
  ``process_single_task_with_retry``: the first answer plus ``--max-retries`` 3 re-asks);
* scoring and routing: ``metrics/subjective/mllm_checklist/aggregate_subjective.py`` at
  31673ca9196e0e8db04521f7887c804003857f4d (per task, ``aggregate_task``) and
  db270d6a08f4d88c73f7cc4294d739a09a74ec10 (pooled, ``aggregate_overall``): ``score_question``,
  ``category_text``, ``classify_question``, ``as_float``, ``mean``.

Kept independent of the project's code on purpose (no import from ``vbench_ray``): a test compares the
two. Numbers are returned unformatted (the official CSV writes ``%.8f``) and on the percent scale
(``--accuracy-scale percent``, ``--sem-scale percent``).
"""

from __future__ import annotations

import json
import math
import re

ASKED_TYPES = ("AB-MCQ", "Single-TF", "Dual-TF", "Score-MCQ")
MAX_RETRIES = 3


def extract(text: str):
    """Text after the last ``</think>``; a fenced block, else first "[" to last "]", else first "{" to last
    "}", else the whole text; ``json.loads`` (raises on failure: the attempt failed)."""
    if "</think>" in text:
        text = text.split("</think>")[-1].strip()
    fenced = re.search(r"```(?:json)?(.*?)```", text, re.DOTALL | re.IGNORECASE)
    if fenced:
        return json.loads(fenced.group(1).strip())
    for pattern in (r"(\[.*\])", r"(\{.*\})"):
        m = re.search(pattern, text, re.DOTALL)
        if m:
            return json.loads(m.group(0).strip())
    return json.loads(text.strip())


def answer_of(item: dict):
    for key in ("final_answer", "final_score", "answer", "score"):
        if key in item and item[key] is not None:
            return item[key]
    return None


def valid(data, expected_ids) -> bool:
    if not isinstance(data, list):
        return False
    seen = []
    for item in data:
        if not isinstance(item, dict):
            return False
        qid = str(item.get("id", ""))
        if not qid or "reasoning" not in item or answer_of(item) is None:
            return False
        seen.append(qid)
    return all(str(x) in seen for x in expected_ids)


def judge(tasks: list[dict], texts: dict) -> list[dict]:
    """The checklist with ``model_answer`` written as the official evaluation leaves it. ``texts[(task id,
    question type)]`` lists the judge's replies to the first ask and its re-asks, in order (the last one
    repeats when there are fewer than 1 + MAX_RETRIES)."""
    tasks = json.loads(json.dumps(tasks))
    for task in tasks:
        by_type: dict[str, list[dict]] = {t: [] for t in ASKED_TYPES}
        for group in task.get("evaluation_groups", []):
            for question in group.get("questions", []):
                if question.get("type") in by_type:
                    by_type[question["type"]].append(question)
        for qtype, questions in by_type.items():
            if not questions:
                continue
            replies = texts[(task["id"], qtype)]
            for attempt in range(1 + MAX_RETRIES):
                text = replies[min(attempt, len(replies) - 1)]
                try:
                    data = extract(text)
                except Exception:  # noqa: BLE001 - the official loop catches everything here
                    continue
                if valid(data, [q["id"] for q in questions]):
                    for item in data:
                        for question in questions:
                            if str(question["id"]) == str(item["id"]):
                                question["model_answer"] = answer_of(item)
                                break
                    break
    return tasks


def as_float(value):
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def score(question: dict):
    answer = question.get("model_answer")
    if answer is None:
        return None
    if question.get("type") == "Score-MCQ":
        return as_float(answer)
    gold = (
        question.get("expected_answer")
        or question.get("answer")
        or question.get("label")
        or question.get("ground_truth")
        or question.get("target_answer")
        or question.get("correct_answer")
    )
    if gold is None and isinstance(question.get("options"), dict):
        opts = question["options"]
        gold = opts.get("answer") or opts.get("correct") or opts.get("target")
    if gold is None:
        return None
    return 1.0 if str(answer).strip().lower() == str(gold).strip().lower() else 0.0


KEYS = (
    "metric",
    "dimension",
    "category",
    "score_type",
    "sub_category",
    "group",
    "name",
    "type",
    "tag",
    "tags",
    "question_type",
)
WORDS = {
    "SEM": ("sem", "semantic", "preservation", "consistency", "unedited", "unchanged"),
    "VRS": ("vrs", "realism", "quality", "plausibility", "artifact", "artifacts", "natural", "physics", "logic"),
    "IFS": ("ifs", "instruction", "execution", "following", "compliance", "accuracy", "edit_success"),
}


def classify(group: dict, question: dict):
    dim = str(question.get("dimension", "")).strip().lower()
    named = {"execution accuracy": "IFS", "physical logic": "VRS", "semantic preservation": "SEM"}
    if dim in named:
        return named[dim]
    pieces = []
    for obj in (group, question):
        for key in KEYS:
            value = obj.get(key)
            if isinstance(value, list):
                pieces.extend(str(x) for x in value)
            elif value is not None:
                pieces.append(str(value))
    compact = re.sub(r"[^a-z0-9]+", "_", " ".join(pieces).lower())
    if question.get("type") == "Score-MCQ":
        return "SEM"
    for metric in ("SEM", "VRS", "IFS"):
        if any(w in compact for w in WORDS[metric]):
            return metric
    return "IFS" if question.get("type") in ("AB-MCQ", "Single-TF", "Dual-TF") else None


def _mean(values):
    clean = [x for x in values if not math.isnan(x)]
    return None if not clean else sum(clean) / len(clean)


def pooled(tasks: list[dict]) -> dict:
    """``aggregate_overall`` (db270d6a): UAS, IFS, VRS in percent, SEM x 10."""
    ifs = [0, 0]
    vrs = [0, 0]
    union = [0, 0]
    sem = []
    for task in tasks:
        for group in task.get("evaluation_groups", []):
            unit = []
            for question in group.get("questions", []):
                metric, value = classify(group, question), score(question)
                if metric is None or value is None:
                    continue
                if metric in ("IFS", "VRS"):
                    counter = ifs if metric == "IFS" else vrs
                    counter[0] += int(value == 1.0)
                    counter[1] += 1
                    unit.append(value)
                elif metric == "SEM":
                    sem.append(value)
            if unit:
                union[1] += 1
                union[0] += int(all(v == 1.0 for v in unit))
    pct = lambda c: None if not c[1] else 100.0 * c[0] / c[1]
    s = _mean(sem)
    return {"UAS": pct(union), "IFS": pct(ifs), "VRS": pct(vrs), "SEM": None if s is None else 10.0 * s}


def per_task_rows(tasks: list[dict]) -> list[dict]:
    """``aggregate_task`` (31673ca) for each task: one row, None for an empty cell."""
    rows = []
    for task in tasks:
        got = {"IFS": [], "VRS": [], "SEM": []}
        for group in task.get("evaluation_groups", []):
            for question in group.get("questions", []):
                metric, value = classify(group, question), score(question)
                if metric is not None and value is not None:
                    got[metric].append(value)
        uas = None
        if got["IFS"] and got["VRS"]:
            uas = 1.0 if all(v == 1.0 for v in got["IFS"] + got["VRS"]) else 0.0
        m = {k: _mean(v) for k, v in got.items()}
        rows.append(
            {
                "UAS": None if uas is None else 100.0 * uas,
                "IFS": None if m["IFS"] is None else 100.0 * m["IFS"],
                "VRS": None if m["VRS"] is None else 100.0 * m["VRS"],
                "SEM": None if m["SEM"] is None else 10.0 * m["SEM"],
            }
        )
    return rows


def per_task(tasks: list[dict]) -> dict:
    """The mean of the per-task CSV's non-empty cells, per metric (how a table of the per-task code is read)."""
    rows = per_task_rows(tasks)
    out = {}
    for metric in ("UAS", "IFS", "VRS", "SEM"):
        cells = [r[metric] for r in rows if r[metric] is not None]
        out[metric] = sum(cells) / len(cells) if cells else None
    return out
