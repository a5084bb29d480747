"""``vbench-ray compare RUN_DIR [RUN_DIR ...] --out DIR``: a leaderboard of runs of one benchmark.

Inputs are run directories as written by ``vbench-ray run`` (README, "The run directory"), read from disk
only: ``config.yaml`` (scoring options), ``summary.json`` (each run's headline value and CI),
``cases/*.parquet`` (per-case values of objective metrics) and ``judgments.parquet`` (per-question
judge outcomes of checklist metrics). Nothing is re-run.

For every metric (see :mod:`vbench_ray.paired` for the statistics):

* each run's value and 95% CI as its own ``summary.json`` reports them, ``n`` and ``n_missing`` (cases
  that some compared run scored and this one did not: not in its run, failed, or excluded);
* rank (1 = best) on the cases **every** run scored, with a bootstrap rank interval and P(rank 1);
* for every pair of runs, on the cases both scored: the difference A - B with a paired bootstrap CI, a
  paired permutation p-value, McNemar on per-question (or per-edit-point) correct/incorrect where the
  metric has binary units, and both p-values Holm-adjusted across the pairs of that metric.

Runs scored with different options (``score.*``, the judge's identity, sampling and parse mode, metric
formulas and exclusion rules: :func:`scoring_options`) are refused unless ``allow_mixed``; the leaderboard
then lists the options that differ, per run, and tags the metric cells they affect. A judge answered through
different backends in different runs is no refusal but a line under ``checks`` (:func:`backend_notes`).

Outputs in ``--out``: ``leaderboard.json``, ``leaderboard.csv``, ``leaderboard.html`` (one self-contained
page: a sortable table, forest plots of each run minus the reference, rank intervals, the pair table) and
an offline wandb run in ``DIR/wandb``.

Where the rest lives: reading runs, their units and options in :mod:`vbench_ray.compare_runs`; the files written
in :mod:`vbench_ray.board_outputs`, the terminal table in :mod:`vbench_ray.board_text`. What depends on the
benchmark (its headline metric, the units of its judged metrics, its own options, its analyses) is its class's
compare hooks (``vbench_ray.benchmarks.base.Benchmark``).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from vbench_ray import paired
from vbench_ray.board_outputs import (  # noqa: F401  (the outputs: JSON, CSV, HTML, wandb; re-exported)
    FORMULA_LEADS,
    _write_csv,
    analysis_tables,
    csv_cell,
    csv_rows,
    log_wandb,
    pair_rows,
    write_outputs,
)
from vbench_ray.board_text import format_board  # noqa: F401  (the terminal table; re-exported)
from vbench_ray.compare_base import RUNTIME_KEYS, CompareError, Run  # noqa: F401  (re-exported)
from vbench_ray.compare_runs import (  # noqa: F401  (reading runs, their units and options; re-exported)
    backend_notes,
    benchmark_class,
    extract_units,
    load_run,
    mixed_options,
    option_metrics,
    scoring_options,
)

log = logging.getLogger(__name__)

ANALYSIS_FLAGS = "--human-prefs / --human-answers / --judge-repeats"


# ----------------------------------------------------------------------------- the leaderboard


def _unique_labels(runs: list[Run]) -> None:
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    for r in runs:
        if seen[r.label] > 1:
            r.label = f"{r.label} ({r.path.parent.name}/{r.path.name})"
    if len({r.label for r in runs}) < len(runs):
        for i, r in enumerate(runs):
            r.label = f"{r.label} #{i + 1}"


def _metric_order(runs: list[Run], wanted: list[str] | None) -> list[str]:
    names: list[str] = []
    for r in runs:
        for m in r.summary.get("metrics") or {}:
            if m not in names:
                names.append(m)
    if wanted:
        unknown = [m for m in wanted if m not in names]
        if unknown:
            raise CompareError(f"--metrics: {unknown} not in any run's summary.json (metrics there: {names})")
        names = [m for m in names if m in wanted]
    return names


def _default_rank_by(runs: list[Run], names: list[str], benchmark: str) -> str:
    """The benchmark's headline metric (``Benchmark.primary_metric``) when some run has a value for it, else the
    first metric some run has a value for (a CoVEBench run without a judge has UAS n/a: rank by SSIM, not n/a)."""

    def has_value(m: str) -> bool:
        return any(((r.summary.get("metrics") or {}).get(m) or {}).get("value") is not None for r in runs)

    primary = benchmark_class(benchmark).primary_metric
    if primary in names and has_value(primary):
        return primary
    return next((m for m in names if has_value(m)), names[0])


def _earned(run: Run, metric: str) -> bool:
    """A run takes part in a metric's ranks and pairs when it has the metric's units and its summary a value for
    it: a metric with no value (no valid judge answer, a dead judge) earns no rank and no difference, whatever
    fallback units its rows hold."""
    value = ((run.summary.get("metrics") or {}).get(metric) or {}).get("value")
    return metric in run.units and value is not None


def _higher_is_better(runs: list[Run], metric: str) -> bool:
    for r in runs:
        m = (r.summary.get("metrics") or {}).get(metric) or {}
        if "higher_is_better" in m:
            return bool(m["higher_is_better"])
    return True


def compare(
    run_dirs: list[str | Path],
    reference: str | None = None,
    allow_mixed: bool = False,
    metrics: list[str] | None = None,
    rank_by: str | None = None,
    variant: str = "base",
    seed: int = 0,
    n_resamples: int = 1000,
    n_permutations: int = 10000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    human_prefs: str | Path | None = None,
    human_answers: str | Path | None = None,
    judge_repeats: list[str | Path] | None = None,
    analyses: bool = True,
) -> dict:
    """The leaderboard as a JSON-ready dict (see the module docstring). With ``analyses``, the ``analyses``
    section holds the benchmark's analyses (``Benchmark.analyses``; docs/analyses.md)."""
    if len(run_dirs) < 2:
        raise CompareError("compare needs at least two run directories")
    runs = [load_run(p, variant) for p in run_dirs]
    benchmarks = {r.benchmark for r in runs}
    if len(benchmarks) > 1:
        raise CompareError("runs of different benchmarks: " + ", ".join(f"{r.path} ({r.benchmark})" for r in runs))
    benchmark = runs[0].benchmark
    _unique_labels(runs)
    mixed = mixed_options(runs)
    if mixed and not allow_mixed:
        lines = [
            f"  {k}: " + ", ".join(f"{label}={json.dumps(v, default=str)}" for label, v in vals.items())
            for k, vals in mixed.items()
        ]
        raise CompareError(
            "runs were scored with different options (compare them anyway with --allow-mixed, "
            "and the leaderboard says which option each run used):\n" + "\n".join(lines)
        )
    names = _metric_order(runs, metrics)
    if not names:
        raise CompareError("no metric in the runs' summary.json")
    rank_by = rank_by or _default_rank_by(runs, names, benchmark)
    if rank_by not in names:
        raise CompareError(f"--rank-by {rank_by!r} is not among the compared metrics {names}")
    checks: list[str] = backend_notes(runs)
    stats_args = dict(seed=seed, n_resamples=n_resamples, confidence=confidence)

    per_model: dict[str, dict[str, dict]] = {r.label: {} for r in runs}
    pairs: list[dict] = []
    for m in names:
        hib = _higher_is_better(runs, m)
        union = set().union(*(set(r.units[m]) for r in runs if m in r.units))
        have = [r for r in runs if _earned(r, m)]
        shared = sorted(set.intersection(*(set(r.units[m]) for r in have))) if len(have) >= 2 else []
        ranks = None
        if len(have) >= 2 and shared:
            nums = np.array([[r.units[m][c][0] for c in shared] for r in have])
            dens = np.array([[r.units[m][c][1] for c in shared] for r in have])
            ranks = paired.bootstrap_ranks(nums, dens, higher_is_better=hib, **stats_args)
        for r in runs:
            s = (r.summary.get("metrics") or {}).get(m) or {}
            entry = {
                "value": s.get("value"),
                "ci95": s.get("ci95"),
                "n": s.get("n"),
                "higher_is_better": hib,
                "scale": s.get("scale"),
                "paired": m in r.units,
                "n_cases": len(r.units.get(m, {})),
                "n_missing": len(union - set(r.units.get(m, {}))),
                "n_ranked": len(shared),
                "rank": None,
                "rank_ci95": None,
                "p_best": None,
            }
            if m in r.units and r.units[m] and s.get("value") is not None:
                u = list(r.units[m].values())
                again = paired.pooled([a for a, _ in u], [b for _, b in u])
                if again is None or not math.isclose(again, float(s["value"]), rel_tol=1e-6, abs_tol=1e-9):
                    checks.append(
                        f"{r.label} {m}: value recomputed from the run's files ({again}) differs from "
                        f"its summary.json ({s['value']}); pairs and ranks use the recomputed units"
                    )
            if ranks is not None and r in have:
                i = have.index(r)
                entry.update(rank=ranks["rank"][i], rank_ci95=ranks["rank_ci95"][i], p_best=ranks["p_best"][i])
            per_model[r.label][m] = entry

    def sort_key(r: Run):
        e = per_model[r.label][rank_by]
        v = e["value"]
        return (
            e["rank"] if e["rank"] is not None else math.inf,
            -(v if v is not None else -math.inf) if e["higher_is_better"] else (v if v is not None else math.inf),
        )

    ordered = sorted(runs, key=sort_key)
    for m in names:  # pairs in leaderboard order: A is the better-placed run
        hib = _higher_is_better(runs, m)
        have = [r for r in ordered if _earned(r, m)]
        metric_pairs = []
        for a, b in itertools.combinations(have, 2):
            both = sorted(set(a.units[m]) & set(b.units[m]))
            rec = {
                "metric": m,
                "a": a.label,
                "b": b.label,
                "n_shared": len(both),
                "n_only_a": len(set(a.units[m]) - set(b.units[m])),
                "n_only_b": len(set(b.units[m]) - set(a.units[m])),
                "higher_is_better": hib,
                "diff": None,
                "ci95": None,
                "p_perm": None,
                "perm_exact": None,
                "mcnemar": None,
            }
            if both:
                na = [a.units[m][c][0] for c in both]
                da = [a.units[m][c][1] for c in both]
                nb = [b.units[m][c][0] for c in both]
                db = [b.units[m][c][1] for c in both]
                boot = paired.paired_bootstrap(na, nb, da, db, **stats_args)
                perm = paired.paired_permutation(na, nb, da, db, seed=seed, n_resamples=n_permutations)
                rec.update(diff=boot["diff"], ci95=boot["ci95"], p_perm=perm["p"], perm_exact=perm["exact"])
            if m in a.binary and m in b.binary:
                keys = sorted(set(a.binary[m]) & set(b.binary[m]))
                if keys:
                    rec["mcnemar"] = paired.mcnemar([a.binary[m][k] for k in keys], [b.binary[m][k] for k in keys])
            metric_pairs.append(rec)
        for key, adjusted in (
            ("p_perm", paired.holm([p["p_perm"] for p in metric_pairs])),
            ("mcnemar", paired.holm([p["mcnemar"]["p"] if p["mcnemar"] else None for p in metric_pairs])),
        ):
            for p, adj in zip(metric_pairs, adjusted):
                if key == "p_perm":
                    p["p_perm_holm"] = adj
                    p["significant"] = adj is not None and adj < alpha
                elif p["mcnemar"] is not None:
                    p["mcnemar"]["p_holm"] = adj
                    p["mcnemar"]["significant"] = adj is not None and adj < alpha
        pairs.extend(metric_pairs)
    ref = _pick_reference(ordered, reference)
    option_tags = {label: {} for label in per_model}
    for k, vals in mixed.items():
        for m in option_metrics(k, names, benchmark):
            for label, v in vals.items():
                option_tags[label].setdefault(m, {})[k] = v
    extra: dict[str, Any] = {}
    if analyses:
        extra = _analyses(
            benchmark,
            {r.label: r for r in ordered},
            variant,
            human_prefs=human_prefs,
            human_answers=human_answers,
            judge_repeats=judge_repeats,
            seed=seed,
            n_resamples=n_resamples,
        )
    return {
        "benchmark": benchmark,
        "variant": variant,
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "metrics": names,
        "rank_by": rank_by,
        "reference": ref.label,
        "settings": {
            "seed": seed,
            "n_resamples": n_resamples,
            "n_permutations": n_permutations,
            "confidence": confidence,
            "alpha": alpha,
            "multiple_testing": "holm (per metric, across pairs)",
            "allow_mixed": allow_mixed,
        },
        "mixed_options": mixed,
        "rows": [
            {
                "label": r.label,
                "run_dir": str(r.path.resolve()),
                "run_name": r.summary.get("run_name"),
                "judge": r.options.get("judge"),
                "n_cases": r.summary.get("n_cases"),
                "options": {k: v[r.label] for k, v in mixed.items()},
                "metrics": {m: {**per_model[r.label][m], "options": option_tags[r.label].get(m, {})} for m in names},
            }
            for r in ordered
        ],
        "pairs": pairs,
        "checks": checks,
        "analyses": extra,
    }


