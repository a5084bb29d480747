"""Statistics for summaries: point estimates with 95% percentile-bootstrap CIs (fixed seed).

The reviewers of CoVEBench asked for confidence intervals (the paper's public review); every headline number in
``summary.json`` therefore carries ``value``, ``ci95`` and ``n``.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np


def finite(values: Iterable) -> np.ndarray:
    """The finite floats among ``values`` (None and NaN are dropped)."""
    out = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return np.asarray([v for v in out if math.isfinite(v)], dtype=float)


def bootstrap_ci(
    values: np.ndarray, seed: int = 0, n_resamples: int = 1000, confidence: float = 0.95
) -> list[float] | None:
    """Percentile bootstrap CI of the mean (scipy.stats.bootstrap). ``None`` with fewer than 2 values."""
    from scipy.stats import bootstrap

    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return None
    if np.all(values == values[0]):  # degenerate: every resample has the same mean
        return [float(values[0]), float(values[0])]
    res = bootstrap(
        (values,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
        vectorized=True,
    )
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def describe(
    values: Iterable, seed: int = 0, n_resamples: int = 1000, confidence: float = 0.95, scale: float = 1.0
) -> dict:
    """``{"value": mean, "ci95": [lo, hi] | None, "n": count}`` over the finite values, times ``scale``."""
    arr = finite(values)
    if arr.size == 0:
        return {"value": None, "ci95": None, "n": 0}
    ci = bootstrap_ci(arr, seed=seed, n_resamples=n_resamples, confidence=confidence)
    return {
        "value": float(arr.mean()) * scale,
        "ci95": [c * scale for c in ci] if ci is not None else None,
        "n": int(arr.size),
    }


def ratio_ci(
    numerators, denominators, seed: int = 0, n_resamples: int = 1000, confidence: float = 0.95
) -> list[float] | None:
    """Percentile bootstrap CI of a pooled ratio ``sum(num) / sum(den)``, resampling clusters (cases).

    Pooled accuracies (all questions of a run) are ratios over cases whose questions are correlated;
    resampling whole cases keeps that structure.
    """
    from scipy.stats import bootstrap

    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.size < 2:
        return None
    ratios = num / np.where(den == 0, np.nan, den)
    if np.allclose(ratios, ratios[0]):
        value = float(num.sum() / den.sum())
        return [value, value]
    res = bootstrap(
        (num, den),
        lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]
