"""``vbench-ray run`` begins Ray's start as its first step (``cli._start_ray_early``, ``ray_start.start_ray_early``):
before the run loads and checks its config; the run then takes the start over, or a command that stops first
shuts it down. Real commands in fresh interpreters (the test session's own Ray is not theirs), a fresh local Ray
each: ~10-40 s apiece on the 2-core development machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from helpers.common import REPO, cove_overrides, user_env

pytestmark = pytest.mark.slow


def _command(args: list[str], tag: str = "") -> subprocess.CompletedProcess:
    env = user_env(PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), VBENCH_TEST_TAG=tag)
    cmd = [sys.executable, "-m", "vbench_ray.cli", "run", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def _tagged(tag: str) -> list[int]:
    """The live processes whose environment holds ``VBENCH_TEST_TAG=tag``: the command and all it started."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and f"VBENCH_TEST_TAG={tag}".encode() in (d / "environ").read_bytes():
                if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(d.name))
        except OSError:
            continue
    return pids


def test_ray_starts_before_the_run_checks_its_config(cove_data, tmp_path):
    """summary.json's ``timing.ray_start`` (seconds from the run's start, which comes after the config's load and
    before its checks) is negative: the command began Ray's start before. Before, it began after the checks and
    the plan (0.4-0.7 s on the run's clock)."""
    out = tmp_path / "run"
    proc = _command(["configs/cove.yaml", *cove_overrides(cove_data, out, "metrics.enabled=[SSIM]", "ray.num_cpus=2")])
    assert proc.returncode == 0, proc.stderr[-4000:]
    timing = json.loads((out / "summary.json").read_text())["timing"]
    assert timing["ray_start"] < 0 < timing["cases_loaded"] < timing["ray_ready"] < timing["first_row"]
    assert "starting it again" not in proc.stderr  # the quick read matched the config: one start


def test_a_data_error_still_exits_2_with_its_message_and_leaves_no_ray(cove_data, tmp_path):
    """The checklist is missing: found after Ray's start began (its start is logged); the same one-line error and
    exit status 2 as before, and every process the command started is gone (its local Ray shut down by its own
    handle: the command's environment is found in no live process)."""
    tag = uuid.uuid4().hex
    missing = tmp_path / "nope.json"
    args = cove_overrides(cove_data, tmp_path / "run", "metrics.enabled=[SSIM]", "ray.num_cpus=2")
    proc = _command(["configs/cove.yaml", *args, f"data.checklist={missing}"], tag)
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert f"error: data.checklist not found: {missing}" in proc.stderr and "Traceback" not in proc.stderr
    assert "Started a local Ray instance" in proc.stderr  # the early start did run
    deadline = time.time() + 15
    while _tagged(tag) and time.time() < deadline:
        time.sleep(0.5)
    assert _tagged(tag) == []


def test_ray_settings_the_quick_read_missed_start_ray_again(cove_data, tmp_path):
    """``ray.num_cpus`` set in a file the YAML ``extends``: the command's quick read does not see it and starts Ray
    with the default; the run finds the difference, shuts that start down and starts Ray as the config says."""
    parent = tmp_path / "parent.yaml"
    parent.write_text(f"extends: {REPO / 'configs' / 'cove.yaml'}\nray:\n  num_cpus: 3\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: parent.yaml\n")
    out = tmp_path / "run"
    proc = _command([str(child), *cove_overrides(cove_data, out, "metrics.enabled=[SSIM]")])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Ray: the config asks for (None, 3)" in proc.stderr and "starting it again" in proc.stderr
    assert json.loads((out / "summary.json").read_text())["metrics"]["SSIM"]["n"] > 0