def _analyses(
    benchmark: str,
    runs: dict[str, Run],
    variant: str,
    human_prefs: str | Path | None,
    human_answers: str | Path | None,
    judge_repeats: list[str | Path] | None,
    seed: int,
    n_resamples: int,
) -> dict:
    """The benchmark's ``analyses`` hook on the compared runs (in leaderboard order) and the judge-repeat runs; a
    benchmark without analyses refuses analysis inputs."""
    hook = benchmark_class(benchmark).analyses
    if hook is None:
        if human_prefs or human_answers or judge_repeats:
            from vbench_ray.benchmarks import BENCHMARKS

            having = sorted(name for name in BENCHMARKS if BENCHMARKS[name].analyses is not None)
            raise CompareError(
                f"{ANALYSIS_FLAGS} are analyses of {', '.join(having) or 'no benchmark'}; "
                f"these runs are {benchmark}, which has none"
            )
        return {}
    repeats = [load_run(p, variant) for p in judge_repeats or []]
    return hook(
        runs,
        human_prefs=human_prefs,
        human_answers=human_answers,
        judge_repeats=repeats,
        seed=seed,
        n_resamples=n_resamples,
    )


def _pick_reference(ordered: list[Run], reference: str | None) -> Run:
    if reference is None:
        return ordered[0]
    for r in ordered:
        if reference in (r.label, str(r.path), str(r.path.resolve()), r.path.name):
            return r
    raise CompareError(f"--reference {reference!r} names none of the runs: {[r.label for r in ordered]}")


def main_compare(
    run_dirs: list[str],
    out: str,
    reference: str | None = None,
    allow_mixed: bool = False,
    metrics: list[str] | None = None,
    rank_by: str | None = None,
    variant: str = "base",
    seed: int = 0,
    n_resamples: int = 1000,
    n_permutations: int = 10000,
    alpha: float = 0.05,
    wandb_mode: str = "offline",
    **analysis_inputs,
) -> tuple[dict, dict]:
    board = compare(
        run_dirs,
        reference=reference,
        allow_mixed=allow_mixed,
        metrics=metrics,
        rank_by=rank_by,
        variant=variant,
        seed=seed,
        n_resamples=n_resamples,
        n_permutations=n_permutations,
        alpha=alpha,
        **analysis_inputs,
    )
    paths = write_outputs(board, out, wandb_mode=wandb_mode)
    return board, paths
