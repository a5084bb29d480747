"""Model pools for metrics: a model-backed metric gets an actor pool of its own (docs/architecture.md, "Stage
kinds").

The decode stage (``vbench_ray.metrics.stage``) reads each video once and computes the CPU metrics on the
spot; for a metric that runs in a pool (``FrameMetric.in_pool()``: RAFT, CoTracker, LPIPS, CLIP, DINO ...)
it puts the metric's own frames (and its extra inputs: masks, texts) in a transient column of the row,
``frames_for_<metric>``. The pool stage loads the metric's model once per actor, with its own GPU share,
computes the score from that column and drops it, so frames are decoded once and never on a GPU worker.

**Batching across cases.** A pool stage is a *batched* stage: one call gets the rows of a Ray Data batch
(``metrics.<M>.pool_batch`` cases, else ``ray.batch_size``) and hands them to ``FrameMetric.compute_many``, so a
metric whose model batches (AES, TQ) runs the frames of several cases in one forward pass (SRC keeps each pass to
one case's images: its Grounding DINO and SAM2 decisions would turn on the rounding of the pass's shape). A case
that fails is that row's ``error_<M>``; if the batched call itself raises (a bad case breaking the shared forward
pass, an out-of-memory on the combined batch), the pool computes each row alone, so one bad case never fails the
others.
"""

from __future__ import annotations

import logging
import os
import pickle
import struct
import time
import warnings
from typing import Any

import numpy as np

from vbench_ray.metrics.base import FrameMetric, build_metric
from vbench_ray.pipeline import Stage, format_exception

log = logging.getLogger(__name__)


def payload_column(metric: str) -> str:
    return f"frames_for_{metric}"


MAGIC = b"VBRP1"  # a payload with out-of-band buffers: MAGIC, <count, header length, buffer lengths>, header, buffers


