"""Agreement between judges and human annotators (NRVBench paper, "Beyond Rigid", §5 "Human Evaluation",
Table 4/6, App. B.2, App. F.2).

B.2's protocol, which this module follows:

* Human answers are mapped to the NRVE-Acc scoring space: instruction MCQs to 1.0 / 0.5 / 0.0 (correct,
  partially correct or ambiguous, incorrect), 1-5 physics and temporal ratings normalised like the judge's
  (``score.normalize``).
* Scores are averaged across annotators per edited sample first; the sample's NRVE-Acc is then Eq. 1 on
  those averages; method-level human scores are the mean over the evaluated samples.
* Agreement is rank correlation across methods: Spearman's rho and Kendall's tau
  (``scipy.stats.spearmanr`` / ``kendalltau``, tau-b) between each judge's method scores and the humans'.
  "Mean judge" (Table 6) is the mean of the judges' rho and of their tau (0.834 = mean of 0.658, 0.771,
  0.886, 0.914, 0.943).
* The judges' method scores are computed on the samples the humans evaluated (the stratified subset of
  B.2), matched on ``(method, instance id)``.

Per-dimension agreement (§5 "per-dimension agreement", App. F.2): the same rank correlations for each of
``S_instr``, ``S_phy``, ``S_temp`` and ``NRVE_Acc``, the mean signed deviation judge - human over methods
(Figure 5/12, ``> 0`` = the judge overestimates), and, per category, the category-level means of both.

Inter-annotator agreement (App. F, Table 5), when some edited sample has scores from two or more annotators
(:func:`inter_annotator`): instruction alignment (1 / 0.5 / 0 as categories) by Fleiss' kappa over the
samples rated by the most common number of annotators (Fleiss needs the same count per sample), with
Krippendorff's nominal alpha over all samples alongside; physics and temporal 1-5 ratings by Krippendorff's
alpha, ordinal (the headline; the paper does not name the level) and interval. Computed on the raw answers,
before normalisation, over every sample with at least two annotations.

**Human scores file** (``agreement.human_scores``): JSONL (one object per line) or CSV with a header, one
record per annotator and edited sample::

    {"method": "wan-edit", "id": "0074_dso14", "annotator": "a1", "instr": "correct", "phy": 4, "temp": 3}

``instr``: ``correct`` / ``partial`` / ``ambiguous`` / ``wrong`` (or ``incorrect``) or the number 1, 0.5, 0;
``phy`` and ``temp``: integer ratings 1-5. ``annotator`` is optional (records of one sample are averaged
whatever their annotator). A record may instead give a method-level score only, ``{"method": ..,
"NRVE_Acc": 31.5}`` (percent; optionally ``S_instr``, ``S_phy``, ``S_temp`` in percent): such methods use
these numbers directly and the judges' scores over all their samples.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from vbench_ray.benchmarks.nrv_scoring import COMPONENT_METRIC, COMPONENTS, NRVE_METRICS, nrve_acc, normalize_rating

INSTR_WORDS = {
    "correct": 1.0,
    "yes": 1.0,
    "partial": 0.5,
    "partially correct": 0.5,
    "ambiguous": 0.5,
    "wrong": 0.0,
    "incorrect": 0.0,
    "no": 0.0,
}
DIMENSIONS = NRVE_METRICS  # NRVE_Acc, S_instr, S_phy, S_temp


class HumanScoresError(ValueError):
    """A human-scores file that cannot be used; the message names the file, record and field."""


def _instr_value(value: Any, where: str) -> float:
    if isinstance(value, str) and value.strip().lower() in INSTR_WORDS:
        return INSTR_WORDS[value.strip().lower()]
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise HumanScoresError(
            f"{where}.instr: expected correct/partial/ambiguous/wrong or 1/0.5/0, got {value!r}"
        ) from None
    if x not in (0.0, 0.5, 1.0):
        raise HumanScoresError(f"{where}.instr: expected 1, 0.5 or 0, got {value!r}")
    return x


def _rating(value: Any, where: str, key: str) -> int:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise HumanScoresError(f"{where}.{key}: expected an integer rating 1-5, got {value!r}") from None
    if not x.is_integer() or not 1 <= x <= 5:
        raise HumanScoresError(f"{where}.{key}: expected an integer rating 1-5, got {value!r}")
    return int(x)


def read_human_scores(path: str | Path) -> list[dict]:
    """Records of a human-scores file (JSONL or CSV), validated; see the module docstring."""
    path = Path(path)
    if not path.is_file():
        raise HumanScoresError(f"agreement.human_scores not found: {path}")
    text = path.read_text(encoding="utf-8")
    records: list[tuple[str, Any]] = []
    if path.suffix.lower() == ".csv":
        for i, row in enumerate(csv.DictReader(text.splitlines())):
            records.append((f"{path.name}: row {i + 2}", {k: v for k, v in row.items() if v not in (None, "")}))
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append((f"{path.name}:{n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise HumanScoresError(f"{path.name}:{n}: not valid JSON ({exc})") from None
    out = []
    for where, rec in records:
        if not isinstance(rec, dict) or not str(rec.get("method") or "").strip():
            raise HumanScoresError(f"{where}: expected an object with a 'method'")
        method = str(rec["method"]).strip()
        if "NRVE_Acc" in rec and "id" not in rec:
            level = {"method": method, "level": "method"}
            for key in DIMENSIONS:
                if rec.get(key) is not None:
                    try:
                        level[key] = float(rec[key])
                    except (TypeError, ValueError):
                        raise HumanScoresError(f"{where}.{key}: expected a number, got {rec[key]!r}") from None
                    if not math.isfinite(level[key]):  # NaN / Infinity would poison the rank correlations
                        raise HumanScoresError(f"{where}.{key}: expected a finite number, got {rec[key]!r}")
            out.append(level)
            continue
        if not str(rec.get("id") or "").strip():
            raise HumanScoresError(f"{where}.id: expected the instance id of the edited sample")
        missing = [k for k in COMPONENTS if rec.get(k) in (None, "")]
        if missing:
            raise HumanScoresError(f"{where}: missing {', '.join(missing)} (instr, phy and temp are required)")
        out.append(
            {
                "method": method,
                "id": str(rec["id"]).strip(),
                "annotator": rec.get("annotator"),
                "level": "sample",
                "instr": _instr_value(rec["instr"], where),
                "phy": _rating(rec["phy"], where, "phy"),
                "temp": _rating(rec["temp"], where, "temp"),
            }
        )
    if not out:
        raise HumanScoresError(f"{path}: no records")
    return out


def human_samples(records: list[dict], normalize: str, weights: dict, epsilon: float) -> list[dict]:
    """Per (method, id): annotator-averaged S_instr, S_phy, S_temp (percent) and Eq. 1 on the averages."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        if r["level"] == "sample":
            groups.setdefault((r["method"], r["id"]), []).append(r)
    out = []
    for (method, iid), rs in sorted(groups.items()):
        s = {
            "instr": float(np.mean([r["instr"] for r in rs])),
            "phy": float(np.mean([normalize_rating(r["phy"], normalize) for r in rs])),
            "temp": float(np.mean([normalize_rating(r["temp"], normalize) for r in rs])),
        }
        row = {"method": method, "instance_id": iid, "n_annotators": len(rs), "NRVE_Acc": nrve_acc(s, weights, epsilon)}
        row.update({COMPONENT_METRIC[k]: 100.0 * s[k] for k in COMPONENTS})
        out.append(row)
    return out


