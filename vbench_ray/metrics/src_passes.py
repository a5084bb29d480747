"""How SRC's model passes are laid out (``vbench_ray/metrics/src.py``'s module docstring, "How it runs"): the wall
time of each phase, prompts packed into passes without splitting one video's prompts, and SAM2's input size and
normalisation as its checkpoint's preprocessor config gives them (CoVEBench App. F; official ``metrics/vf/src``).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from vbench_ray.metrics.device_images import IMAGENET_MEAN, IMAGENET_STD


class PhaseClock:
    """``clock(name)`` adds the wall time since the previous call (or since it was made) to the metric's
    ``phase_seconds[name]``."""

    def __init__(self, metric: Any):
        if not isinstance(getattr(metric, "phase_seconds", None), dict):
            metric.phase_seconds = defaultdict(float)
        self.seconds = metric.phase_seconds
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self.last
        self.last = now


def key_runs(keys: list[int]) -> list[tuple[int, int, int]]:
    """``(key, start, end)`` of each run of equal consecutive ``keys``."""
    runs: list[tuple[int, int, int]] = []
    for i, key in enumerate(keys):
        if runs and runs[-1][0] == key:
            runs[-1] = (key, runs[-1][1], i + 1)
        else:
            runs.append((key, i, i + 1))
    return runs


def pack_runs(items: list, sizes: list[int], keys: list, cap: int) -> list[list]:
    """``items`` in order, in chunks of at most ``cap`` total size (an item larger than ``cap`` alone); a run of
    consecutive items with one key (one video's prompts) starts a new chunk rather than being split, if it fits."""
    chunks: list[list] = []
    chunk: list = []
    used = 0
    for _, a, b in key_runs(keys):
        if chunk and used + sum(sizes[a:b]) > cap:
            chunks.append(chunk)
            chunk, used = [], 0
        for i in range(a, b):
            if chunk and used + sizes[i] > cap:
                chunks.append(chunk)
                chunk, used = [], 0
            chunk.append(items[i])
            used += sizes[i]
    if chunk:
        chunks.append(chunk)
    return chunks


def sam_preprocessing(path: Path, model: Any) -> tuple[int, tuple, tuple]:
    """SAM2's input size and normalisation: from ``preprocessor_config.json`` when there is one, else the model's
    configured image size and ImageNet mean/std (SAM2's own)."""
    size = int(model.config.prompt_encoder_config.image_size)
    mean, std = IMAGENET_MEAN, IMAGENET_STD
    pre = Path(path) / "preprocessor_config.json"
    if pre.exists():
        cfg = json.loads(pre.read_text(encoding="utf-8"))
        size = int((cfg.get("size") or {}).get("height", size))
        mean, std = tuple(cfg.get("image_mean") or mean), tuple(cfg.get("image_std") or std)
    return size, mean, std
