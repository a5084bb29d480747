"""Assembly verifier: chance-adjusted slot accuracy (paper §2.4 Eq. 1).

``score = (r - 1/k) / (1 - 1/k)``, floored at 0, where ``r`` is the fraction of storyboard slots whose
selected clip is the golden one and ``k`` the number of candidate clips per slot (1 golden + k-1
distractors; the paper's tasks have k=3, so the official ``adjusted = max(0, (acc - 1/3) * 1.5)``,
ANCHORS.md §4). When slots have different ``k``, ``1/k`` is the mean chance level over slots.

``solution.json`` maps slot ids to clip names: ``{"slots": {"S1": "c_ab12.mp4", ...}}``, a list
``{"slots": [{"slot": "S1", "clip": "c_ab12.mp4"}, ...]}``, or the bare mapping ``{"S1": ...}``. A slot
left out, or filled with a clip that is not one of its candidates, counts wrong; a missing or
malformed ``solution.json`` scores 0 with the reason in ``details``. The assembled ``solution.mp4`` is
a deliverable but not part of the score (the official verifier is per-slot accuracy, App. A.1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict, clip_index, clip_key, read_solution_json


def chance_adjusted(r: float, chance: float) -> float:
    """``max(0, (r - chance) / (1 - chance))``; with a single candidate per slot (chance 1), ``r``."""
    if chance >= 1.0:
        return float(r)
    return max(0.0, (r - chance) / (1.0 - chance))


def parse_selection(solution: Any) -> dict[str, Any]:
    """Slot id -> submitted clip name, from any of the accepted ``solution.json`` shapes."""
    slots = solution.get("slots", solution) if isinstance(solution, dict) else None
    if isinstance(slots, dict):
        return {str(k): v for k, v in slots.items()}
    if isinstance(slots, list):
        out = {}
        for i, entry in enumerate(slots):
            if not isinstance(entry, dict) or "slot" not in entry:
                raise InvalidSubmission(f"solution.json: slots[{i}] must be an object with 'slot' and 'clip'")
            out[str(entry["slot"])] = entry.get("clip", entry.get("candidate"))
        return out
    raise InvalidSubmission('solution.json: expected {"slots": {slot_id: clip_name}} (or a list of '
                            '{"slot", "clip"} objects)')


def verify(task, submission: Path, cfg: Any = None) -> Verdict:
    slots = task.truth["slots"]
    ks = [len(s["candidates"]) for s in slots]
    chance = sum(1.0 / k for k in ks) / len(ks)
    base = {"n_slots": len(slots), "k": ks[0] if len(set(ks)) == 1 else ks, "chance": chance,
            "solution_mp4": (Path(submission) / "solution.mp4").is_file()}
    try:
        selection = parse_selection(read_solution_json(Path(submission)))
    except InvalidSubmission as exc:
        return Verdict.zero(exc, **base)
    per_slot = {}
    for slot in slots:
        known = clip_index(list(slot["candidates"]))
        picked = clip_key(selection.get(slot["slot"]), known)
        per_slot[slot["slot"]] = {"picked": picked if picked else selection.get(slot["slot"]),
                                  "correct": picked == slot["golden"]}
    correct = sum(v["correct"] for v in per_slot.values())
    r = correct / len(slots)
    extra = sorted(set(selection) - {s["slot"] for s in slots})
    return Verdict(chance_adjusted(r, chance), "ok",
                   {**base, "accuracy": r, "n_correct": correct, "slots": per_slot,
                    **({"unknown_slots": extra[:20]} if extra else {})})
