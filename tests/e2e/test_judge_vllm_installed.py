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
import subprocess
import sys

import pytest

from helpers.common import REPO, cove_overrides, user_env
from helpers.tiny.procs import TAG_VAR, kill_tagged, new_tag

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


@pytest.mark.slow
def test_the_default_judge_as_installed_answers(cove_data, tiny_qwen2_vl_dir, vllm_cache_root, tmp_path):
    """``vbench-ray run`` with the default judge backend on the tiny Qwen2-VL, in a user's environment: the Serve
    LLM deployment loads once (Qwen2-VL's vLLM module and processors import torchvision) and answers every judge
    request of the case, its videos included. The video tokens are counted in ``test_judge_vllm.py``. The run's
    Ray (and so its replica) inherits the session's ``VLLM_CACHE_ROOT``; nothing else differs from a user's run."""
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
        "judge.max_retries=0",
        "judge.max_invalid_fraction=1.0",  # random weights: gibberish, which the run records as invalid
        "ray.num_cpus=4",
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "vbench_ray.cli", "run", str(COVE), *args],
            env=user_env(**{TAG_VAR: tag, "HF_HUB_OFFLINE": "1", "VLLM_CACHE_ROOT": str(vllm_cache_root)}),
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )
    finally:
        kill_tagged(tag)
    log = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, log
    loads = [json.loads(x) for x in (out / "engines.jsonl").read_text().splitlines()]
    assert [x["backend"] for x in loads] == ["vllm-serve"], log
    records = [json.loads(x) for x in (out / "judge_log.jsonl").read_text().splitlines()]
    assert records and all(r["backend"] == "vllm" and r["error"] is None for r in records), records
    assert len(records) == 4  # IFS asks one request per question type of the case
    assert all(isinstance(r["text"], str) and r["prompt_tokens"] > 0 and r["completion_tokens"] >= 1 for r in records)


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
