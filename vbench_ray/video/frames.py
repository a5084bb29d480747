"""The decode stage: decode each video of a case once, feed every frame metric from that one decode.

DESIGN.md, "Decode once": the stage takes the union of the frame indices that the enabled metrics ask
for (each metric's ``Sampling``), reads those frames once per video, then hands each metric its own
subset. CPU metrics are computed here (a CPU stage: stateless tasks); a metric that runs in a model pool
(``FrameMetric.in_pool``) gets its frames in the row instead (``vbench_ray.metrics.pool``), so no model is
ever loaded in, and no GPU ever requested by, a decode worker.

Consumers of the edited video's frames that are not frame metrics (``FrameSink``: CoVEBench's VQR, whose judge
reads JPEGs of 10 uniform frames, ``vbench_ray.benchmarks.cove_vqr.VQRFrames``) join the same union: their
frames come from the same decode, and what they write goes in their own column.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, Sequence

import numpy as np

from vbench_ray.metrics.base import FrameMetric, build_metric
from vbench_ray.metrics.pool import pack, payload_column
from vbench_ray.pipeline import format_exception
from vbench_ray.video.io import VideoError, VideoInfo, VideoReader

log = logging.getLogger(__name__)


class FrameSink(Protocol):
    """A consumer of the edited video's frames that is not a metric (picklable: it travels to decode workers).

    ``indices(info)`` join the decode's union of indices; ``write(row, indices, frames)`` gets those frames
    (uint8 RGB ``(N, H, W, 3)``, in the order of ``indices``) and returns the value of the row's ``column``;
    an exception it raises is the row's ``error_<name>`` (the metrics of the row are unaffected)."""

    name: str
    column: str

    def indices(self, info: VideoInfo) -> list[int]: ...

    def write(self, row: dict, indices: list[int], frames: np.ndarray) -> Any: ...


class FrameMetricsStage:
    """Row -> ``{<metric>: float, error_<metric>: str, <sink column>, frames_decoded, videos_opened, warning_pair}``.

    ``metrics`` maps metric name to its config (a dict). A metric listed in the row's
    ``excluded_<metric>`` is not computed; when every metric is excluded and there is no sink, no video is
    opened. ``sinks`` (``FrameSink``) get their frames of the edited video from the same decode.
    """

    def __init__(self, metrics: dict[str, dict], video_backend: str = "auto", pair_mismatch: str = "resample",
                 sinks: Sequence[FrameSink] = ()):
        from omegaconf import OmegaConf

        import cv2

        cv2.setNumThreads(1)  # one task per CPU: OpenCV's own thread pool would oversubscribe the cores
        self.metrics: list[FrameMetric] = [build_metric(name, OmegaConf.create(cfg)) for name, cfg in metrics.items()]
        for metric in self.metrics:
            if not metric.in_pool():  # pool metrics load their models in their own pool
                metric.setup()
        self.sinks = list(sinks)
        names = [s.name for s in self.sinks] + [m.name for m in self.metrics]
        if len(set(names)) < len(names):  # one plan per name in _decode
            raise ValueError(f"frame sinks need names of their own, apart from the metrics': {names}")
        self.backend = video_backend
        self.pair_mismatch = pair_mismatch

    def __call__(self, row: dict) -> dict:
        todo = [m for m in self.metrics if not row.get(f"excluded_{m.name}")]
        out: dict[str, Any] = {"frames_decoded": 0, "videos_opened": 0}
        if not todo and not self.sinks:
            return out
        # One video open at a time, each closed once read: a decord reader keeps decoding ahead on a thread
        # of its own while it lives, which took a third more CPU per case than the frames needed.
        edited = VideoReader(row["edited_path"], self.backend)
        edited_info = edited.info
        frames_e, plan_e = self._decode(edited, todo, self.sinks)
        del edited
        frames_s, plan_s = {}, {}
        with_source = [m for m in todo if m.needs_source]
        if with_source:
            source = VideoReader(row["source_path"], self.backend)
            out["warning_pair"] = self._check_pair(source.info, edited_info)
            frames_s, plan_s = self._decode(source, with_source)
            del source
        out["videos_opened"] = 1 + bool(with_source)
        out["frames_decoded"] = len(frames_e) + len(frames_s)
        for m in todo:
            try:
                e = _stack(frames_e, plan_e[m.name])
                s = _stack(frames_s, plan_s[m.name]) if m.needs_source else None
                emit(m, out, e, s, m.extra_inputs(row))
            except Exception as exc:  # one metric failing must not lose the others
                log.warning("metric %s failed on case %s: %s", m.name, row.get("case_id"), exc)
                out[f"error_{m.name}"] = format_exception(exc)
        for sink in self.sinks:
            try:
                out[sink.column] = sink.write(row, plan_e[sink.name], _stack(frames_e, plan_e[sink.name]))
            except Exception as exc:  # nor a sink failing
                log.warning("%s frames failed on case %s: %s", sink.name, row.get("case_id"), exc)
                out[f"error_{sink.name}"] = format_exception(exc)
        return out

    def _check_pair(self, s: VideoInfo, e: VideoInfo) -> str | None:
        if (s.num_frames, s.height, s.width) == (e.num_frames, e.height, e.width):
            return None
        msg = (f"source has {s.num_frames} frames at {s.width}x{s.height}, edited has {e.num_frames} frames "
               f"at {e.width}x{e.height}")
        if self.pair_mismatch == "fail":
            raise VideoError(f"{msg} (data.pair_mismatch=fail)")
        return msg + "; each sampled uniformly over its own length and resized (data.pair_mismatch=resample)"

    @staticmethod
    def _decode(reader: VideoReader, metrics: list[FrameMetric],
                sinks: Sequence[FrameSink] = ()) -> tuple[dict[int, np.ndarray], dict[str, list[int]]]:
        """Read the union of the metrics' and sinks' frame indices once; return frames by index and each
        consumer's plan (by name)."""
        info = reader.info
        plan = {m.name: m.sampling().indices(info) for m in metrics}
        plan.update({s.name: list(s.indices(info)) for s in sinks})
        wanted = sorted({i for idx in plan.values() for i in idx})
        frames = reader.read(wanted)
        return dict(zip(wanted, frames)), plan


def emit(metric: FrameMetric, out: dict, edited: np.ndarray, source: np.ndarray | None,
         kwargs: dict | None = None) -> None:
    """Compute a CPU metric into ``out``, or hand a pool metric its inputs (``frames_for_<metric>``)."""
    if metric.in_pool():
        out[payload_column(metric.name)] = pack(*metric.pool_inputs(edited, source, dict(kwargs or {})))
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


def sink_outputs(sinks: Sequence[FrameSink]) -> dict[str, str]:
    """The decode stage's columns for these sinks: what each writes, and its error."""
    out: dict[str, str] = {}
    for s in sinks:
        out.update({s.column: "str", f"error_{s.name}": "str"})
    return out


def _stack(frames: dict[int, np.ndarray], indices: list[int]) -> np.ndarray:
    return np.stack([frames[i] for i in indices])
