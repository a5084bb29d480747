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
then lists the options that differ, per run, and tags the metric cells they affect.

Outputs in ``--out``: ``leaderboard.json``, ``leaderboard.csv``, ``leaderboard.html`` (one self-contained
page: a sortable table, forest plots of each run minus the reference, rank intervals, the pair table) and
an offline wandb run in ``DIR/wandb``.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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

log = logging.getLogger(__name__)

PRIMARY = {"cove": "UAS", "vidic": "Avg", "nrv": "NRVE_Acc", "agentic": "overall"}
COVE_CHECKLIST = ("UAS", "IFS", "VRS", "SEM")
VIDIC_SECTIONS = {"Sim": "Similarities", "Diff": "Differences", "Avg": None}
# config keys that do not change a score (where things run, how fast, where weights sit)
RUNTIME_KEYS = {
    "device",
    "batch_size",
    "workers",
    "num_gpus",
    "gpu_fraction",
    "num_cpus",
    "backend",
    "replay_path",
    "env_vars",
    "vllm",
    "http",
    "hf",
    "seed",
    "concurrency",
    "dtype",
}


class CompareError(ValueError):
    """Runs that cannot be compared; the message says which runs and which option."""


@dataclass
class Run:
    path: Path
    label: str
    benchmark: str
    config: dict
    summary: dict
    cases: pd.DataFrame
    judgments: pd.DataFrame | None
    units: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # metric -> case -> (num, den)
    binary: dict[str, dict[tuple, bool]] = field(default_factory=dict)  # metric -> unit key -> correct
    options: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- reading runs


def _read_parquets(folder: Path) -> pd.DataFrame:
    frames = []
    for shard in sorted(folder.glob("*.parquet")):
        frames.append(pd.read_parquet(shard))
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_run(path: str | Path, variant: str = "base") -> Run:
    from omegaconf import OmegaConf

    from vbench_ray.run_lock import check_not_in_progress

    path = Path(path)
    check_not_in_progress(path, "compare")  # a run in progress: its summary.json is an earlier invocation's
    for name in ("summary.json", "config.yaml"):
        if not (path / name).is_file():
            raise CompareError(f"{path}: no {name} (not a finished run directory)")
    summary = json.loads((path / "summary.json").read_text())
    config = OmegaConf.to_container(OmegaConf.load(path / "config.yaml"), resolve=False)
    cases = _read_parquets(path / "cases")
    if len(cases) and "variant" in cases:
        cases = cases[cases["variant"] == variant].reset_index(drop=True)
    judgments = None
    if (path / "judgments.parquet").is_file():
        judgments = pd.read_parquet(path / "judgments.parquet")
        if "variant" in judgments:
            judgments = judgments[judgments["variant"] == variant].reset_index(drop=True)
    label = str(summary.get("run_name") or (config.get("run") or {}).get("name") or path.name)
    run = Run(
        path=path,
        label=label,
        benchmark=str(summary.get("benchmark") or config.get("benchmark")),
        config=config,
        summary=summary,
        cases=cases,
        judgments=judgments,
    )
    run.units, run.binary = extract_units(run)
    run.options = scoring_options(run)
    return run


def _finite(x: Any) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _get(cfg: dict, dotted: str, default: Any = None) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def extract_units(run: Run) -> tuple[dict, dict]:
    """Per metric: ``{case_id: (num, den)}`` (the metric's value on a case set is ``sum(num)/sum(den)``),
    and for metrics with binary units ``{unit key: correct}`` for McNemar."""
    units: dict[str, dict[str, tuple[float, float]]] = {}
    binary: dict[str, dict[tuple, bool]] = {}
    metrics = list((run.summary.get("metrics") or {}).keys())
    # objective metrics: one value per case in cases/ (null = excluded or failed)
    if len(run.cases):
        for m in metrics:
            if m in run.cases.columns and pd.api.types.is_numeric_dtype(run.cases[m]):
                units[m] = {str(c): (float(v), 1.0) for c, v in zip(run.cases["case_id"], run.cases[m]) if _finite(v)}
    j = run.judgments
    if j is not None and len(j):
        if run.benchmark == "cove" and {"metric", "correct", "score", "group"} <= set(j.columns):
            units.update(_cove_units(j, run.config, binary))
        elif run.benchmark == "vidic" and {"section", "k", "correct"} <= set(j.columns):
            units.update(_vidic_units(j, binary))
    return {m: u for m, u in units.items() if m in metrics}, binary


def _per_task(per_case: dict[str, list[float]], aggregation: str) -> dict[str, tuple[float, float]]:
    if aggregation == "per_task":
        return {c: (float(np.mean(v)), 1.0) for c, v in per_case.items() if v}
    return {c: (float(np.sum(v)), float(len(v))) for c, v in per_case.items() if v}


