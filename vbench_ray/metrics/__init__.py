"""Metrics, one module per family. Importing this package registers every metric in ``METRICS``."""

from vbench_ray.metrics.base import METRICS, FrameMetric, MissingWeightsError, Sampling, build_metric, register_metric
from vbench_ray.metrics import aes, clip, fidelity, background, niqe, motion_score  # noqa: F401  (registration)
from vbench_ray.metrics import lpips, motion  # noqa: F401  (registration)
from vbench_ray.metrics import smoothness, src, struct_dist, tq  # noqa: F401  (registration)

__all__ = ["METRICS", "FrameMetric", "MissingWeightsError", "Sampling", "build_metric", "register_metric"]