def pack(edited: np.ndarray, source: np.ndarray | None, kwargs: dict[str, Any]) -> bytes:
    """A metric's inputs as bytes for the row: pickle protocol 5 with the arrays' memory out of band, appended
    after the pickle, so that ``unpack`` rebuilds the arrays as views on the row's bytes instead of copying them
    once more (a TQ case is 96 native-size frames, 0.6 GB at 1080p)."""
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps((edited, source, kwargs), protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    index = struct.pack(f"<{len(raws) + 2}Q", len(raws), len(header), *(r.nbytes for r in raws))
    return b"".join([MAGIC, index, header, *raws])


def unpack(blob: bytes) -> tuple[np.ndarray, np.ndarray | None, dict]:
    """``pack``'s inputs back; the arrays are read-only views on ``blob`` (metrics never write into their frames)."""
    if blob[: len(MAGIC)] != MAGIC:  # a plain pickle
        return pickle.loads(blob)
    view = memoryview(blob)
    at = len(MAGIC)
    count, header_len = struct.unpack_from("<2Q", view, at)
    sizes = struct.unpack_from(f"<{count}Q", view, at + 16)
    at += 16 + 8 * count
    header = view[at : at + header_len]
    at += header_len
    buffers = []
    for size in sizes:
        buffers.append(view[at : at + size])
        at += size
    return pickle.loads(header, buffers=buffers)


class MetricPool:
    """Rows -> one ``{<metric>: float}`` or ``{error_<metric>: str}`` per row, from each row's
    ``frames_for_<metric>``; the model loads once per actor and scores the batch's cases together."""

    def __init__(self, name: str, cfg: dict):
        from omegaconf import OmegaConf

        self.metric: FrameMetric = build_metric(name, OmegaConf.create(cfg))
        _log_to_stderr()
        where = loading_where(self.metric)
        log.info("pool %s (pid %d, %s): loading %s", name, os.getpid(), where, loading_what(self.metric))
        began = time.perf_counter()
        self.metric.setup()
        log.info("pool %s (pid %d): loaded in %.1f s", name, os.getpid(), time.perf_counter() - began)
        self.error_column = f"error_{self.metric.name}"

    def __call__(self, rows: list[dict]) -> list[dict]:
        out: list[dict] = [{} for _ in rows]
        todo, items = [], []
        for i, row in enumerate(rows):
            blob = row.get(payload_column(self.metric.name))
            if blob is None:  # excluded, or its frames could not be decoded (the decode stage says why)
                continue
            try:
                edited, source, kwargs = unpack(blob)
            except Exception as exc:  # a corrupt payload fails its own row only
                out[i] = {self.error_column: format_exception(exc)}
                continue
            todo.append(i)
            items.append((edited, source, kwargs or {}))
        for i, result in zip(todo, self._scores(items)):
            if isinstance(result, BaseException):
                log.warning("metric %s failed on case %s: %s", self.metric.name, rows[i].get("case_id"), result)
                out[i] = {self.error_column: format_exception(result)}
            else:
                out[i] = {self.metric.name: float(result)}
        return out

    def _scores(self, items: list[tuple]) -> list[float | BaseException]:
        """``compute_many`` on every item; if that raises, on each item alone (its exception, its row's)."""
        if not items:
            return []
        with warnings.catch_warnings():  # the frames are read-only views on the row (unpack): torch warns, harmlessly
            warnings.filterwarnings("ignore", message=".*(is not writable|non-writable).*")
            return self._scores_of(items)

    def _scores_of(self, items: list[tuple]) -> list[float | BaseException]:
        try:
            results = list(self.metric.compute_many(items))
            if len(results) != len(items):
                raise RuntimeError(
                    f"{type(self.metric).__name__}.compute_many returned {len(results)} results for {len(items)} cases"
                )
            return results
        except Exception as exc:
            if len(items) == 1:
                return [exc]
            log.warning(
                "metric %s: the batch of %d cases failed (%s); scoring each case alone",
                self.metric.name,
                len(items),
                exc,
            )
        results = []
        for item in items:
            try:
                results.extend(self.metric.compute_many([item]))
            except Exception as exc:
                results.append(exc)
        return results


def loading_what(metric: FrameMetric) -> str:
    """The weights a pool's actor loads, by config key (the metric's ``weights_from`` keys and any ``*weights`` key
    that is set): ``sam2=/models/sam2, dinov2=/models/dinov2``, or ``its model (no weights file configured)``."""
    keys = list(type(metric).weights_from) + [k for k in metric.cfg if str(k).endswith("weights")]
    named = [f"{k}={metric.cfg.get(k)}" for k in dict.fromkeys(keys) if metric.cfg.get(k)]
    return ", ".join(named) or "its model (no weights file configured)"


def loading_where(metric: FrameMetric) -> str:
    """``device cuda, GPU(s) 0`` (the GPUs Ray gave the actor) / ``device cpu``: where the actor's model goes."""
    device = str(metric.cfg.get("device", "cpu"))
    if not device.startswith("cuda"):
        return f"device {device}"
    return f"device {device}, GPU(s) {os.environ.get('CUDA_VISIBLE_DEVICES', '?')}"


def _log_to_stderr() -> None:
    """In a Ray actor nothing configures logging: the pool's INFO lines (what it loads, how long it took) go to
    stderr, which Ray forwards to the driver's terminal (``log_to_driver``). Where logging is configured (the
    CLI's driver, a test), its handlers are used as they are."""
    if log.handlers or (logging.getLogger().handlers and log.isEnabledFor(logging.INFO)):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def pool_batch(metric: FrameMetric, ray_cfg: Any) -> int:
    """Cases per pool call: ``metrics.<M>.pool_batch`` when the metric has that key, else ``ray.batch_size``."""
    value = getattr(metric.cfg, "pool_batch", None)
    if value is None:
        return int(ray_cfg.batch_size)
    if int(value) < 1:
        raise ValueError(f"metrics.{metric.name}.pool_batch must be >= 1, got {value!r}")
    return int(value)


def metric_pool_stages(metrics: list[FrameMetric], cfgs: dict[str, dict], ray_cfg: Any) -> list[Stage]:
    """One model-pool stage per metric that runs in a pool, each with the metric's own resources.

    The stage is named after the metric, so a failure lands in ``error_<metric>`` as it does for a CPU
    metric. ``ray.pools.<metric>`` (``[min, max]``) overrides the pool size the cluster would give;
    ``metrics.<metric>.pool_batch`` sets how many cases one call scores together.
    """
    stages = []
    for m in metrics:
        if not m.in_pool():
            continue
        low, high = _pool_override(ray_cfg, m.name)
        stages.append(
            Stage(
                name=m.name,
                fn=MetricPool,
                kind="pool",
                init_kwargs={"name": m.name, "cfg": cfgs[m.name]},
                inputs=(payload_column(m.name),),
                outputs={m.name: "float"},
                drop=(payload_column(m.name),),
                num_cpus=1.0,
                num_gpus=float(m.resources().get("num_gpus", 0.0)),
                gpu_cost=float(m.gpu_cost),
                cost_group="metrics",  # FrameMetric.gpu_cost: ms a case in its pool actor, one scale for all
                skip_failed=False,
                batched=True,
                workers=high,
                min_workers=low,
                batch_size=pool_batch(m, ray_cfg),
            )
        )
    return stages


def _pool_override(ray_cfg: Any, name: str) -> tuple[int | None, int | None]:
    pools = getattr(ray_cfg, "pools", None) or {}
    bounds = pools.get(name) if hasattr(pools, "get") else None
    if bounds is None:
        return None, getattr(ray_cfg, "workers", None)
    low, high = (int(bounds[0]), int(bounds[1])) if len(bounds) == 2 else (int(bounds[0]), int(bounds[0]))
    return low, high
