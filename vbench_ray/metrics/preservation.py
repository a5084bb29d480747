"""Background preservation (PSNR, SSIM, MSE), no-reference quality (NIQE) and motion score.

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

NIQE (Mittal et al. 2013, "Making a completely blind image quality analyzer") and the motion score are
computed on the edited video alone. NIQE needs a pristine model (``metrics.NIQE.model``): a ``.npz`` with
``mu`` and ``cov`` (:func:`fit_niqe_model` writes one from a folder of natural images) or the reference
MATLAB ``modelparameters.mat`` (``mu_prisparam``, ``cov_prisparam``). The motion score is the mean magnitude
of Farneback optical flow between consecutive frames, in pixels per frame at a ``size x size`` working
resolution: a motion-magnitude diagnostic, as App. E.5 says, not a quality score (the paper gives no
formula, so absolute values are not comparable with Table 3's).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional

import cv2
import numpy as np

from vbench_ray.metrics.base import FrameMetric, Sampling, register_metric, require_weights, sampling_of, weights_problem
from vbench_ray.video.flow import farneback_flow, gray_resize

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


def masked_mse_frames(source: np.ndarray, edited: np.ndarray, mask: np.ndarray | None = None,
                      mode: str = "exclude") -> np.ndarray:
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
        return np.where(mse > 0, 10.0 * np.log10(1.0 / np.where(mse > 0, mse, 1.0)),
                        np.where(np.isnan(mse), np.nan, np.inf))


def masked_ssim_frames(source: np.ndarray, edited: np.ndarray, mask: np.ndarray | None = None,
                       mode: str = "exclude") -> np.ndarray:
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
            out[t] = structural_similarity(s[t] * bg[t][..., None], e[t] * bg[t][..., None], channel_axis=-1,
                                           data_range=1.0)
            continue
        if mode != "exclude":
            raise ValueError(f"background must be one of {BACKGROUND_MODES}, got {mode!r}")
        _, smap = structural_similarity(s[t], e[t], channel_axis=-1, data_range=1.0, full=True)
        smap = smap.mean(axis=-1)[pad:-pad or None, pad:-pad or None]
        w = bg[t][pad:-pad or None, pad:-pad or None]
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
        raise ValueError(f"needs the same number of sampled frames from both videos, got {len(source)} source "
                         f"and {len(edited)} edited frames")
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
    imports = ("skimage.metrics",)

    def compute(self, edited, source, mask=None) -> float:
        edited, source = _pair(edited, source)
        return 100.0 * _frame_mean(masked_ssim_frames(source, edited, mask, self.cfg.background))


# ----------------------------------------------------------------------------- NIQE

_ALPHAS = np.arange(0.2, 10.0, 0.001)


@functools.lru_cache(maxsize=1)
def _ratio_tables() -> tuple[np.ndarray, np.ndarray]:
    """The GGD and AGGD moment ratios over ``_ALPHAS`` (made on first use: SciPy is not imported by the driver)."""
    from scipy.special import gamma as gamma_fn

    ggd = gamma_fn(1.0 / _ALPHAS) * gamma_fn(3.0 / _ALPHAS) / gamma_fn(2.0 / _ALPHAS) ** 2
    aggd = gamma_fn(2.0 / _ALPHAS) ** 2 / (gamma_fn(1.0 / _ALPHAS) * gamma_fn(3.0 / _ALPHAS))
    return ggd, aggd


def mscn(gray: np.ndarray, sigma: float = 7.0 / 6.0, c: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean-subtracted contrast-normalised coefficients of a grey image in [0, 255] (7x7 Gaussian window),
    and the local standard deviation map."""
    img = np.asarray(gray, dtype=np.float64)
    mu = cv2.GaussianBlur(img, (7, 7), sigma, borderType=cv2.BORDER_REPLICATE)
    var = cv2.GaussianBlur(img * img, (7, 7), sigma, borderType=cv2.BORDER_REPLICATE) - mu * mu
    sd = np.sqrt(np.abs(var))
    return (img - mu) / (sd + c), sd


def ggd_fit(x: np.ndarray) -> tuple[float, float]:
    """Generalised Gaussian fit by moment matching: ``(shape alpha, variance)``."""
    x = np.asarray(x, dtype=np.float64).ravel()
    var = float(np.mean(x * x))
    mean_abs = float(np.mean(np.abs(x)))
    rho = var / (mean_abs ** 2) if mean_abs > 0 else np.inf
    return float(_ALPHAS[np.argmin(np.abs(_ratio_tables()[0] - rho))]), var


