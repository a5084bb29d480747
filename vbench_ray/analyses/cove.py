"""CoVEBench's analyses (CoVEBench paper §4.2, App. G) over run directories loaded by
:func:`vbench_ray.compare_runs.load_run`.

* :func:`human_alignment` - App. G.2: agreement of each metric's pairwise preferences with human ones, with
  the adaptive tie threshold tau (:func:`vbench_ray.analyses.agreement.preference_alignment`).
* :func:`judge_human_agreement` - §4.2: share of objective checklist questions where the judge's answer equals
  a human's, and Cohen's kappa.
* :func:`judge_stability` - §4.2 "repeated checklist evaluations": N runs of one model whose judge differs only
  in ``judge.seed``: share of objective checklist questions (AB-MCQ, Single-TF, Dual-TF) answered identically by
  all runs, Fleiss' kappa over those answers (VQR's per-frame rows of ``judgments.parquet`` are another model's
  scores, not checklist judgements: left out), and the spread of each metric.
* :func:`breakdowns` - Figure 4: accuracy over all objective (non Score-MCQ) questions by generated frame
  count, source duration, number of edit points and instruction length (words), with a case-resampling CI per bin.
* :func:`correlations` - Figure 5 (left): Spearman correlation between metrics across (run, case) pairs.
* :func:`category_levels` - Table 8: UAS per Level-1 category and, within Subject, per Level-2 operation.

File formats (human preferences, human answers) are in docs/analyses.md.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from vbench_ray.analyses.agreement import (
    cohen_kappa,
    fleiss_kappa,
    percent_agreement,
    preference_alignment,
    rating_table,
)
from vbench_ray.stats import ratio_ci

log = logging.getLogger(__name__)

OBJECTIVE = ("IFS", "VRS")
# checklist question types with a categorical answer (cove.QUESTION_TYPES but Score-MCQ, whose 1-10 is a score);
# VQR's per-frame rows in the same judgments.parquet have type "VQR" and are left out with it
CATEGORICAL_TYPES = ("AB-MCQ", "Single-TF", "Dual-TF")
EDIT_POINT_BINS = ("1", "2", "3", "4", "5+")


def _read_jsonl(path: str | Path) -> list[tuple[str, dict]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"not found: {path}")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path.name}:{n}: not valid JSON ({exc})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{path.name}:{n}: expected a JSON object")
            out.append((f"{path.name}:{n}", rec))
    return out


def _norm(x: Any) -> str:
    return str(x).strip().lower()


def _case_value(run, metric: str, case_id: str) -> float:
    u = run.units.get(metric, {}).get(str(case_id))
    return u[0] / u[1] if u and u[1] else float("nan")


def _find_run(runs: dict, name: str, where: str):
    if name in runs:
        return runs[name]
    for r in runs.values():
        if name in (r.summary.get("run_name"), r.path.name):
            return r
    raise ValueError(f"{where}: model {name!r} is none of the compared runs {sorted(runs)}")


# ----------------------------------------------------------------------------- human alignment (App. G.2)


def human_alignment(runs: dict, prefs_path: str | Path, metrics: list[str] | None = None) -> dict:
    """``{metric: preference_alignment(...)}`` over the human pairwise-preference file's comparisons."""
    records = _read_jsonl(prefs_path)
    names = metrics or sorted({m for r in runs.values() for m in r.units})
    by_metric: dict[str, tuple[list, list, list]] = {m: ([], [], []) for m in names}
    for where, rec in records:
        for key in ("case_id", "model_a", "model_b", "preference"):
            if key not in rec:
                raise ValueError(f"{where}: missing {key!r}")
        ra = _find_run(runs, str(rec["model_a"]), where)
        rb = _find_run(runs, str(rec["model_b"]), where)
        targets = [rec["metric"]] if rec.get("metric") else names
        for m in targets:
            if m not in by_metric:
                continue
            a, b, h = by_metric[m]
            a.append(_case_value(ra, m, rec["case_id"]))
            b.append(_case_value(rb, m, rec["case_id"]))
            h.append(rec["preference"])
    hib = {
        m: next(
            (
                (r.summary.get("metrics") or {}).get(m, {}).get("higher_is_better", True)
                for r in runs.values()
                if m in (r.summary.get("metrics") or {})
            ),
            True,
        )
        for m in names
    }
    return {m: preference_alignment(a, b, h, higher_is_better=hib[m]) for m, (a, b, h) in by_metric.items() if h}


# ----------------------------------------------------------------------------- judge vs humans (§4.2)


