"""Issue 30, items 1 and 3: one run per run directory (an exclusive lock for the run's life), and a run with
nothing left to compute loads no judge engine.

The run in progress is a real CoVEBench judge run whose HTTP judge (a stdlib server on 127.0.0.1) holds every
answer until the test lets it go; the second launches, ``compare`` and ``report`` come while it waits.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers.common import REPO, cove_overrides
from vbench_ray.configure import load_config

COVE = REPO / "configs" / "cove.yaml"
ANSWER = json.dumps(
    {
        "choices": [{"message": {"content": "[]"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
).encode()


class GatedJudge:
    """An OpenAI-compatible server whose answers wait for ``gate`` (set: answer at once)."""

    def __init__(self):
        self.gate = threading.Event()
        self.calls = 0
        judge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                judge.calls += 1
                judge.gate.wait(60)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(ANSWER)))
                self.end_headers()
                self.wfile.write(ANSWER)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _cli(*args: str) -> subprocess.CompletedProcess:
    """The command in a process of its own (the lock is per process: the run's own reads pass)."""
    return subprocess.run(
        [sys.executable, "-m", "vbench_ray.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.ray
def test_a_second_run_on_a_directory_in_use_refuses_and_writes_nothing(ray_local, cove_data, tmp_path, capsys):
    from vbench_ray.cli import main
    from vbench_ray.runner import run

    judge = GatedJudge()
    out = tmp_path / "run"
    args = cove_overrides(
        cove_data,
        out,
        "metrics.enabled=[IFS]",
        "run.limit=1",
        "judge.backend=http",
        f"judge.http.base_url={judge.base_url}",
        "judge.model=gated",
        "judge.max_retries=0",
        "judge.http.max_retries=0",
        "judge.max_invalid_fraction=1.0",
    )
    first: dict = {}
    thread = threading.Thread(target=lambda: first.update(result=run(load_config(COVE, args))), daemon=True)
    try:
        thread.start()
        deadline = time.time() + 90
        while judge.calls == 0 and time.time() < deadline:  # the first run is in its stream, waiting on the judge
            time.sleep(0.2)
        assert judge.calls > 0 and thread.is_alive()
        before = _snapshot(out)
        # the same settings, then different ones: both refused at once, naming the holder, writing nothing
        for extra in ([], ["metrics.SSIM.size=112", "metrics.enabled=[SSIM,IFS]"]):
            t0 = time.perf_counter()
            code = main(["run", str(COVE), *args, *extra])
            err = capsys.readouterr().err
            assert code == 2 and time.perf_counter() - t0 < 10
            assert "is in use by another run" in err and f"pid {os.getpid()} on host {socket.gethostname()}" in err
            assert _snapshot(out) == before
        # readers in other processes say the run is in progress instead of reading half a run
        for command in (["report", str(out)], ["compare", str(out), str(out), "--out", str(tmp_path / "board")]):
            done = _cli(*command)
            assert done.returncode == 2 and "a run is in progress there" in done.stderr, done.stderr
        assert _snapshot(out) == before and not (tmp_path / "board").exists()
    finally:
        judge.gate.set()
        thread.join(120)
        judge.close()
    assert first["result"].n_computed == 1
    from vbench_ray.run_lock import holder

    assert holder(out) is None  # released at the end


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    from vbench_ray.run_lock import RunInProgress, RunLock, holder

    code = (
        "import sys, time; from vbench_ray.run_lock import RunLock; RunLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); time.sleep(120)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout.readline().strip() == "held"
        assert f"pid {child.pid}" in holder(tmp_path)
        with pytest.raises(RunInProgress, match=rf"in use by another run \(pid {child.pid} on host "):
            RunLock(tmp_path).acquire()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # the holder died without releasing: its lock went with it, and its stale record is overwritten
    assert holder(tmp_path) is None
    with RunLock(tmp_path):
        assert json.loads((tmp_path / ".run.lock").read_text())["pid"] == os.getpid()
    assert (tmp_path / ".run.lock").read_text() == ""


@pytest.mark.ray
@pytest.mark.slow
def test_a_resume_with_nothing_left_loads_no_judge(ray_local, cove_data, tiny_judge_dir, tmp_path):
    """Issue 30, item 3: the hf judge's replicas load (one line each in engines.jsonl) when the run has requests
    to send; a second run over the finished directory scores every row from the judge log and loads none."""
    from vbench_ray.runner import run

    model = tiny_judge_dir
    out = tmp_path / "run"
    args = cove_overrides(
        cove_data,
        out,
        "metrics.enabled=[IFS]",
        "run.limit=1",
        "judge.backend=hf",
        f"judge.model={model}",
        "judge.max_tokens=8",
        "judge.max_retries=0",
        "judge.hf.workers=2",
        "judge.max_invalid_fraction=1.0",
    )
    first = run(load_config(COVE, args))
    loads = (out / "engines.jsonl").read_text().splitlines()
    assert first.n_computed == 1 and len(loads) == 2  # two replicas, one load each
    again = run(load_config(COVE, args))
    assert again.n_computed == 0 and (out / "engines.jsonl").read_text().splitlines() == loads  # no model loaded
    assert again.summary["judge"]["n_requests"] == first.summary["judge"]["n_requests"] > 0
    assert again.summary["metrics"]["IFS"] == first.summary["metrics"]["IFS"]
