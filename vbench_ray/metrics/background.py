"""Background preservation (PSNR, SSIM, MSE) between the source and edited videos, outside the editing mask.

The conventional metrics of the NRVBench paper ("Beyond Rigid") §5, Table 3 and App. E.5, on the scales App.
E.5 fixes: every frame-level metric is computed per frame, then averaged over frames (and the benchmark
averages over videos); PSNR in dB, SSIM x 100, MSE x 10^4 on RGB values in [0, 1].

**Background** means outside the editing mask (the benchmark's per-frame mask, ``True`` = edit region):

* ``background="exclude"`` (default; "over the background (outside the mask)"): MSE is the mean squared
  error over background pixels and channels; PSNR is ``10 log10(1 / MSE)`` of that frame (``inf`` for a
  frame identical on the background, as the paper's "Reference source" row); SSIM is scikit-image's SSIM
  map (RGB, ``channel_axis=-1``, ``data_range=1``, its default 7x7 uniform window) averaged over the
  background pixels of the interior that scikit-image itself averages (the ``(7 - 1) / 2``-pixel border is
  left out, so with an empty mask the value equals ``structural_similarity``'s).
* ``background="zero"``: both frames are multiplied by ``1 - mask`` and the ordinary full-frame metric is
  taken (the convention of PIE-Bench-style evaluation code, where the masked region counts as identical).

A frame whose mask covers every pixel has no background: it is left out of the mean (all frames: ``nan``,
a recorded failure). Without a mask (another benchmark's frame stage) the whole frame is background.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np

from vbench_ray.metrics.base import FrameMetric, Sampling, register_metric, sampling_of

BACKGROUND_MODES = ("exclude", "zero")
SSIM_WIN = 7  # scikit-image's default window


class MaskedFrameMetric(FrameMetric):
    """A frame metric that may take the editing mask: ``compute(edited, source, mask=None)``.

    ``mask``: bool ``(T, H, W)`` aligned with ``source`` (same frames, same size), ``True`` = edit region.
    The NRVBench frame stage passes it; other frame stages call ``compute(edited, source)`` and the whole
    frame counts as background.
    """

    needs_mask: ClassVar[bool] = True

    def sampling(self) -> Sampling:
        return sampling_of(getattr(self.cfg, "frames", None))


# ----------------------------------------------------------------------------- formulas


def to_unit(frames: np.ndarray) -> np.ndarray:
    """uint8 RGB -> float64 in [0, 1]."""
    return np.asarray(frames, dtype=np.float64) / 255.0


def background_of(mask: np.ndarray | None, shape: tuple) -> np.ndarray:
    """Float background weights ``(T, H, W)``: 1 outside the mask, 0 inside (all ones without a mask)."""
    if mask is None:
        return np.ones(shape[:3], np.float64)
    mask = np.asarray(mask, bool)
    if mask.shape != tuple(shape[:3]):
        raise ValueError(f"mask of shape {mask.shape} does not match frames of shape {tuple(shape[:3])}")
    return (~mask).astype(np.float64)


def masked_mse_frames(
    source: np.ndarray, edited: np.ndarray, mask: np.ndarray | None = None, mode: str = "exclude"
) -> np.ndarray:
    """Per-frame background MSE on RGB in [0, 1] (``nan`` for a frame without background)."""
    s, e = to_unit(source), to_unit(edited)
    if s.shape != e.shape:
        raise ValueError(f"source {s.shape} and edited {e.shape} frames differ in shape")
    bg = background_of(mask, s.shape)
    sq = (s - e) ** 2
    if mode == "zero":
        return (sq * bg[..., None]).mean(axis=(1, 2, 3))
    if mode != "exclude":
        raise ValueError(f"background must be one of {BACKGROUND_MODES}, got {mode!r}")
    weight = bg.sum(axis=(1, 2)) * 3.0
    total = (sq * bg[..., None]).sum(axis=(1, 2, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight > 0, total / np.maximum(weight, 1e-300), np.nan)


def psnr_from_mse(mse: np.ndarray) -> np.ndarray:
    """``10 log10(1 / MSE)`` in dB for data in [0, 1]; ``inf`` where MSE is 0, ``nan`` where it is ``nan``."""
    mse = np.asarray(mse, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            mse > 0, 10.0 * np.log10(1.0 / np.where(mse > 0, mse, 1.0)), np.where(np.isnan(mse), np.nan, np.inf)
        )


def masked_ssim_frames(
    source: np.ndarray, edited: np.ndarray, mask: np.ndarray | None = None, mode: str = "exclude"
) -> np.ndarray:
    """Per-frame background SSIM (RGB, [0, 1], scikit-image defaults)."""
    from skimage.metrics import structural_similarity  # here, not at import: the driver never computes it

    s, e = to_unit(source), to_unit(edited)
    if s.shape != e.shape:
        raise ValueError(f"source {s.shape} and edited {e.shape} frames differ in shape")
    bg = background_of(mask, s.shape)
    out = np.empty(len(s))
    pad = (SSIM_WIN - 1) // 2
    for t in range(len(s)):
        if mode == "zero":
            out[t] = structural_similarity(
                s[t] * bg[t][..., None], e[t] * bg[t][..., None], channel_axis=-1, data_range=1.0
            )
            continue
        if mode != "exclude":
            raise ValueError(f"background must be one of {BACKGROUND_MODES}, got {mode!r}")
        _, smap = structural_similarity(s[t], e[t], channel_axis=-1, data_range=1.0, full=True)
        smap = smap.mean(axis=-1)[pad : -pad or None, pad : -pad or None]
        w = bg[t][pad : -pad or None, pad : -pad or None]
        out[t] = float((smap * w).sum() / w.sum()) if w.sum() > 0 else np.nan
    return out


def _frame_mean(values: np.ndarray) -> float:
    """Mean over frames, leaving out frames without background; ``inf`` if any frame is ``inf`` (PSNR)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else float("nan")