def judge_human_agreement(runs: dict, answers_path: str | Path) -> dict:
    """Per run named in the human-answers file: ``{n, accuracy, kappa, n_unmatched, by_type}`` over the
    objective questions both the judge and a human answered."""
    pairs: dict[str, list[tuple[str, str, str]]] = {}
    unmatched: dict[str, int] = {}
    judged = {}
    for label, run in runs.items():
        if run.judgments is not None and len(run.judgments) and "question_id" in run.judgments:
            j = run.judgments
            judged[label] = {
                (str(c), str(q)): (a, t) for c, q, a, t in zip(j["case_id"], j["question_id"], j["answer"], j["type"])
            }
    for where, rec in _read_jsonl(answers_path):
        for key in ("case_id", "question_id", "answer"):
            if key not in rec:
                raise ValueError(f"{where}: missing {key!r}")
        if rec.get("model") is None and len(runs) > 1:
            raise ValueError(f"{where}: 'model' is required when several runs are compared")
        run = _find_run(runs, str(rec["model"]), where) if rec.get("model") is not None else next(iter(runs.values()))
        got = judged.get(run.label, {}).get((str(rec["case_id"]), str(rec["question_id"])))
        if got is None or got[1] not in CATEGORICAL_TYPES:  # Score-MCQ, VQR's frames: not objective questions
            unmatched[run.label] = unmatched.get(run.label, 0) + 1
            continue
        answer = "" if got[0] is None else _norm(got[0])  # an invalid judge answer disagrees
        pairs.setdefault(run.label, []).append((answer, _norm(rec["answer"]), str(got[1])))
    out = {}
    for label in sorted(set(pairs) | set(unmatched)):
        p = pairs.get(label, [])
        judge, human = [x[0] for x in p], [x[1] for x in p]
        by_type = {}
        for t in sorted({x[2] for x in p}):
            sub = [x for x in p if x[2] == t]
            by_type[t] = {
                "n": len(sub),
                "accuracy": percent_agreement([x[0] for x in sub], [x[1] for x in sub]),
                "kappa": cohen_kappa([x[0] for x in sub], [x[1] for x in sub]),
            }
        out[label] = {
            "n": len(p),
            "accuracy": percent_agreement(judge, human),
            "kappa": cohen_kappa(judge, human),
            "n_unmatched": unmatched.get(label, 0),
            "by_type": by_type,
        }
    return out


# ----------------------------------------------------------------------------- judge stability (§4.2)


def judge_stability(repeats: list) -> dict:
    """Over N runs of one model that differ only in the checklist judge's seed (or sampling): agreement and
    Fleiss' kappa over the categorical checklist answers only (``CATEGORICAL_TYPES``; never VQR's frame scores)."""
    if len(repeats) < 2:
        raise ValueError("judge stability needs at least two repeated runs")
    answers = []
    for r in repeats:
        j = r.judgments
        if j is None or not len(j):
            raise ValueError(f"{r.path}: no judgments.parquet")
        obj = j[j["type"].isin(CATEGORICAL_TYPES)] if "type" in j else j
        answers.append(
            {
                (str(c), str(q)): ("<invalid>" if a is None else _norm(a))
                for c, q, a in zip(obj["case_id"], obj["question_id"], obj["answer"])
            }
        )
    keys = sorted(set.intersection(*(set(a) for a in answers)))
    ratings = [[a[k] for a in answers] for k in keys]
    table, cats = rating_table(ratings) if keys else (np.zeros((0, 0)), [])
    metrics = {}
    for m in sorted({m for r in repeats for m in (r.summary.get("metrics") or {})}):
        values = [(r.summary.get("metrics") or {}).get(m, {}).get("value") for r in repeats]
        values = [v for v in values if v is not None]
        if len(values) == len(repeats):
            metrics[m] = {
                "values": values,
                "range": float(max(values) - min(values)),
                "std": float(np.std(values, ddof=1)),
            }
    return {
        "n_runs": len(repeats),
        "runs": [r.label for r in repeats],
        "n_questions": len(keys),
        "agreement": float(np.mean([len(set(x)) == 1 for x in ratings])) if keys else None,
        "fleiss_kappa": fleiss_kappa(table) if keys and len(cats) else None,
        "categories": cats,
        "metrics": metrics,
    }


# ----------------------------------------------------------------------------- Figure 4 breakdowns


