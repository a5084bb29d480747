"""The ``hf`` judge's engine: ``judge.hf.workers`` Ray actors, each loading the transformers model once.

One GPU each when ``judge.hf.device`` is cuda; a call spreads its requests over the replicas in
``judge.hf.batch_size`` chunks, least busy replica first. A call that lost its replica (process or node) waits until
Ray has it back, and its requests are sent again without spending their budget (``judges.engine.lost_replica_fault``;
``vbench_ray.judges.stage``, rule 6).
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

from vbench_ray.judges.base import JudgeRequest, JudgeResponse
from vbench_ray.judges.engine import REPLICA_BACK_S, Engine, lost_replica_fault, record_load


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
                back, note = lost_replica_fault(exc, lambda: replica_back(replica))
                yield [
                    JudgeResponse(
                        r.request_id,
                        error=f"hf judge replica failed: {type(exc).__name__}: {str(exc)[:300]}{note}",
                        model=self.model_label,
                        engine_fault=back,
                    )
                    for r in chunk
                ]


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
        from vbench_ray.judges.backends.hf_worker import HFJudgeWorker

        started = time.perf_counter()
        self.worker = HFJudgeWorker(worker_cfg)
        record_load(run_dir, worker_cfg.get("label") or "hf", "hf", time.perf_counter() - started)

    def ready(self) -> bool:
        return True

    def answer(self, table):
        return self.worker(table)


def hf_engine(judge_cfg: Any, backend_cls: type, run_dir: str | None = None) -> Engine:
    """``HFBackend.engine``: the run's replicas of the transformers judge."""
    return HFEngine(judge_cfg, run_dir)
