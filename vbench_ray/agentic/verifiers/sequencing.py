"""Sequencing verifier: ``score = (1 - ND) * LIS * ADJ`` (paper §2.6 Eq. 2, App. H.2 Eqs. 3-7).

With ``true_rank(c)`` / ``pred_rank(c)`` the zero-indexed positions of clip ``c`` in the ground-truth
and predicted orders, and ``n`` clips:

* ``ND = sum_c |pred_rank(c) - true_rank(c)| / floor(n^2 / 2)`` (Eq. 4; the denominator is the largest
  possible total displacement, reached by the reversed order);
* ``LIS = len(longest increasing subsequence of the true ranks read in predicted order) / n`` (Eq. 5);
* ``ADJ = #{i : (p_i, p_{i+1}) is consecutive, in that direction, in the ground truth} / (n - 1)`` (Eq. 6);
* ``strict = 1[predicted order == ground truth]`` (Eq. 7), reported beside the score.

``solution.json`` may be ``{"order": [...]}``, a bare list, or the official harness's
``{"segments": [{"source": "<clip>", ...}, ...]}`` (what its agents write). A missing or malformed
``solution.json``, or one that is not a permutation of the provided clips, is invalid and scores 0 (App.
H.2 "Invalid Submissions"; the continuous score is computed only for valid permutations), with the reason
in ``details``. A missing ``solution.mp4`` (a required deliverable) scores 0 too, the order's metrics kept
in ``details``, as the task's own judge (PhiloLabs/agentic-vbench 4ed7ffc,
tasks/agentic_vbench_sequencing/agentic-vbench-sequencing-task1/steps/solve/tests/judge.py, ``score``).

``sequencing.video=frames`` (default, that judge): every slot's segment must show its clip in
``solution.mp4`` where it says, ``output`` in the video and ``source_range`` in the clip (the SSIM frame
check of :mod:`vbench_ray.agentic.verifiers.frame_check`, shared with assembly); a slot whose segment has
no such ranges (an ``{"order": [...]}`` answer has none), whose clip is not shown, or whose video is empty
or unreadable fails it. ``reward = honesty_factor * score``, ``honesty_factor`` the share of slots that
pass; it runs on every slot, right or misplaced. A slot's clip is the file the answer key names in
``inputs/clips/`` (the official key writes clip numbers, ``"3"``, and the judge opens ``"3.mp4"``: a key
entry that is not a file there gets ``.mp4`` appended). ``sequencing.video=exists``: ``solution.mp4`` need
only exist (the project's earlier reading; shapes without ranges then score by the order alone).

``sequencing.names=exact`` (default, official: that judge and AgentVBench 193db62
verifiers/sequencing/score.py compare ``str(source)`` with the answer key's entries as written, so a clip
given without its ``.mp4`` when the key has it scores 0); ``lenient`` also takes a name without extension,
a path, or the clip's number.

``sequencing.score=official_weighted`` reports ``0.4 (1-ND) + 0.3 LIS + 0.3 ADJ`` instead (the
official runner's ``final``, PhiloLabs/AgentVBench 193db62 ``verifiers/sequencing/score.py``); the paper's
multiplicative score is the default and is always in ``details`` as ``adjusted``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict, clip_index, clip_key, read_solution_json
from vbench_ray.agentic.verifiers.frame_check import check_shown

SCORES = ("paper", "official_weighted")
NAME_RULES = ("exact", "lenient")
VIDEO_CHECKS = ("frames", "exists")


@dataclass
class SequencingConfig:
    score: str = "paper"  # paper: (1-ND)*LIS*ADJ (Eq. 2) | official_weighted: 0.4(1-ND)+0.3LIS+0.3ADJ
    # exact: official, str(entry) must be a clip's name as the key writes it | lenient: stems, paths, clip numbers
    names: str = "exact"
    # frames: official, each slot's segment must show its clip in solution.mp4 (SSIM >= 0.95)
    # | exists: the file need only exist
    video: str = "frames"


def lis_length(seq: list[int]) -> int:
    """Length of the longest strictly increasing subsequence (patience sorting, O(n log n))."""
    tails: list[int] = []
    for x in seq:
        i = bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return len(tails)


def sequencing_metrics(pred: list[Any], truth: list[Any]) -> dict:
    """ND, LIS, ADJ, strict, the paper score and the official weighted composite for a valid permutation."""
    n = len(truth)
    if sorted(map(str, pred)) != sorted(map(str, truth)) or len(set(truth)) != n:
        raise ValueError("pred must be a permutation of truth")
    true_rank = {c: i for i, c in enumerate(truth)}
    q = [true_rank[c] for c in pred]
    if n == 1:
        nd, lis, adj = 0.0, 1.0, 1.0
    else:
        nd = sum(abs(i - r) for i, r in enumerate(q)) / (n * n // 2)
        lis = lis_length(q) / n
        adj = sum(1 for a, b in zip(q, q[1:]) if b == a + 1) / (n - 1)
    return {
        "n": n,
        "nd": nd,
        "lis": lis,
        "adj": adj,
        "strict": int(list(pred) == list(truth)),
        "adjusted": (1.0 - nd) * lis * adj,
        "weighted": 0.4 * (1.0 - nd) + 0.3 * lis + 0.3 * adj,
    }


def _clip_numbers(clips: list[str]) -> dict[int, str]:
    """Clip number -> clip name, from the last run of digits in each clip's stem (``clip_06.mp4`` -> 6),
    for the numbers that name exactly one clip."""
    found: dict[int, list[str]] = {}
    for c in clips:
        stem = c.rsplit(".", 1)[0] if "." in c else c
        digits = re.findall(r"\d+", stem)
        if digits:
            found.setdefault(int(digits[-1]), []).append(c)
    return {k: v[0] for k, v in found.items() if len(v) == 1}


def _raw_entries(solution: Any) -> list:
    """The submitted slots as written, from any shape the paper's or the official harness's solution takes:
    ``{"order": [...]}``, a bare JSON list, or the official ``{"segments": [{"source": ...}, ...]}``
    (AgenticVBench verifier package, ``verifiers/sequencing``: one segment per slot, in output order)."""
    if isinstance(solution, dict) and "segments" in solution and "order" not in solution:
        segments = solution["segments"]
        if not isinstance(segments, list):
            raise InvalidSubmission("solution.json: segments is not a list")
        return segments
    order = solution.get("order") if isinstance(solution, dict) else solution
    if not isinstance(order, list):
        raise InvalidSubmission(
            'solution.json: expected {"order": [clip names]}, {"segments": [{"source": ...}]} '
            "or a JSON list of clip names"
        )
    return order


def _order_entries(solution: Any) -> list:
    """The submitted clip of each slot (a segment's ``source``, or the entry itself)."""
    return [item.get("source") if isinstance(item, dict) else item for item in _raw_entries(solution)]


def parse_order(solution: Any, clips: list[str], names: str = "exact") -> list[str]:
    """The predicted order from ``solution.json`` (see ``_order_entries`` for the accepted shapes).
    ``names=exact``: an entry's ``str()`` must be a clip's name exactly (official); ``lenient``: also by
    name without extension or by its clip number (``"6"`` or ``6``). Not a permutation of ``clips`` ->
    :class:`InvalidSubmission`."""
    order = _order_entries(solution)
    if names == "exact":
        order = ["" if item is None else str(item) for item in order]
    known = {c: c for c in clips} if names == "exact" else clip_index(clips)
    numbers = {} if names == "exact" else _clip_numbers(clips)
    mapped, unknown = [], []
    for item in order:
        key = known.get(item) if names == "exact" else clip_key(item if isinstance(item, str) else None, known)
        if key is None and not isinstance(item, bool) and isinstance(item, (int, str)) and str(item).strip().isdigit():
            key = numbers.get(int(str(item).strip()))
        (mapped if key else unknown).append(key or item)
    if unknown:
        raise InvalidSubmission(f"solution.json: unknown clip name(s) {unknown[:5]}", unknown=unknown[:20])
    dup = sorted({c for c in mapped if mapped.count(c) > 1})
    if dup:
        raise InvalidSubmission(f"solution.json: clip(s) listed more than once {dup[:5]}", duplicates=dup[:20])
    missing = [c for c in clips if c not in mapped]
    if missing:
        raise InvalidSubmission(
            f"solution.json: not a permutation of the {len(clips)} clips; missing {missing[:5]}", missing=missing[:20]
        )
    return mapped


def clip_file(task, name: str) -> Path | None:
    """The clip a key entry names: ``inputs/clips/<name>``, else ``<name>.mp4`` there (the official key's
    clip numbers); None if neither is a file."""
    clips = task.input("clips")
    for candidate in (name, f"{name}.mp4"):
        path = clips / candidate
        if path.is_file():
            return path
    return None


def shown_slots(task, submission: Path, order: list[str], truth: list[str], entries: list) -> list[dict]:
    """Per slot: whether ``solution.mp4`` shows its clip where its segment says (the official judge's
    ``_check_honesty`` on every slot); an entry without ranges fails."""
    per_slot = []
    for i, name in enumerate(order):
        slot: dict[str, Any] = {"slot": i, "pred": name, "expected": truth[i], "match": name == truth[i]}
        path = clip_file(task, name)
        if path is None:
            slot.update(honest=False, honesty_reason=f"missing source clip {name}")
        else:
            segment = entries[i] if i < len(entries) and isinstance(entries[i], dict) else {}
            honest, samples = check_shown(submission / "solution.mp4", path, segment)
            slot.update(honest=honest, samples=samples)
        per_slot.append(slot)
    return per_slot


def verify(task, submission: Path, cfg: SequencingConfig | None = None) -> Verdict:
    cfg = cfg or SequencingConfig()
    if cfg.names not in NAME_RULES:
        raise ValueError(f"sequencing.names must be one of {NAME_RULES}, got {cfg.names!r}")
    if cfg.video not in VIDEO_CHECKS:
        raise ValueError(f"sequencing.video must be one of {VIDEO_CHECKS}, got {cfg.video!r}")
    submission = Path(submission)
    truth = list(task.truth["order"])
    base = {"n_clips": len(truth), "solution_mp4": (submission / "solution.mp4").is_file(), "video_check": cfg.video}
    try:
        solution = read_solution_json(submission)
        order = parse_order(solution, sorted(truth), cfg.names)
    except InvalidSubmission as exc:
        return Verdict.zero(exc, **base, strict=0)
    m = sequencing_metrics(order, truth)
    if not base["solution_mp4"]:  # a required deliverable: no number for an order without its video
        return Verdict.zero(
            InvalidSubmission("solution.mp4 is missing from the submission", status="missing"),
            **base,
            **m,
            score_formula=cfg.score,
            predicted=order,
            honesty_factor=0.0,
        )
    ordering = m["adjusted"] if cfg.score == "paper" else m["weighted"]
    details = {**base, **m, "score_formula": cfg.score, "predicted": order, "ordering": ordering}
    if cfg.video == "exists":
        return Verdict(ordering, "ok", details)
    per_slot = shown_slots(task, submission, order, truth, _raw_entries(solution))
    n_honest = sum(bool(s["honest"]) for s in per_slot)
    factor = n_honest / len(truth)
    details.update(n_honest=n_honest, honesty_factor=factor, per_slot=per_slot)
    if n_honest < len(truth):
        failed = next(s for s in per_slot if not s["honest"])
        why = failed.get("honesty_reason") or next(
            (x.get("reason") for x in failed.get("samples", []) if x.get("reason")),
            "its frames do not match the clip (SSIM < 0.95)",
        )
        details["reason"] = (
            f"solution.mp4 shows {n_honest} of {len(truth)} slots as declared; slot "
            f"{failed['slot']} ({failed['pred']}): {why}"
        )
    return Verdict(factor * ordering, "ok", details)
