"""Streaming readers of the repair verifier: frames decoded one at a time, audio through a sliding
buffer, so that nothing holds a whole clip (see :mod:`vbench_ray.agentic.verifiers.repair`, Memory)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from vbench_ray.agentic.media import MediaError, MediaInfo, audio_limit, iter_audio, iter_frames, probe_stream


class FrameCursor:
    """Forward-only access by index to a video decoded one frame at a time (an index past the end gives
    the last frame). Only the current frame is held."""

    def __init__(self, path: Path, max_side: int | None):
        self._it = iter_frames(path, max_side)
        self.index = -1
        self.frame: np.ndarray | None = None
        self.decoded = 0  # frames decoded so far

    def at(self, i: int) -> np.ndarray:
        if i < self.index:
            raise ValueError(f"FrameCursor reads forward only (asked {i} after {self.index})")
        while self.index < i:
            nxt = next(self._it, None)
            if nxt is None:
                break
            self.frame, self.index = nxt, self.index + 1
            self.decoded += 1
        if self.frame is None:
            raise MediaError("video has no frames")
        return self.frame


class AudioReader:
    """Forward sliding window over a file's mono audio: ``get(lo, hi)`` returns samples ``[lo, hi)``
    (zeros outside ``[0, n)``, ``n`` the stream's length capped by :func:`media.audio_limit`); ``lo``
    must not decrease between calls. Holds only the samples from the last ``lo`` on."""

    def __init__(self, path: Path | None, info: MediaInfo | None):
        limit = audio_limit(info) if info is not None else None
        self._it = iter_audio(path, limit) if path is not None and info is not None and info.has_audio else iter(())
        self._buf = np.zeros(0, np.float32)
        self._start = 0  # absolute index of _buf[0]
        self._done = False
        self.max_buffered = 0

    def get(self, lo: int, hi: int) -> np.ndarray:
        out = np.zeros(max(0, hi - lo), np.float32)
        lo_c = max(lo, 0)
        if lo_c > self._start:  # drop what is no longer needed
            self._buf = self._buf[lo_c - self._start :]
            self._start = lo_c
        while not self._done and self._start + len(self._buf) < hi:
            chunk = next(self._it, None)
            if chunk is None:
                self._done = True
                break
            self._buf = np.concatenate([self._buf, chunk])
        self.max_buffered = max(self.max_buffered, len(self._buf))
        a, b = max(lo, self._start), min(hi, self._start + len(self._buf))
        if b > a:
            out[a - lo : b - lo] = self._buf[a - self._start : b - self._start]
        return out


def _blocks(n: int, size: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into equal consecutive blocks of about ``size`` (one block when ``n <= size``)."""
    k = max(1, int(math.ceil(n / max(1, size))))
    edges = [round(i * n / k) for i in range(k + 1)]
    return [(edges[i], edges[i + 1]) for i in range(k)]


@dataclass
class Source:
    """A media file probed without keeping its content: ``info`` and its kept audio length ``n_audio``."""

    path: Path
    info: MediaInfo
    n_audio: int

    @classmethod
    def probe(cls, path: Path) -> "Source":
        info, n = probe_stream(path)
        return cls(Path(path), info, n)

    @property
    def fps(self) -> float:
        return self.info.fps

    @property
    def sr(self) -> int:
        return int(self.info.sample_rate or 0)

    @property
    def n_frames(self) -> int:
        return self.info.num_frames

    def frames(self, max_side: int | None) -> Iterator[np.ndarray]:
        return iter_frames(self.path, max_side)

    def audio(self) -> AudioReader:
        return AudioReader(self.path if self.n_audio else None, self.info)
