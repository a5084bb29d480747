"""``run(cfg)``: one benchmark, one run directory, from cases to summary, report and wandb.

The run directory (``output.dir``) holds ``config.yaml`` (the resolved config), ``cases/*.parquet``
(one row per case and variant, streamed as results finish), ``summary.json``, ``report.html`` and
``wandb/``. Re-running into the same directory skips finished ``(case_id, variant)`` rows.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
from omegaconf import DictConfig, OmegaConf

from vbench_ray import case_table, driver_memory, preflight, stall
from vbench_ray.benchmarks import Benchmark, bench_for
from vbench_ray.config import ConfigError, to_dict, to_yaml
from vbench_ray.judges.backends import BACKENDS
from vbench_ray.judges.engines import EngineSet
from vbench_ray.pipeline import build_dataset, cluster_capacity, iter_blocks
from vbench_ray.run_plan import RunPlan
from vbench_ray.ray_start import ensure_ray, prewarm, settle_ray_start, start_began, start_data_actors, start_ray
from vbench_ray.run_lock import RunLock
from vbench_ray import live
from vbench_ray.figures import sweep_figures
from vbench_ray.interrupt import held
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


def _check_resumable(run_dir: Path, plan: RunPlan) -> None:
    cfg = plan.cfg
    saved = run_dir / "config.yaml"
    has_rows = any((run_dir / "cases").glob("part-*.parquet"))
    if not has_rows:
        return
    if not cfg.output.resume:
        raise ConfigError(
            f"output.dir {run_dir} already holds results and output.resume=false; "
            f"choose a new output.dir or set output.resume=true"
        )
    if not saved.exists():
        return
    old = OmegaConf.load(saved)
    sections = RESULT_SECTIONS + tuple(plan.bench.result_sections)
    changed = [k for k in sections if OmegaConf.select(old, k) != OmegaConf.select(cfg, k)]
    if changed:
        raise ConfigError(
            f"output.dir {run_dir} holds rows computed with different `{'`, `'.join(changed)}` "
            f"settings; resuming would mix them. Use a new output.dir."
        )


def run(cfg: DictConfig, variants: list | None = None) -> RunResult:
    """Evaluate ``cfg``; with ``variants`` (``vbench_ray.sweeps``), every case once per variant.

    One stream (docs/architecture.md, "Data flow"): the cases still to do go through the benchmark's stages and its
    judge phases in one Ray Data execution, rows reaching ``cases/`` as they finish; the judges' engines
    are started once for the run. Then every row (earlier runs' too) is scored from the judge log.
    """
    start = time.perf_counter()
    timing = {"wall_start": time.time()}  # seconds since the start at each milestone -> summary.timing
    bench = bench_for(cfg)  # the benchmark bound to this run's config, once: every step below asks it
    preflight.check(cfg, bench)  # every config problem up front, before Ray, a video or a model
    bench.check_data()  # a missing data file, duplicate ids: before Ray starts
    plan = RunPlan.build(bench)  # stages, judge phases and schema, built once and passed on
    run_dir = Path(cfg.output.dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    # one run per directory for the run's life: a second one refuses here, writing nothing
    with RunLock(run_dir):
        return _locked_run(plan, variants, run_dir, start, timing)


def _locked_run(plan: RunPlan, variants: list | None, run_dir: Path, start: float, timing: dict) -> RunResult:
    cfg = plan.cfg
    _check_resumable(run_dir, plan)
    (run_dir / "config.yaml").write_text(to_yaml(cfg))

    driver_memory.use_c_allocator()  # the driver's Arrow memory from the C allocator (driver_memory says why)
    sink = CaseSink(run_dir, plan.schema, retry_failed=cfg.output.retry_failed)
    # a fresh run (nothing to resume) that needs Ray: Ray starts (or the command's early start goes on) while the
    # cases load, its workers then import the CPU stages' modules while the driver imports Ray Data and plans
    if not sink.done_keys and plan.needs_ray and start_ray(cfg, warm=plan.stages):
        timing["ray_start"] = start_began() - start  # < 0: the command began it before the run (start_ray_early)
    try:
        return _run(plan, variants, run_dir, sink, Milestones(start, timing))
    finally:
        settle_ray_start()


class Milestones:
    """Seconds from the run's start at each milestone (``timing``: summary.json's ``timing``); a milestone reached
    twice keeps its first time."""

    def __init__(self, start: float, timing: dict):
        self.start, self.timing = start, timing

    def __call__(self, name: str) -> None:
        self.timing.setdefault(name, time.perf_counter() - self.start)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def _run(plan: RunPlan, variants: list | None, run_dir: Path, sink: CaseSink, mark: Milestones) -> RunResult:
    cfg, bench, schema = plan.cfg, plan.bench, plan.schema
    # the case table as Arrow chunks, made while the loader streams its rows (no list of dicts)
    cases = case_table.case_chunks(bench.iter_cases(), schema)
    sweep_info = None
    if variants is None:  # a benchmark may ask for variants itself (NRVBench's negative controls)
        variants = bench.variants()
    if variants:
        rows, sweep_info = _expand(cfg, case_table.to_rows(cases), variants, run_dir)
        cases = case_table.case_chunks(rows, schema)
        del rows
    todo = case_table.without_keys(cases, sink.done_keys)
    keys, n_cases, n_todo = case_table.keys_of(cases), case_table.num_rows(cases), case_table.num_rows(todo)
    log.info("%s: %d cases, %d already done, %d to compute", cfg.benchmark, n_cases, n_cases - n_todo, n_todo)
    mark("cases_loaded")
    phases = plan.phases
    if any(phase.prepare is not None for phase in phases):
        rows = case_table.to_rows(cases)
        for phase in phases:
            if phase.prepare is not None:
                phase.prepare(rows)
        del rows
    del cases  # from here the driver holds the cases to do (`todo`, handed to the stream) and the keys
    sink.on_write = live.start(run_dir, cfg, run_name(cfg), to_dict(cfg), sweep_info, n_todo).update  # W&B
    engines = EngineSet(str(run_dir))
    try:
        computed = _compute(plan, todo, sink, engines, run_dir, mark) if n_todo else 0
        del todo
        mark("stream_done")
        table = case_table.with_keys(sink.read_all(), keys)
        judgments, judge_info = _judge(plan, table.to_pylist() if phases else [], run_dir, engines)
        mark("judged")
    finally:
        engines.stop()
    summary = finalize(run_dir, bench, table, judgments, judge_info, sweep_info, mark.timing)
    return RunResult(run_dir, summary, computed, mark.elapsed())


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


def _compute(
    plan: RunPlan, todo: list[pa.Table], sink: CaseSink, engines: EngineSet, run_dir: Path, mark=lambda name: None
) -> int:
    """The stream: ``todo`` through the plan's stages and its judge phases, rows to the sink as they come."""
    cfg = plan.cfg
    stages = list(plan.stages)
    if plan.phases and plan.needs_ray:
        ensure_ray(cfg)
        from vbench_ray.judges.stream import start_log_actor

        judge_stages = plan.judge_stages(engines)  # their engines made, not yet loaded
        if judge_stages:
            log_actor = start_log_actor(str(run_dir))
            for stage in judge_stages:
                stage.init_kwargs["log_actor"] = log_actor
        stages += judge_stages
    if not stages:  # nothing per case to compute (e.g. replay re-scoring only): record the cases as loaded
        written = 0
        while todo:  # chunk by chunk, each freed once written
            written += sink.write(todo.pop(0))
        return written
    ensure_ray(cfg)
    mark("ray_ready")
    reserved = engines.reserved()
    capacity = cluster_capacity()
    plans = plan.pools(stages, capacity, reserved)  # a stream that cannot run is refused before a judge loads
    engines.start()
    start_data_actors()
    prewarm(stages, capacity)
    _budget_without_engines(reserved)
    _progress_on_terminals()
    # `todo` (the case table's chunks) is emptied into the object store: no second copy stays in the driver
    ds = build_dataset(todo, stages, todo[0].schema, parallelism=case_table.num_rows(todo), plans=plans)
    mark("stream_planned")
    # no row for ray.stall_s: the stream fails naming what it waits for, not 0 rows for ever
    blocks = stall.guard(iter_blocks(ds), cfg.ray.stall_s, lambda: stall.waiting_for(plans, reserved))
    written = drain_to_sink(blocks, sink, cfg.ray, mark)
    try:  # Ray Data's per-operator stats (wall, CPU, rows, object-store use) for whoever tunes the run
        (run_dir / "ray_data_stats.txt").write_text(ds.stats())
    except Exception as exc:
        log.debug("no Ray Data stats: %s", exc)
    return written


