"""Tiny random-initialised versions of the model-backed CoVEBench metrics' networks, for tests that run them: TQ's
settings for the tiny DOVER++ technical branch, and SRC's Grounding DINO, SAM2 and DINOv2; SRC's config and random
frames for its tests."""

from pathlib import Path

import numpy as np

from vbench_ray.metrics.src import SRCConfig
from vbench_ray.metrics.src_random import save_random_src

TINY_TQ = dict(arch="tiny", clip_len=8, num_clips=2, frame_interval=1, fsize=8, aligned=8)


def build_tiny_src_models(out: Path) -> dict[str, str]:
    """Random-weight Grounding DINO, SAM2 and DINOv2 in transformers format (offline, ~3 s, ~1 M params)."""
    return save_random_src(out, "tiny", seed=0)


def save_tiny_pool_weights(out: Path) -> dict[str, str]:
    """Random-weight AES head, DOVER (TQ) and SRC models under ``out``: the model pools' tiny weights."""
    from vbench_ray.metrics.aes import save_tiny_aes
    from vbench_ray.metrics.tq_net import save_tiny_dover

    return {
        "aes": save_tiny_aes(out / "aes"),
        "tq": str(save_tiny_dover(out / "dover" / "DOVER_plus_plus.pth")),
        "src": build_tiny_src_models(out / "src"),
    }


def src_cfg(**kw) -> SRCConfig:
    return SRCConfig(**kw)


def random_frames(t=4, h=48, w=64, seed=0):
    return np.random.default_rng(seed).integers(0, 255, size=(t, h, w, 3), dtype=np.uint8)