@dataclass
class BackgroundConfig:
    frames: Optional[int] = None  # uniformly sampled frames (null: every frame, App. E.5)
    background: str = "exclude"  # exclude: pixels outside the mask | zero: mask zeroed in both, full-frame metric


class BackgroundMetric(MaskedFrameMetric):
    """The background-preservation metrics share one config (``metrics.<name>.frames`` / ``.background``)."""

    config_class = BackgroundConfig
    choices = {"background": BACKGROUND_MODES}


def _pair(edited, source):
    if source is None:
        raise ValueError("background preservation compares against the source video, but no source frames were given")
    if len(source) != len(edited):
        raise ValueError(
            f"needs the same number of sampled frames from both videos, got {len(source)} source "
            f"and {len(edited)} edited frames"
        )
    return edited, source


@register_metric
class BackgroundPSNR(BackgroundMetric):
    """PSNR (dB) between source and edited frames outside the mask, averaged over frames (App. E.5)."""

    name = "BG_PSNR"
    paper = "NRVBench App. E.5 (background PSNR, dB)"
    scale = "dB"

    def compute(self, edited, source, mask=None) -> float:
        edited, source = _pair(edited, source)
        return _frame_mean(psnr_from_mse(masked_mse_frames(source, edited, mask, self.cfg.background)))


@register_metric
class BackgroundMSE(BackgroundMetric):
    """MSE x 10^4 on RGB in [0, 1] outside the mask, averaged over frames (App. E.5)."""

    name = "BG_MSE"
    paper = "NRVBench App. E.5 (background MSE x 1e4)"
    higher_is_better = False
    scale = "MSE x 1e4"

    def compute(self, edited, source, mask=None) -> float:
        edited, source = _pair(edited, source)
        return 1e4 * _frame_mean(masked_mse_frames(source, edited, mask, self.cfg.background))


@register_metric
class BackgroundSSIM(BackgroundMetric):
    """SSIM x 100 outside the mask, averaged over frames (App. E.5)."""

    name = "BG_SSIM"
    paper = "NRVBench App. E.5 (background SSIM x 100)"
    scale = "[0,100]"
    imports = ("skimage.metrics:structural_similarity",)  # scikit-image loads it lazily: the attribute loads it

    def compute(self, edited, source, mask=None) -> float:
        edited, source = _pair(edited, source)
        return 100.0 * _frame_mean(masked_ssim_frames(source, edited, mask, self.cfg.background))
