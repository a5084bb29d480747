"""Writing videos: h264 mp4 through PyAV (docs/stack.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_video(
    path: str | Path, frames: np.ndarray, fps: float = 16.0, crf: int = 18, pix_fmt: str = "yuv420p"
) -> Path:
    """Write uint8 RGB frames ``(T, H, W, 3)`` to an h264 mp4. H and W must be even.

    ``crf=0, pix_fmt="yuv444p"`` is (near) lossless: what perturbed sweep videos use, so that the
    perturbation, not the encoder, is what a model sees.
    """
    import av

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"expected uint8 frames of shape (T, H, W, 3), got {frames.dtype} {frames.shape}")
    t, h, w, _ = frames.shape
    if t == 0:
        raise ValueError("cannot write a video with no frames")
    if h % 2 or w % 2:
        raise ValueError(f"h264/yuv420p needs even width and height, got {w}x{h}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from fractions import Fraction

    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
        stream.options = {"crf": str(crf), "preset": "veryfast"}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
