"""The decode stage: decode each video of a case once, feed every frame metric from that one decode.

DESIGN.md, "Decode once": the stage takes the union of the frame indices that the enabled metrics ask
for (each metric's ``Sampling``), reads those frames once per video, then hands each metric its own
subset. CPU metrics are computed here (a CPU stage: stateless tasks); a metric that runs in a model pool
(``FrameMetric.in_pool``) gets its frames in the row instead (``vbench_ray.metrics.pool``), so no model is
ever loaded in, and no GPU ever requested by, a decode worker.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from vbench_ray.metrics.base import FrameMetric, build_metric
from vbench_ray.metrics.pool import pack, payload_column
from vbench_ray.pipeline import format_exception
from vbench_ray.video.io import VideoError, VideoReader

log = logging.getLogger(__name__)


class FrameMetricsStage:
    """Row -> ``{<metric>: float, error_<metric>: str, frames_decoded, videos_opened, warning_pair}``.

    ``metrics`` maps metric name to its config (a dict). A metric listed in the row's
    ``excluded_<metric>`` is not computed; when every metric is excluded no video is opened.
    """

    def __init__(self, metrics: dict[str, dict], video_backend: str = "auto", pair_mismatch: str = "resample"):
        from omegaconf import OmegaConf

        import cv2

        cv2.setNumThreads(1)  # one task per CPU: OpenCV's own thread pool would oversubscribe the cores
        self.metrics: list[FrameMetric] = [build_metric(name, OmegaConf.create(cfg)) for name, cfg in metrics.items()]
        for metric in self.metrics:
            if not metric.in_pool():  # pool metrics load their models in their own pool
                metric.setup()
        self.backend = video_backend
        self.pair_mismatch = pair_mismatch

    def __call__(self, row: dict) -> dict:
        todo = [m for m in self.metrics if not row.get(f"excluded_{m.name}")]
        out: dict[str, Any] = {"frames_decoded": 0, "videos_opened": 0}
        if not todo:
            return out
        edited = VideoReader(row["edited_path"], self.backend)
        source = VideoReader(row["source_path"], self.backend) if any(m.needs_source for m in todo) else None
        out["videos_opened"] = 1 + (source is not None)
        if source is not None:
            out["warning_pair"] = self._check_pair(source, edited)
        frames_e, plan_e = self._decode(edited, todo)
        frames_s, plan_s = self._decode(source, [m for m in todo if m.needs_source]) if source else ({}, {})
        out["frames_decoded"] = len(frames_e) + len(frames_s)
        for m in todo:
            try:
                e = _stack(frames_e, plan_e[m.name])
                s = _stack(frames_s, plan_s[m.name]) if m.needs_source else None
                emit(m, out, e, s, m.extra_inputs(row))
            except Exception as exc:  # one metric failing must not lose the others
                log.warning("metric %s failed on case %s: %s", m.name, row.get("case_id"), exc)
                out[f"error_{m.name}"] = format_exception(exc)
        return out

    def _check_pair(self, source: VideoReader, edited: VideoReader) -> str | None:
        s, e = source.info, edited.info
        if (s.num_frames, s.height, s.width) == (e.num_frames, e.height, e.width):
            return None
        msg = (f"source has {s.num_frames} frames at {s.width}x{s.height}, edited has {e.num_frames} frames "
               f"at {e.width}x{e.height}")
        if self.pair_mismatch == "fail":
            raise VideoError(f"{msg} (data.pair_mismatch=fail)")
        return msg + "; each sampled uniformly over its own length and resized (data.pair_mismatch=resample)"

    @staticmethod
    def _decode(reader: VideoReader, metrics: list[FrameMetric]) -> tuple[dict[int, np.ndarray], dict[str, list[int]]]:
        """Read the union of the metrics' frame indices once; return frames by index and each metric's plan."""
        info = reader.info
        plan = {m.name: m.sampling().indices(info) for m in metrics}
        wanted = sorted({i for idx in plan.values() for i in idx})
        frames = reader.read(wanted)
        return dict(zip(wanted, frames)), plan


def emit(metric: FrameMetric, out: dict, edited: np.ndarray, source: np.ndarray | None,
         kwargs: dict | None = None) -> None:
    """Compute a CPU metric into ``out``, or hand a pool metric its inputs (``frames_for_<metric>``)."""
    if metric.in_pool():
        out[payload_column(metric.name)] = pack(edited, source, kwargs or {})
    else:
        out[metric.name] = float(metric.compute(edited, source, **(kwargs or {})))


def decode_outputs(metrics: list[FrameMetric]) -> dict[str, str]:
    """The decode stage's columns for these metrics: CPU metrics' scores and errors, pool metrics' frames."""
    out: dict[str, str] = {}
    for m in metrics:
        if m.in_pool():  # its error column also holds a failure to prepare its frames here
            out.update({payload_column(m.name): "bytes", f"error_{m.name}": "str"})
        else:
            out.update({m.name: "float", f"error_{m.name}": "str"})
    return out


def _stack(frames: dict[int, np.ndarray], indices: list[int]) -> np.ndarray:
    return np.stack([frames[i] for i in indices])
