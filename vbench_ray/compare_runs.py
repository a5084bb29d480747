"""Finished runs as ``vbench-ray compare`` reads them: each run's files, its per-case units and the options that
decide its scores.

A run folder (README, "The run directory") is read from disk only: ``config.yaml``, ``summary.json``,
``cases/*.parquet`` and ``judgments.parquet``. What depends on the benchmark comes from its class's compare hooks
(``vbench_ray.benchmarks.base.Benchmark``: ``compare_units``, ``judge_reads_video``, ``comparison_options``,
``judged_metrics``); a run of a benchmark that is not registered here is read with the base class's defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from vbench_ray import cfgutil
from vbench_ray.compare_base import CompareError, Run, finite, flatten_options, sampling_seed


def benchmark_class(name: str) -> type:
    """The registered benchmark class ``name``, or the ``Benchmark`` base (no units beyond the per-case columns,
    no headline metric, no analyses) for a name not registered in this installation."""
    from vbench_ray.benchmarks import BENCHMARKS, Benchmark

    return BENCHMARKS[name] if name in BENCHMARKS else Benchmark


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
        variant=variant,
    )
    run.units, run.binary = extract_units(run)
    run.options = scoring_options(run)
    return run


def extract_units(run: Run) -> tuple[dict, dict]:
    """Per metric: ``{case_id: (num, den)}`` (the metric's value on a case set is ``sum(num)/sum(den)``),
    and for metrics with binary units ``{unit key: correct}`` for McNemar. Objective metrics: one value per case
    in ``cases/``; metrics scored from ``judgments.parquet``: the benchmark's ``compare_units``."""
    units: dict[str, dict[str, tuple[float, float]]] = {}
    binary: dict[str, dict[tuple, bool]] = {}
    metrics = list((run.summary.get("metrics") or {}).keys())
    # objective metrics: one value per case in cases/ (null = excluded or failed)
    if len(run.cases):
        for m in metrics:
            if m in run.cases.columns and pd.api.types.is_numeric_dtype(run.cases[m]):
                units[m] = {str(c): (float(v), 1.0) for c, v in zip(run.cases["case_id"], run.cases[m]) if finite(v)}
    j = run.judgments
    if j is not None and len(j):
        units.update(benchmark_class(run.benchmark).compare_units(j, run.config, binary))
    return {m: u for m, u in units.items() if m in metrics}, binary


# ----------------------------------------------------------------------------- scoring options


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
    """The options that decide a run's scores: ``score.*``, the judge (identity, sampling, its seed where it
    samples, parse mode, video sampling where the benchmark's judge reads video), each metric's own settings (its
    seed among them) and exclusion rules, the CI level, ``run.seed`` where the benchmark says it picks what is
    scored (``Benchmark.run_seed_scores``), and the benchmark's own (``Benchmark.comparison_options``)."""
    cfg = run.config
    bench = benchmark_class(run.benchmark)
    out: dict[str, Any] = {}
    flatten_options("score", cfg.get("score") or {}, out)
    judge = cfg.get("judge")
    if isinstance(judge, dict):
        out["judge"] = _judge_identity(judge, run.summary.get("judge"))
        for key in ("temperature", "top_p", "max_tokens", "max_retries"):
            if key in judge:
                out[f"judge.{key}"] = judge[key]
        samples, seed = sampling_seed(judge)
        if samples:
            out["judge.seed"] = seed
        for key, value in judge.items():
            if "parse" in key:
                flatten_options(f"judge.{key}", value, out)
        if bench.judge_reads_video:
            flatten_options("judge.video", judge.get("video") or {}, out)
    if isinstance(cfg.get("judges"), list):  # several judges, one block each, each over `judge`
        entries = [j for j in cfg["judges"] if isinstance(j, dict)]
        out["judges"] = ", ".join(sorted(str(_judge_identity(j, None)) for j in entries))
        for key, value in flatten_options(
            "", [{k: v for k, v in j.items() if k not in ("name", "model", "seed")} for j in entries], {}
        ).items():
            out[f"judges{key}"] = value
        for i, entry in enumerate(entries):
            samples, seed = sampling_seed(entry, judge)
            if samples:
                out[f"judges[{i}].seed"] = seed
    out.update(bench.comparison_options(cfg))
    if bench.run_seed_scores(cfg, run.variant):
        out["run.seed"] = cfgutil.get(cfg, "run.seed")
    metrics_cfg = cfg.get("metrics") or {}
    for m in run.summary.get("metrics") or {}:
        if isinstance(metrics_cfg.get(m), dict):
            flatten_options(f"metrics.{m}", metrics_cfg[m], out)
        exclude = (metrics_cfg.get("exclude") or {}).get(m)
        if isinstance(exclude, dict):
            flatten_options(f"metrics.exclude.{m}", exclude, out)
    out["stats.confidence"] = cfgutil.get(cfg, "stats.confidence")
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
    """The metric columns an option affects: a metric's own settings that metric, the CI level every metric, an
    option of a section named after a metric that metric, a ``score``, ``judge`` or ``model`` option the benchmark's
    ``judged_metrics`` (every metric where it has none)."""
    if option.startswith("metrics.exclude."):
        return [m for m in metrics if option.split(".")[2] == m]
    if option.startswith("metrics."):
        return [m for m in metrics if option.split(".")[1] == m]
    if option == "stats.confidence":
        return list(metrics)
    section = option.split(".")[0].split("[")[0]
    named = [m for m in metrics if m.lower() == section.lower()]
    if named:  # a section named after a metric (CoVEBench's `vqr`, VQR's judge) affects that metric alone
        return named
    judged = benchmark_class(benchmark).judged_metrics
    if judged is not None and option.split(".")[0] in ("score", "judge", "model"):
        return [m for m in metrics if m in judged]
    return list(metrics)
