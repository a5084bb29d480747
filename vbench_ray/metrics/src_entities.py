"""The entities SRC keeps unchanged (CoVEBench App. F, Table 2, "SAM2 + DINOv2, mask-based feature comparison for
unchanged areas"): a case's preserved entities, from the official stage1 cache (``entities_from_cache``), a task's
``preserved_entities`` list, or the phrases extracted by rule from the task's Semantic Preservation questions
(``entities_from_task``, ``entity_from_question``; abstract targets dropped). The order of these sources, and the
official LLM step they stand in for, are in ``vbench_ray/metrics/src.py``'s module docstring ("Entities").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from vbench_ray.safepaths import within

# targets a mask cannot localise: dropped from the question-derived entities (official stage 1B drops them)
ABSTRACT_WORDS = (
    "camera",
    "framing",
    "frame",
    "shot",
    "angle",
    "perspective",
    "composition",
    "lighting",
    "light",
    "mood",
    "atmosphere",
    "style",
    "tone",
    "colour grading",
    "color grading",
    "aesthetic",
    "background",
    "scene",
    "environment",
    "bokeh",
    "motion",
    "movement",
)
_PRESERVED = re.compile(
    r"\bthe\s+([^?.,;]+?)\s+(?:is\s+|are\s+)?(?:preserved|maintained|retained|kept|unchanged)", re.IGNORECASE
)


def _phrase(entity: Any) -> str:
    text = entity.get("description", "") if isinstance(entity, dict) else entity
    return str(text or "").strip().lower().rstrip(".").strip()


def _dedupe(phrases: Sequence[str]) -> list[str]:
    out: list[str] = []
    for p in phrases:
        if p and p not in out:
            out.append(p)
    return out


def is_abstract(phrase: str) -> bool:
    return any(re.search(rf"\b{re.escape(w)}\b", phrase) for w in ABSTRACT_WORDS)


def entity_from_question(question: str) -> str | None:
    """The noun phrase a Semantic Preservation question asks to be preserved, or None (abstract / no match).

    ``"How well is the identity and appearance of the young woman preserved?"`` -> ``"young woman"``."""
    m = _PRESERVED.search(question)
    if not m:
        return None
    phrase = m.group(1).lower()
    if " of the " in phrase:
        phrase = phrase.rsplit(" of the ", 1)[1]
    phrase = re.sub(r"^(?:the|a|an)\s+", "", phrase.strip())
    if not phrase or is_abstract(phrase) or len(phrase.split()) > 10:
        return None
    return phrase


def entities_from_task(task: dict) -> list[str]:
    """The entities to keep of one checklist task: its ``preserved_entities`` if it has them, else the phrases of
    its Semantic Preservation questions (``entity_from_question``)."""
    given = task.get("preserved_entities")
    if isinstance(given, list):
        return _dedupe([_phrase(e) for e in given])
    found = []
    for group in task.get("evaluation_groups") or []:
        for q in group.get("questions") or []:
            if q.get("dimension") == "Semantic Preservation":
                found.append(entity_from_question(str(q.get("question") or "")))
    return _dedupe([p for p in found if p])


def entities_from_cache(entities_dir: str | Path, case_id: Any) -> list[str]:
    """``preserved_entities`` of ``{entities_dir}/{case_id}/metadata.json`` (the official stage1 cache); [] when the
    file is absent or the task was skipped there. A case id that leads out of ``entities_dir`` (``../x``, ``/x``, a
    link out) raises ``ValueError``: that case's error, never another folder's file read."""
    path = within(entities_dir, str(case_id), "metadata.json")
    if not path.exists():
        return []
    meta = json.loads(path.read_text(encoding="utf-8"))
    return _dedupe([_phrase(e) for e in meta.get("preserved_entities") or []])
