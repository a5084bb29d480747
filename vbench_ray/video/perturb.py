"""Deterministic video perturbations for robustness sweeps (ViDiC App. E.4) and negative controls.

E.4 applies three distortions with OpenCV at fixed intensities, identically to both videos of a pair:

* Gaussian noise: additive N(0, sigma^2), sigma 15 / 30 / 45, from a generator seeded with 42 for each
  video (so every video of a variant gets the same noise sequence);
* Gaussian blur: kernels 5x5 / 9x9 / 15x15 with sigma derived from the kernel size (OpenCV's rule for
  ``sigmaX=0``: ``0.3 * ((k - 1) * 0.5 - 1) + 0.8``);
* saturation: the S channel in HSV scaled by 0.75 / 0.50 / 0.25.

Plus resolution (resize to a given short side, keeping the aspect ratio and even sizes for h264).
A perturbation is named by a spec string, ``"noise:15"``, ``"blur:9"``, ``"saturation:0.5"``,
``"resize:360"``, so it can travel in a ``variant`` column and a config list.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

NOISE_SEED = 42  # ViDiC App. E.4
KINDS = ("noise", "blur", "saturation", "resize")


@dataclass(frozen=True)
class Perturbation:
    kind: str
    amount: float

    @classmethod
    def parse(cls, spec: str) -> "Perturbation":
        kind, _, amount = spec.partition(":")
        if kind not in KINDS or not amount:
            raise ValueError(f"perturbation spec {spec!r} must be one of {', '.join(k + ':<amount>' for k in KINDS)}")
        value = float(amount)
        if kind == "blur" and (value < 1 or value % 2 != 1):
            raise ValueError(f"blur kernel must be an odd positive integer, got {amount}")
        if kind in ("noise", "resize") and value <= 0 or kind == "saturation" and value < 0:
            raise ValueError(f"{kind} amount must be positive, got {amount}")
        return cls(kind, value)

    @property
    def spec(self) -> str:
        amount = int(self.amount) if float(self.amount).is_integer() else self.amount
        return f"{self.kind}:{amount}"

    def apply(self, frames: np.ndarray) -> np.ndarray:
        """uint8 RGB ``(T, H, W, 3)`` in, the perturbed frames out (same dtype; resize changes H, W)."""
        return {
            "noise": gaussian_noise,
            "blur": gaussian_blur,
            "saturation": scale_saturation,
            "resize": resize_short_side,
        }[self.kind](frames, self.amount)


def gaussian_noise(frames: np.ndarray, sigma: float, seed: int = NOISE_SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        noisy = frame.astype(np.float32) + rng.normal(0.0, sigma, frame.shape).astype(np.float32)
        out[t] = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
    return out


def gaussian_blur(frames: np.ndarray, kernel: float) -> np.ndarray:
    k = int(kernel)
    return np.stack([cv2.GaussianBlur(f, (k, k), 0) for f in frames])  # sigmaX=0: derived from k


def scale_saturation(frames: np.ndarray, factor: float) -> np.ndarray:
    out = np.empty_like(frames)
    for t, frame in enumerate(frames):
        hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
        hsv[..., 1] = np.clip(hsv[..., 1].astype(np.float32) * factor, 0, 255).astype(np.uint8)
        out[t] = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
    return out


def resize_short_side(frames: np.ndarray, short_side: float) -> np.ndarray:
    h, w = frames.shape[1:3]
    scale = float(short_side) / min(h, w)

    def even(x):  # nearest even size (h264), halves up
        return max(2, int(np.floor(x * scale / 2 + 0.5)) * 2)

    new_w, new_h = even(w), even(h)
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    return np.stack([cv2.resize(f, (new_w, new_h), interpolation=interp) for f in frames])
