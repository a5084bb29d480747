"""NIQE of the edited video: the no-reference quality metric of NRVBench Table 3 (App. E.5).

NIQE (Mittal et al. 2013, "Making a completely blind image quality analyzer"), per frame, averaged over frames;
lower is better. It needs a pristine model (``metrics.NIQE.model``): a ``.npz`` with ``mu`` and ``cov``
(:func:`fit_niqe_model` writes one from a folder of natural images) or the reference MATLAB
``modelparameters.mat`` (``mu_prisparam``, ``cov_prisparam``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import cv2
import numpy as np

from vbench_ray.metrics.base import FrameMetric, register_metric, require_weights, weights_problem

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
    rho = var / (mean_abs**2) if mean_abs > 0 else np.inf
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
    r_norm = r_hat * (g**3 + 1) * (g + 1) / (g**2 + 1) ** 2 if np.isfinite(g) else 0.0
    alpha = float(_ALPHAS[np.argmin(np.abs(_ratio_tables()[1] - r_norm))])
    from scipy.special import gamma as gamma_fn

    eta = (
        (right_sd - left_sd)
        * gamma_fn(2.0 / alpha)
        / gamma_fn(1.0 / alpha)
        * math.sqrt(gamma_fn(1.0 / alpha) / gamma_fn(3.0 / alpha))
    )
    return alpha, float(eta), left_sd**2, right_sd**2


def patch_features(coeffs: np.ndarray) -> np.ndarray:
    """The 18 NIQE features of one MSCN patch: GGD (alpha, variance), then AGGD (alpha, mean, left and
    right variance) of the products with the horizontal, vertical and two diagonal neighbours."""
    feats = list(ggd_fit(coeffs))
    for a, b in (
        (coeffs[:, :-1], coeffs[:, 1:]),
        (coeffs[:-1, :], coeffs[1:, :]),
        (coeffs[:-1, :-1], coeffs[1:, 1:]),
        (coeffs[1:, :-1], coeffs[:-1, 1:]),
    ):
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
        raise ValueError(
            f"NIQE needs frames of at least {patch}x{patch} pixels (metrics.NIQE.patch_size), "
            f"got {img.shape[1]}x{img.shape[0]}"
        )
    img = img[:h, :w]
    half = cv2.resize(img, (w // 2, h // 2), interpolation=cv2.INTER_CUBIC)
    scales = []
    sds = None
    for k, (im, p) in enumerate(((img, patch), (half, patch // 2))):
        coeffs, sd = mscn(im)
        rows = []
        for y in range(0, im.shape[0] - p + 1, p):
            for x in range(0, im.shape[1] - p + 1, p):
                rows.append(patch_features(coeffs[y : y + p, x : x + p]))
        scales.append(np.asarray(rows))
        if k == 0:
            sds = np.asarray(
                [
                    sd[y : y + p, x : x + p].mean()
                    for y in range(0, im.shape[0] - p + 1, p)
                    for x in range(0, im.shape[1] - p + 1, p)
                ]
            )
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
        return float(
            np.mean(
                [
                    niqe_score(cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2GRAY), self.mu, self.cov, patch)
                    for f in edited
                ]
            )
        )
