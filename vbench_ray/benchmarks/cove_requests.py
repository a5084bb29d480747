"""CoVEBench checklist requests: what the judge is asked, and which metric each question counts for.

Spec: CoVEBench paper §3.1 and App. F.1 (IFS, VRS, UAS), App. F.3 (SEM); the official request layout and routing
(NJU-LINK/CoVEBench, metrics/subjective/mllm_checklist):

* one request per (task, question type), returning a JSON array; AB-MCQ and Single-TF see only the
  edited video (Video B), Dual-TF and Score-MCQ see the source (Video A) then the edited video; the
  editing instruction is always given. Request ids: ``cove/{case_id}/{variant}/checklist/{type}``.
* routing by the question's ``dimension``: Execution Accuracy -> IFS, Physical Logic -> VRS,
  Semantic Preservation -> SEM. Without one of these, the official code's keyword routing: Score-MCQ
  -> SEM; else keywords in the question's and its group's metadata (SEM words, then VRS words such as
  "physics" or "artifact", then IFS words); else AB-MCQ / TF -> IFS (``route``). Questions of a type the
  official code does not ask are skipped (status ``not_asked``), never a load failure.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Iterable

from vbench_ray.judges.base import JudgeRequest
from vbench_ray.judges.parsing import PARSE_MODES

STAGE = "checklist"  # the judge stage of every request id (cove/{case}/{variant}/checklist/{question type})
TYPE_FORM = {"AB-MCQ": "AB", "Single-TF": "TF", "Dual-TF": "TF", "Score-MCQ": "SCORE"}
SEES_SOURCE = {"Dual-TF", "Score-MCQ"}
DIMENSION_METRIC = {"Execution Accuracy": "IFS", "Physical Logic": "VRS", "Semantic Preservation": "SEM"}
VALIDITY_RULES = ("request", "question")


def system_prompt(qtype: str) -> str:
    return resources.files("vbench_ray.judges.prompts").joinpath("cove", f"{qtype}.txt").read_text()


# Keyword routing of questions without a known dimension (CoVEBench 31673ca / db270d6a,
# metrics/subjective/mllm_checklist/aggregate_subjective.py, ``category_text`` / ``classify_question``): the
# group's then the question's values under these keys, each ``str()``-ed (a list: each element ``str()``-ed),
# joined by spaces, lower-cased, runs of other characters than a-z0-9 made "_", then searched for these words.
ROUTE_KEYS = (
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
ROUTE_KEYWORDS = (
    ("SEM", ("sem", "semantic", "preservation", "consistency", "unedited", "unchanged")),
    ("VRS", ("vrs", "realism", "quality", "plausibility", "artifact", "artifacts", "natural", "physics", "logic")),
    ("IFS", ("ifs", "instruction", "execution", "following", "compliance", "accuracy", "edit_success")),
)


def _route_text(group: dict, question: dict) -> str:
    pieces: list[str] = []
    for obj in (group, question):
        for key in ROUTE_KEYS:
            value = obj.get(key)
            if isinstance(value, list):
                pieces += [str(x) for x in value]
            elif value is not None:
                pieces.append(str(value))
    return re.sub(r"[^a-z0-9]+", "_", " ".join(pieces).lower())


def route(question: dict, group: dict | None = None) -> str | None:
    """IFS, VRS or SEM for a question (App. F.1, F.3), or None when nothing routes it (not scored).

    As the official ``classify_question``: by its ``dimension`` (case-insensitive, stripped); else a
    Score-MCQ is SEM; else by keywords in the group's and the question's metadata (``ROUTE_KEYS``);
    else an AB-MCQ / TF question is IFS. Any question type is routed; unknown ones are not asked."""
    dim = str(question.get("dimension", "")).strip().lower()
    for name, metric in DIMENSION_METRIC.items():
        if dim == name.lower():
            return metric
    if question.get("type") == "Score-MCQ":
        return "SEM"
    compact = _route_text(group or {}, question)
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


def build_requests(case: dict, parse: str = "official", validity: str = "request") -> list[JudgeRequest]:
    """One request per question type present in the task (official grouping; questions of other types are
    not asked, as the official ``build_pending_tasks`` skips them); ``parse`` is ``judge.parse`` (which
    parse decides validity and re-asks; both are recorded), ``validity`` is ``score.validity``."""
    if parse not in PARSE_MODES:
        raise ValueError(f"judge.parse must be one of {PARSE_MODES}, got {parse!r}")
    if validity not in VALIDITY_RULES:
        raise ValueError(f"score.validity must be one of {VALIDITY_RULES}, got {validity!r}")
    task = json.loads(case["annotations"])
    params = json.loads(case.get("variant_params") or "{}")
    video = {"fps": params["fps"]} if "fps" in params else None  # an fps sweep variant
    by_type: dict[str, list[dict]] = {}
    for _, _, q in iter_questions(task):
        if q.get("type") in TYPE_FORM:
            by_type.setdefault(q["type"], []).append(q)
    requests = []
    for qtype, questions in by_type.items():
        listed = [
            {"id": q["id"], "question": q["question"], **({"options": q["options"]} if q.get("options") else {})}
            for q in questions
        ]
        content: list[dict] = []
        if qtype in SEES_SOURCE:
            content += [
                {"type": "text", "text": "Video A (Original Source):"},
                _video_part(case["source_path"]),
                {"type": "text", "text": "Video B (Edited/Generated):"},
                _video_part(case["edited_path"]),
            ]
        else:
            content += [{"type": "text", "text": "Video for evaluation:"}, _video_part(case["edited_path"])]
        content += [
            {"type": "text", "text": f"Editing Instruction:\n{case['instruction']}"},
            {
                "type": "text",
                "text": "Here are the questions to answer, as a JSON array:\n"
                + json.dumps(listed, ensure_ascii=False, indent=1),
            },
            {
                "type": "text",
                "text": "CRITICAL: Output STRICTLY a valid JSON array with one object per question and nothing else.",
            },
        ]
        requests.append(
            JudgeRequest.build(
                "cove",
                case["case_id"],
                case["variant"],
                STAGE,
                qtype,
                messages=[{"role": "system", "content": system_prompt(qtype)}, {"role": "user", "content": content}],
                parser=f"checklist_{parse}",
                expected={
                    "ids": [q["id"] for q in questions],
                    "form": TYPE_FORM[qtype],
                    **({"validity": validity} if validity != "request" else {}),
                },
                video=video,
            )
        )
    return requests
