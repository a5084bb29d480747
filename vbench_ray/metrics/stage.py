"""The decode stage: decode each video of a case once, feed every frame metric from that one decode.

A benchmark wires it with ``decode_stages(cfg, metrics, ...)``: the decode stage (``FrameMetricsStage``, or a
benchmark's subclass of it) followed by one model pool per metric that runs in a pool (``metrics.pool``).

docs/architecture.md, "Decode once": the stage takes the union of the frame indices that the enabled metrics ask
for (each metric's ``Sampling``), reads those frames once per video, then hands each metric its own
subset. CPU metrics are computed here (a CPU stage: stateless tasks); a metric that runs in a model pool
(``FrameMetric.in_pool``) gets its frames in the row instead (``vbench_ray.metrics.pool``), so no model is
ever loaded in, and no GPU ever requested by, a decode worker.

Consumers of the edited video's frames that are not frame metrics (``FrameSink``: CoVEBench's VQR, whose judge
reads JPEGs of 10 uniform frames, ``vbench_ray.benchmarks.cove_vqr.VQRFrames``) join the same union: their
frames come from the same decode, and what they write goes in their own column.

The reader hands the frames over one at a time, in index order (``VideoReader.frames``; PyAV as it decodes
them, decord once the wanted frames are decoded back to back, its decoder thread idle). A CPU metric that
declares a ``frame_view()`` (SSIM, MSM, MF: grayscale and/or ``INTER_AREA`` to a square) gets that view of its
frames, made from each frame as it is handed over, once per distinct (frame, view): SSIM's and MSM's edited
frames are the same frames with the same view. A full-resolution frame is kept only when a consumer reads raw
frames (a pool metric, a sink, a metric without a view), and stacked only for those; a view is what the
metric's ``compute`` would make itself, by the same calls, so the scores are those of ``compute`` on raw frames.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, Sequence

import numpy as np

from vbench_ray.cfgutil import plain
from vbench_ray.metrics.base import METRICS, FrameMetric, build_metric
from vbench_ray.metrics.pool import metric_pool_stages, pack, payload_column
from vbench_ray.pipeline import Stage, format_exception
from vbench_ray.video.flow import FrameView
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

    def __init__(
        self,
        metrics: dict[str, dict],
        video_backend: str = "auto",
        pair_mismatch: str = "resample",
        sinks: Sequence[FrameSink] = (),
    ):
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
        self.views = {m.name: view_of(m) for m in self.metrics}
        self.backend = video_backend
        self.pair_mismatch = pair_mismatch

    @staticmethod
    def warm_modules(init_kwargs: dict) -> list[str]:
        """What this stage's workers import on their first case beyond its own module: its metrics' libraries
        (``FrameMetric.imports``) and the video reader (``ray_start.prewarm`` imports them before the stream)."""
        wanted = [m for name in init_kwargs.get("metrics", {}) if name in METRICS for m in METRICS[name].imports]
        reader = {"auto": ["decord"], "decord": ["decord"], "pyav": ["av"]}.get(init_kwargs.get("video_backend"), [])
        return list(dict.fromkeys(wanted + reader))

    def __call__(self, row: dict) -> dict:
        todo = [m for m in self.metrics if not row.get(f"excluded_{m.name}")]
        out: dict[str, Any] = {"frames_decoded": 0, "videos_opened": 0}
        if not todo and not self.sinks:
            return out
        # One video open at a time, each closed once read: a decord reader keeps decoding ahead on a thread
        # of its own while it lives, which took a third more CPU per case than the frames needed.
        edited = VideoReader(row["edited_path"], self.backend)
        edited_info = edited.info
        got_e = self._decode(edited, todo, self.sinks)
        del edited
        got_s = Decoded({}, {})
        with_source = [m for m in todo if m.needs_source]
        if with_source:
            source = VideoReader(row["source_path"], self.backend)
            out["warning_pair"] = self._check_pair(source.info, edited_info)
            got_s = self._decode(source, with_source)
            del source
        out["videos_opened"] = 1 + bool(with_source)
        out["frames_decoded"] = got_e.decoded + got_s.decoded
        for m in todo:
            try:
                e = got_e.frames(m.name)
                s = got_s.frames(m.name) if m.needs_source else None
                emit(m, out, e, s, m.extra_inputs(row), viewed=self.views[m.name] is not None)
            except Exception as exc:  # one metric failing must not lose the others
                log.warning("metric %s failed on case %s: %s", m.name, row.get("case_id"), exc)
                out[f"error_{m.name}"] = format_exception(exc)
        for sink in self.sinks:
            try:
                out[sink.column] = sink.write(row, got_e.plans[sink.name], got_e.frames(sink.name))
            except Exception as exc:  # nor a sink failing
                log.warning("%s frames failed on case %s: %s", sink.name, row.get("case_id"), exc)
                out[f"error_{sink.name}"] = format_exception(exc)
        return out

    def _check_pair(self, s: VideoInfo, e: VideoInfo) -> str | None:
        if (s.num_frames, s.height, s.width) == (e.num_frames, e.height, e.width):
            return None
        msg = (
            f"source has {s.num_frames} frames at {s.width}x{s.height}, edited has {e.num_frames} frames "
            f"at {e.width}x{e.height}"
        )
        if self.pair_mismatch == "fail":
            raise VideoError(f"{msg} (data.pair_mismatch=fail)")
        return msg + "; each sampled uniformly over its own length and resized (data.pair_mismatch=resample)"

    def _decode(self, reader: VideoReader, metrics: list[FrameMetric], sinks: Sequence[FrameSink] = ()) -> Decoded:
        """Decode the union of the metrics' and sinks' frame indices once, frame by frame, into what each consumer
        (by name) reads: its view of each of its frames, or raw frames (sinks; metrics without a view)."""
        info = reader.info
        plans = {m.name: m.sampling().indices(info) for m in metrics}
        plans.update({s.name: list(s.indices(info)) for s in sinks})
        views = {m.name: self.views[m.name] for m in metrics}
        views.update({s.name: None for s in sinks})
        got = Decoded(plans, views)
        for i, frame in reader.frames(sorted(got.wanted)):
            got.add(i, frame)
        return got


class Decoded:
    """One video's decoded frames, as its consumers read them.

    ``plans``: each consumer's frame indices (by name); ``views``: its ``FrameView``, or None for raw frames.
    ``add(i, frame)`` makes, from a frame just decoded, each distinct view that some consumer wants of frame
    ``i`` (one call per view however many consumers share it) and keeps the frame itself only if a consumer
    wants it raw; ``frames(name)`` stacks a consumer's frames. A view that raises is that view's consumers'
    failure (raised again by ``frames``), not the case's.
    """

    def __init__(self, plans: dict[str, list[int]], views: dict[str, FrameView | None]):
        self.plans, self.views = plans, views
        self.wanted: dict[int, set[FrameView | None]] = {}  # frame index -> the views made of it (None: raw)
        for name, indices in plans.items():
            for i in indices:
                self.wanted.setdefault(i, set()).add(views[name])
        self.made: dict[tuple[int, FrameView | None], np.ndarray] = {}
        self.failed: dict[FrameView, Exception] = {}
        self.decoded = 0  # distinct frames decoded

    def add(self, i: int | None, frame: np.ndarray | None) -> None:
        """Take frame ``i`` as decoded; ``(None, None)``: the reader starts over, so forget what came before."""
        if frame is None:
            self.made.clear()
            self.failed.clear()
            self.decoded = 0
            return
        self.decoded += 1
        for view in self.wanted[i]:
            if view is None:
                self.made[(i, None)] = frame
            elif view not in self.failed:
                try:
                    self.made[(i, view)] = view(frame)
                except Exception as exc:  # e.g. a size cv2 refuses: the failure of the metrics with this view
                    self.failed[view] = exc

    def frames(self, name: str) -> np.ndarray:
        """The consumer's frames (its views, or raw), stacked in the order of its plan."""
        view = self.views[name]
        if view in self.failed:
            raise self.failed[view]
        return np.stack([self.made[(i, view)] for i in self.plans[name]])


