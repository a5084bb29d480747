"""The README's cluster path on one machine: `ray start --head` on loopback, then `ray job submit`."""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, head: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert head.poll() is None, "ray start exited"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:  # 401 without the token: the dashboard is up
            return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"the Ray head did not come up at {url}")


@pytest.fixture
def ray_head():
    """A Ray head node on loopback with its own ports, temp dir and token; stopped by killing its own
    process group (`ray stop` would stop every Ray runtime on the machine, other tests' included)."""
    temp_dir = tempfile.mkdtemp(prefix="vbrh", dir="/tmp")  # short: Ray's socket paths have a length limit
    token = Path(temp_dir) / "auth_token"  # Ray 2.60 clusters use token auth; a token of this test's own
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    env.pop("RAY_ADDRESS", None)
    ports = {flag: _free_port() for flag in ("port", "dashboard-port", "dashboard-agent-listen-port",
                                              "dashboard-agent-grpc-port", "metrics-export-port",
                                              "runtime-env-agent-port", "ray-client-server-port")}
    head = subprocess.Popen([str(BIN / "ray"), "start", "--head", "--block", "--num-cpus=4",
                             "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
                             f"--temp-dir={temp_dir}", "--disable-usage-stats",
                             *[f"--{flag}={port}" for flag, port in ports.items()]],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"http://127.0.0.1:{ports['dashboard-port']}"
    try:
        _wait_for(address + "/api/version", head)
        yield address, env
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        subprocess.run(["pkill", "-KILL", "-f", temp_dir], capture_output=True)  # stragglers of this head only


def test_job_submit_runs_cove_on_a_local_head(ray_head, cove_data, tmp_path):
    address, env = ray_head
    out = tmp_path / "run"
    cmd = [str(BIN / "ray"), "job", "submit", "--address", address, "--working-dir", str(REPO), "--",
           "python", "jobs/cove.py", "configs/cove.yaml",
           f"data.checklist={cove_data['checklist']}", f"data.source_dir={cove_data['source_dir']}",
           f"data.edited_dir={cove_data['edited_dir']}", f"output.dir={out}", "wandb.mode=offline",
           "metrics.enabled=[SSIM,MSM,MF]"]
    for _ in range(12):  # the head's job agent comes up a few seconds after `ray start` returns
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
        if "No available agent" not in proc.stderr:
            break
        time.sleep(5)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "succeeded" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_rows"] == 8 and summary["failures"]["count"] == 0
    assert summary["metrics"]["SSIM"]["n"] + summary["metrics"]["SSIM"]["n_excluded"] == 8
    assert (out / "report.html").exists() and list((out / "cases").glob("part-*.parquet"))
    assert list((out / "wandb").glob("offline-run-*"))
