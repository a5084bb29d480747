"""Dense optical flow between consecutive frames, and its visualisation.

Two estimators:

* ``farneback_flow``: OpenCV's Farneback on grayscale frames, the CPU default. The parameters are the
  standard ones the CoVEBench MSM code uses (pyr_scale 0.5, levels 3, winsize 15, iterations 3,
  poly_n 5, poly_sigma 1.2), so scores are comparable with the official numbers.
* ``RaftFlow``: torchvision's RAFT (small or large, read from the weights) on RGB frames, a GPU option. torchvision is
  imported only when a ``RaftFlow`` is built, because the CPU stack has no working torchvision
  (docs/stack.md); weights come only from a local ``.pth`` (no downloads on cluster nodes).

Flows are float32 arrays ``(H, W, 2)`` holding ``(dx, dy)`` in pixels, from frame ``t`` to ``t + 1``.
``flow_to_color`` turns one into an RGB picture (hue = direction, brightness = magnitude) for reports.

The per-frame preprocessing before a flow or a formula (grayscale, ``INTER_AREA`` to a square) is a
``FrameView``: a hashable chain of steps, which is what a metric declares as its ``frame_view()``
(``vbench_ray.metrics.base``) so the decode stage makes each view of a frame once, as it is decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

# Farneback parameters: pyr_scale, levels, winsize, iterations, poly_n, poly_sigma, flags.
FARNEBACK_PARAMS = (0.5, 3, 15, 3, 5, 1.2, 0)


# ------------------------------------------------------------------------------ per-frame views


@dataclass(frozen=True)
class Gray:
    """uint8 RGB ``(H, W, 3)`` → uint8 grayscale ``(H, W)``: ``cv2.COLOR_RGB2GRAY``, as the official code."""

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)


@dataclass(frozen=True)
class AreaResize:
    """A uint8 frame (RGB or grayscale) → ``size x size`` with ``cv2.INTER_AREA``, as the official code."""

    size: int

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        return cv2.resize(np.ascontiguousarray(frame), (self.size, self.size), interpolation=cv2.INTER_AREA)


@dataclass(frozen=True)
class FrameView:
    """What a formula reads of each frame: ``steps`` (e.g. ``Gray()``, ``AreaResize(224)``) applied in order.

    Frozen steps make equal views equal and hash alike: the decode stage computes each (frame, view) once and
    hands it to every metric that declares that view. The order of steps is part of the view: grayscale then
    resize rounds differently from resize then grayscale, and each metric keeps its official order.
    """

    steps: tuple[Callable[[np.ndarray], np.ndarray], ...]

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        for step in self.steps:
            frame = step(frame)
        return frame

    def stack(self, frames: np.ndarray) -> np.ndarray:
        """The view of each uint8 RGB frame of ``(T, H, W, 3)``, stacked (``(0, ...)`` for no frame)."""
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"expected uint8 RGB frames (T, H, W, 3), got shape {frames.shape}")
        if not len(frames):  # the view's shape, from a blank frame
            return self(np.zeros((max(1, frames.shape[1]), max(1, frames.shape[2]), 3), np.uint8))[None][:0]
        return np.stack([self(f) for f in frames])


def gray_resize(frames: np.ndarray, size: int) -> np.ndarray:
    """uint8 RGB ``(T, H, W, 3)`` → uint8 grayscale ``(T, size, size)``.

    Grayscale first, then ``INTER_AREA`` resize to a square, in that order, as CoVEBench's official
    SSIM and MSM preprocessing does (the order changes rounding, hence the last digits of a score).
    """
    return FrameView((Gray(), AreaResize(int(size)))).stack(frames)


def rgb_resize(frames: np.ndarray, size: int) -> np.ndarray:
    """uint8 RGB ``(T, H, W, 3)`` → uint8 RGB ``(T, size, size, 3)`` with ``INTER_AREA``."""
    return FrameView((AreaResize(int(size)),)).stack(frames)


def farneback_flow(prev_gray: np.ndarray, next_gray: np.ndarray) -> np.ndarray:
    """Dense flow ``(H, W, 2)`` from ``prev_gray`` to ``next_gray`` (uint8 grayscale, same size)."""
    flow = cv2.calcOpticalFlowFarneback(prev_gray, next_gray, None, *FARNEBACK_PARAMS)
    return flow.astype(np.float32, copy=False)  # float32 already: no copy


def farneback_flows(grays: np.ndarray) -> np.ndarray:
    """Flows between consecutive frames: ``(T, H, W)`` uint8 → ``(T - 1, H, W, 2)`` float32."""
    flows = [farneback_flow(grays[t], grays[t + 1]) for t in range(len(grays) - 1)]
    if not flows:
        return np.zeros((0, *grays.shape[1:3], 2), np.float32)
    return np.stack(flows)


def raft_model(variant: str):
    """torchvision's ``raft_small`` or ``raft_large``, randomly initialised (weights come from a local state dict)."""
    from torchvision.models.optical_flow import raft_large, raft_small

    return {"small": raft_small, "large": raft_large}[variant](weights=None, progress=False)