def drain_to_sink(blocks, sink: CaseSink, ray_cfg, mark=lambda name: None) -> int:
    """Write the stream's ``blocks`` as they finish; return the rows written. A shard when ``ray.shard_rows`` rows
    are in or ``ray.shard_seconds`` passed (the first block at once), so the first rows are on disk within seconds
    whatever the run's size, and a large run does not write tiny files. When the stream stops early (Ctrl-C's
    ``KeyboardInterrupt``, a failure), the rows already received are written before the exception goes on."""
    written, buffered, last = 0, [], 0.0
    try:
        for block in blocks:
            buffered.append(block)
            if (
                sum(b.num_rows for b in buffered) >= ray_cfg.shard_rows
                or time.monotonic() - last >= ray_cfg.shard_seconds
            ):
                chunk, buffered = buffered, []  # taken first: a write cut short is recomputed, never written twice
                with held():  # the shard and its W&B progress step (sink.on_write): Ctrl-C waits for both
                    written += sink.write(pa.concat_tables(chunk, promote_options="permissive"))
                last = time.monotonic()
                mark("first_row")
    except BaseException:
        if buffered:
            sink.write(pa.concat_tables(buffered, promote_options="permissive"))
        raise
    if buffered:
        written += sink.write(pa.concat_tables(buffered, promote_options="permissive"))
    return written


