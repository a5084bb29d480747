"""The default judge (``judge.backend=vllm``) as ``make setup`` installs it, with no stand-in (issue 29, item 3):
the tiny random-weight Qwen2-VL of ``tests/helpers/tiny`` built from a config, run through the CLI as a user runs it.

vLLM's Qwen2-VL module and transformers' Qwen2-VL image and video processors import torchvision. The CPU stack has
torchvision 0.28.0 (the release paired with torch 2.13) without its C extension: PyPI's build links CUDA torch, so
its ``_C`` cannot load beside the CPU build, and ``make setup`` guards the two fake-kernel registrations that
otherwise stop ``import torchvision`` there (docs/stack.md). What needs only its Python (transforms, RAFT, the
processors) works; its C ops (``nms``, ``roi_align``, ...) say they cannot run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from helpers.common import REPO, cove_overrides, user_env
from helpers.tiny.procs import TAG_VAR, kill_tagged, new_tag, tagged_pids

COVE = REPO / "configs" / "cove.yaml"


def test_torchvision_as_installed_imports_without_its_c_extension():
    import torch
    import torchvision
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as F

    assert not torchvision.extension._has_ops()  # the CUDA-linked _C is not loaded
    x = torch.tensor([[[10, 20], [30, 40]]], dtype=torch.uint8)
    # nearest 2x2 -> 4x4: each pixel becomes a 2x2 block
    assert F.resize(x, [4, 4], interpolation=InterpolationMode.NEAREST)[0].tolist() == [
        [10, 10, 20, 20],
        [10, 10, 20, 20],
        [30, 30, 40, 40],
        [30, 30, 40, 40],
    ]
    with pytest.raises(RuntimeError, match="Couldn't load custom C\\+\\+ ops"):
        torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)


def kill_first_replica_once_loaded(run: subprocess.Popen, engines_log: Path, tag: str) -> dict:
    """While ``run`` runs: once its Serve replica has recorded its load in ``engines_log``, SIGKILL that process (the
    pid the load records, checked to be one of the run's by ``tag``), as the OOM killer or a lost node would; Serve's
    controller starts a replacement. Returns the killed pid and when it was killed (``{}``: the run ended first)."""
    while run.poll() is None:
        lines = engines_log.read_text().splitlines() if engines_log.exists() else []
        if lines:
            pid = json.loads(lines[0])["pid"]
            assert pid in tagged_pids(tag), f"the load's pid {pid} is not a process of this run"
            os.kill(pid, signal.SIGKILL)
            return {"pid": pid, "time": time.time()}
        time.sleep(0.2)
    return {}


@pytest.mark.slow
def test_the_default_judge_as_installed_answers_every_round_and_is_reloaded_when_lost(
    cove_data, tiny_qwen2_vl_dir, vllm_cache_root, tmp_path
):
    """``vbench-ray run`` with the default judge backend on the tiny Qwen2-VL, in a user's environment: the run
    starts one Serve LLM deployment (Qwen2-VL's vLLM module and processors import torchvision), which answers every
    judge request of the case, its videos included, in every re-ask round (the random weights answer gibberish, so
    each request is asked again once: ``judge.max_retries=1``). Its replica, SIGKILLed once loaded, is started again
    by Serve and appends a second load of its own; a send lost with it is an engine fault that spends none of a
    request's budget (checked where one was lost: the judge tasks usually send after the restart; a replica lost
    mid-call for certain is ``test_judge_serve_faults.py``). The video tokens are counted in
    ``test_judge_vllm.py``; that one engine serves every phase of a run is the engine registry's rule, whatever the
    backend (``test_streaming.py``); the deployment's start without an HTTP proxy and its deletion are checked in
    ``test_judge_serve.py``. The run's Ray (and so its replica) inherits the session's ``VLLM_CACHE_ROOT``; nothing
    else differs from a user's run."""
    tag = new_tag()
    out = tmp_path / "run"
    args = cove_overrides(
        cove_data,
        out,
        "metrics.enabled=[IFS]",
        "run.limit=1",
        f"judge.model={tiny_qwen2_vl_dir}",
        "judge.vllm.cpu=true",
        "judge.vllm.max_model_len=4096",
        "judge.max_tokens=16",  # the paper judge's 16384 does not fit the tiny model's 4096
        "judge.max_retries=1",
        "judge.max_invalid_fraction=1.0",  # random weights: gibberish, which the run records as invalid
        "ray.num_cpus=4",
    )
    output = tmp_path / "output.log"  # a file, not a pipe: nothing reads the run's output while it runs
    with open(output, "w") as sink:
        run = subprocess.Popen(
            [sys.executable, "-m", "vbench_ray.cli", "run", str(COVE), *args],
            env=user_env(**{TAG_VAR: tag, "HF_HUB_OFFLINE": "1", "VLLM_CACHE_ROOT": str(vllm_cache_root)}),
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        killed = kill_first_replica_once_loaded(run, out / "engines.jsonl", tag)
        run.wait(timeout=900)
    finally:
        run.kill()
        kill_tagged(tag)
    log = output.read_text(errors="replace")[-4000:]
    assert run.returncode == 0, log
    assert killed, "the run ended before its replica was loaded"
    loads = [json.loads(x) for x in (out / "engines.jsonl").read_text().splitlines()]
    # one deployment for every round: its first replica's load, and the load of the replica Serve started in place
    # of the one killed (a deployment started again per round would add loads), each in a process of its own
    assert [x["backend"] for x in loads] == ["vllm-serve", "vllm-serve"], (loads, log)
    assert loads[0]["time"] < killed["time"] < loads[1]["time"], (loads, killed)
    assert len({loads[0]["pid"], loads[1]["pid"], run.pid, os.getpid()}) == 4
    records = [json.loads(x) for x in (out / "judge_log.jsonl").read_text().splitlines()]
    # a send lost with the killed replica is logged as an engine fault and spends none of the request's budget
    assert all(r["text"] is None and "vllm serve" in r["error"] for r in records if r["engine_fault"]), records
    answered = [r for r in records if not r["engine_fault"]]
    assert all(r["backend"] == "vllm" and r["error"] is None for r in answered), answered
    assert all(isinstance(r["text"], str) and r["prompt_tokens"] > 0 and r["completion_tokens"] >= 1 for r in answered)
    # IFS asks one request per question type of the case (4), each answered twice: the first round and one re-ask
    asked = Counter(r["request_id"] for r in answered)
    assert len(asked) == 4 and set(asked.values()) == {2}, asked


def test_a_judge_worker_without_torchvision_is_refused_up_front(tiny_qwen2_vl_dir, tmp_path):
    """Preflight imports torchvision with the workers' environment (``judge.env_vars``); where it fails (here a
    package that raises what PyPI's torchvision raised beside CPU torch before ``make setup`` guarded it), the run
    is refused before Ray starts, with the error and what to do."""
    from omegaconf import OmegaConf

    from vbench_ray.judges.backends.vllm import vision_problem
    from vbench_ray.judges.base import JudgeConfig

    broken = tmp_path / "broken" / "torchvision"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    cfg = OmegaConf.merge(OmegaConf.structured(JudgeConfig), {"backend": "vllm", "model": str(tiny_qwen2_vl_dir)})
    assert vision_problem(cfg, "judge") is None  # torchvision as installed
    without = OmegaConf.merge(cfg, {"env_vars": {"PYTHONPATH": str(broken.parent)}})
    problem = vision_problem(without, "judge")
    assert "`judge.backend` = vllm with the vision-language model" in problem
    assert "operator torchvision::nms does not exist" in problem and "make setup" in problem
    text_only = OmegaConf.merge(without, {"model": str(tiny_qwen2_vl_dir.parent)})  # no config.json there: not checked
    assert vision_problem(text_only, "judge") is None
