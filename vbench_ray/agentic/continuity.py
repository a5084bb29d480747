"""Visual continuity between clips, and the cheapest order of clips by it (the Sequencing baseline's heuristic,
also used by the Repair baseline to re-order cuts that break continuity).

The cost of cutting clip i to clip j is the distance between i's last frame, extrapolated one step, and j's first
frame; the order is the cheapest path, exact (Held-Karp) for n <= 12 clips, best-of-greedy plus relocation moves
above.
"""

from __future__ import annotations

import itertools

import numpy as np


def small_frame(frame: np.ndarray, width: int = 48) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    return cv2.resize(frame, (width, max(4, round(h * width / w))), interpolation=cv2.INTER_AREA).astype(np.float32)


def continuity_costs(clips: list[np.ndarray]) -> np.ndarray:
    """``cost[i, j]``: mean absolute difference between clip i's last frame extrapolated one step and
    clip j's first frame (downscaled). The diagonal is infinite."""
    n = len(clips)
    heads = [small_frame(c[0]) for c in clips]
    tails = []
    for c in clips:
        last = small_frame(c[-1])
        prev = small_frame(c[-2]) if len(c) > 1 else last
        tails.append(np.clip(2 * last - prev, 0, 255))
    cost = np.full((n, n), np.inf)
    for i, j in itertools.permutations(range(n), 2):
        cost[i, j] = float(np.mean(np.abs(tails[i] - heads[j])))
    return cost


def _path_cost(path: list[int], cost: np.ndarray) -> float:
    return float(sum(cost[a, b] for a, b in zip(path, path[1:])))


def best_path(cost: np.ndarray, exact_max: int = 12) -> list[int]:
    """The order visiting every clip once with the least total cut cost (open path, any start)."""
    n = len(cost)
    if n <= 1:
        return list(range(n))
    if n <= exact_max:
        return _held_karp(cost)
    best = min((_greedy(cost, s) for s in range(n)), key=lambda p: _path_cost(p, cost))
    return _relocate(best, cost)


def _held_karp(cost: np.ndarray) -> list[int]:
    n = len(cost)
    full = 1 << n
    dp = np.full((full, n), np.inf)
    parent = np.full((full, n), -1, dtype=np.int64)
    for j in range(n):
        dp[1 << j, j] = 0.0
    c = np.where(np.isfinite(cost), cost, 1e18)
    for mask in range(1, full):
        row = dp[mask]
        if not np.isfinite(row).any():
            continue
        # extend every path ending at i (in mask) by every j not in mask
        cand = row[:, None] + c  # (i, j)
        for j in range(n):
            if mask & (1 << j):
                continue
            i = int(np.argmin(cand[:, j]))
            val = cand[i, j]
            nm = mask | (1 << j)
            if val < dp[nm, j]:
                dp[nm, j] = val
                parent[nm, j] = i
    mask, j = full - 1, int(np.argmin(dp[full - 1]))
    path = []
    while j != -1:
        path.append(j)
        i = int(parent[mask, j])
        mask ^= 1 << j
        j = i
    return path[::-1]


def _greedy(cost: np.ndarray, start: int) -> list[int]:
    path, left = [start], set(range(len(cost))) - {start}
    while left:
        nxt = min(left, key=lambda j: cost[path[-1], j])
        path.append(nxt)
        left.remove(nxt)
    return path


def _relocate(path: list[int], cost: np.ndarray) -> list[int]:
    """Move single clips or runs of up to 3 to their best place while that lowers the cost."""
    best, best_c = list(path), _path_cost(path, cost)
    improved = True
    while improved:
        improved = False
        for length in (1, 2, 3):
            for i in range(len(best) - length + 1):
                seg, rest = best[i : i + length], best[:i] + best[i + length :]
                for k in range(len(rest) + 1):
                    cand = rest[:k] + seg + rest[k:]
                    cc = _path_cost(cand, cost)
                    if cc < best_c - 1e-9:
                        best, best_c, improved = cand, cc, True
    return best