def _progress_on_terminals() -> None:
    """On a terminal, Ray Data's live progress display (one line per stage: rows done, rate, resources) instead
    of its plain log lines; in a log file (``ray job submit``, CI) nothing changes."""
    import sys

    from ray.data import DataContext

    if sys.stderr.isatty():
        ctx = DataContext.get_current()
        ctx.enable_rich_progress_bars, ctx.use_ray_tqdm = True, False


def _budget_without_engines(reserved: dict[str, float]) -> None:
    """Ray Data's budget without what the judge engines hold outside it: otherwise it plans with CPUs an engine
    replica already took. (Whether the stages fit beside the engines at all is checked when the stream is planned:
    ``vbench_ray.pool_plan``.)

    The budget is ``execution_options.resource_limits``: the cluster's CPUs and GPUs less the engines'. Ray 2.60
    deprecates ``exclude_resources`` (subtracted from whatever the cluster has) for ``label_selector``, which confines
    Ray Data to labelled nodes and cannot split one node between the engines and the stream. A limit is also the
    most Ray Data asks an autoscaling cluster for, so there no limit is set: the cluster grows for the pools rather
    than the stream waiting under a cap. No engine: no limit, whatever an earlier run in this process set."""
    from ray.data import DataContext, ExecutionResources

    capacity = cluster_capacity()
    limits = ExecutionResources.for_limits()
    if (reserved["CPU"] > 0 or reserved["GPU"] > 0) and not capacity["autoscales"]:
        limits = ExecutionResources.for_limits(
            cpu=max(0.0, capacity["CPU"] - reserved["CPU"]), gpu=max(0.0, capacity["GPU"] - reserved["GPU"])
        )
    DataContext.get_current().execution_options.resource_limits = limits


def _judge(plan: RunPlan, rows: list[dict], run_dir: Path, engines: EngineSet) -> tuple[pa.Table | None, dict | None]:
    """Every row's judge results from the judge log, asking the run's engines only what it lacks (rows the
    stream did not judge: earlier runs', a judge that cannot stream); the judged items go to
    ``judgments.parquet``."""
    bench, cfg, phases = plan.bench, plan.cfg, plan.phases
    if not phases:
        return None, None
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage, judge_stats

    judge_log = JudgeLog(run_dir)
    results: dict = {}
    info: dict = {}
    for phase in phases:
        requests = phase.build(rows, results)
        if not requests:
            continue
        phase_results: dict = {}
        for judge_cfg, group in _by_video_override(phase.judge_cfg, requests):
            engine = engines.get(judge_cfg, start=False)
            stage = JudgeStage(engine, judge_log, judge_cfg.max_retries, before_send=_starter(cfg, judge_cfg, engines))
            phase_results.update(stage.run(group))
        results.update(phase_results)
        info[phase.name] = {
            "backend": phase.judge_cfg.backend,
            "model": engine.model_label,
            **judge_stats(phase_results, requests, judge_log),
        }
    judgments = bench.score_judgments(rows, results)
    if judgments is not None:
        pq.write_table(judgments, run_dir / "judgments.parquet")
    return judgments, (info[phases[0].name] if len(phases) == 1 and info else info)


def _starter(cfg: DictConfig, judge_cfg, engines: EngineSet):
    """Ray and the engine for ``judge_cfg``, started when a request is about to be sent, not before: a run
    whose judge log answers everything (a resume with nothing left) loads no model."""

    def start() -> None:
        if BACKENDS[judge_cfg.backend].asks_a_model:
            ensure_ray(cfg)
        engines.get(judge_cfg).check()  # started by the stream, it may have found the endpoint down since

    return start


