"""The query grid both MF trackers start from (CoVEBench App. F.3: a ``grid_size`` x ``grid_size`` grid on the
first frame), in CoTracker's convention; numpy only, so the LK path never imports torch and the CoTracker3 model
(``cotracker3``) shares it without importing the metric (``motion``)."""

from __future__ import annotations

import numpy as np


def grid_points(grid_size: int, height: int, width: int) -> np.ndarray:
    """``grid_size`` x ``grid_size`` query points (x, y), row-major, inset by width/64 from the border.

    The inset follows CoTracker's grid convention so both trackers start from the same points.
    """
    if grid_size == 1:
        return np.array([[width / 2.0, height / 2.0]], np.float32)
    margin = width / 64.0
    ys = np.linspace(margin, height - margin, grid_size)
    xs = np.linspace(margin, width - margin, grid_size)
    gy, gx = np.meshgrid(ys, xs, indexing="ij")
    return np.stack([gx.ravel(), gy.ravel()], axis=-1).astype(np.float32)
