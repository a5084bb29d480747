"""ViDiC-1K's checklist questions: each item's Similarities and Differences questions read as the official code
reads them (or strictly), their classes, and the join key of an item and a model's response.

Spec: ViDiC paper Table 2 (the seven classes), App. G.2 (the class names); official code NJU-LINK/ViDiC-1K b7aeefd
(``judge/judge.py`` ``process_object``) and 23d5004 (``utils/calculate.py``).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any

# Table 2's seven classes, in the paper's order of the G.3 framework.
CLASSES = ("Subject", "Style", "Background", "Camera", "Motion", "Position", "Playback Technique")
# The official checklist spells classes in lower case ("playback technique"); the paper's G.2 headings
# give the longer names. Keys are normalised with ``_norm_class``.
CLASS_ALIASES = {
    **{c.lower(): c for c in CLASSES},
    "camera work": "Camera",
    "subject motion": "Motion",
    "positional relationship": "Position",
    "playback": "Playback Technique",
}
# (checklist key, id tag, metric) per section
SECTIONS = (("Similarities", "sim", "Sim"), ("Differences", "diff", "Diff"))
SECTION_TAG = {s: t for s, t, _ in SECTIONS}
ANSWERS = ("yes", "no")


@dataclass(frozen=True)
class Question:
    section: str  # Similarities | Differences
    k: int  # position in its section's list, from 0
    cls: str  # canonical class (CLASSES), else the checklist's own (data.questions=official)
    question: str
    correct_answer: str  # as the checklist writes it (official; compared lower-cased) | yes / no (strict)

    @property
    def tag(self) -> str:
        return f"{SECTION_TAG[self.section]}{self.k}"


def _norm_class(value: str) -> str:
    return re.sub(r"[\s_\-]+", " ", value.strip().lower())


def canonical_class(value: Any) -> str | None:
    return CLASS_ALIASES.get(_norm_class(value)) if isinstance(value, str) else None


QUESTION_RULES = ("official", "strict")


def _official_class(q: dict) -> str:
    """The class a question is counted under: one of the seven (``canonical_class``), else the value as the
    official ``calculate.py`` keys it (``q.get("class", "unknown")``), as text."""
    if "class" not in q:
        return "unknown"
    return canonical_class(q["class"]) or str(q["class"])


def parse_questions(item: Any, where: str, rules: str = "official") -> tuple[list[Question], list[str]]:
    """The checklist questions of one item and the problems found, each naming its field
    (``checklist.json: item[3] (index=3).structured_analysis.Differences[1].class: ...``).

    ``rules=official`` (default) reads a question as NJU-LINK/ViDiC-1K does (b7aeefd ``judge/judge.py``
    ``process_object``: ``question.get("question", "")`` sent as it is; 23d5004 ``utils/calculate.py``:
    ``q.get("class", "unknown")``, ``q.get("correct_answer", "")`` compared lower-cased, not stripped): an
    unknown class is its own class (``"unknown"`` when absent), a gold answer other than yes/no (``""``,
    ``"np"``, as six questions of the official ``checklist_final.json`` have) is kept literally and matched
    literally. Only shapes on which the official scripts raise (item, ``structured_analysis``, a section or
    a question not of its type; a gold answer or a class that is not text / hashable) are problems.
    ``rules=strict``: also an unknown class, an empty question or a gold answer other than yes/no (then
    stripped and lower-cased), as the project read it before: the case is a load error, left out.
    """
    if rules not in QUESTION_RULES:
        raise ValueError(f"data.questions must be one of {QUESTION_RULES}, got {rules!r}")
    if not isinstance(item, dict):
        return [], [f"{where}: expected an object, got {type(item).__name__}"]
    analysis = item.get("structured_analysis")
    if not isinstance(analysis, dict):
        return [], [
            f"{where}.structured_analysis: expected an object with Similarities and Differences lists, "
            f"got {type(analysis).__name__}"
        ]
    questions, errors = [], []
    for section, _, _ in SECTIONS:
        entries = analysis.get(section, [])  # a missing section is an empty one (official code)
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            errors.append(f"{where}.structured_analysis.{section}: expected a list, got {type(entries).__name__}")
            continue
        for k, q in enumerate(entries):
            qw = f"{where}.structured_analysis.{section}[{k}]"
            if not isinstance(q, dict):
                errors.append(f"{qw}: expected an object, got {type(q).__name__}")
                continue
            question = _official_question(q, qw) if rules == "official" else _strict_question(q, qw)
            if isinstance(question, list):
                errors += question
                continue
            questions.append(Question(section, k, *question))
    return questions, errors


def _official_question(q: dict, qw: str) -> tuple[str, str, str] | list[str]:
    problems = []
    if isinstance(q.get("class"), (dict, list)):  # calculate.py's class dict cannot key it
        problems.append(f"{qw}.class: expected a class name, got {type(q['class']).__name__}")
    gold = q.get("correct_answer", "")
    if not isinstance(gold, str):  # calculate.py's .lower() raises on it
        problems.append(f"{qw}.correct_answer: expected text, got {gold!r}")
    if problems:
        return problems
    text = q.get("question", "")
    return _official_class(q), text if isinstance(text, str) else str(text), gold


def _strict_question(q: dict, qw: str) -> tuple[str, str, str] | list[str]:
    problems = []
    cls = canonical_class(q.get("class"))
    if cls is None:
        problems.append(
            f"{qw}.class: unknown class {q.get('class')!r} (expected one of {[c.lower() for c in CLASSES]})"
        )
    text = q.get("question")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{qw}.question: missing or empty")
    gold = q.get("correct_answer")
    if not isinstance(gold, str) or gold.strip().lower() not in ANSWERS:
        problems.append(f"{qw}.correct_answer: expected 'yes' or 'no', got {gold!r}")
    if problems:
        return problems
    return cls, text.strip(), gold.strip().lower()


def item_questions(case: dict, rules: str = "official") -> list[Question]:
    """The questions of a case row (empty when its annotations are unusable)."""
    try:
        item = json.loads(case.get("annotations") or "null")
    except json.JSONDecodeError:
        return []
    questions, errors = parse_questions(item, "", rules)
    return [] if errors else questions


def pair_key(video1: str, video2: str) -> tuple[str, str]:
    """The official join key of a checklist item and a response, with ``./`` and ``//`` normalised."""
    return posixpath.normpath(video1), posixpath.normpath(video2)