def _cove_units(j: pd.DataFrame, config: dict, binary: dict) -> dict:
    """CoVEBench checklist units, exactly as the run scored them (``cove_checklist.case_units``: paper App. F.1,
    F.3), as ``{case: (num, den)}``; and the binary units McNemar pairs (a question, or an edit point for UAS)."""
    from vbench_ray.benchmarks.cove_checklist import case_units

    aggregation = _get(config, "score.aggregation", "pooled")
    uas_unit = _get(config, "score.uas_unit", "group")
    rows = [
        {
            **r,
            "case_id": str(r["case_id"]),
            "correct": None if r.get("correct") is None or pd.isna(r["correct"]) else bool(r["correct"]),
            "score": r["score"] if _finite(r.get("score")) else None,
        }
        for r in j.to_dict("records")
    ]
    out: dict[str, dict] = {}
    for m in ("IFS", "VRS", "SEM", "UAS"):
        per_case = case_units(
            rows, m, uas_unit, aggregation == "per_task", _get(config, "score.sem_questions", "routed")
        )
        if per_case:
            out[m] = {
                c: (
                    (float(np.mean([v for v, _ in u])), 1.0)
                    if aggregation == "per_task"
                    else (float(sum(v * w for v, w in u)), float(sum(w for _, w in u)))
                )
                for c, u in per_case.items()
            }
    groups: dict[tuple, bool] = {}
    for r in rows:
        if r["metric"] in ("IFS", "VRS") and r["correct"] is not None:
            binary.setdefault(r["metric"], {})[(r["case_id"], str(r["question_id"]))] = r["correct"]
            key = (r["case_id"], str(r["group"]) if uas_unit == "group" else "task")
            groups[key] = groups.get(key, True) and r["correct"]
    if groups:
        binary["UAS"] = groups
    return out


def _vidic_units(j: pd.DataFrame, binary: dict) -> dict:
    """ViDiC accuracy (Table 2): Sim / Diff over their section's questions, Avg over all, pooled."""
    out = {}
    for m, section in VIDIC_SECTIONS.items():
        sub = j if section is None else j[j["section"] == section]
        per_case: dict[str, list[float]] = {}
        for r in sub.to_dict("records"):
            ok = bool(r["correct"]) if r["correct"] is not None and not pd.isna(r["correct"]) else False
            per_case.setdefault(str(r["case_id"]), []).append(100.0 * ok)
            binary.setdefault(m, {})[(str(r["case_id"]), str(r["section"]), str(r["k"]))] = ok
        if per_case:
            out[m] = _per_task(per_case, "pooled")
    return out


# ----------------------------------------------------------------------------- scoring options


def _flatten(prefix: str, node: Any, out: dict) -> dict:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in RUNTIME_KEYS:
                continue
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(node, list) and node and all(isinstance(x, dict) for x in node):
        for i, v in enumerate(node):
            _flatten(f"{prefix}[{i}]", v, out)
    else:
        if isinstance(node, str) and (prefix.endswith("_weights") or prefix.endswith(".model")) and "/" in node:
            node = node.rstrip("/").rsplit("/", 1)[-1]  # a local path: the same model sits elsewhere per machine
        out[prefix] = node
    return out


def _judge_identity(judge: dict | None, summary_judge: Any) -> str | None:
    judge = judge or {}
    if judge.get("name"):
        return str(judge["name"])
    if judge.get("model"):
        return str(judge["model"]).rstrip("/").rsplit("/", 1)[-1]
    if isinstance(summary_judge, dict):
        return summary_judge.get("model")
    return None


