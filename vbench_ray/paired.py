"""Paired statistics across runs: what a leaderboard needs beyond each run's own bootstrap CI.

Every function here works on *paired* data: two models scored on the same cases (or the same checklist
questions). A metric's value on a set of cases is a pooled ratio ``sum(num) / sum(den)`` over per-case
numerators and denominators; a plain mean is the case ``den = 1`` (objective metrics, ``per_task``
aggregation), a pooled accuracy has ``num`` = points and ``den`` = questions per case. Resampling and
swapping always move whole cases, because the questions of one case are not independent.

* :func:`paired_bootstrap` - percentile bootstrap CI of the difference A - B, resampling shared cases
  with replacement (one ``numpy.random.default_rng(seed)`` draw of an ``(R, n)`` index matrix).
* :func:`paired_permutation` - two-sided paired permutation test: under H0 the labels A/B of each case
  are exchangeable, so each case's pair is swapped with probability 1/2 (for plain means: a sign flip of
  the per-case difference). Exact over all ``2**n`` swaps when that is at most ``n_resamples``, else
  Monte Carlo with the ``(1 + hits) / (1 + R)`` correction. A model against itself gives p = 1.
* :func:`mcnemar` - per-question correct/incorrect, discordant counts b (A right, B wrong) and c:
  exact two-sided binomial p ``min(1, 2 * P(X <= min(b, c)))`` with ``X ~ Bin(b + c, 1/2)``, and the
  chi-square statistic with continuity correction ``(|b - c| - 1)^2 / (b + c)`` (1 dof); ``p`` is the
  exact one when ``b + c < 25``, else the chi-square one. Questions of a case are correlated, so
  McNemar's p-values are optimistic; the case-level permutation test is the primary test.
* :func:`holm` - Holm's step-down adjustment of a family of p-values.
* :func:`bootstrap_ranks` - rank of each model (1 = best) and a percentile interval of its rank over
  bootstrap resamples of the cases all models share.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

EXACT_MCNEMAR_BELOW = 25  # discordant pairs: below this the exact binomial p is the reported one


def _arrays(num, den) -> tuple[np.ndarray, np.ndarray]:
    num = np.asarray(num, dtype=float)
    den = np.ones_like(num) if den is None else np.asarray(den, dtype=float)
    if num.shape != den.shape or num.ndim != 1:
        raise ValueError(f"num and den must be 1-d arrays of one length, got {num.shape} and {den.shape}")
    return num, den


def pooled(num, den=None) -> float | None:
    """``sum(num) / sum(den)``; None when the denominator is 0."""
    num, den = _arrays(num, den)
    total = den.sum()
    return float(num.sum() / total) if total else None


def _resampled_values(num: np.ndarray, den: np.ndarray, idx: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return num[idx].sum(axis=1) / den[idx].sum(axis=1)


def paired_bootstrap(
    num_a, num_b, den_a=None, den_b=None, seed: int = 0, n_resamples: int = 1000, confidence: float = 0.95
) -> dict:
    """``{"diff", "ci95", "n"}``: A - B on the paired cases with a percentile bootstrap CI.

    The i-th entries of the A and B arrays are the same case. ``ci95`` is None with fewer than 2 cases.
    """
    num_a, den_a = _arrays(num_a, den_a)
    num_b, den_b = _arrays(num_b, den_b)
    if num_a.shape != num_b.shape:
        raise ValueError("A and B must hold the same cases")
    n = num_a.size
    a, b = pooled(num_a, den_a), pooled(num_b, den_b)
    out = {"diff": None if a is None or b is None else a - b, "ci95": None, "n": int(n)}
    if n < 2 or out["diff"] is None:
        return out
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    diffs = _resampled_values(num_a, den_a, idx) - _resampled_values(num_b, den_b, idx)
    diffs = diffs[np.isfinite(diffs)]
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.percentile(diffs, [100 * alpha, 100 * (1 - alpha)])
    out["ci95"] = [float(lo), float(hi)]
    return out


def paired_permutation(num_a, num_b, den_a=None, den_b=None, seed: int = 0, n_resamples: int = 10000) -> dict:
    """``{"stat", "p", "exact", "n"}``: two-sided paired permutation (swap / sign-flip) test of A - B."""
    num_a, den_a = _arrays(num_a, den_a)
    num_b, den_b = _arrays(num_b, den_b)
    n = num_a.size
    if n == 0:
        return {"stat": None, "p": None, "exact": True, "n": 0}

    def stat(swap: np.ndarray) -> np.ndarray:  # swap: (R, n) booleans, True = the case's labels exchanged
        na = np.where(swap, num_b, num_a).sum(axis=1)
        da = np.where(swap, den_b, den_a).sum(axis=1)
        nb = np.where(swap, num_a, num_b).sum(axis=1)
        db = np.where(swap, den_a, den_b).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return na / da - nb / db

    observed = float(stat(np.zeros((1, n), dtype=bool))[0])
    tol = 1e-12 * max(1.0, abs(observed))
    if 2**n <= n_resamples:
        swaps = np.array(list(itertools.product([False, True], repeat=n)), dtype=bool)
        null = stat(swaps)
        p = float(np.mean(np.abs(null) >= abs(observed) - tol))
        exact = True
    else:
        swaps = np.random.default_rng(seed).random((n_resamples, n)) < 0.5
        null = stat(swaps)
        p = float((1 + np.sum(np.abs(null) >= abs(observed) - tol)) / (1 + n_resamples))
        exact = False
    return {"stat": observed, "p": min(1.0, p), "exact": exact, "n": int(n)}


def mcnemar(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> dict:
    """McNemar's test on paired binary outcomes (see the module docstring)."""
    from scipy.stats import binom, chi2

    a = np.asarray(correct_a, dtype=bool)
    b_ = np.asarray(correct_b, dtype=bool)
    if a.shape != b_.shape:
        raise ValueError("A and B must hold the same questions")
    b = int(np.sum(a & ~b_))
    c = int(np.sum(~a & b_))
    n_disc = b + c
    out = {
        "n": int(a.size),
        "b": b,
        "c": c,
        "n_discordant": n_disc,
        "p_exact": 1.0,
        "chi2": 0.0,
        "p_chi2": 1.0,
        "p": 1.0,
        "method": "exact",
    }
    if n_disc == 0:
        return out
    out["p_exact"] = float(min(1.0, 2.0 * binom.cdf(min(b, c), n_disc, 0.5)))
    out["chi2"] = float((abs(b - c) - 1) ** 2 / n_disc) if abs(b - c) >= 1 else 0.0
    out["p_chi2"] = float(chi2.sf(out["chi2"], 1))
    if n_disc < EXACT_MCNEMAR_BELOW:
        out["p"] = out["p_exact"]
    else:
        out["p"], out["method"] = out["p_chi2"], "chi2-cc"
    return out


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in the input's order (None entries stay None, not counted)."""
    present = [(i, float(p)) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    m = len(present)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for k, (i, p) in enumerate(sorted(present, key=lambda t: t[1])):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out


def rank_values(values: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """Competition ranks along the last axis (1 = best; tied models share the better rank)."""
    from scipy.stats import rankdata

    v = np.asarray(values, dtype=float)
    key = -v if higher_is_better else v
    key = np.where(np.isnan(key), np.inf, key)  # an undefined value ranks last
    return rankdata(key, method="min", axis=-1).astype(int)


def bootstrap_ranks(
    nums: np.ndarray,
    dens: np.ndarray | None = None,
    higher_is_better: bool = True,
    seed: int = 0,
    n_resamples: int = 1000,
    confidence: float = 0.95,
) -> dict:
    """Ranks of ``M`` models on ``n`` shared cases (``nums``: ``(M, n)``) and their bootstrap intervals.

    Returns ``{"rank": [M], "rank_ci95": [[lo, hi]] * M, "p_best": [M]}``: the rank on all cases, the
    ``(1 - confidence) / 2`` and ``1 - (1 - confidence) / 2`` percentiles (``lower``/``higher``, so integer
    ranks) of the rank over case resamples, and how often each model ranked first.
    """
    nums = np.asarray(nums, dtype=float)
    dens = np.ones_like(nums) if dens is None else np.asarray(dens, dtype=float)
    m, n = nums.shape
    with np.errstate(invalid="ignore", divide="ignore"):
        full = nums.sum(axis=1) / dens.sum(axis=1)
    out = {"rank": rank_values(full, higher_is_better).tolist(), "rank_ci95": [None] * m, "p_best": [None] * m}
    if n < 2:
        return out
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = nums[:, idx].sum(axis=2) / dens[:, idx].sum(axis=2)  # (M, R)
    ranks = rank_values(values.T, higher_is_better)  # (R, M)
    alpha = (1.0 - confidence) / 2.0
    lo = np.percentile(ranks, 100 * alpha, axis=0, method="lower")
    hi = np.percentile(ranks, 100 * (1 - alpha), axis=0, method="higher")
    out["rank_ci95"] = [[int(a), int(b)] for a, b in zip(lo, hi)]
    out["p_best"] = [float(x) for x in np.mean(ranks == 1, axis=0)]
    return out
