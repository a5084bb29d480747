"""``run(cfg)``: one benchmark, one run directory, from cases to summary, report and wandb.

The run directory (``output.dir``) holds ``config.yaml`` (the resolved config), ``cases/*.parquet``
(one row per case and variant, streamed as results finish), ``summary.json``, ``report.html`` and
``wandb/``. Re-running into the same directory skips finished ``(case_id, variant)`` rows.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
from omegaconf import DictConfig, OmegaConf

from vbench_ray.benchmarks import get_benchmark
from vbench_ray.config import ConfigError, to_dict, to_yaml
from vbench_ray.pipeline import build_dataset
from vbench_ray.sinks import CaseSink, log_to_wandb, write_json

log = logging.getLogger(__name__)

# Config sections whose change makes earlier rows incomparable: resuming across them is refused.
# (Judge answers are matched per request and prompt in the judge log, and scoring options only change
# how rows aggregate, so neither blocks a resume: replay re-scoring runs in the same directory.)
RESULT_SECTIONS = ("benchmark", "data", "metrics")


@dataclass
class RunResult:
    run_dir: Path
    summary: dict
    n_computed: int  # rows computed by this invocation (0 when everything was already done)
    seconds: float

    @property
    def summary_path(self) -> Path:
        return self.run_dir / "summary.json"

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.html"


def ensure_ray(cfg: DictConfig) -> None:
    """Connect to ``ray.address`` / ``RAY_ADDRESS`` (a cluster, or inside ``ray job submit``), else start locally."""
    import ray

    if ray.is_initialized():
        return
    address = cfg.ray.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
        # Logical CPUs: at least 4, so a stage's actors never starve the tasks feeding them (STACK.md)
        num_cpus = cfg.ray.num_cpus or max(4, os.cpu_count() or 1)
        # address="local": a fresh runtime, never silently attaching to a cluster someone else started
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=True,
                 _node_ip_address="127.0.0.1")


def _check_resumable(run_dir: Path, cfg: DictConfig) -> None:
    saved = run_dir / "config.yaml"
    has_rows = any((run_dir / "cases").glob("part-*.parquet"))
    if not has_rows:
        return
    if not cfg.output.resume:
        raise ConfigError(f"output.dir {run_dir} already holds results and output.resume=false; "
                          f"choose a new output.dir or set output.resume=true")
    if not saved.exists():
        return
    old = OmegaConf.load(saved)
    sections = RESULT_SECTIONS + tuple(get_benchmark(cfg.benchmark).result_sections)
    changed = [k for k in sections if OmegaConf.select(old, k) != OmegaConf.select(cfg, k)]
    if changed:
        raise ConfigError(f"output.dir {run_dir} holds rows computed with different `{'`, `'.join(changed)}` "
                          f"settings; resuming would mix them. Use a new output.dir.")


def run(cfg: DictConfig, variants: list | None = None) -> RunResult:
    """Evaluate ``cfg``; with ``variants`` (``vbench_ray.sweeps``), every case once per variant."""
    start = time.perf_counter()
    bench = get_benchmark(cfg.benchmark)
    run_dir = Path(cfg.output.dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    _check_resumable(run_dir, cfg)
    (run_dir / "config.yaml").write_text(to_yaml(cfg))

    schema = bench.schema(cfg)
    sink = CaseSink(run_dir, schema)
    cases = bench.load_cases(cfg)
    sweep_info = None
    if variants is None:  # a benchmark may ask for variants itself (NRVBench's negative controls)
        variants = bench.variants(cfg)
    if variants:
        cases, sweep_info = _expand(cfg, cases, variants, run_dir)
    todo = [c for c in cases if (c["case_id"], c["variant"]) not in sink.done_keys]
    log.info("%s: %d cases, %d already done, %d to compute", cfg.benchmark, len(cases), len(cases) - len(todo), len(todo))
    computed = _compute(bench, cfg, todo, schema, sink) if todo else 0

    table = _current_rows(sink.read_all(), cases)
    judgments, judge_info = _judge(bench, cfg, table.to_pylist(), run_dir)
    summary = finalize(run_dir, cfg, bench, table, judgments, judge_info, sweep_info)
    return RunResult(run_dir, summary, computed, time.perf_counter() - start)


def _expand(cfg: DictConfig, cases: list[dict], variants: list, run_dir: Path) -> tuple[list[dict], dict]:
    """Cases x variants, with each perturbed (video, variant) rendered once into ``run_dir/variants``."""
    from vbench_ray.sweeps import expand, render_jobs, render_variants

    variant_dir = run_dir / "variants"
    jobs = render_jobs(cases, variants, variant_dir)
    if jobs:
        ensure_ray(cfg)
    rendered = render_variants(jobs, cfg.ray.workers)
    rows = expand(cases, variants, variant_dir)
    for row in rows:
        missing = [row[c] for c in ("source_path", "edited_path") if row.get(c) and not Path(row[c]).exists()]
        if missing and not row.get("error_load"):
            row["error_load"] = f"variant {row['variant']}: perturbed video could not be made: {missing[0]}"
    info = {"variants": [{"name": v.name, "axis": v.axis, "value": v.value} for v in variants], **rendered}
    return rows, info


def _compute(bench, cfg: DictConfig, todo: list[dict], schema: pa.Schema, sink: CaseSink) -> int:
    stages = bench.stages(cfg)
    if not stages:  # nothing per case to compute (e.g. judge metrics only): record the cases as loaded
        return sink.write(pa.Table.from_pylist(todo, schema=_input_schema(schema, todo)))
    ensure_ray(cfg)
    ds = build_dataset(todo, stages, _input_schema(schema, todo), parallelism=len(todo))
    written = 0
    for batch in ds.iter_batches(batch_size=cfg.ray.shard_rows, batch_format="pyarrow"):
        written += sink.write(batch)
    return written


def _input_schema(schema: pa.Schema, rows: list[dict]) -> pa.Schema:
    """The part of the full schema the loader fills in (stage outputs are added by the stages)."""
    keys = {k for r in rows for k in r}
    return pa.schema([f for f in schema if f.name in keys])


def _current_rows(table: pa.Table, cases: list[dict]) -> pa.Table:
    """Rows of the cases this config selects (``run.limit`` may select fewer than the run dir holds)."""
    keys = {(c["case_id"], c["variant"]) for c in cases}
    mask = [k in keys for k in zip(table.column("case_id").to_pylist(), table.column("variant").to_pylist())]
    return table.filter(pa.array(mask, type=pa.bool_())) if table.num_rows else table


def _judge(bench, cfg: DictConfig, rows: list[dict], run_dir: Path) -> tuple[pa.Table | None, dict | None]:
    """The benchmark's judge phases in order, one judge log; the judged items go to ``judgments.parquet``."""
    phases = bench.judge_phases(cfg)
    if not phases:
        return None, None
    from vbench_ray.judges.backends import build_backend
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage, judge_stats

    judge_log = JudgeLog(run_dir)
    results: dict = {}
    info: dict = {}
    for phase in phases:
        requests = phase.build(rows, results)
        if not requests:
            continue
        if phase.judge_cfg.backend != "replay":
            ensure_ray(cfg)
        phase_results: dict = {}
        for judge_cfg, group in _by_video_override(phase.judge_cfg, requests):
            backend = build_backend(judge_cfg)
            phase_results.update(JudgeStage(backend, judge_log, judge_cfg.max_retries).run(group))
        results.update(phase_results)
        info[phase.name] = {"backend": phase.judge_cfg.backend, "model": backend.model_label,
                            **judge_stats(phase_results, requests, judge_log)}
    judgments = bench.score_judgments(rows, results, cfg)
    if judgments is not None:
        pq.write_table(judgments, run_dir / "judgments.parquet")
    return judgments, (info[phases[0].name] if len(phases) == 1 and info else info)


