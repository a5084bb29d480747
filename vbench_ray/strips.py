"""Frame strips: a few uniformly spaced frames of a video side by side, as one PNG (the report's case figures and
the W&B per-case table's images)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

STRIP_FRAMES = 5  # frames per strip, uniformly spaced (video.io.uniform_indices)
STRIP_HEIGHT = 96  # pixels; frames are resized to this height, keeping the aspect ratio


def resolve(path: Any, run_dir: Path) -> Path:
    p = Path(str(path))
    if not p.is_absolute() and not p.exists() and (run_dir / p).exists():
        return run_dir / p
    return p


def encode_strip(path: Path) -> bytes:
    """``STRIP_FRAMES`` uniformly spaced frames, resized to ``STRIP_HEIGHT``, side by side, as PNG."""
    import cv2

    from vbench_ray.video.io import VideoReader, uniform_indices

    reader = VideoReader(path)
    frames = reader.read(uniform_indices(reader.info.num_frames, STRIP_FRAMES))
    h, w = frames.shape[1:3]
    size = (max(1, round(w * STRIP_HEIGHT / h)), STRIP_HEIGHT)
    interp = cv2.INTER_AREA if h > STRIP_HEIGHT else cv2.INTER_LINEAR
    gap = np.full((STRIP_HEIGHT, 2, 3), 255, np.uint8)
    tiles = []
    for frame in frames:
        tiles += [cv2.resize(frame, size, interpolation=interp), gap]
    strip = np.ascontiguousarray(np.hstack(tiles[:-1]))
    ok, buf = cv2.imencode(".png", cv2.cvtColor(strip, cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError(f"PNG encoding failed for {path}")
    return buf.tobytes()