def scoring_options(run: Run) -> dict[str, Any]:
    """The options that decide a run's scores: ``score.*``, the judge (identity, sampling, parse mode,
    video sampling), each metric's own settings and exclusion rules, and the CI level."""
    cfg = run.config
    out: dict[str, Any] = {}
    _flatten("score", cfg.get("score") or {}, out)
    judge = cfg.get("judge")
    if isinstance(judge, dict):
        out["judge"] = _judge_identity(judge, run.summary.get("judge"))
        for key in ("temperature", "top_p", "max_tokens", "max_retries"):
            if key in judge:
                out[f"judge.{key}"] = judge[key]
        for key, value in judge.items():
            if "parse" in key:
                _flatten(f"judge.{key}", value, out)
        if run.benchmark != "vidic":  # ViDiC's judge is text-only: its video block is unused
            _flatten("judge.video", judge.get("video") or {}, out)
    if isinstance(cfg.get("judges"), list):  # NRVBench: several judges
        out["judges"] = ", ".join(sorted(str(_judge_identity(j, None)) for j in cfg["judges"] if isinstance(j, dict)))
        for key, value in _flatten(
            "",
            [{k: v for k, v in j.items() if k not in ("name", "model")} for j in cfg["judges"] if isinstance(j, dict)],
            {},
        ).items():
            out[f"judges{key}"] = value
    model = cfg.get("model")
    if run.benchmark == "vidic" and isinstance(model, dict):  # Table 5's fixed decoding of the model under test
        for key in ("temperature", "top_p"):
            out[f"model.{key}"] = model.get(key)
        _flatten("model.video", model.get("video") or {}, out)
    metrics_cfg = cfg.get("metrics") or {}
    for m in run.summary.get("metrics") or {}:
        if isinstance(metrics_cfg.get(m), dict):
            _flatten(f"metrics.{m}", metrics_cfg[m], out)
        exclude = (metrics_cfg.get("exclude") or {}).get(m)
        if isinstance(exclude, dict):
            _flatten(f"metrics.exclude.{m}", exclude, out)
    out["stats.confidence"] = _get(cfg, "stats.confidence")
    return out


def mixed_options(runs: list[Run]) -> dict[str, dict[str, Any]]:
    """``{option: {run label: value}}`` for the options whose values differ between runs."""
    keys = sorted({k for r in runs for k in r.options})
    out = {}
    for k in keys:
        values = {r.label: r.options.get(k) for r in runs}
        if len({json.dumps(v, sort_keys=True, default=str) for v in values.values()}) > 1:
            out[k] = values
    return out


def option_metrics(option: str, metrics: list[str], benchmark: str) -> list[str]:
    """The metric columns an option affects."""
    if option.startswith("metrics.exclude."):
        return [m for m in metrics if option.split(".")[2] == m]
    if option.startswith("metrics."):
        return [m for m in metrics if option.split(".")[1] == m]
    if option == "stats.confidence":
        return list(metrics)
    judged = {"cove": COVE_CHECKLIST, "vidic": tuple(VIDIC_SECTIONS)}.get(benchmark)
    if judged is not None and option.split(".")[0] in ("score", "judge", "model"):
        return [m for m in metrics if m in judged]
    return list(metrics)


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
    """The benchmark's headline metric (UAS, Avg, NRVE_Acc, overall) when some run has a value for it, else the
    first metric some run has a value for (a CoVEBench run without a judge has UAS n/a: rank by SSIM, not n/a)."""

    def has_value(m: str) -> bool:
        return any(((r.summary.get("metrics") or {}).get(m) or {}).get("value") is not None for r in runs)

    primary = PRIMARY.get(benchmark)
    if primary in names and has_value(primary):
        return primary
    return next((m for m in names if has_value(m)), names[0])


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
    section holds :func:`vbench_ray.analyses.cove.cove_analyses` (CoVEBench) or
    :func:`vbench_ray.analyses.vidic.vidic_analyses` (ViDiC) (docs/analyses.md)."""
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
    checks: list[str] = []
    stats_args = dict(seed=seed, n_resamples=n_resamples, confidence=confidence)

    per_model: dict[str, dict[str, dict]] = {r.label: {} for r in runs}
    pairs: list[dict] = []
    for m in names:
        hib = _higher_is_better(runs, m)
        have = [r for r in runs if m in r.units]
        union = set().union(*(set(r.units[m]) for r in have)) if have else set()
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
        have = [r for r in ordered if m in r.units]
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
    if analyses and benchmark == "cove":
        from vbench_ray.analyses.cove import cove_analyses

        repeats = [load_run(p, variant) for p in judge_repeats or []]
        extra = cove_analyses(
            {r.label: r for r in ordered},
            human_prefs=human_prefs,
            human_answers=human_answers,
            judge_repeats=repeats,
            seed=seed,
            n_resamples=n_resamples,
        )
    elif analyses and benchmark == "vidic":
        from vbench_ray.analyses.vidic import vidic_analyses

        if human_prefs:
            raise CompareError(
                "--human-prefs is a CoVEBench analysis; these runs are vidic "
                "(ViDiC takes --human-answers and --judge-repeats)"
            )
        repeats = [load_run(p, variant) for p in judge_repeats or []]
        try:
            extra = vidic_analyses({r.label: r for r in ordered}, human_answers=human_answers, judge_repeats=repeats)
        except (ValueError, FileNotFoundError) as exc:
            raise CompareError(str(exc)) from None
    elif human_prefs or human_answers or judge_repeats:
        raise CompareError(
            "--human-prefs / --human-answers / --judge-repeats are CoVEBench (and ViDiC: "
            f"--human-answers, --judge-repeats) analyses; these runs are {benchmark}"
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
