"""NRVBench's summary pieces: the conventional metrics' statistics, the per-judge and cross-judge tables
(Table 2), the negative-control sanity section (App. F.1) and the tables of the report.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vbench_ray import controls as ctl
from vbench_ray.benchmarks import nrv_scoring as scoring
from vbench_ray.benchmarks.base import DataError, blank_unavailable, judge_availability
from vbench_ray.metrics.base import METRICS
from vbench_ray.stats import bootstrap_ci, describe, finite

FPS_SCALE = "frames/s"


def _is_control(variant: str) -> bool:
    return str(variant).startswith("control:")


# ----------------------------------------------------------------------------- summary pieces


def _describe(values, stats) -> dict:
    seed, n_resamples, confidence = stats
    return describe(values, seed=seed, n_resamples=n_resamples, confidence=confidence)


def conventional_stats(rows: list[dict], metric: str, stats) -> dict:
    """Mean over cases with a 95% bootstrap CI; PSNR's infinite values (identical background) are counted
    in ``n_infinite`` and left out of the mean (JSON has no infinity)."""
    values = [r.get(metric) for r in rows if not r.get("error_load")]
    out = _describe(values, stats)
    n_inf = sum(1 for v in values if v is not None and np.isinf(v))
    out.update(
        n_failed=sum(1 for r in rows if r.get(metric) is None and not r.get("error_load")),
        scale=METRICS[metric].scale if metric in METRICS else None,
        higher_is_better=METRICS[metric].higher_is_better if metric in METRICS else True,
    )
    if n_inf:
        out["n_infinite"] = n_inf
    return out


def _metric_block(rows, cross, judged, frame_metrics, with_fps, stats, is_judged, brief: bool = False) -> dict:
    block: dict[str, Any] = {}
    if is_judged:
        judgeable_rows = [r for r in rows if not r.get("control_skip")]
        judged_keys = {(c["case_id"], c["variant"]) for c in cross}
        n_failed = sum(1 for r in judgeable_rows if (r["case_id"], r["variant"]) not in judged_keys)
        for m in scoring.NRVE_METRICS:
            s = _describe([c[m] for c in cross], stats)
            comp = {v: k for k, v in scoring.COMPONENT_METRIC.items()}.get(m)
            s["n_invalid"] = sum(1 for j in judged if not j["valid"] and (comp is None or j["component"] == comp))
            if not brief:
                s.update(n_failed=n_failed, scale="[0,100]", higher_is_better=True)
            block[m] = s
    for m in frame_metrics:
        s = conventional_stats(rows, m, stats)
        block[m] = {k: s[k] for k in ("value", "ci95", "n", "n_infinite") if k in s} if brief else s
    if with_fps:
        fps = [r.get("FPS") for r in rows if not _is_control(r.get("variant", "base"))]
        s = _describe(fps, stats)
        if not brief:
            s.update(scale=FPS_SCALE, higher_is_better=True)
        block["FPS"] = s
    return block


def by_method_category(rows, cross, judged, frame_metrics, with_fps, stats, is_judged) -> dict:
    """Each method across the material categories (NRVBench Fig. 6: six methods x six categories): ``{method:
    {category: metrics}}``, the same brief blocks as ``by_category``; a pair with no rows is left out."""
    out: dict[str, dict] = {}
    for method in sorted({r.get("method") for r in rows} - {None}):
        for category in sorted({r.get("category") for r in rows} - {None}):

            def mine(items, method=method, category=category):
                return [x for x in items if x.get("method") == method and x.get("category") == category]

            if mine(rows):
                out.setdefault(method, {})[category] = _metric_block(
                    mine(rows), mine(cross), mine(judged), frame_metrics, with_fps, stats, is_judged, brief=True
                )
    return out


def report_figures(cls, summary: dict) -> list[dict]:
    """``NRVBench.report_figures``: the bar charts of each breakdown (categories in the paper's order, App. C),
    then each method across the six material categories as a heat grid per metric (Fig. 6)."""
    from vbench_ray.figures import breakdowns, heat_figures

    metrics = summary.get("metrics") or {}
    scales = {name: (m or {}).get("scale") for name, m in metrics.items()}
    higher = {name: (m or {}).get("higher_is_better") for name, m in metrics.items()}  # darker = better
    note = "NRVBench Fig. 6: " + ", ".join(f"{c} {scoring.CATEGORY_CRITERIA[c]['name']}" for c in scoring.CATEGORIES)
    grid = heat_figures(
        summary.get("by_method_category"),
        "method",
        "category",
        "by_method_category",
        scales,
        scoring.CATEGORIES,
        note,
        higher,
    )
    return breakdowns(summary, {"by_category": scoring.CATEGORIES}) + grid


def _by_judge(instances, judged, labels, stats) -> dict:
    out = {}
    for label in labels:
        mine = scoring.percent_rows([i for i in instances if i["judge"] == label])
        out[label] = {m: _describe([r[m] for r in mine], stats) for m in scoring.NRVE_METRICS}
        out[label]["n_invalid"] = sum(1 for j in judged if j["judge"] == label and not j["valid"])
    return out


def judges_availability(metrics: dict, by_judge: dict | None, judged: list[dict], limits: dict[str, float]) -> None:
    """A dead judge is not a score (``base.unusable_judge``), each judge held to its own ``max_invalid_fraction``
    (``limits``: label -> the value of its ``judges`` entry, of the file that entry includes, else of ``judge``).

    For each NRVE metric: ``base.judge_availability`` over each judge's base-variant answers to the metric's
    component (all three for NRVE_Acc) against that judge's limit, written into its ``by_judge`` block; the
    cross-judge value (``metrics``) is unavailable when any judge's is (its mean holds that judge's fallback
    lowest scores), and its ``invalid_fraction`` is the share over all judges.
    """
    base = [j for j in judged if j["variant"] == "base"] or judged
    component_of = {v: k for k, v in scoring.COMPONENT_METRIC.items()}
    for m in scoring.NRVE_METRICS:
        comp = component_of.get(m)
        members = [j for j in base if comp is None or j["component"] == comp]
        stats = metrics[m]
        if len(limits) == 1:  # one judge: the run's own rows, whatever their label
            judge_availability(stats, members, next(iter(limits.values())), what="judge answers")
            continue
        stats["invalid_fraction"] = judge_availability({}, members, 1.0)["invalid_fraction"]
        for label, limit in limits.items():
            mine = (by_judge or {}).get(label, {}).get(m, {})
            judge_availability(
                mine, [j for j in members if j.get("judge") == label], limit, what=f"judge {label!r} answers"
            )
            if mine.get("unavailable") and not stats.get("unavailable"):
                stats.update(
                    unavailable=mine["unavailable"],
                    unavailable_errors=mine["unavailable_errors"],
                    value=None,
                    ci95=None,
                )


def _judge_means(instances, labels, metric, percent: bool) -> dict:
    out = {}
    for label in labels:
        vals = [i[metric] for i in instances if i["judge"] == label]
        out[label] = float(np.mean(vals)) * (100.0 if percent else 1.0) if vals else None
    return out


def _cross_judge(instances, labels) -> dict:
    """Table 2: per judge and per method, the mean over instances; across judges, mean and std."""
    out: dict[str, Any] = {
        m: scoring.cross_judge_stats(_judge_means(instances, labels, m, m != "NRVE_Acc")) for m in scoring.NRVE_METRICS
    }
    out["by_method"] = {}
    for method in sorted({i["method"] for i in instances}):
        mine = [i for i in instances if i["method"] == method]
        out["by_method"][method] = {
            m: scoring.cross_judge_stats(_judge_means(mine, labels, m, m != "NRVE_Acc")) for m in scoring.NRVE_METRICS
        }
    return out


def _status_counts(judged: list[dict]) -> dict:
    counts: dict[str, int] = {}
    for j in judged:
        key = f"{j['component']}:{j['status']}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


# ----------------------------------------------------------------------------- negative controls (App. F.1)

# What each control should do to the NRVE-Acc components (App. F.1, Table 8, Figure 19): the component its
# failure mode targets must drop below the real edits'; NRVE-Acc (Eq. 1) must drop too.
CONTROL_EXPECTATIONS = {
    "unchanged": ("S_instr", "no edit: instruction alignment should fail"),
    "random_mask": ("S_instr", "edit in the wrong region: localised instruction alignment should fail"),
    "appearance": ("S_phy", "appearance-only change: the physical deformation should be judged absent/implausible"),
    "shuffled": ("S_temp", "frame order corrupted: temporal coherence should fail"),
    "flow_corrupted": ("S_temp", "local motion corrupted: temporal coherence should fail"),
}


def sanity_section(rows: list[dict], judged: list[dict], cfg, frame_metrics: list[str]) -> dict:
    """Each control's components next to the real edits of the same cases, with the expected direction.

    Paired by case: a control's instances are compared with the ``base`` instances of the same case ids
    (the same method's real edit). ``delta = control - reference`` (percent points) with a 95% bootstrap CI
    over cases; an expectation ``held`` when the mean delta is negative, ``significant`` when the whole CI is.
    """
    instances = scoring.instance_scores(judged, cfg.score)
    cross = scoring.cross_judge_instances(instances)
    skipped = {(r["case_id"], r["variant"]) for r in rows if r.get("control_skip")}
    by_variant: dict[str, dict[str, dict]] = {}
    for c in cross:
        if (c["case_id"], c["variant"]) not in skipped:
            by_variant.setdefault(c["variant"], {})[c["case_id"]] = c
    rows_by = {(r["case_id"], r["variant"]): r for r in rows}
    reference = by_variant.get("base", {})
    seed, n_resamples, confidence = cfg.run.seed, cfg.stats.bootstrap_samples, cfg.stats.confidence
    out: dict[str, Any] = {"reference": "base", "controls": {}}
    for variant in sorted(v for v in by_variant if _is_control(v)):
        name = variant.split(":", 1)[1]
        primary, why = CONTROL_EXPECTATIONS.get(name, (None, "unknown control"))
        cases = sorted(set(by_variant[variant]) & set(reference))
        entry: dict[str, Any] = {
            "variant": variant,
            "n": len(cases),
            "expectation": why,
            "failure_mode": ctl.FAILURE_MODES.get(name),
            "components": {},
        }
        for m in scoring.NRVE_METRICS:
            a = np.array([by_variant[variant][c][m] for c in cases], dtype=float)
            b = np.array([reference[c][m] for c in cases], dtype=float)
            comp: dict[str, Any] = {
                "control": float(a.mean()) if len(a) else None,
                "reference": float(b.mean()) if len(b) else None,
            }
            comp["delta"] = comp["control"] - comp["reference"] if len(a) else None
            comp["delta_ci95"] = (
                bootstrap_ci(a - b, seed=seed, n_resamples=n_resamples, confidence=confidence) if len(a) else None
            )
            if m == primary or m == "NRVE_Acc":
                comp["expected"] = "lower"
                comp["held"] = bool(len(a) and comp["delta"] < 0)
                comp["significant"] = bool(comp["delta_ci95"] is not None and comp["delta_ci95"][1] < 0)
            entry["components"][m] = comp
        entry["primary"] = primary
        entry["held"] = bool(primary and entry["components"][primary].get("held"))
        entry["by_judge"] = {}
        for label in sorted({i["judge"] for i in instances}):
            mine = {(i["case_id"], i["variant"]): i for i in instances if i["judge"] == label}
            pairs = [(mine.get((c, variant)), mine.get((c, "base"))) for c in cases]
            pairs = [(x, y) for x, y in pairs if x and y]
            if primary and pairs:
                d = float(np.mean([x[primary] - y[primary] for x, y in pairs])) * (
                    100.0 if primary != "NRVE_Acc" else 1.0
                )
                entry["by_judge"][label] = {"delta": d, "held": d < 0}
        conventional = {}
        for m in frame_metrics:
            ctrl = finite([rows_by.get((c, variant), {}).get(m) for c in cases])
            ref = finite([rows_by.get((c, "base"), {}).get(m) for c in cases])
            conventional[m] = {
                "control": float(ctrl.mean()) if ctrl.size else None,
                "reference": float(ref.mean()) if ref.size else None,
            }
        entry["conventional"] = conventional
        out["controls"][name] = entry
    out["all_held"] = all(e["held"] for e in out["controls"].values()) if out["controls"] else None
    return out


# ----------------------------------------------------------------------------- report tables


def _f(value, digits: int = 2) -> str:
    return "–" if value is None or (isinstance(value, float) and not np.isfinite(value)) else f"{value:.{digits}f}"


def _cross_cell(stats: dict, key: str, judge: str | None = None) -> str:
    """A Table 2 cell: ``n/a`` where the number was blanked (its metric unavailable: ``blank_unavailable_nrv``),
    ``–`` where no judge scored it."""
    blanked = judge in stats.get("unavailable_judges", []) if judge is not None else stats.get("unavailable") is True
    value = (stats.get("per_judge") or {}).get(judge) if judge is not None else stats.get(key)
    return "n/a" if value is None and blanked else _f(value)


def sanity_tables(sanity: dict | None) -> list[dict]:
    """The negative-control table (App. F.1): each control's components next to the real edits'."""
    if not sanity or not sanity.get("controls"):
        return []
    rows = []
    for name, e in sanity["controls"].items():
        cells = [name, f"{e['primary']} lower"]
        for m in scoring.NRVE_METRICS:
            c = e["components"][m]
            cells.append(f"{_f(c['control'])} vs {_f(c['reference'])}")
        cells.append("yes" if e["held"] else "NO")
        rows.append(cells)
    return [
        {
            "title": "Negative controls (App. F.1): control vs real edits",
            "columns": ["Control", "Expected", *scoring.NRVE_METRICS, "Held"],
            "rows": rows,
        }
    ]


def report_tables(summary: dict, frame_metrics: list[str], with_fps: bool) -> list[dict]:
    """Tables for report.html: ``[{"title", "columns", "rows"}]`` (cells are plain text)."""
    tables = []
    cross = summary.get("cross_judge")
    if cross:
        judges = summary.get("judges") or []
        rows = []
        for method, per in cross["by_method"].items():
            nrve = per["NRVE_Acc"]
            rows.append(
                [
                    method,
                    _cross_cell(per["S_phy"], "mean"),
                    _cross_cell(per["S_temp"], "mean"),
                    _cross_cell(per["S_instr"], "mean"),
                    *[_cross_cell(nrve, "per_judge", j) for j in judges],
                    _cross_cell(nrve, "mean"),
                    _cross_cell(nrve, "std"),
                ]
            )
        why = {m: ((summary.get("metrics") or {}).get(m) or {}).get("unavailable") for m in scoring.NRVE_METRICS}
        why_na = "; ".join(f"{m} n/a: {reason}" for m, reason in why.items() if isinstance(reason, str))
        tables.append(
            {
                "title": "NRVE-Acc by method and judge (Table 2)" + (f" ({why_na})" if why_na else ""),
                "columns": ["Method", "S_phy", "S_temp", "S_instr", *judges, "Mean", "Std"],
                "rows": rows,
            }
        )
    conv = [m for m in frame_metrics] + (["FPS"] if with_fps else [])
    if conv and summary.get("by_method"):
        rows = [
            [method, *[_f((block.get(m) or {}).get("value")) for m in conv]]
            for method, block in summary["by_method"].items()
        ]
        tables.append(
            {
                "title": "Conventional metrics by method (Table 3, App. E.5 scales)",
                "columns": ["Method", *conv],
                "rows": rows,
            }
        )
    tables += sanity_tables(summary.get("sanity"))
    agreement = summary.get("agreement")
    if agreement and agreement.get("judges"):
        rows = [
            [
                label,
                *[f"{_f(j[d]['rho'], 3)} / {_f(j[d]['tau'], 3)}" for d in scoring.NRVE_METRICS],
                _f(j["NRVE_Acc"]["signed_deviation"]),
            ]
            for label, j in agreement["judges"].items()
        ]
        mean = agreement["mean_judge"]
        rows.append(
            ["Mean judge", *[f"{_f(mean[d]['rho'], 3)} / {_f(mean[d]['tau'], 3)}" for d in scoring.NRVE_METRICS], "–"]
        )
        tables.append(
            {
                "title": "Agreement with humans: Spearman rho / Kendall tau over methods (Table 6)",
                "columns": ["Judge", *scoring.NRVE_METRICS, "Signed deviation"],
                "rows": rows,
            }
        )
    inter = (agreement or {}).get("inter_annotator")
    if inter:
        i = inter["instr"]
        rows = [
            ["Instruction alignment", "Fleiss' kappa", _f(i["value"], 3), f"{i['n_samples']} x {i['n_annotators']}"],
            [
                "Instruction alignment",
                "Krippendorff's alpha (nominal)",
                _f(i["krippendorff_alpha_nominal"], 3),
                str(i["n_samples_alpha"]),
            ],
        ]
        for key, name in (("phy", "Physics plausibility"), ("temp", "Temporal consistency")):
            rows.append(
                [name, "Krippendorff's alpha (ordinal)", _f(inter[key]["value"], 3), str(inter[key]["n_samples"])]
            )
            rows.append(
                [name, "Krippendorff's alpha (interval)", _f(inter[key]["interval"], 3), str(inter[key]["n_samples"])]
            )
        tables.append(
            {
                "title": "Inter-annotator agreement of the human scores (Table 5)",
                "columns": ["Dimension", "Agreement metric", "Score", "Samples"],
                "rows": rows,
            }
        )
    return tables


def blank_unavailable_nrv(summary: dict) -> None:
    """No number where none was earned: a metric the headline reports unavailable is null in
    ``by_category`` / ``by_difficulty`` / ``by_method`` and in the cross-judge block (Table 2), overall and per
    method: its ``mean`` and ``std`` (they average in the dead judge's fallback scores), and the ``per_judge`` mean
    of each judge that is itself unavailable (``by_judge``; with one judge, that judge), named in
    ``unavailable_judges``. The other judges' own means stay: each is earned, as in ``by_judge``."""
    blank_unavailable(summary)
    for per in (summary.get("by_method_category") or {}).values():  # method -> category -> metrics
        blank_unavailable({"metrics": summary["metrics"], "grid": per}, ("grid",))
    cross = summary.get("cross_judge") or {}
    blocks = [cross, *(cross.get("by_method") or {}).values()]
    for m, headline in summary["metrics"].items():
        if not (isinstance(headline, dict) and headline.get("unavailable")):
            continue
        dead = _dead_judges(summary, m)
        for block in blocks:
            stats = block.get(m)
            if isinstance(stats, dict):
                per_judge = stats.get("per_judge") or {}
                stats.update(
                    mean=None,
                    std=None,
                    unavailable=True,
                    per_judge={j: None if j in dead else v for j, v in per_judge.items()},
                    unavailable_judges=[j for j in per_judge if j in dead],
                )


def _dead_judges(summary: dict, metric: str) -> set[str]:
    """The judges whose own ``metric`` is unavailable (``judges_availability``); with one judge the headline is
    that judge's, so it is that one."""
    judges = list(summary.get("judges") or [])
    by_judge = summary.get("by_judge") or {}
    dead = {j for j in judges if ((by_judge.get(j) or {}).get(metric) or {}).get("unavailable")}
    return dead or (set(judges) if len(judges) == 1 else set())


def agreement_section(instances: list[dict], rows: list[dict], cfg: Any) -> dict:
    """``agreement``: each judge's base-variant NRVE-Acc against ``agreement.human_scores`` (§5, App. B.2)."""
    from vbench_ray.agreement import HumanScoresError, agreement_summary, read_human_scores

    try:
        records = read_human_scores(cfg.agreement.human_scores)
    except HumanScoresError as exc:
        raise DataError(str(exc)) from None
    per_judge: dict[str, list[dict]] = {}
    for r in scoring.percent_rows([i for i in instances if i["variant"] == "base"]):
        per_judge.setdefault(r["judge"], []).append(r)
    categories = {r["instance_id"]: r["category"] for r in rows if r.get("category")}
    out = agreement_summary(
        per_judge, records, cfg.score.normalize, scoring.weights_of(cfg.score), cfg.score.epsilon, categories
    )
    out["human_scores"] = str(cfg.agreement.human_scores)
    return out
