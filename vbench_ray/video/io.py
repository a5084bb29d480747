"""Video decoding: decord first, PyAV as the fallback, one open per video.

Every benchmark samples frames the same two ways:

* uniform: ``idx_i = round(i * (T - 1) / (n - 1))`` for ``i = 0..n-1`` (CoVEBench's official
  ``equal_indices``; ANCHORS.md §1, "Objective metrics");
* by rate: one frame every ``1 / fps`` seconds, optionally capped at ``max_frames`` (ViDiC's models
  under test, VLMEvalKit's ``_1fps`` presets).

Decoders disagree on nothing that matters here (STACK.md: decord, PyAV and OpenCV agree on frame
count and fps for h264), so the first one that opens the file wins and the choice is recorded.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)

BACKENDS = ("auto", "decord", "pyav")


class VideoError(ValueError):
    """A video that cannot be used: missing, unreadable, or without frames. The message names the file."""


@dataclass(frozen=True)
class VideoInfo:
    path: str
    num_frames: int
    fps: float
    height: int
    width: int
    backend: str
    # the container's keyframes (I-frames), when the decoder reports them (decord get_key_indices, PyAV
    # key_frame flags); None when unknown. Metrics that score keyframes (CoVEBench AES) read them here.
    keyframes: tuple[int, ...] | None = None

    @property
    def duration(self) -> float:
        return self.num_frames / self.fps if self.fps > 0 else float("nan")


def uniform_indices(num_frames: int, n: int) -> list[int]:
    """``min(T, n)`` distinct frames at ``round(i * (T-1) / (m-1))``, i in 0..m-1, m = min(T, n).

    CoVEBench's official sampler (ANCHORS.md §1; paper App. F: "T uniformly sampled frames"): a video
    shorter than ``n`` frames gives all of its ``T`` frames, never repeats (a repeated frame would look
    like a frozen video to MSM and like zero motion to MF). With one frame to take, the index is
    ``T // 2``. Python's ``round`` is banker's rounding, as in the official code, so ties match.
    """
    if num_frames <= 0:
        return []
    if n <= 0:
        raise ValueError(f"number of frames to sample must be positive, got {n}")
    m = min(num_frames, n)
    if m == 1:
        return [num_frames // 2]
    return [int(round(i * (num_frames - 1) / (m - 1))) for i in range(m)]


def fps_indices(num_frames: int, video_fps: float, fps: float, max_frames: int | None = None) -> list[int]:
    """One frame every ``1/fps`` seconds from t=0; if more than ``max_frames``, resample uniformly."""
    if num_frames <= 0:
        return []
    if fps <= 0 or video_fps <= 0:
        raise ValueError(f"fps must be positive (sampling fps={fps}, video fps={video_fps})")
    duration = num_frames / video_fps
    count = max(1, int(math.floor(duration * fps + 1e-9)))
    idx = [min(num_frames - 1, int(round(k * video_fps / fps))) for k in range(count)]
    if max_frames is not None and len(idx) > max_frames:
        idx = [idx[j] for j in uniform_indices(len(idx), max_frames)]
    return idx


class VideoReader:
    """An opened video. ``read(indices)`` returns uint8 RGB frames ``(N, H, W, 3)`` in the order asked."""

    def __init__(self, path: str | Path, backend: str = "auto"):
        self.path = str(path)
        if backend not in BACKENDS:
            raise ValueError(f"video backend must be one of {BACKENDS}, got {backend!r}")
        p = Path(self.path)
        if not p.exists():
            raise VideoError(f"video not found: {self.path}")
        if p.stat().st_size == 0:
            raise VideoError(f"video is an empty file: {self.path}")
        order = ["decord", "pyav"] if backend == "auto" else [backend]
        errors = []
        for name in order:
            try:
                self._impl = _OPENERS[name](self.path)
                self.backend = name
                break
            except ImportError as exc:
                errors.append(f"{name}: not installed ({exc})")
            except Exception as exc:  # decoders raise their own exception types
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
        else:
            raise VideoError(f"cannot decode video {self.path}: " + "; ".join(errors))
        if self._impl.num_frames <= 0:
            raise VideoError(f"video has no frames: {self.path}")
        if errors:
            log.debug("opened %s with %s after: %s", self.path, self.backend, errors)

    @property
    def info(self) -> VideoInfo:
        h, w = self._impl.shape
        return VideoInfo(self.path, self._impl.num_frames, self._impl.fps, h, w, self.backend,
                         getattr(self._impl, "keyframes", None))

    def read(self, indices: Sequence[int]) -> np.ndarray:
        indices = [int(i) for i in indices]
        n = self._impl.num_frames
        bad = [i for i in indices if i < 0 or i >= n]
        if bad:
            raise VideoError(f"frame indices {bad[:5]} out of range for {self.path} ({n} frames)")
        if not indices:
            h, w = self._impl.shape
            return np.zeros((0, h, w, 3), np.uint8)
        try:
            frames = self._impl.read(indices)
        except Exception as exc:
            raise VideoError(f"cannot decode frames {indices[:5]}... of {self.path}: {exc}") from exc
        if frames.shape[0] != len(indices):
            raise VideoError(f"decoded {frames.shape[0]} of {len(indices)} frames from {self.path} (truncated file?)")
        return frames


class _DecordImpl:
    def __init__(self, path: str):
        import decord

        self._vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        self.num_frames = len(self._vr)
        self.fps = float(self._vr.get_avg_fps())
        first = self._vr[0].asnumpy() if self.num_frames else np.zeros((0, 0, 3))
        self.shape = first.shape[:2]
        try:  # from the demuxer's index, no decoding
            self.keyframes = tuple(int(i) for i in self._vr.get_key_indices())
        except Exception:  # noqa: BLE001  (older decord builds)
            self.keyframes = None

    def read(self, indices: list[int]) -> np.ndarray:
        uniq = sorted(set(indices))
        batch = self._vr.get_batch(uniq).asnumpy()
        pos = {i: k for k, i in enumerate(uniq)}
        return batch[[pos[i] for i in indices]]


class _PyAVImpl:
    """Decodes the whole stream once (sequential decode is the robust path for short clips)."""

    def __init__(self, path: str):
        import av

        with av.open(path) as container:
            if not container.streams.video:
                raise VideoError("the file holds no video stream (zero frames?)")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            self.fps = float(rate) if rate else 0.0
            frames, keys = [], []
            for f in container.decode(stream):
                if f.key_frame:
                    keys.append(len(frames))
                frames.append(f.to_ndarray(format="rgb24"))
            self.keyframes = tuple(keys)
            self.shape = (stream.codec_context.height, stream.codec_context.width)
        self._frames = np.stack(frames) if frames else np.zeros((0, *self.shape, 3), np.uint8)
        self.num_frames = len(frames)

    def read(self, indices: list[int]) -> np.ndarray:
        return self._frames[indices]


_OPENERS = {"decord": _DecordImpl, "pyav": _PyAVImpl}


def probe(path: str | Path, backend: str = "auto") -> VideoInfo:
    return VideoReader(path, backend).info
