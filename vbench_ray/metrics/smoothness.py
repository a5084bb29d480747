"""Motion Smoothness (MSM) of the edited video alone. CoVEBench App. F.2, "Motion Smoothness".

With T uniformly sampled frames and dense flows F_t = Flow(I_t, I_{t+1}) between consecutive sampled
frames (t = 1..T-1), the paper defines a per-pixel jitter between consecutive flows

    J_t(p) = ||F_{t+1}(p) - F_t(p)|| / (||F_{t+1}(p)|| + ||F_t(p)|| + eps)

and MSM = 1 - 1/(T-2) * sum_{t=1}^{T-2} mean_{p in M_t} min(1, J_t(p)),

where M_t holds the pixels with non-negligible motion. We take M_t = {p : ||F_t(p)|| > thr or
||F_{t+1}(p)|| > thr} with thr = 0.05 px, the official code's mask; an empty M_t (no motion at all)
counts as perfectly smooth. Since J_t is the relative change of the flow vector, it is 0 for constant
motion and 1 when the motion reverses (F_{t+1} = -F_t). By the triangle inequality J_t <= 1 always, so
the paper's min(1, .) never changes a value; it is kept for fidelity to the formula.

Two formulas, both kept (``metrics.MSM.formula``):

* ``official`` (default): the official repository's score, which is what the paper's published numbers
  come from: Table 3 reports MSM 0.63-0.71, which this formula produces, while the App. F.2 text's
  formula gives about 0.2-0.3 on the same videos (docs/official_parity.md, CoVEBench). A number comparable with
  Table 3 needs this one.
* ``paper_text``: the App. F.2 formula as written above.

The official score, per flow
pair, the masked mean of clip(0.7 * (clip(cos, -1, 1) + 1) / 2 + 0.3 * (1 - |m_t - m_{t+1}| /
(m_t + m_{t+1} + eps)), 0, 1), with cos = F_t . F_{t+1} / (m_t m_{t+1} + eps) and m = ||F||; an empty
mask scores 1.0, and MSM is the mean over pairs. Both are 1 for constant motion; they differ in how
much a direction or speed change costs (a reversal costs 1 in the paper, 0.7 in the official code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from vbench_ray.metrics.base import FrameMetric, VideoTooShortError, register_metric, require_weights, weights_problem
from vbench_ray.video.flow import AreaResize, FrameView, Gray, farneback_flows

FLOWS = ("farneback", "raft")
FORMULAS = ("official", "paper_text")
RAFT_KEY = "metrics.MSM.raft_weights"


@dataclass
class MSMConfig:
    frames: int = 10  # T: uniformly sampled frames of the edited video (paper: 10)
    size: int = 224  # frames are resized to size x size before flow (official: 224)
    flow: str = "farneback"  # "farneback" (OpenCV, CPU) or "raft" (torchvision, GPU option)
    formula: str = (
        "official"  # "official" (the repository's score; Table 3's numbers) or "paper_text" (App. F.2 jitter)
    )
    motion_threshold: float = 0.05  # px; pixels moving less in both flows are outside M_t
    eps: float = 1e-6  # keeps the ratios finite where both flows are zero
    raft_weights: Optional[str] = (
        None  # local torchvision RAFT state dict (.pth), for flow="raft"; small or large, read from its keys
    )
    device: str = "cpu"  # torch device for RAFT
    gpu_fraction: float = 0.1  # GPU share per pool actor, device cuda (pool_plan)


Magnitudes = tuple[np.ndarray, np.ndarray]  # ||F_t||, ||F_{t+1}|| per pixel


def _magnitudes(f0: np.ndarray, f1: np.ndarray, mags: Magnitudes | None = None) -> Magnitudes:
    """``mags`` when given (``msm_score`` computes each flow's once; a flow is in two pairs, four norms each)."""
    return mags if mags is not None else (np.linalg.norm(f0, axis=-1), np.linalg.norm(f1, axis=-1))


def motion_mask(f0: np.ndarray, f1: np.ndarray, threshold: float, mags: Magnitudes | None = None) -> np.ndarray:
    """M_t: pixels where either of two consecutive flows moves more than ``threshold`` px."""
    m0, m1 = _magnitudes(f0, f1, mags)
    return (m0 > threshold) | (m1 > threshold)


def jitter_map(f0: np.ndarray, f1: np.ndarray, eps: float = 1e-6, mags: Magnitudes | None = None) -> np.ndarray:
    """J_t(p) of the paper: relative change between consecutive flow vectors, per pixel (uncapped)."""
    m0, m1 = _magnitudes(f0, f1, mags)
    return np.linalg.norm(f1 - f0, axis=-1) / (m0 + m1 + eps)


def paper_pair_jitter(
    f0: np.ndarray, f1: np.ndarray, threshold: float, eps: float, mags: Magnitudes | None = None
) -> float:
    """mean_{p in M_t} min(1, J_t(p)); 0 (no jitter) when nothing moves."""
    mask = motion_mask(f0, f1, threshold, mags)
    if not mask.any():
        return 0.0
    return float(np.minimum(1.0, jitter_map(f0, f1, eps, mags)[mask]).mean())


def official_pair_score(
    f0: np.ndarray, f1: np.ndarray, threshold: float, eps: float, mags: Magnitudes | None = None
) -> float:
    """The official code's per-pair smoothness: 0.7 * direction agreement + 0.3 * speed agreement."""
    m0, m1 = _magnitudes(f0, f1, mags)
    mask = motion_mask(f0, f1, threshold, (m0, m1))
    if not mask.any():
        return 1.0
    cos = np.sum(f0 * f1, axis=-1) / (m0 * m1 + eps)
    direction = (np.clip(cos, -1.0, 1.0) + 1.0) / 2.0
    speed = 1.0 - np.abs(m0 - m1) / (m0 + m1 + eps)
    return float(np.clip(0.7 * direction + 0.3 * speed, 0.0, 1.0)[mask].mean())


def msm_score(flows: np.ndarray, formula: str = "official", motion_threshold: float = 0.05, eps: float = 1e-6) -> float:
    """MSM from consecutive flows ``(T-1, H, W, 2)``; nan with fewer than two flows (T < 3 frames)."""
    if formula not in FORMULAS:
        raise ValueError(f"MSM formula must be one of {FORMULAS}, got {formula!r}")
    flows = np.asarray(flows, dtype=np.float64)
    if len(flows) < 2:
        return math.nan
    norms = [np.linalg.norm(f, axis=-1) for f in flows]  # ||F_t||, once per flow
    pairs = [(flows[t], flows[t + 1], (norms[t], norms[t + 1])) for t in range(len(flows) - 1)]  # T-2 pairs
    if formula == "paper_text":
        return 1.0 - float(np.mean([paper_pair_jitter(a, b, motion_threshold, eps, m) for a, b, m in pairs]))
    return float(np.mean([official_pair_score(a, b, motion_threshold, eps, m) for a, b, m in pairs]))


@register_metric
class MSM(FrameMetric):
    """Motion Smoothness, CoVEBench App. F.2: flow-jitter score of the edited video (higher = smoother)."""

    name = "MSM"
    paper = "CoVEBench App. F.2 (Motion Smoothness)"
    weights_from = {  # where the official weights are published
        "raft_weights": "torchvision's RAFT weights (torchvision.models.optical_flow.Raft_Large_Weights.DEFAULT "
        "or Raft_Small_Weights.DEFAULT); the official MSM uses OpenCV Farneback flow, no weights",
    }
    config_class = MSMConfig
    choices = {"flow": FLOWS, "formula": FORMULAS}
    needs_source = False
    scale = "[0,1]"
    gpu_cost = 160.0  # ms per case in its RAFT-large pool actor, 5-metric stream, H200 (tests/perf/gpu_stream.py)

    def __init__(self, cfg: MSMConfig | None = None):
        super().__init__(cfg)
        if self.cfg.flow not in FLOWS:
            raise ValueError(f"metrics.MSM.flow must be one of {FLOWS}, got {self.cfg.flow!r}")
        if self.cfg.formula not in FORMULAS:
            raise ValueError(f"metrics.MSM.formula must be one of {FORMULAS}, got {self.cfg.formula!r}")
        self._raft = None

    def resources(self) -> dict:
        on_gpu = self.cfg.flow == "raft" and str(self.cfg.device).startswith("cuda")
        return {"num_gpus": float(self.cfg.gpu_fraction)} if on_gpu else {}

    def in_pool(self) -> bool:
        return self.cfg.flow == "raft"  # RAFT's weights load once per pool actor

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        """For RAFT: the file exists and is a torchvision RAFT state dict of either variant (read from its keys and
        shapes: ``vbench_ray.video.flow.raft_variant_of``), so a wrong file is one message before any compute."""
        if cfg.flow != "raft":
            return []
        problems = weights_problem(cfg.raft_weights, RAFT_KEY, "RAFT optical flow")
        if problems:
            return problems
        from vbench_ray.metrics.base import checkpoint_shapes
        from vbench_ray.video.flow import raft_variant_of

        try:  # keys and shapes from the file's pickle: the driver imports no torch for this (checkpoint_shapes)
            raft_variant_of(checkpoint_shapes(cfg.raft_weights, RAFT_KEY), RAFT_KEY, cfg.raft_weights)
        except ImportError:  # a legacy-format file and no torch in the driver: the pool actor's setup checks it
            return []
        except ValueError as exc:  # ConfigError included
            return [str(exc)]
        return []

    def setup(self) -> None:
        if self.cfg.flow != "raft":
            return
        # check the weights before importing torchvision, so a missing path fails with the config key
        # even where torchvision is not installed (the CPU stack)
        weights = require_weights(self.cfg.raft_weights, RAFT_KEY, "RAFT optical flow")
        from vbench_ray.config import ConfigError
        from vbench_ray.metrics.base import load_checked, read_state_dict
        from vbench_ray.video.flow import RaftFlow, raft_model, raft_variant_of

        try:  # small or large: read from the state dict, never from the file's name
            state = read_state_dict(weights, RAFT_KEY)
            self.raft_variant = raft_variant_of(state, RAFT_KEY, weights)
            model = load_checked(
                raft_model(self.raft_variant),
                state,
                RAFT_KEY,
                weights,
                f"a torchvision RAFT-{self.raft_variant} state dict",
            )
        except ValueError as exc:  # every key at its shape, or one message naming the config key
            raise ConfigError(str(exc)) from exc
        self._raft = RaftFlow(model, self.cfg.device)

    def frame_view(self) -> FrameView:
        """Farneback: grayscale, then ``INTER_AREA`` to size x size (the official order); RAFT: RGB at size."""
        size = AreaResize(int(self.cfg.size))
        return FrameView((Gray(), size)) if self.cfg.flow == "farneback" else FrameView((size,))

    def flows(self, frames: np.ndarray) -> np.ndarray:
        """Consecutive flows of the sampled frames at ``size x size``: ``(T-1, size, size, 2)``."""
        return self.view_flows(self.frame_view().stack(frames))

    def view_flows(self, views: np.ndarray) -> np.ndarray:
        """``flows`` of frames already through ``frame_view()``."""
        if self.cfg.flow == "farneback":
            return farneback_flows(views)
        if self._raft is None:
            self.setup()
        return self._raft(views)

    def compute_views(self, edited: np.ndarray, source: np.ndarray | None = None) -> float:
        """MSM of App. F.2 (``formula``) on the edited video's views; the source is not read."""
        if len(edited) < 3:  # two flows are the least a change of motion can be measured on
            raise VideoTooShortError("MSM", len(edited), 3, "the edited video")
        return msm_score(
            self.view_flows(edited), self.cfg.formula, float(self.cfg.motion_threshold), float(self.cfg.eps)
        )
