"""Model pools for metrics: a model-backed metric gets an actor pool of its own (DESIGN.md, "Stage kinds").

The decode stage (``vbench_ray.video.frames``) reads each video once and computes the CPU metrics on the
spot; for a metric that runs in a pool (``FrameMetric.in_pool()``: RAFT, CoTracker, LPIPS, CLIP, DINO ...)
it puts the metric's own frames (and its extra inputs: masks, texts) in a transient column of the row,
``frames_for_<metric>``. The pool stage loads the metric's model once per actor, with its own GPU share,
computes the score from that column and drops it, so frames are decoded once and never on a GPU worker.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from vbench_ray.metrics.base import FrameMetric, build_metric
from vbench_ray.pipeline import Stage


def payload_column(metric: str) -> str:
    return f"frames_for_{metric}"


def pack(edited: np.ndarray, source: np.ndarray | None, kwargs: dict[str, Any]) -> bytes:
    """A metric's inputs as bytes for the row (pickle protocol 5: arrays without a copy into text)."""
    return pickle.dumps((edited, source, kwargs), protocol=5)


class MetricPool:
    """Row -> ``{<metric>: float}`` from the row's ``frames_for_<metric>``; the model loads once per actor."""

    def __init__(self, name: str, cfg: dict):
        from omegaconf import OmegaConf

        self.metric: FrameMetric = build_metric(name, OmegaConf.create(cfg))
        self.metric.setup()

    def __call__(self, row: dict) -> dict:
        blob = row.get(payload_column(self.metric.name))
        if blob is None:  # excluded, or its frames could not be decoded (the decode stage says why)
            return {}
        edited, source, kwargs = pickle.loads(blob)
        return {self.metric.name: float(self.metric.compute(edited, source, **kwargs))}


def metric_pool_stages(metrics: list[FrameMetric], cfgs: dict[str, dict], ray_cfg: Any) -> list[Stage]:
    """One model-pool stage per metric that runs in a pool, each with the metric's own resources.

    The stage is named after the metric, so a failure lands in ``error_<metric>`` as it does for a CPU
    metric. ``ray.pools.<metric>`` (``[min, max]``) overrides the pool size the cluster would give.
    """
    stages = []
    for m in metrics:
        if not m.in_pool():
            continue
        low, high = _pool_override(ray_cfg, m.name)
        stages.append(Stage(
            name=m.name, fn=MetricPool, kind="pool", init_kwargs={"name": m.name, "cfg": cfgs[m.name]},
            inputs=(payload_column(m.name),), outputs={m.name: "float"}, drop=(payload_column(m.name),),
            num_cpus=1.0, num_gpus=float(m.resources().get("num_gpus", 0.0)), skip_failed=False,
            workers=high, min_workers=low, batch_size=int(ray_cfg.batch_size)))
    return stages


def _pool_override(ray_cfg: Any, name: str) -> tuple[int | None, int | None]:
    pools = getattr(ray_cfg, "pools", None) or {}
    bounds = pools.get(name) if hasattr(pools, "get") else None
    if bounds is None:
        return None, getattr(ray_cfg, "workers", None)
    low, high = (int(bounds[0]), int(bounds[1])) if len(bounds) == 2 else (int(bounds[0]), int(bounds[0]))
    return low, high