def _case_attributes(run, probe_videos: bool = True) -> dict[str, dict[str, float]]:
    """Per case: edit points, instruction words and (probing the videos) edited frames and source duration."""
    out: dict[str, dict[str, float]] = {}
    if not len(run.cases):
        return out
    for rec in run.cases.to_dict("records"):
        attrs: dict[str, float] = {}
        try:
            task = json.loads(rec.get("annotations") or "null") or {}
        except (TypeError, json.JSONDecodeError):
            task = {}
        groups = [
            g
            for g in task.get("evaluation_groups") or []
            if any(q.get("dimension") in ("Execution Accuracy", "Physical Logic") for q in g.get("questions") or [])
        ]
        if task:
            attrs["edit_points"] = float(len(groups))
        if isinstance(rec.get("instruction"), str):
            attrs["instruction_words"] = float(len(rec["instruction"].split()))
        if probe_videos:
            from vbench_ray.video.io import probe

            for key, col, field in (
                ("generated_frames", "edited_path", "num_frames"),
                ("source_duration_s", "source_path", "duration"),
            ):
                path = rec.get(col)
                if isinstance(path, str) and Path(path).is_file():
                    try:
                        attrs[key] = float(getattr(probe(path), field))
                    except Exception as exc:  # an unreadable video only leaves the case out of this breakdown
                        log.debug("probe %s: %s", path, exc)
        out[str(rec["case_id"])] = attrs
    return out


def _edges(values: list[float], n_bins: int = 4) -> list[float]:
    """Quantile bin edges over the pooled values (duplicates merged)."""
    v = np.asarray(values, dtype=float)
    return sorted(set(float(x) for x in np.quantile(v, np.linspace(0, 1, n_bins + 1))))


def _bin_label(x: float, edges: list[float]) -> str:
    for lo, hi in zip(edges[:-1], edges[1:]):
        if x <= hi:
            return f"{lo:g}-{hi:g}"
    return f"{edges[-2]:g}-{edges[-1]:g}"


def _objective_per_case(run) -> dict[str, tuple[float, float]]:
    out: dict[str, list[float]] = {}
    for m in OBJECTIVE:
        for case, (num, den) in run.units.get(m, {}).items():
            s = out.setdefault(case, [0.0, 0.0])
            s[0] += num
            s[1] += den
    return {c: (v[0], v[1]) for c, v in out.items()}


def breakdowns(runs: dict, n_bins: int = 4, seed: int = 0, n_resamples: int = 1000, probe_videos: bool = True) -> dict:
    """``{attribute: {"bins": [...], "runs": {label: [{bin, value, ci95, n_cases}]}}}`` (Figure 4). Bins are
    shared by all runs: quantiles of the pooled values, and 1, 2, 3, 4, 5+ for edit points."""
    attrs = {label: _case_attributes(r, probe_videos) for label, r in runs.items()}
    acc = {label: _objective_per_case(r) for label, r in runs.items()}
    names = sorted({k for a in attrs.values() for v in a.values() for k in v})
    out = {}
    for name in names:
        pooled = [v[name] for a in attrs.values() for v in a.values() if name in v]
        if name == "edit_points":

            def label_of(x, _e=None):
                return EDIT_POINT_BINS[min(int(x), 5) - 1] if x >= 1 else "0"

            bins = [b for b in ("0", *EDIT_POINT_BINS) if any(label_of(x) == b for x in pooled)]
        else:
            edges = _edges(pooled, n_bins)
            if len(edges) < 2:
                edges = [edges[0], edges[0]]

            def label_of(x, _e=edges):
                return _bin_label(x, _e)

            bins = list(dict.fromkeys(_bin_label(e, edges) for e in edges[1:]))
        per_run = {}
        for label in runs:
            rows = []
            for b in bins:
                cases = [c for c, v in attrs[label].items() if name in v and label_of(v[name]) == b and c in acc[label]]
                num = np.array([acc[label][c][0] for c in cases])
                den = np.array([acc[label][c][1] for c in cases])
                value = float(num.sum() / den.sum()) if len(cases) and den.sum() else None
                ci = ratio_ci(num, den, seed=seed, n_resamples=n_resamples) if len(cases) >= 2 else None
                rows.append({"bin": b, "value": value, "ci95": ci, "n_cases": len(cases)})
            per_run[label] = rows
        out[name] = {"bins": bins, "runs": per_run}
    return out


# ----------------------------------------------------------------------------- Figure 5, Table 8


