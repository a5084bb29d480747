"""The motion score of the edited video (NRVBench Table 3 "Mot.", App. E.5).

The mean magnitude of Farneback optical flow between consecutive frames, in pixels per frame at a
``size x size`` working resolution: a motion-magnitude diagnostic, as App. E.5 says, not a quality score (the
paper gives no formula, so absolute values are not comparable with Table 3's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from vbench_ray.metrics.base import FrameMetric, register_metric
from vbench_ray.video.flow import farneback_flow, gray_resize


@dataclass
class MotionScoreConfig:
    frames: Optional[int] = None  # uniformly sampled frames (null: every frame); flow between consecutive ones
    size: int = 256  # frames resized to size x size (grey, INTER_AREA) before Farneback flow


def motion_score(frames: np.ndarray, size: int = 256) -> float:
    """Mean Farneback flow magnitude (px per step at ``size x size``) over consecutive frame pairs."""
    if len(frames) < 2:
        return float("nan")
    grays = gray_resize(frames, size)
    return float(
        np.mean([np.linalg.norm(farneback_flow(grays[t], grays[t + 1]), axis=-1).mean() for t in range(len(grays) - 1)])
    )


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
