"""Judge backends, selected by ``judge.backend``. Imported lazily: vLLM and transformers are heavy."""

from __future__ import annotations

import importlib

BACKENDS = {
    "vllm": "vbench_ray.judges.backends.vllm:VLLMBackend",
    "http": "vbench_ray.judges.backends.http:HTTPBackend",
    "hf": "vbench_ray.judges.backends.hf:HFBackend",
    "replay": "vbench_ray.judges.backends.replay:ReplayBackend",
}


def build_backend(cfg):
    """The backend named by ``cfg.backend`` (a ``JudgeConfig`` node)."""
    if cfg.backend not in BACKENDS:
        raise ValueError(f"judge.backend must be one of {sorted(BACKENDS)}, got {cfg.backend!r}")
    module, cls = BACKENDS[cfg.backend].split(":")
    return getattr(importlib.import_module(module), cls)(cfg)
