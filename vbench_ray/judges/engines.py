"""Judge engines: a judge model loaded once per replica per run, shared by every judge stage and re-ask round.

docs/architecture.md, "Judges": the run starts one engine per distinct judge config before the stream begins; the
judge stages of the stream (one per phase: ViDiC's describe -> judge -> error analysis, NRVBench's several
judges) and every re-ask round send their requests to it, and the run stops it at the end. An engine is a
small picklable handle with the ``JudgeBackend`` contract (``generate(requests)`` yields batches of
``JudgeResponse``), so the judge loop (``vbench_ray.judges.stage.JudgeStage``) runs unchanged in the driver
or inside a stream's judge task.

Each backend's registry entry names the factory of its engine (``JudgeBackend.engine``); the engine handle's
contract, ``LocalEngine`` and the rule for a lost replica are in ``judges/engine.py``:

* ``hf`` (``backends/hf_engine.py``): ``judge.hf.workers`` Ray actors, each loading the transformers model once (one
  GPU each when ``judge.hf.device`` is cuda); a call spreads its requests over the replicas in
  ``judge.hf.batch_size`` chunks, least busy replica first. A call that lost its replica (process or node) waits
  until Ray has it back, and its requests are sent again without spending their budget (``vbench_ray.judges.stage``,
  rule 6).
* ``http``: no model here; each process that calls the engine posts to the endpoint itself
  (``judge.http.concurrency`` requests in flight, retries with backoff, the key never logged).
* ``replay``: the recorded answers, read once per process.
* ``vllm`` (``judge.vllm.serve``, the default; ``backends/vllm_serve.py``): a Ray Serve LLM deployment
  (``ray.serve.llm``) started by the run with ``judge.vllm.replicas`` replicas, or attached by name
  (``judge.vllm.serve_app``), called through its deployment handle by every judge task; re-asks go to the same
  deployment. With ``serve: false`` the ``ray.data.llm`` processor of ``vbench_ray.judges.backends.vllm`` runs after
  the stream instead, one engine per round (``streams = False``).
"""

from __future__ import annotations

import logging
from typing import Any

# the engines and their contract, importable from here too
from vbench_ray.judges.backends.hf_engine import HFEngine, HFReplica, hf_engine, replica_back
from vbench_ray.judges.backends.vllm_serve import ServeEngine, judge_server_cls, vllm_engine
from vbench_ray.judges.engine import (
    ENGINE_LOG,
    REPLICA_BACK_S,
    Engine,
    LocalEngine,
    engine_key,
    record_load,
    replica_lost,
)

__all__ = [
    "ENGINE_LOG",
    "REPLICA_BACK_S",
    "Engine",
    "EngineSet",
    "HFEngine",
    "HFReplica",
    "LocalEngine",
    "ServeEngine",
    "engine_key",
    "hf_engine",
    "judge_server_cls",
    "local_engine",
    "make_engine",
    "record_load",
    "replica_back",
    "replica_lost",
    "vllm_engine",
]

log = logging.getLogger(__name__)


def make_engine(judge_cfg: Any, run_dir: str | None = None) -> Engine:
    """The engine for ``judge_cfg``, its config checked and its model path resolved, but nothing loaded yet: what it
    will hold (``reserved``) is known before it starts, so the stream's plan is checked before a judge loads. Made by
    the factory the backend's registry entry names (``JudgeBackend.engine``); an unknown backend:
    ``registry.UnknownName``."""
    from vbench_ray.judges.backends import BACKENDS
    from vbench_ray.registry import load_target

    backend_cls = BACKENDS[judge_cfg.backend]
    return load_target(backend_cls.engine)(judge_cfg, backend_cls, run_dir)


def local_engine(judge_cfg: Any, backend_cls: type, run_dir: str | None = None) -> Engine:
    """http, replay: the backend itself, built in each process that calls it."""
    return LocalEngine(judge_cfg, backend_cls)


class EngineSet:
    """The run's engines, one per distinct judge config, started on first request and stopped together."""

    def __init__(self, run_dir: str | None = None):
        self.run_dir = run_dir
        self.engines: dict[str, Engine] = {}
        self.started: set[str] = set()

    def get(self, judge_cfg: Any, start: bool = True) -> Engine:
        """The run's engine for ``judge_cfg``; ``start=False``: made (config checked) but not loaded yet."""
        key = engine_key(judge_cfg)
        if key not in self.engines:
            self.engines[key] = make_engine(judge_cfg, self.run_dir)
        if start:
            self._start(key)
        return self.engines[key]

    def start(self) -> None:
        """Load every engine made and not yet started."""
        for key in list(self.engines):
            self._start(key)

    def _start(self, key: str) -> None:
        if key not in self.started:
            self.engines[key].start()
            self.started.add(key)

    def reserved(self) -> dict[str, float]:
        """What the run's engines hold, summed (the stream's budget excludes it)."""
        out = {"CPU": 0.0, "GPU": 0.0}
        for engine in self.engines.values():
            for k, v in engine.reserved().items():
                out[k] += v
        return out

    def stop(self) -> None:
        for engine in self.engines.values():
            try:
                engine.stop()
            except Exception as exc:  # shutting down must not hide the run's result
                log.warning("stopping judge engine %s: %s", engine.name, exc)
        self.engines, self.started = {}, set()