def aggd_fit(x: np.ndarray) -> tuple[float, float, float, float]:
    """Asymmetric generalised Gaussian fit: ``(alpha, mean, left variance, right variance)``."""
    x = np.asarray(x, dtype=np.float64).ravel()
    left, right = x[x < 0], x[x > 0]
    left_sd = math.sqrt(float(np.mean(left * left))) if left.size else 0.0
    right_sd = math.sqrt(float(np.mean(right * right))) if right.size else 0.0
    g = left_sd / right_sd if right_sd > 0 else np.inf
    mean_sq = float(np.mean(x * x))
    r_hat = float(np.mean(np.abs(x))) ** 2 / mean_sq if mean_sq > 0 else 0.0
    r_norm = r_hat * (g ** 3 + 1) * (g + 1) / (g ** 2 + 1) ** 2 if np.isfinite(g) else 0.0
    alpha = float(_ALPHAS[np.argmin(np.abs(_ratio_tables()[1] - r_norm))])
    from scipy.special import gamma as gamma_fn

    eta = (right_sd - left_sd) * gamma_fn(2.0 / alpha) / gamma_fn(1.0 / alpha) * math.sqrt(
        gamma_fn(1.0 / alpha) / gamma_fn(3.0 / alpha))
    return alpha, float(eta), left_sd ** 2, right_sd ** 2


def patch_features(coeffs: np.ndarray) -> np.ndarray:
    """The 18 NIQE features of one MSCN patch: GGD (alpha, variance), then AGGD (alpha, mean, left and
    right variance) of the products with the horizontal, vertical and two diagonal neighbours."""
    feats = list(ggd_fit(coeffs))
    for a, b in ((coeffs[:, :-1], coeffs[:, 1:]), (coeffs[:-1, :], coeffs[1:, :]),
                 (coeffs[:-1, :-1], coeffs[1:, 1:]), (coeffs[1:, :-1], coeffs[:-1, 1:])):
        feats += list(aggd_fit(a * b))
    return np.asarray(feats)


