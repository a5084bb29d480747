"""Sequencing verifier: ``score = (1 - ND) * LIS * ADJ`` (paper §2.6 Eq. 2, App. H.2 Eqs. 3-7).

With ``true_rank(c)`` / ``pred_rank(c)`` the zero-indexed positions of clip ``c`` in the ground-truth
and predicted orders, and ``n`` clips:

* ``ND = sum_c |pred_rank(c) - true_rank(c)| / floor(n^2 / 2)`` (Eq. 4; the denominator is the largest
  possible total displacement, reached by the reversed order);
* ``LIS = len(longest increasing subsequence of the true ranks read in predicted order) / n`` (Eq. 5);
* ``ADJ = #{i : (p_i, p_{i+1}) is consecutive, in that direction, in the ground truth} / (n - 1)`` (Eq. 6);
* ``strict = 1[predicted order == ground truth]`` (Eq. 7), reported beside the score.

``solution.json`` may be ``{"order": [...]}``, a bare list, or the official harness's
``{"segments": [{"source": "<clip number or name>", ...}, ...]}`` (issue 10 item 8). A missing or
malformed ``solution.json``, or one that is not a permutation of the provided clips, is
invalid and scores 0 (App. H.2 "Invalid Submissions"; the continuous score is computed only for valid
permutations), with the reason in ``details``.

``sequencing.score=official_weighted`` reports ``0.4 (1-ND) + 0.3 LIS + 0.3 ADJ`` instead (the
official runner's ``final``, ANCHORS.md §4); the paper's multiplicative score is the default and is
always in ``details`` as ``adjusted``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict, clip_index, clip_key, read_solution_json

SCORES = ("paper", "official_weighted")


@dataclass
class SequencingConfig:
    score: str = "paper"  # paper: (1-ND)*LIS*ADJ (Eq. 2) | official_weighted: 0.4(1-ND)+0.3LIS+0.3ADJ


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
    return {"n": n, "nd": nd, "lis": lis, "adj": adj, "strict": int(list(pred) == list(truth)),
            "adjusted": (1.0 - nd) * lis * adj, "weighted": 0.4 * (1.0 - nd) + 0.3 * lis + 0.3 * adj}


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


def _order_entries(solution: Any) -> list:
    """The submitted order, from any shape the paper's or the official harness's solution takes:
    ``{"order": [...]}``, a bare JSON list, or the official ``{"segments": [{"source": ...}, ...]}``
    (AgenticVBench verifier package, ``verifiers/sequencing``: one segment per slot, in output order)."""
    if isinstance(solution, dict) and "segments" in solution and "order" not in solution:
        segments = solution["segments"]
        if not isinstance(segments, list):
            raise InvalidSubmission("solution.json: segments is not a list")
        return [seg.get("source") if isinstance(seg, dict) else seg for seg in segments]
    order = solution.get("order") if isinstance(solution, dict) else solution
    if not isinstance(order, list):
        raise InvalidSubmission('solution.json: expected {"order": [clip names]}, {"segments": [{"source": ...}]} '
                                "or a JSON list of clip names")
    return [item.get("source") if isinstance(item, dict) else item for item in order]


def parse_order(solution: Any, clips: list[str]) -> list[str]:
    """The predicted order from ``solution.json`` (see ``_order_entries`` for the accepted shapes). An
    entry names a clip by file name, by name without extension, or by its clip number (``"6"`` or ``6``,
    as the official harness writes). Not a permutation of ``clips`` -> :class:`InvalidSubmission`."""
    order = _order_entries(solution)
    known = clip_index(clips)
    numbers = _clip_numbers(clips)
    mapped, unknown = [], []
    for item in order:
        key = clip_key(item if isinstance(item, str) else None, known)
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
        raise InvalidSubmission(f"solution.json: not a permutation of the {len(clips)} clips; "
                                f"missing {missing[:5]}", missing=missing[:20])
    return mapped


def verify(task, submission: Path, cfg: SequencingConfig | None = None) -> Verdict:
    cfg = cfg or SequencingConfig()
    truth = list(task.truth["order"])
    base = {"n_clips": len(truth), "solution_mp4": (Path(submission) / "solution.mp4").is_file()}
    try:
        order = parse_order(read_solution_json(Path(submission)), sorted(truth))
    except InvalidSubmission as exc:
        return Verdict.zero(exc, **base, strict=0)
    m = sequencing_metrics(order, truth)
    reward = m["adjusted"] if cfg.score == "paper" else m["weighted"]
    return Verdict(reward, "ok", {**base, **m, "score_formula": cfg.score, "predicted": order})
