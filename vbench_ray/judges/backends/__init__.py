"""Judge backends, selected by ``judge.backend``. Imported lazily: vLLM and transformers are heavy.

One entry per backend: its class (``engine`` factory, preflight ``problems``: ``judges.base.JudgeBackend``) and its
config section, ``judge.<name>``: a dataclass in a light module, declared by the registration (``config=``, for a
lazy entry) or by a registered class's ``config_class``. ``judges.base.JudgeConfig`` holds one field per declared
section, made from this registry whenever it changes (``BackendRegistry.on_change``)."""

from __future__ import annotations

from typing import Any, Callable

from vbench_ray.registry import Registry, load_target


class BackendRegistry(Registry):
    """The judge backends' registry: a ``Registry`` whose entries also declare their config section."""

    def __init__(self) -> None:
        super().__init__("judge backend")
        self._configs: dict[str, Any] = {}
        self.on_change: list[Callable[[], None]] = []  # called after an entry is added or removed

    def add(self, name: str, target: Any, config: Any = None, **meta: str) -> Any:
        """``Registry.add``, with ``config``: the dataclass of the section ``judge.<name>`` (or its
        ``"module:Class"``); None: the class's own ``config_class``, if any."""
        new = name not in self
        super().add(name, target, **meta)
        declared = config if config is not None else getattr(target, "config_class", None)
        if declared is not None or name not in self._configs:
            self._configs[name] = declared
        try:
            self._changed()
        except Exception:  # a section the judge config cannot take: the registration is undone
            if new:
                super().__delitem__(name)
                self._configs.pop(name, None)
            raise
        return target

    def __delitem__(self, name: str) -> None:
        super().__delitem__(name)
        self._configs.pop(name, None)
        self._changed()

    def _changed(self) -> None:
        for hook in self.on_change:
            hook()

    def config_classes(self) -> dict[str, type]:
        """``{name: its config dataclass}`` of the backends that declare one, in registration order (a lazy
        ``"module:Class"`` declaration is imported now: a light module)."""
        return {n: load_target(c) if isinstance(c, str) else c for n, c in self._configs.items() if c is not None}


# Lazy entries ("module:object", imported on first use), so `vbench-ray list judges` imports none of them.
BACKENDS = BackendRegistry()
BACKENDS.add(
    "vllm",
    "vbench_ray.judges.backends.vllm:VLLMBackend",
    config="vbench_ray.judges.backends.vllm_config:VLLMJudgeConfig",
    section="offline vLLM engine (the official CoVEBench judge's runtime)",
    needs="weights (judge.model: a local model folder), GPU (judge.vllm.cpu=true: CPU)",
)
BACKENDS.add(
    "http",
    "vbench_ray.judges.backends.http:HTTPBackend",
    config="vbench_ray.judges.backends.http_config:HTTPJudgeConfig",
    section="an OpenAI-compatible server (vLLM serve, a hosted API)",
    needs="a server (judge.http.base_url, judge.model: the served name; judge.http.api_key_env)",
)
BACKENDS.add(
    "hf",
    "vbench_ray.judges.backends.hf:HFBackend",
    config="vbench_ray.judges.backends.hf_config:HFJudgeConfig",
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
