"""The metric contract: one small class per metric, torchmetrics-style.

A frame metric declares which frames it needs (``sampling``), whether it compares against the source
video (``needs_source``), and computes one number per case from decoded frames. The frame stage
(``vbench_ray.video.frames``) decodes every video once, takes the union of all metrics' sampling
specs, and hands each metric its own frames. Metrics never open files themselves.

Model-backed metrics load weights in ``setup()`` (called once per actor) from a configured local path
and raise ``MissingWeightsError`` naming the config key when the path is not set or does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vbench_ray.video.io import VideoInfo, fps_indices, uniform_indices


class MissingWeightsError(FileNotFoundError):
    """Raised by a model-backed metric or judge whose weights are not configured."""

    def __init__(self, config_key: str, value: Any, what: str):
        hint = "is not set" if not value else f"points to {value!r}, which does not exist"
        super().__init__(f"{what}: config key `{config_key}` {hint}; set it to a local weights path "
                         f"(e.g. `{config_key}=/models/...`) or choose a backend that needs no weights")
        self.config_key = config_key


def require_weights(path: str | None, config_key: str, what: str) -> Path:
    if not path or not Path(path).exists():
        raise MissingWeightsError(config_key, path, what)
    return Path(path)


@dataclass(frozen=True)
class Sampling:
    """Which frames of one video a metric needs: ``n`` uniform frames, or ``fps`` (capped at ``max_frames``)."""

    n: int | None = 10
    fps: float | None = None
    max_frames: int | None = None

    def indices(self, info: VideoInfo) -> list[int]:
        if self.fps is not None:
            return fps_indices(info.num_frames, info.fps, self.fps, self.max_frames)
        if self.n is None:
            raise ValueError("Sampling needs either n or fps")
        return uniform_indices(info.num_frames, self.n)


class AllFrames(Sampling):
    """Every frame of the video (``frames: null`` in a metric config)."""

    def indices(self, info: VideoInfo) -> list[int]:
        return list(range(info.num_frames))


def sampling_of(frames: int | None) -> Sampling:
    """``frames`` uniform frames, or every frame when ``frames`` is None."""
    return AllFrames(n=None) if frames is None else Sampling(n=int(frames))


class FrameMetric:
    """Base class. Subclasses set ``name`` (the output column), ``needs_source`` and implement ``compute``.

    ``cfg`` is the metric's config node (``metrics.<name>`` in the run config), an object with attributes.
    ``compute`` returns a float on the scale the paper reports, or ``nan`` when undefined for the case
    (a recorded failure, never a silent zero).
    """

    name: ClassVar[str] = ""
    needs_source: ClassVar[bool] = True
    higher_is_better: ClassVar[bool] = True

    def __init__(self, cfg: Any = None):
        self.cfg = cfg

    def sampling(self) -> Sampling:
        """``cfg.frames`` uniform frames (every frame when null; 10 when the config has no such key)."""
        return sampling_of(getattr(self.cfg, "frames", 10))

    def resources(self) -> dict:
        """Ray resources one worker of this metric needs: a GPU when ``cfg.device`` is a CUDA device.
        Metrics that use the GPU only for some settings (RAFT, CoTracker) override this."""
        return {"num_gpus": 1.0} if str(getattr(self.cfg, "device", "cpu")).startswith("cuda") else {}

    def setup(self) -> None:
        """Load models. Called once per worker before the first ``compute``."""

    def compute(self, edited: np.ndarray, source: np.ndarray | None) -> float:
        """``edited`` and ``source``: uint8 RGB ``(T, H, W, 3)`` at their native resolution."""
        raise NotImplementedError


METRICS: dict[str, type[FrameMetric]] = {}


def register_metric(cls: type[FrameMetric]) -> type[FrameMetric]:
    if not cls.name:
        raise TypeError(f"{cls.__name__} must set `name`")
    METRICS[cls.name] = cls
    return cls


def build_metric(name: str, cfg: Any = None) -> FrameMetric:
    # importing the package registers every metric module
    import vbench_ray.metrics  # noqa: F401

    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {sorted(METRICS)}")
    return METRICS[name](cfg)
