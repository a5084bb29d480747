"""Assembly verifier: chance-adjusted slot accuracy (paper §2.4 Eq. 1), as the task's own judge scores it.

``assembly.scheme=official`` (default): the judge the official harness runs for every assembly task,
PhiloLabs/agentic-vbench at commit 4ed7ffc, ``tasks/agentic_vbench_assembly/agentic-vbench-assembly-task1/
steps/solve/tests/judge.py`` (the same judge in every assembly task, only ``CORRECT_PICKS`` changes),
reimplemented:

* ``solution.json`` is ``{"segments": [{"source": "<clip>", "output": [t0, t1], "source_range": [s0, s1]},
  ...]}``, one segment per storyboard slot, in slot order; a clip name gets ``.mp4`` appended when it
  lacks it and must then equal the golden clip's file name. Not a list of segments ("segments not a
  list"; a ``slots``-only answer is one) or a number of segments other than the slots' ("slot count
  mismatch") scores 0 with the reason.
* A correctly picked slot counts only when ``solution.mp4`` shows that clip where the segment says
  (:func:`vbench_ray.agentic.verifiers.frame_check.check_shown`, shared with the sequencing judge): at
  1/4, 2/4 and 3/4 of its ``output`` range and the matching points of its ``source_range``, five frames
  read from 0.1 s before each point in both videos (longest side at most 360 px), the best pairwise
  grey SSIM (11x11 Gaussian window, sigma 1.5) must reach 0.95. No ``solution.mp4``: 0.
* ``reward = max(0, (p - 1/3) / (1 - 1/3))``, ``p`` the share of slots right and shown; chance is a fixed
  1/3 whatever the number of candidates.

``assembly.scheme=slots``: the project's own reading (paper §2.4 Eq. 1 with the task's ``k``): plain
per-slot accuracy, ``solution.mp4`` not checked, chance ``1/k`` (the mean over slots when ``k`` differs).
``solution.json`` is ``{"slots": {"S1": "c_ab12.mp4", ...}}``, a list ``{"slots": [{"slot", "clip"}]}``,
the bare mapping, or the official ``segments`` list (read in slot order); names match with or without
extension. A slot left out or filled with a clip that is not one of its candidates counts wrong; an
answer naming none of the storyboard's slots scores 0 with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict, clip_index, clip_key, read_solution_json
from vbench_ray.agentic.verifiers.frame_check import check_shown

SCHEMES = ("official", "slots")
CHANCE = 1.0 / 3.0  # judge.py CHANCE_LEVEL


@dataclass
class AssemblyConfig:
    scheme: str = "official"  # official: the task judge (segments, mp4 check, chance 1/3) | slots: plain accuracy


def chance_adjusted(r: float, chance: float) -> float:
    """``max(0, (r - chance) / (1 - chance))``; with a single candidate per slot (chance 1), ``r``."""
    if chance >= 1.0:
        return float(r)
    return max(0.0, (r - chance) / (1.0 - chance))


def parse_selection(solution: Any, slot_ids: list[str] | None = None) -> dict[str, Any]:
    """Slot id -> submitted clip name, from any of the shapes ``assembly.scheme=slots`` reads."""
    if isinstance(solution, dict) and isinstance(solution.get("segments"), list) and "slots" not in solution:
        segs = solution["segments"]
        if slot_ids is None or not all(isinstance(s, dict) for s in segs):
            raise InvalidSubmission("solution.json: segments must be objects with a 'source'")
        return {sid: seg.get("source") for sid, seg in zip(slot_ids, segs)}
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
    raise InvalidSubmission(
        'solution.json: expected {"slots": {slot_id: clip_name}} (or a list of '
        '{"slot", "clip"} objects, or {"segments": [...]})'
    )


def verify(task, submission: Path, cfg: AssemblyConfig | None = None) -> Verdict:
    cfg = cfg or AssemblyConfig()
    if cfg.scheme not in SCHEMES:
        raise ValueError(f"assembly.scheme={cfg.scheme!r}: expected one of {list(SCHEMES)}")
    return (
        _verify_official(task, Path(submission)) if cfg.scheme == "official" else _verify_slots(task, Path(submission))
    )


def _verify_slots(task, submission: Path) -> Verdict:
    slots = task.truth["slots"]
    ks = [len(s["candidates"]) for s in slots]
    chance = sum(1.0 / k for k in ks) / len(ks)
    base = {
        "scheme": "slots",
        "n_slots": len(slots),
        "k": ks[0] if len(set(ks)) == 1 else ks,
        "chance": chance,
        "solution_mp4": (submission / "solution.mp4").is_file(),
    }
    ids = [s["slot"] for s in slots]
    try:
        selection = parse_selection(read_solution_json(submission), ids)
        if not set(selection) & set(ids):
            raise InvalidSubmission(
                f"solution.json names none of the storyboard's slots {ids[:8]} (got {sorted(map(str, selection))[:8]})"
            )
    except InvalidSubmission as exc:
        return Verdict.zero(exc, **base)
    per_slot = {}
    for slot in slots:
        known = clip_index(list(slot["candidates"]))
        picked = clip_key(selection.get(slot["slot"]), known)
        per_slot[slot["slot"]] = {
            "picked": picked if picked else selection.get(slot["slot"]),
            "correct": picked == slot["golden"],
        }
    correct = sum(v["correct"] for v in per_slot.values())
    r = correct / len(slots)
    extra = sorted(set(selection) - set(ids))
    return Verdict(
        chance_adjusted(r, chance),
        "ok",
        {
            **base,
            "accuracy": r,
            "n_correct": correct,
            "slots": per_slot,
            **({"unknown_slots": extra[:20]} if extra else {}),
        },
    )


# ----------------------------------------------------------------------------- the task judge


def _normalize(source: Any) -> str:
    s = str(source).strip()
    return s if s.endswith(".mp4") else f"{s}.mp4"


def _verify_official(task, submission: Path) -> Verdict:
    golden = [s["golden"] for s in task.truth["slots"]]
    n = len(golden)
    base: dict[str, Any] = {"scheme": "official", "n_slots": n, "chance": CHANCE, "correct": golden}
    try:
        sol = read_solution_json(submission)
        segments = sol.get("segments") if isinstance(sol, dict) else None
        if not isinstance(segments, list):
            raise InvalidSubmission("solution.json: segments not a list")
        bad = [i for i, seg in enumerate(segments) if not isinstance(seg, dict)]
        if bad:
            raise InvalidSubmission(f"solution.json: segments[{bad[0]}] is not an object")
        pred = [_normalize(seg.get("source", "")) for seg in segments]
        base["pred"] = pred
        if len(pred) != n:
            raise InvalidSubmission(f"slot count mismatch: expected {n}, got {len(pred)}")
        base["n_correct"] = sum(p == g for p, g in zip(pred, golden))
        if not (submission / "solution.mp4").is_file():
            raise InvalidSubmission("solution.mp4 is missing from the submission", status="missing")
    except InvalidSubmission as exc:
        return Verdict.zero(exc, **base, n_honest_correct=0)
    per_slot, honest = [], 0
    for i, (p, g) in enumerate(zip(pred, golden)):
        slot: dict[str, Any] = {"slot": task.truth["slots"][i]["slot"], "pred": p, "expected": g, "match": p == g}
        if p == g:
            clip = task.input("clips") / p
            if not clip.is_file():
                slot.update(honest=False, honesty_reason=f"missing source clip {p}")
            else:
                ok, samples = check_shown(submission / "solution.mp4", clip, segments[i])
                slot.update(honest=ok, samples=samples)
                honest += ok
        per_slot.append(slot)
    p_rate = honest / n
    return Verdict(
        max(0.0, (p_rate - CHANCE) / (1.0 - CHANCE)),
        "ok",
        {**base, "n_honest_correct": honest, "pass_rate": p_rate, "per_slot": per_slot},
    )