def view_of(metric: FrameMetric) -> FrameView | None:
    """The view the stage makes of ``metric``'s frames: its ``frame_view()``; None (raw frames) for a metric in a
    model pool (its pool reads what ``pool_inputs`` makes of raw frames), or when ``frame_view()`` raises (a bad
    config value: the metric's ``compute`` then raises it, as every case's failure of that metric)."""
    if metric.in_pool():
        return None
    try:
        return metric.frame_view()
    except Exception:  # noqa: BLE001  (compute raises it again, per case)
        return None


def emit(
    metric: FrameMetric,
    out: dict,
    edited: np.ndarray,
    source: np.ndarray | None,
    kwargs: dict | None = None,
    viewed: bool = False,
) -> None:
    """Compute a CPU metric into ``out``, or hand a pool metric its inputs (``frames_for_<metric>``).
    ``viewed``: the frames are already ``metric.frame_view()`` of each frame (``compute_views``)."""
    if metric.in_pool():
        out[payload_column(metric.name)] = pack(*metric.pool_inputs(edited, source, dict(kwargs or {})))
    elif viewed:
        out[metric.name] = float(metric.compute_views(edited, source, **(kwargs or {})))
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


def decode_stages(
    cfg: Any,
    metrics: Sequence[str],
    fn: type = FrameMetricsStage,
    sinks: Sequence[FrameSink] | None = None,
    init_kwargs: dict | None = None,
    inputs: Sequence[str] = (),
    outputs: dict[str, str] | None = None,
) -> list[Stage]:
    """A benchmark's frame stages: the decode stage ``frames`` (``fn``: ``FrameMetricsStage`` or a subclass) over the
    registered frame metrics named in ``metrics`` (their configs at ``cfg.metrics.<name>``), then one model pool per
    metric that runs in a pool (``metric_pool_stages``).

    The decode stage reads ``source_path``, ``edited_path`` and ``inputs``; it writes the metrics' columns
    (``decode_outputs``), the sinks' (``sink_outputs``), its counters and ``outputs``. ``init_kwargs`` adds to
    what ``fn`` is built with (``metrics``, ``video_backend``, ``pair_mismatch``, and ``sinks`` when given)."""
    specs = {m: plain(getattr(cfg.metrics, m)) for m in metrics}
    built = [METRICS[m](getattr(cfg.metrics, m)) for m in metrics]
    kwargs: dict[str, Any] = {
        "metrics": specs,
        "video_backend": cfg.video.backend,
        "pair_mismatch": cfg.data.pair_mismatch,
    }
    if sinks is not None:
        kwargs["sinks"] = list(sinks)
    decode = Stage(
        name="frames",
        fn=fn,
        kind="cpu",
        init_kwargs={**kwargs, **(init_kwargs or {})},
        inputs=("source_path", "edited_path") + tuple(inputs),
        outputs={
            **decode_outputs(built),
            **sink_outputs(sinks or ()),
            "frames_decoded": "int",
            "videos_opened": "int",
            "warning_pair": "str",
            **(outputs or {}),
        },
        num_cpus=1.0,
        workers=cfg.ray.workers,
        batch_size=cfg.ray.batch_size,
    )
    return [decode] + metric_pool_stages(built, specs, cfg.ray)