def _by_video_override(judge_cfg, requests: list) -> list[tuple[DictConfig, list]]:
    """Requests grouped by their ``video`` overrides (fps sweeps), each with its judge config: frame
    sampling is a property of a vLLM processor, so each distinct sampling gets its own backend."""
    groups: dict[str, list] = {}
    for r in requests:
        groups.setdefault(json.dumps(r.video, sort_keys=True), []).append(r)
    out = []
    for key, group in groups.items():
        override = json.loads(key)
        out.append((OmegaConf.merge(judge_cfg, {"video": override}) if override else judge_cfg, group))
    return out


def finalize(run_dir: Path, cfg: DictConfig, bench, table: pa.Table, judgments: pa.Table | None = None,
             judge_info: dict | None = None, sweep_info: dict | None = None) -> dict:
    """summary.json, report.html and the wandb run(s), from the rows on disk.

    Headline metrics are those of the ``base`` variant; with a sweep, ``by_variant.<variant>`` holds
    every variant's metrics and each variant is its own wandb run in the sweep's group.
    """
    variants = [v["name"] for v in sweep_info["variants"]] if sweep_info else ["base"]
    parts = {v: (_variant_rows(table, v), _variant_rows(judgments, v)) for v in variants}
    base_rows, base_judged = parts.get("base", (table, judgments))
    summary = bench.summarize(base_rows, cfg, base_judged)
    for key, value in bench.summarize_variants(table, cfg, judgments).items():  # e.g. negative-control checks
        summary[key] = summary.get(key, []) + value if isinstance(value, list) else value
    summary = {"benchmark": cfg.benchmark, "run_name": run_name(cfg),
               "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **summary}
    by_variant = {}
    if sweep_info:
        for v, (rows, judged) in parts.items():
            by_variant[v] = {m: {k: s.get(k) for k in ("value", "ci95", "n")}
                             for m, s in bench.summarize(rows, cfg, judged)["metrics"].items()}
        summary["by_variant"] = by_variant
        summary["sweep"] = {"name": cfg.wandb.group or run_name(cfg), **sweep_info}
    if judge_info:
        summary["judge"] = judge_info
    if cfg.run.notes:
        summary["notes"] = list(cfg.run.notes)
    write_json(run_dir / "summary.json", summary)
    if cfg.report.enabled:
        from vbench_ray.report import write_report

        write_report(run_dir, n_strips=cfg.report.n_strips)
    if not sweep_info:
        log_to_wandb(run_dir, cfg.wandb, run_name(cfg), to_dict(cfg), summary, table)
    for v, (rows, _) in parts.items() if sweep_info else ():
        variant_summary = {"metrics": {m: s for m, s in by_variant[v].items()}}
        log_to_wandb(run_dir, cfg.wandb, f"{run_name(cfg)}/{v}", {**to_dict(cfg), "variant": v},
                     variant_summary, rows)
    return summary


def _variant_rows(table: pa.Table | None, variant: str) -> pa.Table | None:
    if table is None:
        return None
    return table.filter(pa.compute.equal(table.column("variant"), variant))


def run_name(cfg: DictConfig) -> str:
    return cfg.run.name or Path(cfg.output.dir).resolve().name
