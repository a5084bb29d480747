"""The default judge (``judge.backend=vllm``) as ``make setup`` installs it, with no test stand-in (issue 29, item 3):
the tiny random-weight Qwen2-VL of ``tests/helpers/tiny`` built from a config, run through the CLI as a user runs it.

vLLM's Qwen2-VL module and transformers' Qwen2-VL video processor import torchvision, which the CPU stack cannot
have (PyPI's builds are CUDA-linked; ``make setup`` removes them). So the run must stop before Ray starts, with a
message naming torchvision and what to do; it used to start Ray and wait in Ray Data's multimodal stage. Where a
torchvision can be imported (the GPU stack; here the test-only stand-in through ``judge.env_vars``), the check
passes and the judge answers (``test_judge_vllm.py``).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from helpers.common import REPO, cove_overrides, user_env
from helpers.tiny.models import build_tiny_qwen2_vl, stub_env

COVE = REPO / "configs" / "cove.yaml"


@pytest.fixture(scope="module")
def tiny_vl(tmp_path_factory):
    return build_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny_models") / "qwen2_vl")


def _args(cove_data, out, model, *extra):
    return [
        sys.executable,
        "-m",
        "vbench_ray.cli",
        "run",
        str(COVE),
        *cove_overrides(
            cove_data,
            out,
            "metrics.enabled=[IFS]",
            "run.limit=1",
            f"judge.model={model}",
            "judge.vllm.cpu=true",
            "judge.vllm.max_model_len=4096",
            "ray.num_cpus=4",
            *extra,
        ),
    ]


def test_the_default_judge_as_installed_stops_up_front_naming_torchvision(cove_data, tiny_vl, tmp_path):
    t0 = time.monotonic()
    done = subprocess.run(
        _args(cove_data, tmp_path / "run", tiny_vl),
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    took = time.monotonic() - t0
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    assert "`judge.backend` = vllm with the vision-language model" in out and "torchvision" in out, out[-3000:]
    assert "judge.backend=http" in out  # what to do instead
    assert "Started a local Ray instance" not in out and took < 120  # refused before Ray starts
    assert not (tmp_path / "run" / "cases").exists()


def test_the_check_passes_where_torchvision_imports(tiny_vl):
    """The same config with the test-only stand-in on the workers' PYTHONPATH (judge.env_vars): no problem."""
    from omegaconf import OmegaConf

    from vbench_ray.judges.base import JudgeConfig
    from vbench_ray.judges.backends.vllm import vision_problem as _vllm_vision_problem

    cfg = OmegaConf.merge(OmegaConf.structured(JudgeConfig), {"backend": "vllm", "model": str(tiny_vl)})
    assert "torchvision" in _vllm_vision_problem(cfg, "judge")
    with_stub = OmegaConf.merge(cfg, {"env_vars": {"PYTHONPATH": stub_env()["PYTHONPATH"]}})
    assert _vllm_vision_problem(with_stub, "judge") is None
    text_only = OmegaConf.merge(cfg, {"model": str(tiny_vl.parent)})  # no config.json there: not checked
    assert _vllm_vision_problem(text_only, "judge") is None
