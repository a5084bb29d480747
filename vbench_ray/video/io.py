"""Video decoding: decord first, PyAV as the fallback, one open per video.

Every benchmark samples frames the same two ways:

* uniform: ``idx_i = round(i * (T - 1) / (n - 1))`` for ``i = 0..n-1`` (CoVEBench's official
  ``equal_indices``, NJU-LINK/CoVEBench 4fe1c2f ``src/covebench_eval/common.py``);
* by rate: one frame every ``1 / fps`` seconds, optionally capped at ``max_frames`` (ViDiC's models
  under test, VLMEvalKit's ``_1fps`` presets).

Decoders disagree on nothing that matters here (docs/stack.md: decord, PyAV and OpenCV agree on frame
count and fps for h264), so the first one that opens the file wins and the choice is recorded.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

log = logging.getLogger(__name__)

BACKENDS = ("auto", "decord", "pyav")


class VideoError(ValueError):
    """A video that cannot be used: missing, unreadable, too small or without frames. The message names the file."""


# The smallest side a video may have: below it the window and flow metrics are undefined (SSIM's 11-px Gaussian
# window, the optical-flow pyramids) and the decoders fail with messages of their own (OpenCV "Bad number of
# channels", decord's buffer-size check), so a tiny video is refused when opened, as that case's failure.
MIN_SIDE = 16


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

    CoVEBench's official sampler (4fe1c2f ``src/covebench_eval/common.py``; paper App. F: "T uniformly sampled
    frames"): a video shorter than ``n`` frames gives all of its ``T`` frames, never repeats (a repeated frame
    would look like a frozen video to MSM and like zero motion to MF). With one frame to take, the index is
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
    """An opened video. ``read(indices)`` returns uint8 RGB frames ``(N, H, W, 3)`` in the order asked;
    ``frames(indices)`` yields them one at a time, in index order."""

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
        h, w = self._impl.shape
        if min(h, w) < MIN_SIDE:
            raise VideoError(f"video is too small ({w}x{h} px; at least {MIN_SIDE} px a side is needed): {self.path}")
        if errors:
            log.debug("opened %s with %s after: %s", self.path, self.backend, errors)

    @property
    def info(self) -> VideoInfo:
        h, w = self._impl.shape
        return VideoInfo(
            self.path, self._impl.num_frames, self._impl.fps, h, w, self.backend, getattr(self._impl, "keyframes", None)
        )

    def read(self, indices: Sequence[int]) -> np.ndarray:
        indices = self._checked(indices)
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

    def frames(self, indices: Sequence[int]) -> Iterator[tuple[int | None, np.ndarray | None]]:
        """``(index, frame)`` for each distinct index of ``indices``, in increasing order, handed over one at a time
        and never stacked: a caller that reduces every frame as it comes (the decode stage's per-frame views)
        drops each full-resolution frame once reduced. PyAV decodes each frame when the caller asks for it;
        decord decodes the wanted frames back to back first (its decoder thread would otherwise decode frames
        nobody uses while the caller works, ``_DecordImpl.frames``). The same frames as ``read``.

        ``(None, None)`` means *start over*: forget the frames given so far, the read is redone from the first
        frame (PyAV, when a decoded frame is not where the container's timestamps put it; ``read`` does the same).
        Raises ``VideoError`` as ``read`` does: out-of-range indices at once, a decoding failure after the frames
        it could decode."""
        return self._stream(sorted(set(self._checked(indices))))

    def _stream(self, wanted: list[int]) -> Iterator[tuple[int | None, np.ndarray | None]]:
        got: set[int] = set()
        try:
            for i, frame in self._impl.frames(wanted):
                if frame is None:
                    got.clear()
                else:
                    got.add(i)
                yield i, frame
        except VideoError:
            raise
        except Exception as exc:
            raise VideoError(f"cannot decode frames {wanted[:5]}... of {self.path}: {exc}") from exc
        if len(got) != len(wanted):
            raise VideoError(f"decoded {len(got)} of {len(wanted)} frames from {self.path} (truncated file?)")

    def _checked(self, indices: Sequence[int]) -> list[int]:
        indices = [int(i) for i in indices]
        n = self._impl.num_frames
        bad = [i for i in indices if i < 0 or i >= n]
        if bad:
            raise VideoError(f"frame indices {bad[:5]} out of range for {self.path} ({n} frames)")
        return indices


class _DecordImpl:
    def __init__(self, path: str):
        import decord

        self._vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        self.num_frames = len(self._vr)
        self.fps = float(self._vr.get_avg_fps())
        # decord tells the frame size only by decoding a frame; the first one is kept for a ``frames`` that
        # starts there (uniform sampling always does), so frame 0 is decoded once, not twice
        self._first = self._vr[0].asnumpy() if self.num_frames else None
        self.shape = self._first.shape[:2] if self._first is not None else (0, 0)
        if self._first is not None and self._first.shape[2:] != (3,) and min(self.shape) >= MIN_SIDE:
            # decord 0.6 misreads frames of some widths (24, 48 px ...): 4 or 6 "channels" per pixel from padded
            # rows, and get_batch fails (``Check failed: from_size == to_size``); ``auto`` reads them with PyAV.
            # (A video under MIN_SIDE is refused as too small by the reader, whichever decoder opened it.)
            raise VideoError(f"decord decodes frames of shape {self._first.shape}, not (height, width, 3)")
        try:  # from the demuxer's index, no decoding
            self.keyframes = tuple(int(i) for i in self._vr.get_key_indices())
        except Exception:  # noqa: BLE001  (older decord builds)
            self.keyframes = None

    def read(self, indices: list[int]) -> np.ndarray:
        self._first = None
        uniq = sorted(set(indices))
        batch = self._vr.get_batch(uniq).asnumpy()
        if uniq == indices:  # already in order, no repeats: the batch is the answer, no second copy
            return batch
        pos = {i: k for k, i in enumerate(uniq)}
        return batch[[pos[i] for i in indices]]

    def frames(self, wanted: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        """``wanted`` (sorted, distinct), all decoded before the first is handed out, then one at a time.

        ``vr[i]`` in index order is decord's accurate seek, which decodes on within a GOP and seeks to the
        keyframe otherwise, as ``get_batch`` does (same frames, measured no dearer). They are decoded back to
        back because decord's decoder thread runs ahead of the reads (the reading thread queues packets while
        it waits for a frame): work done between two reads lets it decode and convert to RGB frames the next
        seek throws away, about 0.035 CPU-s more per 832x480 video when views were made between reads. The
        decoder is idled (a fast seek to frame 0) before the caller works on the frames."""
        first, self._first = self._first, None  # the decoder stands just after frame 0 only this once
        got = [(i, first if i == 0 and first is not None else self._vr[i].asnumpy()) for i in wanted]
        self._idle()
        got.reverse()
        while got:  # each frame dropped here once handed out: the caller decides what to keep
            yield got.pop()

    def _idle(self) -> None:
        """Stop decord's decoder thread from decoding the packets queued ahead (a seek joins it and starts a
        new one with nothing queued); the reader stays usable."""
        try:
            self._vr.seek(0)
        except Exception:  # noqa: BLE001  (a failed seek changes no frame already read)
            pass


class _PyAVImpl:
    """Counts frames from the container's packets and decodes only the frames ``read`` asks for.

    Opening demuxes the stream without decoding it: the packets' presentation timestamps, sorted, are the
    frames in display order (frame ``i`` has the ``i``-th smallest pts; decord counts the same way) and the
    packets flagged as keyframes are the seek points. ``read`` seeks to the keyframe at or before each wanted
    frame, or decodes on when no keyframe lies between, and converts only the wanted frames to RGB: a
    10-minute 1080p video sampled at 10 frames holds about 10 frames, never the stream. A stream
    whose packets lack timestamps (or repeat one) is counted by decoding it once, dropping each frame, and
    read by decoding from its start; so is one whose decoded frames' timestamps are not its packets'.
    """

    def __init__(self, path: str):
        import av

        self.path = path
        with av.open(path) as container:
            if not container.streams.video:
                raise VideoError("the file holds no video stream (zero frames?)")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            self.fps = float(rate) if rate else 0.0
            self.shape = (stream.codec_context.height, stream.codec_context.width)
            self._pts, keys = _packet_timestamps(container, stream)
        if self._pts is None:
            self.num_frames, keys = _count_by_decoding(path)
        else:
            self.num_frames = len(self._pts)
        self.keyframes = tuple(keys)

    def read(self, indices: list[int]) -> np.ndarray:
        got: dict[int, np.ndarray] = {}
        for i, frame in self.frames(sorted(set(indices))):
            if frame is None:  # starting over from the first frame
                got.clear()
            else:
                got[i] = frame
        found = [got[i] for i in indices if i in got]  # fewer than asked: VideoReader names the truncated file
        return np.stack(found) if found else np.zeros((0, *self.shape, 3), np.uint8)

    def frames(self, wanted: list[int]) -> Iterator[tuple[int | None, np.ndarray | None]]:
        """``(index, RGB frame)`` for ``wanted`` (sorted, distinct) as they are decoded; ``(None, None)`` before
        starting over from the first frame, when the stream has no timestamps or the decoder's disagree with
        the packets'."""
        import av

        if self._pts is not None:
            with av.open(self.path) as container:
                whole = yield from self._seek_frames(container, container.streams.video[0], wanted)
            if whole:
                return
            yield None, None
        with av.open(self.path) as container:
            yield from _forward_frames(container, container.streams.video[0], wanted)

    def _seek_frames(self, container, stream, wanted: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(index, RGB frame)`` for ``wanted`` (sorted, distinct); return True when all came, False as soon
        as a decoded frame is not where the packets put it (then the caller decodes from the start)."""
        from bisect import bisect_left, bisect_right

        frames, pos = None, -1  # the decoder's frame iterator, just after display index `pos`
        for target in wanted:
            k = bisect_right(self.keyframes, target) - 1
            key = self.keyframes[k] if k >= 0 else 0
            if frames is None or key > pos:  # a keyframe after `pos`: seeking beats decoding up to it
                if frames is not None or key > 0:
                    container.seek(int(self._pts[key]), stream=stream, backward=True, any_frame=False)
                frames = container.decode(stream)
            for frame in frames:
                i = bisect_left(self._pts, frame.pts) if frame.pts is not None else len(self._pts)
                if i == len(self._pts) or self._pts[i] != frame.pts or i > target:
                    return False
                pos = i
                if i == target:
                    yield i, frame.to_ndarray(format="rgb24")
                    break
            else:  # the stream ended before the frame
                return False
        return True


def _packet_timestamps(container, stream) -> tuple[list[int] | None, list[int]]:
    """The stream's packets' presentation timestamps, sorted (one per frame, in display order), and the display
    indices of its keyframes, by demuxing alone; ``(None, [])`` when a packet has no pts or two share one."""
    pts, key_pts = [], []
    for packet in container.demux(stream):
        if not packet.size:  # the demuxer's closing empty packet
            continue
        if packet.pts is None:
            return None, []
        pts.append(packet.pts)
        if packet.is_keyframe:
            key_pts.append(packet.pts)
    pts.sort()
    if any(a == b for a, b in zip(pts, pts[1:])):
        return None, []
    index = {p: i for i, p in enumerate(pts)}
    return pts, sorted(index[p] for p in key_pts)


def _count_by_decoding(path: str) -> tuple[int, list[int]]:
    """Frames and keyframe indices of the first video stream, decoded once, no frame kept."""
    import av

    count, keys = 0, []
    with av.open(path) as container:
        for frame in container.decode(container.streams.video[0]):
            if frame.key_frame:
                keys.append(count)
            count += 1
    return count, keys


def _forward_frames(container, stream, wanted: list[int]) -> Iterator[tuple[int, np.ndarray]]:
    """Decode from the first frame, converting only the ``wanted`` (sorted) indices; stop after the last."""
    todo, left = set(wanted), len(set(wanted))
    if not left:
        return
    for i, frame in enumerate(container.decode(stream)):
        if i in todo:
            yield i, frame.to_ndarray(format="rgb24")
            left -= 1
            if not left:
                break


_OPENERS = {"decord": _DecordImpl, "pyav": _PyAVImpl}


def probe(path: str | Path, backend: str = "auto") -> VideoInfo:
    return VideoReader(path, backend).info
