"""The README's cluster lines, run as written, on a fresh copy of the repository after `make demo`.

The block between `<!-- cluster-lines ... -->` and `<!-- /cluster-lines -->` in README.md is parsed out and each
command runs in `bash` from a copy of the working tree (git's tracked and untracked, not ignored, files) whose
`.venv` is this test's environment and whose `runs/demo/` holds what `make demo` writes there (the synthetic
CoVEBench and the tiny judge), in a shell whose PATH has no project environment on it (like a fresh login; the
pyenv/system `python` there lacks the project's packages). The commands are not edited, except where a shared
test machine requires it, each listed here:

* `ray start --head ...` gets this test's own ports, `--temp-dir` and `--disable-usage-stats` appended (other
  Ray runtimes, the suite's own included, may hold the default ports), and the job URL's port 8265 becomes the
  dashboard port chosen;
* the token is this test's own file (`RAY_AUTH_TOKEN_PATH`) rather than `~/.ray/auth_token`;
* `ray stop` (which stops every Ray runtime of the user on the machine) becomes: end this head's processes,
  found by its own temp dir, by pid;
* while the head's job agent is still coming up (`No available agent`), `ray job submit` is retried.
"""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow
VENV = Path(sys.executable).parent.parent
BLOCK = re.compile(r"<!-- cluster-lines[^>]*-->\s*```bash\n(.*?)```\s*<!-- /cluster-lines -->", re.S)


def readme_cluster_lines() -> list[str]:
    """The README's cluster commands, one per entry (backslash continuations joined, comments dropped)."""
    match = BLOCK.search((REPO / "README.md").read_text())
    assert match, "README.md has no <!-- cluster-lines --> block"
    joined = match.group(1).replace("\\\n", " ")
    return [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines() if line.strip()]


def test_readme_lines_are_the_documented_path():
    lines = readme_cluster_lines()
    assert lines[0] == ". .venv/bin/activate", "the environment must be active before `ray start`"
    assert [line.split()[:2] for line in lines[1:]] == [["ray", "start"], ["ray", "job"], ["ray", "stop"]]
    assert "--node-ip-address=127.0.0.1" in lines[1] and "--dashboard-host=127.0.0.1" in lines[1]
    assert "python jobs/cove.py" in lines[2] and "output.dir=$PWD/" in lines[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_head(temp_dir: str) -> None:
    """`ray stop` for this head only: every process whose command line names its temp dir, by pid."""
    import psutil

    def ours():
        found = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                if any(temp_dir in part for part in (p.info["cmdline"] or [])) and p.pid != os.getpid():
                    found.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in ours():
            try:
                p.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        deadline = time.time() + 15
        while ours() and time.time() < deadline:
            time.sleep(0.5)


@pytest.fixture
def fresh_clone(tmp_path_factory):
    """A copy of the working tree with `.venv` and `runs/demo/` as `make demo` leaves them."""
    from vbench_ray.judges.tiny import build_tiny_judge
    from vbench_ray.synth.cove import synth_cove

    clone = tmp_path_factory.mktemp("clone")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file() and not rel.startswith("runs/"):
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    (clone / ".venv").symlink_to(VENV)
    synth_cove(clone / "runs" / "demo" / "data", n=8, seed=0)
    build_tiny_judge(clone / "runs" / "demo" / "tiny-judge", seed=0)
    return clone


def _fresh_shell_env(token: Path) -> dict:
    """A login-like environment: no project environment on PATH, no Ray address, this test's token."""
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and not p.startswith(str(VENV))
            and ".venv" not in p]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=os.pathsep.join(path), RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
               RAY_AUTH_TOKEN_PATH=str(token))
    return env


def _bash(line: str, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_readme_cluster_lines_run_as_written(fresh_clone):
    activate, start, submit, stop = readme_cluster_lines()
    temp_dir = tempfile.mkdtemp(prefix="vbrj", dir="/tmp")  # short: Ray's socket paths have a length limit
    token = Path(temp_dir) / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = _fresh_shell_env(token)
    # the premise: without the activation line, `python` here is not the project's
    bare = _bash("python -c 'import pyarrow, ray'", fresh_clone, env, 60)
    assert bare.returncode != 0, "the test shell's python already has the project's packages: it proves nothing"

    ports = {flag: _free_port() for flag in ("port", "dashboard-port", "dashboard-agent-listen-port",
                                              "dashboard-agent-grpc-port", "metrics-export-port",
                                              "runtime-env-agent-port", "ray-client-server-port", "node-manager-port",
                                              "object-manager-port")}
    start += f" --temp-dir={temp_dir} --disable-usage-stats " + " ".join(f"--{f}={p}" for f, p in ports.items())
    assert "http://127.0.0.1:8265" in submit
    submit = submit.replace("http://127.0.0.1:8265", f"http://127.0.0.1:{ports['dashboard-port']}")
    assert stop == "ray stop"
    try:
        started = _bash(f"{activate} && {start}", fresh_clone, env, 180)
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        for _ in range(24):  # the head's job agent registers a few seconds after `ray start` returns
            proc = _bash(f"{activate} && {submit}", fresh_clone, env, 500)
            if "No available agent" not in proc.stdout + proc.stderr:
                break
            time.sleep(5)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
        assert "succeeded" in proc.stdout
        out = fresh_clone / "runs" / "cluster-demo"
        summary = json.loads((out / "summary.json").read_text())
        assert summary["n_rows"] == 8 and summary["failures"]["count"] == 0
        for name in ("SSIM", "MSM", "MF", "UAS"):
            assert name in summary["metrics"], name
        assert summary["judge"]["backend"] == "hf"
        assert (out / "report.html").exists() and list((out / "cases").glob("part-*.parquet"))
        assert (out / "judge_log.jsonl").stat().st_size > 0

        # A job whose interpreter lacks the project's packages stops at once with what to do.
        bare_python = shutil.which("python", path=env["PATH"]) or "/usr/bin/python3"
        wrong = submit.split(" -- ", 1)[0] + f" -- {bare_python} jobs/cove.py configs/cove.yaml"
        failed = _bash(f"{activate} && {wrong}", fresh_clone, env, 300)
        logs = failed.stdout + failed.stderr
        assert failed.returncode != 0, logs[-2000:]
        assert "vbench-ray job: this interpreter" in logs and ". .venv/bin/activate" in logs, logs[-3000:]
        assert "ModuleNotFoundError" not in logs, logs[-3000:]
    finally:
        _stop_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_job_without_the_packages_says_what_to_do(tmp_path):
    """A bare interpreter (a venv with only the standard library) running a job entrypoint directly."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    for job in ("cove", "vidic", "nrv", "agentic", "compare", "sweep"):
        proc = subprocess.run([str(tmp_path / "bare" / "bin" / "python"), f"jobs/{job}.py", "x=1"], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1, (job, proc.stderr)
        assert proc.stderr.count("\n") <= 1 and "lacks the packages numpy, pyarrow" in proc.stderr, proc.stderr
        assert ". .venv/bin/activate" in proc.stderr and "Traceback" not in proc.stderr
