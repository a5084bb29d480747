"""Structural Fidelity (SSIM) between source and edited videos. CoVEBench App. F.3, "Structural Fidelity".

    SF = 1/T * sum_t SSIM(I_t^src, I_t^edit)

over T = 10 uniformly sampled frame pairs, grayscale, resized to 224x224 (``INTER_AREA``, as the
official code), with scikit-image's ``structural_similarity`` (``data_range=255``, its default 7x7
uniform window). Scale [0, 1] for natural images (SSIM can dip below 0 for anti-correlated frames).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vbench_ray.metrics.base import FrameMetric, register_metric
from vbench_ray.video.flow import AreaResize, FrameView, Gray


@dataclass
class SSIMConfig:
    frames: int = 10  # T: uniformly sampled frames per video (paper: 10)
    size: int = 224  # both videos are resized to size x size before comparison (official: 224)


def ssim_frames(src_gray: np.ndarray, edit_gray: np.ndarray) -> np.ndarray:
    """Per-frame SSIM of two uint8 grayscale stacks ``(T, H, W)`` of equal shape."""
    from skimage.metrics import structural_similarity  # here, not at import: the driver never computes SSIM

    if src_gray.shape != edit_gray.shape:
        raise ValueError(
            f"SSIM needs frame stacks of equal shape, got source {src_gray.shape} and edited {edit_gray.shape}"
        )
    # float64 per frame: structural_similarity returns its mean as np.float64 whatever the frames' dtype
    return np.array([structural_similarity(a, b, data_range=255) for a, b in zip(src_gray, edit_gray)])


def ssim_video(src_gray: np.ndarray, edit_gray: np.ndarray) -> float:
    """Video-level SF: the mean of per-frame SSIM over the sampled pairs (nan when there are none)."""
    scores = ssim_frames(src_gray, edit_gray)
    return float(scores.mean()) if len(scores) else float("nan")


@register_metric
class SSIM(FrameMetric):
    """Structural Fidelity, CoVEBench App. F.3: mean grayscale SSIM over T uniformly sampled frame pairs.

    The paper excludes background-change cases from this metric; that filter is the benchmark's job
    (it knows the categories), not the metric's.
    """

    name = "SSIM"
    paper = "CoVEBench App. F.3 (Structural Fidelity)"
    config_class = SSIMConfig
    needs_source = True
    scale = "[0,1]"
    imports = ("skimage.metrics:structural_similarity",)  # scikit-image loads it lazily: the attribute loads it

    def frame_view(self) -> FrameView:
        """Grayscale, then ``INTER_AREA`` to size x size: the official preprocessing, in its order."""
        return FrameView((Gray(), AreaResize(int(self.cfg.size))))

    def compute_views(self, edited: np.ndarray, source: np.ndarray | None) -> float:
        """SF of App. F.3 on the grayscale size x size frames."""
        if source is None:
            raise ValueError("SSIM compares against the source video, but no source frames were given")
        # both videos are sampled with min(T, n) distinct frames (video.io.uniform_indices), so a video
        # shorter than n gives fewer; as the official code, the first k samples of each are paired
        k = min(len(source), len(edited))
        if k == 0:
            raise ValueError("SSIM needs at least one frame of each video")
        return ssim_video(source[:k], edited[:k])
