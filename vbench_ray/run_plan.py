"""A run's plan, built once from its config: the stream's stages, the judge phases, the case table's schema, and
(once the cluster's size is known) every stage's pool. The runner builds one ``RunPlan`` and passes it on;
``vbench-ray run --dry-run`` prints it (``describe``) without computing anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import pyarrow as pa
from omegaconf import DictConfig

from vbench_ray.benchmarks import Benchmark, bench_for
from vbench_ray.editors import editor_stages
from vbench_ray.pipeline import Stage
from vbench_ray.pool_plan import StagePlan, plan_stages

log = logging.getLogger(__name__)


@dataclass
class RunPlan:
    """What one run computes: ``bench`` (the benchmark bound to ``cfg``), ``stages`` (the editor's, then the
    benchmark's per-case stages), ``phases`` (its judge phases, in order) and ``schema`` (the case table's columns),
    each built once; ``pool_plans`` (every stream stage's pool, ``pools``) once the cluster's size is known."""

    cfg: DictConfig
    bench: Benchmark
    stages: list[Stage]
    phases: list
    schema: pa.Schema
    pool_plans: dict[str, StagePlan] | None = None

    @classmethod
    def build(cls, bench: Benchmark) -> "RunPlan":
        """The plan of ``bench`` (a benchmark bound to its config: ``bench_for(cfg)``)."""
        cfg = bench.cfg
        stages = editor_stages(cfg) + list(bench.stages())
        phases = list(bench.judge_phases())
        return cls(cfg, bench, stages, phases, bench.schema(stages, phases))

    @property
    def needs_ray(self) -> bool:
        """Whether the stream needs Ray: per-case stages, or a judge phase that asks a model (replay reads a file)."""
        from vbench_ray.judges.backends import BACKENDS

        return bool(self.stages) or any(BACKENDS[p.judge_cfg.backend].asks_a_model for p in self.phases)

    def judge_stages(self, engines, log_actor: Any = None) -> list[Stage]:
        """One ``judge`` stage per phase, in order, when every phase's engine can serve the stream (their engines
        made, not loaded). A vLLM judge through ``ray.data.llm`` (one engine per dataset) cannot: its phases run
        after the stream, and this is empty. ``log_actor``: where the stages' judge log lines go (the dry run,
        which starts none, plans with None)."""
        from vbench_ray.judges.backends import BACKENDS
        from vbench_ray.judges.stream import STATE_COLUMN, StreamJudge

        if not self.phases or not self.needs_ray:
            return []
        made = [engines.get(p.judge_cfg, start=False) for p in self.phases]
        if not all(e.streams for e in made):
            log.info(
                "judge phases run after the stream: the %s backend keeps no engine across datasets",
                [e.name for e in made if not e.streams][0],
            )
            return []
        stages = []
        for phase, engine in zip(self.phases, made):
            replicas = BACKENDS[phase.judge_cfg.backend].stream_replicas(phase.judge_cfg)
            stages.append(
                Stage(
                    name=f"judge_{phase.name}",
                    fn=StreamJudge,
                    kind="judge",
                    batched=True,
                    skip_failed=False,
                    init_kwargs={
                        "phase": phase.name,
                        "build": phase.build,
                        "engine": engine,
                        "log_actor": log_actor,
                        "max_retries": int(phase.judge_cfg.max_retries),
                    },
                    outputs={STATE_COLUMN: "str"},
                    transient=(STATE_COLUMN,),
                    num_cpus=0.25,
                    workers=2 * replicas,
                    min_workers=1,
                    batch_size=self.cfg.ray.judge_batch_size,
                )
            )
        return stages

    def pools(self, stages: list[Stage], capacity: dict, reserved: dict[str, float]) -> dict[str, StagePlan]:
        """Every stage's plan on a cluster of ``capacity`` beside the engines' ``reserved`` (``pool_plan``), kept as
        ``pool_plans``; a stream that cannot run is refused here (``ConfigError``), before a judge loads."""
        self.pool_plans = plan_stages(stages, capacity, reserved)
        return self.pool_plans


def describe(
    plan: RunPlan, capacity: dict, engines, n_cases: int, n_done: int, n_variants: int, requests: dict[str, str]
) -> list[str]:
    """The lines ``run --dry-run`` prints: the cluster, the cases, each stage with its pool and resources, the judge
    engines with what they hold, and each judge phase with its requests (``requests``: phase -> what to say)."""
    cfg = plan.cfg
    reserved = engines.reserved()
    stream = plan.stages + plan.judge_stages(engines)
    plans = plan.pools(stream, capacity, reserved) if stream else {}
    lines = [
        f"plan of a {cfg.benchmark} run into {cfg.output.dir} (nothing computed)",
        (
            f"cluster: {capacity['CPU']:g} CPUs, {capacity['GPU']:g} GPUs"
            + (" (autoscaling)" if capacity.get("autoscales") else "")
        )
        if plan.needs_ray
        else "cluster: not read (nothing needs Ray)",
        f"cases: {n_cases}"
        + (f" x {n_variants} variants" if n_variants > 1 else "")
        + f", {n_done} already done, {n_cases * max(1, n_variants) - n_done} to compute",
        f"stages ({len(stream)}):",
    ]
    for stage in stream:
        p = plans[stage.name]
        gpus = stage.num_gpus if p.num_gpus is None else p.num_gpus
        cap = p.max_size if stage.kind == "judge" else stage.workers
        size = (
            f"pool {p.min_size}..{p.max_size} actors"
            if stage.is_actor
            else f"tasks (up to {cap} at once)"
            if cap
            else "tasks"
        )
        lines.append(
            f"  {stage.name:<22} {stage.kind:<5} {size}, {p.num_cpus:g} CPU"
            + (f", {gpus:g} GPU" if gpus else "")
            + " each"
        )
    if not stream:
        lines.append("  (none: the cases are recorded as loaded)")
    lines.append(
        f"judge engines: {len(engines.engines)}, holding {reserved['CPU']:g} CPUs, {reserved['GPU']:g} GPUs"
        + " outside the stream"
    )
    for engine in engines.engines.values():
        held = engine.reserved()
        # the label from the config: a replay engine's file may be one the run writes first (ViDiC's responses)
        label = engine.cfg.name or (PurePath(str(engine.cfg.model)).name if engine.cfg.model else engine.name)
        lines.append(
            f"  {engine.name:<8} {label}: {held['CPU']:g} CPUs, {held['GPU']:g} GPUs"
            + ("" if engine.streams else " (after the stream)")
        )
    lines.append(f"judge phases ({len(plan.phases)}):")
    for phase in plan.phases:
        lines.append(f"  {phase.name:<12} {phase.judge_cfg.backend}: {requests.get(phase.name, '')}")
    return lines


def dry_run(cfg: DictConfig) -> list[str]:
    """``vbench-ray run --dry-run``: the config checked as a run checks it, the plan built, and its lines
    (``describe``), nothing computed and nothing written. When the stream needs Ray, Ray is started (or connected
    to, ``ray.address``) to read the cluster's size, which the pools are planned for; no stage or engine starts."""
    from pathlib import Path

    from vbench_ray import preflight
    from vbench_ray.judges.engines import EngineSet
    from vbench_ray.pipeline import cluster_capacity
    from vbench_ray.ray_start import ensure_ray

    bench = bench_for(cfg)
    preflight.check(cfg, bench)
    bench.check_data()
    plan = RunPlan.build(bench)
    rows = list(bench.iter_cases())
    variants = bench.variants() or []
    n_done = 0
    if (Path(cfg.output.dir) / "cases").is_dir():  # a resume: what is on disk already
        from vbench_ray.sinks import CaseSink

        n_done = len(CaseSink(Path(cfg.output.dir), plan.schema, retry_failed=cfg.output.retry_failed).done_keys)
    requests = {}
    for i, phase in enumerate(plan.phases):
        try:
            n = len(phase.build(rows, {}))
        except Exception as exc:  # noqa: BLE001  (a phase that needs what earlier phases answer)
            log.debug("phase %s: requests not built from the cases alone: %s", phase.name, exc)
            n = 0
        per = " per variant" if len(variants) > 1 else ""
        requests[phase.name] = (
            f"{n} requests{per} (each re-asked at most judge.max_retries={int(phase.judge_cfg.max_retries)} times)"
            if n or i == 0
            else "built from the answers of the phases before it"
        )
    engines = EngineSet(None)
    for phase in plan.phases:
        engines.get(phase.judge_cfg, start=False)  # config checked, model resolved; nothing loaded
    ray_line = "Ray: not started (nothing per case, no judge model to call)"
    if plan.needs_ray:
        ensure_ray(cfg)
        ray_line = "Ray: started (or connected to) only to read the cluster's size; no stage or engine started"
    lines = describe(plan, cluster_capacity(), engines, len(rows), n_done, len(variants), requests)
    return lines[:1] + [ray_line] + lines[1:]