def niqe_features(gray: np.ndarray, patch: int = 96, sharpness: float | None = None) -> np.ndarray:
    """Per-patch 36-dim features (18 at full scale, 18 at half scale): ``(n_patches, 36)``.

    The image is cropped to whole patches. ``sharpness``: keep only patches whose mean local deviation is
    at least that fraction of the sharpest patch's (pristine-model fitting); None keeps every patch.
    """
    img = np.asarray(gray, dtype=np.float64)
    h, w = (img.shape[0] // patch) * patch, (img.shape[1] // patch) * patch
    if h == 0 or w == 0:
        raise ValueError(f"NIQE needs frames of at least {patch}x{patch} pixels (metrics.NIQE.patch_size), "
                         f"got {img.shape[1]}x{img.shape[0]}")
    img = img[:h, :w]
    half = cv2.resize(img, (w // 2, h // 2), interpolation=cv2.INTER_CUBIC)
    scales = []
    sds = None
    for k, (im, p) in enumerate(((img, patch), (half, patch // 2))):
        coeffs, sd = mscn(im)
        rows = []
        for y in range(0, im.shape[0] - p + 1, p):
            for x in range(0, im.shape[1] - p + 1, p):
                rows.append(patch_features(coeffs[y:y + p, x:x + p]))
        scales.append(np.asarray(rows))
        if k == 0:
            sds = np.asarray([sd[y:y + p, x:x + p].mean() for y in range(0, im.shape[0] - p + 1, p)
                              for x in range(0, im.shape[1] - p + 1, p)])
    feats = np.concatenate(scales, axis=1)
    if sharpness is not None and len(feats):
        feats = feats[sds >= sharpness * sds.max()]
    return feats


def niqe_score(gray: np.ndarray, mu_p: np.ndarray, cov_p: np.ndarray, patch: int = 96) -> float:
    """NIQE of one grey image: the distance between its patches' MVG fit and the pristine model,
    ``sqrt((mu_p - mu)^T pinv((cov_p + cov) / 2) (mu_p - mu))``."""
    feats = niqe_features(gray, patch)
    mu = np.nanmean(feats, axis=0)
    cov = np.cov(feats, rowvar=False) if len(feats) > 1 else np.zeros((feats.shape[1], feats.shape[1]))
    diff = np.asarray(mu_p, dtype=np.float64) - mu
    inv = np.linalg.pinv((np.asarray(cov_p, dtype=np.float64) + np.nan_to_num(cov)) / 2.0)
    return float(np.sqrt(max(0.0, diff @ inv @ diff)))


def fit_niqe_model(images, patch: int = 96, sharpness: float = 0.75) -> tuple[np.ndarray, np.ndarray]:
    """The pristine MVG ``(mu, cov)`` from natural images (uint8 RGB or grey), keeping sharp patches."""
    feats = []
    for img in images:
        img = np.asarray(img)
        gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY) if img.ndim == 3 else img
        feats.append(niqe_features(gray, patch, sharpness))
    feats = np.concatenate(feats)
    if len(feats) < 2:
        raise ValueError("fitting a NIQE model needs at least two sharp patches")
    return feats.mean(axis=0), np.cov(feats, rowvar=False)


def save_niqe_model(path: str | Path, mu: np.ndarray, cov: np.ndarray, patch: int = 96) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, mu=mu, cov=cov, patch_size=patch)
    return path


def load_niqe_model(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, cov)`` from our ``.npz`` or the reference ``modelparameters.mat``."""
    path = Path(path)
    if path.suffix.lower() == ".mat":
        from scipy.io import loadmat

        data = loadmat(str(path))
        return np.ravel(data["mu_prisparam"]).astype(np.float64), np.asarray(data["cov_prisparam"], np.float64)
    with np.load(path) as data:
        return np.asarray(data["mu"], np.float64), np.asarray(data["cov"], np.float64)


@dataclass
class NIQEConfig:
    model: Optional[str] = None  # pristine model: .npz (mu, cov; see fit_niqe_model) or modelparameters.mat
    frames: Optional[int] = 16  # uniformly sampled edited frames (null: every frame)
    patch_size: int = 96  # NIQE patch size in pixels (reference: 96)


@register_metric
class NIQE(FrameMetric):
    """Mean per-frame NIQE of the edited video (lower is better; Table 3)."""

    name = "NIQE"
    paper = "NRVBench Table 3 (NIQE; Mittal et al. 2013)"
    weights_from = {  # where the official weights are published
        "model": "modelparameters.mat of the NIQE reference release (LIVE, "
                 "http://live.ece.utexas.edu/research/quality/niqe_release.zip)",
    }
    config_class = NIQEConfig
    needs_source = False
    higher_is_better = False
    scale = "NIQE"
    imports = ("scipy.special",)

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        return weights_problem(cfg.model, "metrics.NIQE.model", "NIQE pristine model")

    def setup(self) -> None:
        path = require_weights(self.cfg.model, "metrics.NIQE.model", "NIQE pristine model")
        self.mu, self.cov = load_niqe_model(path)

    def compute(self, edited, source=None) -> float:
        if not hasattr(self, "mu"):
            self.setup()
        patch = int(self.cfg.patch_size)
        return float(np.mean([niqe_score(cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2GRAY), self.mu,
                                         self.cov, patch) for f in edited]))


# ----------------------------------------------------------------------------- motion score

@dataclass
class MotionScoreConfig:
    frames: Optional[int] = None  # uniformly sampled frames (null: every frame); flow between consecutive ones
    size: int = 256  # frames resized to size x size (grey, INTER_AREA) before Farneback flow


def motion_score(frames: np.ndarray, size: int = 256) -> float:
    """Mean Farneback flow magnitude (px per step at ``size x size``) over consecutive frame pairs."""
    if len(frames) < 2:
        return float("nan")
    grays = gray_resize(frames, size)
    return float(np.mean([np.linalg.norm(farneback_flow(grays[t], grays[t + 1]), axis=-1).mean()
                          for t in range(len(grays) - 1)]))


@register_metric
class MotionScore(FrameMetric):
    """Motion magnitude of the edited video from optical flow (Table 3 "Mot."; App. E.5)."""

    name = "MotionScore"
    paper = "NRVBench App. E.5 (motion score)"
    config_class = MotionScoreConfig
    needs_source = False
    scale = "px/frame"

    def compute(self, edited, source=None) -> float:
        return motion_score(edited, int(self.cfg.size))
