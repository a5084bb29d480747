"""A vLLM judge as a Ray Serve LLM deployment (``ray.serve.llm``) on the CPU stack: started once by the run,
called from the stream's judge actors through its deployment handle, kept across re-ask rounds and across
phases (ViDiC's judge and error-analysis phases share one judge config), and deleted at the end.

The tiny random-weight Qwen2 (text only: ViDiC's judge answers from the description) answers gibberish, so
every judge request is re-asked: the rounds are real. One engine start costs about a minute on 2 cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from tiny.models import build_tiny_qwen2
from tiny.procs import kill_tagged, new_tag, vllm_env

VIDIC = REPO / "configs" / "vidic.yaml"


@pytest.mark.ray
@pytest.mark.slow
def test_vllm_judge_served_once_for_every_round_and_phase(ray_local, tmp_path):
    from ray import serve

    from test_vidic import DESCRIPTION, script  # the scripted descriptions of the model under test
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run
    from vbench_ray.synth.vidic import synth_vidic

    model = build_tiny_qwen2(tmp_path / "qwen2")
    data = synth_vidic(tmp_path / "vidic", n=2, seed=0)
    answers = tmp_path / "descriptions.jsonl"
    script(Path(data["checklist"]), answers, describe=lambda item: DESCRIPTION, answer=lambda i, t, g: "")
    tag = new_tag()
    env = vllm_env(tmp_path / "vllm", tag, stub=False)
    out = tmp_path / "run"
    cfg = load_config(VIDIC, [
        f"data.checklist={data['checklist']}", f"data.video_root={data['video_root']}", f"output.dir={out}",
        "wandb.mode=disabled", "report.enabled=false", "stats.bootstrap_samples=50",
        "model.backend=replay", f"model.replay_path={answers}", "model.max_retries=0",
        "judge.backend=vllm", f"judge.model={model}", "judge.max_tokens=8", "judge.max_retries=1",
        "judge.vllm.cpu=true", "judge.vllm.max_model_len=1024", "judge.vllm.batch_size=8",
        "judge.max_invalid_fraction=1.0", "judge.parse=lenient", "error_analysis.enabled=true",
        *[f"judge.env_vars.{k}={v}" for k, v in env.items()]])
    try:
        summary = run(cfg).summary
        apps_after = dict(serve.status().applications)
    finally:
        serve.shutdown()  # the controller and proxy too: later tests share this Ray session
        kill_tagged(tag)
    judge = summary["judge"]
    assert judge["judge"]["backend"] == "vllm" and judge["judge"]["n_requests"] > 0
    records = [json.loads(x) for x in (out / "judge_log.jsonl").read_text().splitlines()]
    judged = [r for r in records if "/judge/" in r["request_id"]]
    assert {r["attempt"] for r in judged} == {0, 1}  # two rounds: every gibberish answer was re-asked
    assert all(r["backend"] == "vllm" and r["text"] is not None for r in judged)  # answered by the engine
    loads = [json.loads(x) for x in (out / "engines.jsonl").read_text().splitlines()]
    assert [x["backend"] for x in loads] == ["vllm-serve"]  # one deployment, one replica, for both phases
    assert not any(name.startswith("vbench-judge-") for name in apps_after)  # the run deleted its deployment
