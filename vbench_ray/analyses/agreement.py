"""Agreement statistics shared by the papers' analyses: Cohen's kappa, Fleiss' kappa, percent agreement,
and CoVEBench's adaptive-tie human alignment (CoVEBench paper App. G.2).

* :func:`cohen_kappa`: two raters, nominal labels: ``(p_o - p_e) / (1 - p_e)`` with ``p_e`` from the two
  raters' own marginals.
* :func:`fleiss_kappa`: ``N`` items each rated by the same number ``n`` of raters into ``k`` categories,
  given as an ``(N, k)`` count table: ``P_i = (sum_j n_ij^2 - n) / (n (n - 1))``, ``P_bar`` their mean,
  ``p_j`` the share of all ratings in category ``j``, ``P_e = sum_j p_j^2``, kappa ``(P_bar - P_e) / (1 - P_e)``.
* :func:`adaptive_tau`: the tie threshold of App. G.2: if X% of human judgments are ties, tau is the X-th
  percentile (numpy's linear interpolation) of the metric's absolute score differences over the compared pairs.
* :func:`preference_alignment`: App. G.2's agreement ``(N_correct + N_unclear-as-tie) / (N_correct +
  N_incorrect + N_unclear)``; a human tie counts as agreement when ``|s_A - s_B| <= tau``, a clear human
  preference when the metric prefers the same side (strictly; an exact metric tie against a clear human
  preference is a disagreement).

* :func:`krippendorff_alpha`: ``1 - D_o / D_e`` from the coincidence matrix of the pairable values (units
  with at least two ratings; any number of raters per unit, missing ratings allowed), with the nominal,
  ordinal or interval difference function (Krippendorff, "Computing Krippendorff's Alpha-Reliability", 2011).

Kappa is undefined (None) when chance agreement is 1 (every rating in one category); alpha when the expected
disagreement is 0.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


def percent_agreement(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    if len(a) != len(b):
        raise ValueError("both raters must rate the same items")
    if not a:
        return None
    return float(np.mean([x == y for x, y in zip(a, b)]))


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    if len(a) != len(b):
        raise ValueError("both raters must rate the same items")
    n = len(a)
    if n == 0:
        return None
    cats = sorted({*map(str, a), *map(str, b)})
    sa, sb = [str(x) for x in a], [str(x) for x in b]
    po = sum(x == y for x, y in zip(sa, sb)) / n
    pe = sum((sa.count(c) / n) * (sb.count(c) / n) for c in cats)
    if pe >= 1.0:
        return None
    return float((po - pe) / (1.0 - pe))


def fleiss_kappa(counts) -> float | None:
    """Fleiss' kappa of an ``(items, categories)`` table of rating counts (same raters per item)."""
    t = np.asarray(counts, dtype=float)
    if t.ndim != 2 or t.shape[0] == 0:
        raise ValueError("expected an (items, categories) count table")
    n = t.sum(axis=1)
    if not np.all(n == n[0]) or n[0] < 2:
        raise ValueError("every item needs the same number (>= 2) of ratings")
    n = n[0]
    p_i = ((t**2).sum(axis=1) - n) / (n * (n - 1))
    p_bar = p_i.mean()
    p_j = t.sum(axis=0) / t.sum()
    p_e = float((p_j**2).sum())
    if p_e >= 1.0:
        return None
    return float((p_bar - p_e) / (1.0 - p_e))


def rating_table(ratings: Sequence[Sequence[Any]]) -> tuple[np.ndarray, list[str]]:
    """``ratings[i]`` = the labels item ``i`` got (one per rater) -> ``(counts, categories)`` for Fleiss."""
    cats = sorted({str(x) for row in ratings for x in row})
    index = {c: j for j, c in enumerate(cats)}
    t = np.zeros((len(ratings), len(cats)))
    for i, row in enumerate(ratings):
        for x in row:
            t[i, index[str(x)]] += 1
    return t, cats


