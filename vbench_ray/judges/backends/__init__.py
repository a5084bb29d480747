"""Judge backends, selected by ``judge.backend``. Imported lazily: vLLM and transformers are heavy."""

from __future__ import annotations

from vbench_ray.registry import Registry

# Lazy entries ("module:object", imported on first use), so `vbench-ray list judges` imports none of them.
BACKENDS = Registry("judge backend")
BACKENDS.add(
    "vllm",
    "vbench_ray.judges.backends.vllm:VLLMBackend",
    section="offline vLLM engine (the official CoVEBench judge's runtime)",
    needs="weights (judge.model: a local model folder), GPU (judge.vllm.cpu=true: CPU)",
)
BACKENDS.add(
    "http",
    "vbench_ray.judges.backends.http:HTTPBackend",
    section="an OpenAI-compatible server (vLLM serve, a hosted API)",
    needs="a server (judge.http.base_url, judge.model: the served name; judge.http.api_key_env)",
)
BACKENDS.add(
    "hf",
    "vbench_ray.judges.backends.hf:HFBackend",
    section="transformers generate, in-process",
    needs="weights (judge.model: a local model folder), GPU optional (judge.hf.device)",
)
BACKENDS.add(
    "replay",
    "vbench_ray.judges.backends.replay:ReplayBackend",
    section="answers replayed from a judge log (re-scoring without a model)",
    needs="a judge log (judge.replay_path)",
)


def build_backend(cfg):
    """The backend named by ``cfg.backend`` (a ``JudgeConfig`` node); an unknown name: ``registry.UnknownName``."""
    return BACKENDS[cfg.backend](cfg)