def _by_video_override(judge_cfg, requests: list) -> list[tuple[DictConfig, list]]:
    """Requests grouped by their ``video`` overrides (fps sweeps), each with its judge config: frame
    sampling is a property of a vLLM processor, so each distinct sampling gets its own backend. Other
    backends read the override per request: one group."""
    if BACKENDS[judge_cfg.backend].video_per_request:
        return [(judge_cfg, requests)]
    groups: dict[str, list] = {}
    for r in requests:
        groups.setdefault(json.dumps(r.video, sort_keys=True), []).append(r)
    out = []
    for key, group in groups.items():
        override = json.loads(key)
        out.append((OmegaConf.merge(judge_cfg, {"video": override}) if override else judge_cfg, group))
    return out


def finalize(
    run_dir: Path,
    bench: Benchmark,
    table: pa.Table,
    judgments: pa.Table | None = None,
    judge_info: dict | None = None,
    sweep_info: dict | None = None,
    timing: dict | None = None,
) -> dict:
    """summary.json, report.html and the wandb run(s), from the rows on disk.

    Headline metrics are those of the ``base`` variant; with a sweep, ``by_variant.<variant>`` holds
    every variant's metrics and each variant is its own wandb run in the sweep's group.
    """
    cfg = bench.cfg
    variants = [v["name"] for v in sweep_info["variants"]] if sweep_info else ["base"]
    parts = {v: (_variant_rows(table, v), _variant_rows(judgments, v)) for v in variants}
    base_rows, base_judged = parts.get("base", (table, judgments))
    summary = bench.summarize(base_rows, base_judged)
    for key, value in bench.summarize_variants(table, judgments).items():  # e.g. negative-control checks
        summary[key] = summary.get(key, []) + value if isinstance(value, list) else value
    summary = {
        "benchmark": cfg.benchmark,
        "run_name": run_name(cfg),
        "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **summary,
    }
    by_variant = {}
    if sweep_info:
        for v, (rows, judged) in parts.items():
            by_variant[v] = {
                m: {k: s.get(k) for k in ("value", "ci95", "n")}
                for m, s in bench.summarize(rows, judged)["metrics"].items()
            }
        summary["by_variant"] = by_variant
        summary["sweep"] = {
            "name": cfg.wandb.group or run_name(cfg),
            **sweep_info,
            "rows_by_variant": {v: rows.num_rows for v, (rows, _) in parts.items()},
        }
    if judge_info:
        summary["judge"] = judge_info
    if timing:  # seconds from the run's start: where a run's time went (ray start, first row, stream, judging)
        summary["timing"] = {k: (round(v, 3) if k != "wall_start" else v) for k, v in timing.items()}
        summary["timing"]["stages"] = stage_timing(table, timing["wall_start"])
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
        log_to_wandb(
            run_dir,
            cfg.wandb,
            f"{run_name(cfg)}/{v}",
            {**to_dict(cfg), **live.sweep_config(sweep_info, v)},
            variant_summary,
            rows,
            curves=sweep_figures(summary["sweep"], by_variant, list(summary["metrics"])) if v == "base" else (),
        )
    return summary


def stage_timing(table: pa.Table, since: float) -> dict:
    """Per stage, over the rows computed since ``since``: rows, summed seconds, and when the stage's first and
    last rows left it (seconds from the run's start), from the ``seconds_<stage>`` / ``at_<stage>`` columns."""
    out = {}
    for name in table.column_names:
        if not name.startswith("at_"):
            continue
        stage = name[len("at_") :]
        ats = table.column(name).to_pylist()
        secs = table.column(f"seconds_{stage}").to_pylist() if f"seconds_{stage}" in table.column_names else []
        here = [i for i, a in enumerate(ats) if a is not None and a >= since]
        if here:
            out[stage] = {
                "rows": len(here),
                "seconds_total": round(sum(secs[i] or 0.0 for i in here), 3),
                "first_row_s": round(min(ats[i] for i in here) - since, 3),
                "last_row_s": round(max(ats[i] for i in here) - since, 3),
            }
    return out


def _variant_rows(table: pa.Table | None, variant: str) -> pa.Table | None:
    if table is None:
        return None
    return table.filter(pa.compute.equal(table.column("variant"), variant))


def run_name(cfg: DictConfig) -> str:
    return cfg.run.name or Path(cfg.output.dir).resolve().name
