"""The judge engine contract: a small picklable handle on a judge model started for the run.

An engine has the ``JudgeBackend`` contract (``generate(requests)`` yields batches of ``JudgeResponse``), so the judge
loop (``vbench_ray.judges.stage.JudgeStage``) runs unchanged in the driver or inside a stream's judge task; what it
holds for the whole run (``reserved``), how it starts, checks and stops are its own. ``LocalEngine`` builds the
backend in the calling process (http, replay); the engines that start replicas live with their backend
(``backends/hf_engine.py``, ``backends/vllm_serve.py``). ``engines.py`` makes them and keeps the run's set.

A replica lost mid-call (its process or node) is one rule for every engine (``lost_replica_fault``): ``replica_lost``
tells it from an error of the model, and once the engine has a replica serving again (within ``REPLICA_BACK_S``)
the requests it held are sent again without spending their budget (``JudgeResponse.engine_fault``,
``vbench_ray.judges.stage``, rule 6).

Each engine replica appends one line to ``RUN_DIR/engines.jsonl`` when it loads (``record_load``: ``pid``, ``node``,
``judge``), which is how a user (and the tests) can see that a model was loaded once per replica.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from vbench_ray.judges.base import JudgeBackend, JudgeRequest, JudgeResponse

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
    """A handle on a judge engine started for the run. Subclasses are picklable (they go to the judge tasks)."""

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


REPLICA_BACK_S = 300.0  # how long a call that lost its replica waits for Ray to have it running again


def replica_lost(exc: BaseException) -> bool:
    """Whether a failed call lost the process or node serving it (Ray 2.60 ``ray.exceptions``: the actor died or
    is unreachable, its worker crashed, its node died, its result was lost with its node; a Serve replica that is
    no longer available, ``ray.serve.exceptions.ReplicaUnavailableError``), as opposed to an error the model raised
    (``RayTaskError``), which would happen again."""
    from ray import exceptions as rex
    from ray.serve.exceptions import ReplicaUnavailableError

    lost = (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError, ReplicaUnavailableError)
    return isinstance(exc, lost) and not isinstance(exc, rex.RayTaskError)


def lost_replica_fault(exc: BaseException, back: Callable[[], bool]) -> tuple[bool, str]:
    """What a failed call is, the same rule for every engine: ``(engine_fault, note)``. A call that lost the replica
    serving it (``replica_lost``) is an engine fault, spending none of its requests' budget, once ``back()`` says the
    engine serves again (waiting up to ``REPLICA_BACK_S``: Ray restarts a lost actor, Serve replaces a lost
    replica); otherwise it is a failed attempt, and ``note`` says when the replica did not come back."""
    lost = replica_lost(exc)
    fault = lost and back()
    return fault, "" if fault or not lost else f" (not back within {REPLICA_BACK_S:.0f} s)"