def krippendorff_alpha(units: Sequence[Sequence[Any]], level: str = "nominal") -> float | None:
    """Krippendorff's alpha; ``units[u]`` = the values unit ``u`` got (one per rater who rated it; None or NaN
    = not rated). ``level``: ``nominal`` (any labels), ``ordinal`` or ``interval`` (numbers)."""
    if level not in ("nominal", "ordinal", "interval"):
        raise ValueError(f"level must be nominal, ordinal or interval, got {level!r}")

    def rated(x: Any) -> bool:
        return x is not None and not (isinstance(x, float) and math.isnan(x))

    rows = [[x for x in u if rated(x)] for u in units]
    rows = [u for u in rows if len(u) >= 2]  # only pairable values count
    if not rows:
        return None
    if level == "nominal":
        values = sorted({str(x) for u in rows for x in u})
        rows = [[str(x) for x in u] for u in rows]
    else:
        values = sorted({float(x) for u in rows for x in u})
        rows = [[float(x) for x in u] for u in rows]
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    o = np.zeros((k, k))  # coincidence matrix
    for u in rows:
        m = len(u)
        counts = np.zeros(k)
        for x in u:
            counts[index[x]] += 1
        o += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if level == "nominal":
        delta = 1.0 - np.eye(k)
    elif level == "interval":
        v = np.asarray(values)
        delta = (v[:, None] - v[None, :]) ** 2
    else:  # ordinal: (sum of the marginals from c to k, minus half of the two ends) squared
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        delta = np.zeros((k, k))
        for c in range(k):
            for d in range(k):
                lo, hi = min(c, d), max(c, d)
                delta[c, d] = (cum[hi + 1] - cum[lo] - (n_c[c] + n_c[d]) / 2.0) ** 2
    d_o = float((o * delta).sum() / n)
    d_e = float((np.outer(n_c, n_c) * delta).sum() / (n * (n - 1)))
    if d_e <= 0.0:
        return None
    return float(1.0 - d_o / d_e)


def adaptive_tau(abs_diffs: Sequence[float], tie_share: float) -> float | None:
    """App. G.2's tie threshold: the ``100 * tie_share``-th percentile of the absolute score differences."""
    d = np.abs(np.asarray(abs_diffs, dtype=float))
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None
    return float(np.percentile(d, 100.0 * tie_share))


def preference_alignment(
    score_a: Sequence[float], score_b: Sequence[float], human: Sequence[str], higher_is_better: bool = True
) -> dict:
    """Agreement of a metric's pairwise preferences with humans' (``human[i]`` in ``A``, ``B``, ``tie``)."""
    a = np.asarray(score_a, dtype=float)
    b = np.asarray(score_b, dtype=float)
    h = [str(x).strip().lower() for x in human]
    if not (len(a) == len(b) == len(h)):
        raise ValueError("scores and human judgments must be paired")
    bad = sorted({x for x in h if x not in ("a", "b", "tie")})
    if bad:
        raise ValueError(f"human preferences must be A, B or tie, got {bad}")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b, h = a[keep], b[keep], [x for x, k in zip(h, keep) if k]
    n = len(h)
    out = {
        "n": n,
        "n_dropped": int((~keep).sum()),
        "tie_share": None,
        "tau": None,
        "n_correct": 0,
        "n_incorrect": 0,
        "n_unclear": 0,
        "n_unclear_as_tie": 0,
        "agreement": None,
    }
    if n == 0:
        return out
    ties = sum(x == "tie" for x in h)
    out["tie_share"] = ties / n
    diff = a - b if higher_is_better else b - a  # > 0: the metric prefers A
    tau = adaptive_tau(np.abs(diff), ties / n)
    out["tau"] = tau
    for d, x in zip(diff, h):
        if x == "tie":
            out["n_unclear"] += 1
            out["n_unclear_as_tie"] += int(abs(d) <= tau)
        elif (x == "a" and d > 0) or (x == "b" and d < 0):
            out["n_correct"] += 1
        else:
            out["n_incorrect"] += 1
    out["agreement"] = (out["n_correct"] + out["n_unclear_as_tie"]) / n
    return out