def correlations(runs: dict, metrics: list[str] | None = None) -> dict:
    """Spearman's rho between metrics over (run, case) pairs where both metrics have a value."""
    from scipy.stats import spearmanr

    names = metrics or sorted({m for r in runs.values() for m in r.units}, key=str)
    matrix: list[list[float | None]] = []
    counts: list[list[int]] = []
    for m1 in names:
        row, nrow = [], []
        for m2 in names:
            xs, ys = [], []
            for r in runs.values():
                u1, u2 = r.units.get(m1, {}), r.units.get(m2, {})
                for c in sorted(set(u1) & set(u2)):
                    xs.append(u1[c][0] / u1[c][1])
                    ys.append(u2[c][0] / u2[c][1])
            rho = None
            if len(xs) >= 3 and np.std(xs) > 0 and np.std(ys) > 0:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rho = float(spearmanr(xs, ys).statistic)
            row.append(rho)
            nrow.append(len(xs))
        matrix.append(row)
        counts.append(nrow)
    return {"metrics": names, "rho": matrix, "n": counts, "method": "spearman over (run, case) pairs"}


def category_levels(run, seed: int = 0, n_resamples: int = 1000) -> dict:
    """Table 8: UAS (edit points whose IFS/VRS questions are all correct) per Level-1 category, and per
    Level-2 operation within Subject. A group's categories are its ``category`` entries in the checklist."""
    j = run.judgments
    if j is None or not len(j) or not len(run.cases) or "annotations" not in run.cases:
        return {}
    uas_unit_task = (run.config.get("score") or {}).get("uas_unit") == "task"
    if uas_unit_task:
        return {"note": "score.uas_unit=task: category levels need edit-point units"}
    uas = ((run.summary or {}).get("metrics") or {}).get("UAS") or {}
    if uas.get("unavailable") or (uas and uas.get("value") is None):
        return {"note": "UAS has no value in this run (no valid judge answers): no category levels"}
    ok: dict[tuple[str, int], bool] = {}
    for r in j.to_dict("records"):
        if r.get("metric") in OBJECTIVE:
            correct = r["correct"]
            if correct is None or (isinstance(correct, float) and np.isnan(correct)):
                continue  # a dropped question (no answer, or no gold) is no part of its edit point, as in UAS
            key = (str(r["case_id"]), int(r["group"]))
            ok[key] = ok.get(key, True) and bool(correct)
    levels: dict[str, dict[str, dict[str, list[float]]]] = {"level1": {}, "subject_level2": {}}
    for rec in run.cases.to_dict("records"):
        try:
            task = json.loads(rec.get("annotations") or "null") or {}
        except (TypeError, json.JSONDecodeError):
            continue
        for g, group in enumerate(task.get("evaluation_groups") or []):
            key = (str(rec["case_id"]), g)
            if key not in ok:
                continue
            entries = [c for c in group.get("category") or [] if isinstance(c, dict)]
            l1 = sorted({c.get("Level 1") for c in entries if c.get("Level 1")})
            l2 = sorted({c.get("Level 2") for c in entries if c.get("Level 1") == "Subject" and c.get("Level 2")})
            for name, cats in (("level1", l1), ("subject_level2", l2)):
                for cat in cats:
                    levels[name].setdefault(cat, {}).setdefault(key[0], []).append(100.0 * ok[key])
    out: dict[str, Any] = {}
    for name, cats in levels.items():
        out[name] = {}
        for cat, per_case in sorted(cats.items()):
            cases = sorted(per_case)
            num = np.array([sum(per_case[c]) for c in cases])
            den = np.array([len(per_case[c]) for c in cases], dtype=float)
            out[name][cat] = {
                "value": float(num.sum() / den.sum()),
                "n": int(den.sum()),
                "n_cases": len(cases),
                "ci95": ratio_ci(num, den, seed=seed, n_resamples=n_resamples),
            }
    return out


def cove_analyses(
    runs: dict,
    human_prefs: str | Path | None = None,
    human_answers: str | Path | None = None,
    judge_repeats: list | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
    probe_videos: bool = True,
) -> dict:
    """Every CoVEBench analysis the inputs allow, as the ``analyses`` section of leaderboard.json."""
    out: dict[str, Any] = {
        "breakdowns": breakdowns(runs, seed=seed, n_resamples=n_resamples, probe_videos=probe_videos),
        "correlations": correlations(runs),
        "category_levels": {label: category_levels(r, seed, n_resamples) for label, r in runs.items()},
    }
    if human_prefs:
        out["human_alignment"] = human_alignment(runs, human_prefs)
    if human_answers:
        out["judge_human"] = judge_human_agreement(runs, human_answers)
    if judge_repeats:
        out["judge_stability"] = judge_stability(judge_repeats)
    return out
