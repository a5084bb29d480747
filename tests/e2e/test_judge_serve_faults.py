"""The Serve judge engine (``backends/vllm_serve.ServeEngine``) under a replica lost mid-call: the same rule as the hf
engine's (``judges/engine.py``: ``replica_lost``, ``REPLICA_BACK_S``; ``judges/stage.py``, rule 6). A real Ray Serve
application stands in for Serve LLM's ``LLMServer`` (the model is not what is tested: its ``chat`` and
``check_health``, the surface the engine calls); its replica kills its own process on its first call, as the OOM
killer or a lost node would, and Serve starts another."""

from __future__ import annotations

import json

import pytest

GOOD = '[{"id": "Q1", "final_answer": "Yes"}]'
APP = "vbench-test-flaky-judge"


class FlakyChat:
    """Answers every chat with ``GOOD``, except the calls before the first kill: each waits (up to 60 s) until two
    calls are in the replica, then SIGKILLs it mid-call, so the replica dies holding both requests by the order of
    events (on a loaded machine the second send could otherwise come after the kill, to the new replica)."""

    def __init__(self, marker: str):
        self.marker = marker

    async def check_health(self) -> None:
        return None

    async def chat(self, request):
        import asyncio
        import os
        import signal
        import time
        import uuid
        from pathlib import Path

        marker = Path(self.marker)
        if not marker.exists():
            (marker.parent / f"{marker.name}.in.{uuid.uuid4().hex}").touch()
            deadline = time.monotonic() + 60
            while len(list(marker.parent.glob(f"{marker.name}.in.*"))) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        yield {
            "choices": [{"message": {"content": GOOD}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }


TRIES = 3  # scenarios run until the engine sees a loss (Serve's router may route both requests again itself)


@pytest.mark.ray
def test_a_serve_replica_lost_mid_call_spends_no_budget_once_serve_has_it_back(ray_local, tmp_path):
    """``max_retries=0`` (one send). The replica dies holding both requests; Serve starts another; the engine waits
    until the deployment answers its health check and the sends lost with the replica spend nothing: each request
    is sent again and answered (before, each was a failed attempt: status ``error`` after one send). At least one
    request must reach the engine as lost: Serve's router routes a request again itself when the replica dies
    before the router has its acceptance (ray/serve/_private/router.py, Ray 2.60), which was seen for the second
    request on a loaded machine and once for both; the scenario is then run again (a fresh replica, up to
    ``TRIES`` times), every run's requests answered and none of them spending a send."""
    from omegaconf import OmegaConf
    from ray import serve

    from vbench_ray.judges.base import JudgeConfig, JudgeRequest
    from vbench_ray.judges.engines import make_engine
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    model = tmp_path / "model"  # the engine resolves judge.model before it attaches: a folder with a config
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    deployment = serve.deployment(FlakyChat, name="judge-flaky", ray_actor_options={"num_cpus": 0})
    serve.start(proxy_location="Disabled")  # handles only, as the run's own judge deployment
    cfg = OmegaConf.merge(
        OmegaConf.structured(JudgeConfig), {"backend": "vllm", "model": str(model), "vllm": {"serve_app": APP}}
    )
    expected = {"ids": ["Q1"], "form": "TF"}
    requests = [
        JudgeRequest(rid, [{"role": "user", "content": rid}], parser="checklist_items", expected=expected)
        for rid in ("a", "b")
    ]
    try:
        for n in range(TRIES):
            run_dir = tmp_path / f"try{n}"
            run_dir.mkdir()
            serve.run(deployment.bind(str(run_dir / "killed")), name=APP, route_prefix=None)
            engine = make_engine(cfg).start()
            results = JudgeStage(engine, JudgeLog(run_dir), max_retries=0).run(requests)
            assert (run_dir / "killed").exists()
            records = [json.loads(line) for line in (run_dir / "judge_log.jsonl").read_text().splitlines()]
            lost = [r["request_id"] for r in records if r["engine_fault"]]
            # each request the engine saw lost was sent once more and answered: none spent its one send
            outcome = {rid: ("ok", 2 if rid in lost else 1) for rid in ("a", "b")}
            assert {k: (v.status, v.attempts) for k, v in results.items()} == outcome
            if lost:
                break
    finally:
        serve.shutdown()  # the application and Serve's controller: later tests share this Ray session
    assert lost and set(lost) <= {"a", "b"} and len(lost) == len(set(lost)), records
    logged = sorted((r["attempt"], r["request_id"], r["engine_fault"], r["parse_status"]) for r in records)
    assert logged == sorted(
        [*[(0, rid, True, "error") for rid in lost], *[(int(rid in lost), rid, False, "ok") for rid in ("a", "b")]]
    )