class RaftFlow:
    """A torchvision RAFT with its weights loaded (``raft_model``); ``__call__(rgb)`` gives consecutive flows.

    ``rgb`` is uint8 ``(T, H, W, 3)`` with H and W multiples of 8 (RAFT's requirement; 224 is).
    """

    def __init__(self, model, device: str = "cpu"):
        import torch

        self.model = model.to(device).eval()
        self.device = device
        self._torch = torch

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        torch = self._torch
        if len(rgb) < 2:
            return np.zeros((0, *rgb.shape[1:3], 2), np.float32)
        # RAFT expects float RGB in [-1, 1], NCHW.
        x = torch.from_numpy(np.ascontiguousarray(rgb)).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)
        x = x.to(self.device)
        with torch.inference_mode():
            # the last element of RAFT's output list is the final (most refined) flow estimate
            flow = self.model(x[:-1], x[1:])[-1]
        return flow.permute(0, 2, 3, 1).float().cpu().numpy()


# torchvision's RAFT (pytorch/vision@07a929e8b851242b1c75c9016ee06a8e502961d8,
# torchvision/models/optical_flow/raft.py): the feature encoder's first conv is ``Conv2dNormActivation(3, layers[0],
# kernel_size=7)`` with layers[0] = 64 in ``raft_large`` and 32 in ``raft_small``; only ``raft_large`` has a
# ``mask_predictor`` (raft_small upsamples its flow bilinearly).
RAFT_STEM_KEY = "feature_encoder.convnormrelu.0.weight"
RAFT_STEM_WIDTH = {64: "large", 32: "small"}


def raft_variant_of(state: dict, config_key: str = "metrics.MSM.raft_weights", path: str | Path = "") -> str:
    """``"large"`` or ``"small"``: the torchvision RAFT variant whose state dict ``state`` is, from its keys and
    shapes (the stem's width, and a mask predictor exactly when large). Anything else is a ``ConfigError``
    naming ``config_key``."""
    from vbench_ray.config import ConfigError

    stem = state.get(RAFT_STEM_KEY)
    shape = tuple(getattr(stem, "shape", ()))
    if len(shape) != 4 or shape[1:] != (3, 7, 7) or shape[0] not in RAFT_STEM_WIDTH:
        found = f"has {RAFT_STEM_KEY} of shape {shape}" if stem is not None else f"has no {RAFT_STEM_KEY}"
        raise ConfigError(
            f"{config_key}={path}: not a torchvision RAFT state dict (raft_small or raft_large): it "
            f"{found}, where RAFT has (64, 3, 7, 7) (large) or (32, 3, 7, 7) (small)"
        )
    variant = RAFT_STEM_WIDTH[shape[0]]
    if any(k.startswith("mask_predictor.") for k in state) != (variant == "large"):
        raise ConfigError(
            f"{config_key}={path}: its stem is RAFT-{variant}'s, but it "
            f"{'lacks' if variant == 'large' else 'has'} the mask_predictor only RAFT-large has"
        )
    return variant


def flow_to_color(flow: np.ndarray, max_magnitude: float | None = None) -> np.ndarray:
    """Colour-code a flow ``(H, W, 2)`` as uint8 RGB: hue = direction, value = magnitude.

    ``max_magnitude`` fixes the magnitude that maps to full brightness, so several flows can share one
    scale; by default the flow's own maximum is used (a zero flow is black).
    """
    flow = np.asarray(flow, dtype=np.float32)
    if flow.ndim != 3 or flow.shape[-1] != 2:
        raise ValueError(f"expected a flow of shape (H, W, 2), got {flow.shape}")
    mag, ang = cv2.cartToPolar(flow[..., 0], flow[..., 1], angleInDegrees=True)
    scale = float(max_magnitude) if max_magnitude else float(mag.max())
    hsv = np.zeros((*flow.shape[:2], 3), np.uint8)
    hsv[..., 0] = (ang / 2.0).astype(np.uint8) % 180  # OpenCV's 8-bit hue runs over 0..179
    hsv[..., 1] = 255
    if scale > 0:
        hsv[..., 2] = np.clip(mag / scale * 255.0, 0, 255).astype(np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