def method_means(rows: Iterable[dict], dims: Iterable[str] = DIMENSIONS) -> dict[str, dict[str, float]]:
    """``{method: {dim: mean over its rows}}``."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["method"], []).append(r)
    return {
        m: {
            d: float(np.mean([r[d] for r in rs if r.get(d) is not None]))
            for d in dims
            if any(r.get(d) is not None for r in rs)
        }
        for m, rs in sorted(groups.items())
    }


def _finite(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def rank_agreement(judge: dict[str, float], human: dict[str, float]) -> dict:
    """Spearman's rho and Kendall's tau (tau-b) between two ``{method: score}`` maps over their common
    methods; None where undefined (fewer than 2 methods, or constant scores)."""
    from scipy.stats import kendalltau, spearmanr

    common = sorted(m for m in judge if m in human and judge[m] is not None and human[m] is not None)
    out: dict[str, Any] = {
        "n": len(common),
        "rho": None,
        "rho_p": None,
        "tau": None,
        "tau_p": None,
        "signed_deviation": None,
    }
    if not common:
        return out
    a = np.array([judge[m] for m in common], dtype=float)
    b = np.array([human[m] for m in common], dtype=float)
    out["signed_deviation"] = float(np.mean(a - b))
    if len(common) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = spearmanr(a, b)
        tau = kendalltau(a, b)
    out.update(
        rho=_finite(rho.statistic), rho_p=_finite(rho.pvalue), tau=_finite(tau.statistic), tau_p=_finite(tau.pvalue)
    )
    return out


def inter_annotator(records: list[dict]) -> dict | None:
    """Table 5: agreement between annotators of the same edited samples; None when no sample has two or more
    annotations. ``{n_samples, n_annotations, annotators_per_sample, instr: {...}, phy: {...}, temp: {...}}``."""
    from vbench_ray.analyses.agreement import fleiss_kappa, krippendorff_alpha, rating_table

    groups: dict[tuple, list[dict]] = {}
    for r in records:
        if r["level"] == "sample":
            groups.setdefault((r["method"], r["id"]), []).append(r)
    multi = {k: v for k, v in sorted(groups.items()) if len(v) >= 2}
    if not multi:
        return None
    sizes = [len(v) for v in multi.values()]
    modal = max(set(sizes), key=lambda s: (sizes.count(s), s))
    same = [v for v in multi.values() if len(v) == modal]
    table, cats = rating_table([[r["instr"] for r in v] for v in same])
    instr = {
        "metric": "Fleiss' kappa",
        "value": fleiss_kappa(table) if len(cats) else None,
        "n_samples": len(same),
        "n_annotators": modal,
        "categories": cats,
        "krippendorff_alpha_nominal": krippendorff_alpha([[r["instr"] for r in v] for v in multi.values()]),
        "n_samples_alpha": len(multi),
    }
    out: dict[str, Any] = {
        "n_samples": len(multi),
        "n_annotations": int(sum(sizes)),
        "annotators_per_sample": {str(k): sizes.count(k) for k in sorted(set(sizes))},
        "instr": instr,
    }
    for key in ("phy", "temp"):
        units = [[r[key] for r in v] for v in multi.values()]
        out[key] = {
            "metric": "Krippendorff's alpha (ordinal)",
            "value": krippendorff_alpha(units, "ordinal"),
            "interval": krippendorff_alpha(units, "interval"),
            "n_samples": len(units),
        }
    return out


def agreement_summary(
    judge_rows: dict[str, list[dict]],
    records: list[dict],
    normalize: str,
    weights: dict,
    epsilon: float,
    categories: dict[str, str] | None = None,
) -> dict:
    """The summary's ``agreement`` section.

    ``judge_rows``: per judge label, its instance rows (``method``, ``instance_id``, ``category``, the four
    dimensions in percent). ``categories``: instance id -> category, for the per-category breakdown.
    """
    samples = human_samples(records, normalize, weights, epsilon)
    method_level = {r["method"]: r for r in records if r["level"] == "method"}
    pairs = {(r["method"], r["instance_id"]) for r in samples}
    human = method_means(samples)
    for m, r in method_level.items():
        human[m] = {d: r[d] for d in DIMENSIONS if d in r}
    categories = categories or {}
    out: dict[str, Any] = {
        "n_methods": len(human),
        "n_samples": len(samples),
        "n_annotations": sum(r["n_annotators"] for r in samples),
        "human": human,
        "judges": {},
        "mean_judge": {},
        "inter_annotator": inter_annotator(records),
    }
    for label, rows in judge_rows.items():
        matched = [r for r in rows if (r["method"], r["instance_id"]) in pairs or r["method"] in method_level]
        scores = method_means(matched)
        per_dim = {
            d: rank_agreement({m: s.get(d) for m, s in scores.items()}, {m: s.get(d) for m, s in human.items()})
            for d in DIMENSIONS
        }
        by_cat: dict[str, dict] = {}
        for cat in sorted({categories.get(r["instance_id"]) for r in samples} - {None}):
            h = method_means([r for r in samples if categories.get(r["instance_id"]) == cat])
            j = method_means([r for r in matched if r.get("category") == cat])
            by_cat[cat] = {
                d: rank_agreement({m: s.get(d) for m, s in j.items()}, {m: s.get(d) for m, s in h.items()})
                for d in DIMENSIONS
            }
            by_cat[cat]["human"] = h
            by_cat[cat]["judge"] = j
        out["judges"][label] = {"n_samples": len(matched), "scores": scores, **per_dim, "by_category": by_cat}
    for d in DIMENSIONS:
        rhos = [j[d]["rho"] for j in out["judges"].values() if j[d]["rho"] is not None]
        taus = [j[d]["tau"] for j in out["judges"].values() if j[d]["tau"] is not None]
        out["mean_judge"][d] = {
            "rho": float(np.mean(rhos)) if rhos else None,
            "tau": float(np.mean(taus)) if taus else None,
            "n_judges": len(rhos),
        }
    return out
