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
from vbench_ray.compare_base import (
    SAMPLED_KEYS,
    CompareError,
    Run,
    decoding_options,
    finite,
    flatten_options,
    judge_identity,
    resolved_settings,
    runtime_keys,
    served_by,
)


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
    run.served = served_sections(run)
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


def scoring_options(run: Run) -> dict[str, Any]:
    """The options that decide a run's scores: ``score.*``; each judge-like section's identity and decoding through
    ``decoding_options`` (the judge, each ``judges`` entry over it, and the benchmark's own: CoVEBench's ``vqr``,
    ViDiC's ``model``, AgenticVBench's ``agent``), the judge's parse mode and, where the benchmark's judge reads
    video, its video sampling; the editor's seed where its editor draws from one (``editor_seed``); each metric's
    own settings (its seed among them, less its class's ``runtime_keys``) and exclusion rules; the CI level;
    ``run.seed`` where the benchmark says it picks what is scored (``Benchmark.run_seed_scores``); and the rest of
    the benchmark's own (``Benchmark.comparison_options``)."""
    cfg = run.config
    bench = benchmark_class(run.benchmark)
    out: dict[str, Any] = {}
    flatten_options("score", cfg.get("score") or {}, out)
    judge = cfg.get("judge")
    if isinstance(judge, dict):
        out["judge"] = judge_identity(judge, run.summary.get("judge"))
        out.update(decoding_options("judge", judge))
        for key, value in judge.items():
            if "parse" in key:
                flatten_options(f"judge.{key}", value, out)
        if bench.judge_reads_video:
            flatten_options("judge.video", judge.get("video") or {}, out)
    if isinstance(cfg.get("judges"), list):  # several judges, one block each, each over `judge`
        entries = [j for j in cfg["judges"] if isinstance(j, dict)]
        out["judges"] = ", ".join(sorted(str(judge_identity(j)) for j in entries))
        own = [{k: v for k, v in j.items() if k not in ("name", "model", *SAMPLED_KEYS)} for j in entries]
        for key, value in flatten_options("", own, {}).items():
            out[f"judges{key}"] = value
        for i, entry in enumerate(entries):  # its top_p, top_k and seed (its own or `judge`'s) where it samples
            out.update(decoding_options(f"judges[{i}]", entry, judge, keys=()))
    out.update(editor_seed(cfg.get("editor")))
    out.update(bench.comparison_options(cfg))
    if bench.run_seed_scores(cfg, run.variant):
        out["run.seed"] = cfgutil.get(cfg, "run.seed")
    metrics_cfg = cfg.get("metrics") or {}
    for m in run.summary.get("metrics") or {}:
        if isinstance(metrics_cfg.get(m), dict):  # a setting left to the device as it resolved there (AES dtype auto)
            settings = {**metrics_cfg[m], **resolved_settings(m, metrics_cfg[m])}
            flatten_options(f"metrics.{m}", settings, out, runtime_keys(m))
        exclude = (metrics_cfg.get("exclude") or {}).get(m)
        if isinstance(exclude, dict):
            flatten_options(f"metrics.exclude.{m}", exclude, out)
    out["stats.confidence"] = cfgutil.get(cfg, "stats.confidence")
    return out


def editor_seed(editor: Any) -> dict[str, Any]:
    """``{"editor.seed": seed}`` where the run's editor made the edited videos from it (the diffusers backend's
    initial noise, the command backend's ``{seed}``); nothing where no editor ran (``precomputed``: the videos
    were made elsewhere) or the editor draws nothing (``Editor.keeps_source``: ``identity`` copies the source)."""
    from vbench_ray.editors import EDITORS

    if not isinstance(editor, dict) or editor.get("name") in (None, "precomputed"):
        return {}
    name = editor["name"]
    if name in EDITORS and getattr(EDITORS[name], "keeps_source", False):
        return {}
    return {"editor.seed": editor.get("seed")}


def served_sections(run: Run) -> dict[str, str]:
    """``{section: backend}`` of the run's judge-like sections whose options it compares (a top-level section with
    a ``backend``: ``judge``, ``vqr``, ViDiC's ``model``; each ``judges`` entry over ``judge``), by ``served_by``
    (a replayed log has none)."""
    cfg = run.config
    sections = {k: (v, None) for k, v in cfg.items() if isinstance(v, dict) and "backend" in v}
    if "judges" in run.options:
        judges = [j for j in cfg.get("judges") or [] if isinstance(j, dict)]
        sections.update({f"judges[{i}]": (entry, cfg.get("judge")) for i, entry in enumerate(judges)})
    out = {}
    for name, (section, base) in sections.items():
        compared = name.startswith("judges[") or any(k == name or k.startswith(f"{name}.") for k in run.options)
        backend = served_by(section, base) if compared else None
        if backend is not None:
            out[name] = backend
    return out


def backend_notes(runs: list[Run]) -> list[str]:
    """One line per judge-like section that answered through different backends in different runs: no scoring
    option (the same model, the same decoding), but kernels, attention implementations and video loaders differ
    between vLLM, transformers and a server, so answers can move; the leaderboard says so instead of refusing."""
    notes = []
    for name in sorted({k for r in runs for k in r.served}):
        served = {r.label: r.served[name] for r in runs if name in r.served}
        if len(set(served.values())) > 1:
            notes.append(
                f"{name}.backend differs ("
                + ", ".join(f"{label}={backend}" for label, backend in served.items())
                + "): the same model served by another backend decodes with other kernels and video loaders, "
                "so its answers can differ (compared anyway)"
            )
    return notes


def mixed_options(runs: list[Run]) -> dict[str, dict[str, Any]]:
    """``{option: {run label: value}}`` for the options whose values differ between the runs that have them (one a
    run lacks does not apply to it: its editor draws no seed, it does not score that metric); a run without it is
    listed as None."""
    keys = sorted({k for r in runs for k in r.options})
    out = {}
    for k in keys:
        values = {r.label: r.options.get(k) for r in runs}
        if len({json.dumps(r.options[k], sort_keys=True, default=str) for r in runs if k in r.options}) > 1:
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
