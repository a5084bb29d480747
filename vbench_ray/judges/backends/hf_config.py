"""``judge.hf``: the settings of the ``hf`` backend (``backends/hf.py``, its engine ``backends/hf_engine.py``).

A light module (dataclasses and ``vbench_ray.config`` only): every config build reads it."""

from __future__ import annotations

from dataclasses import dataclass

from vbench_ray.config import bounded


@dataclass
class HFJudgeConfig:
    device: str = "cpu"  # cpu | cuda | cuda:N
    dtype: str = "bfloat16"
    batch_size: int = bounded(4, ge=1)
    workers: int = bounded(1, ge=1)  # actor replicas

    # the keys that change what the model computes, compared by `vbench-ray compare` (``compare_base.backend_options``):
    # weights in bfloat16 give other logits than in float32, so other answers; where it runs and in what batches do not
    SCORING_KEYS = ("dtype",)
