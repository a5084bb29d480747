"""What a new user runs, in the environment a new user has: `make demo`'s command, then the README's cluster block.

A copy of the working tree (git's tracked and untracked, not ignored, files) whose `.venv` is this test's
environment is driven from a login-like shell: `HOME` a fresh folder, `PATH` without the project's environment
(the pyenv/system `python` there lacks the project's packages), `USER`, `LOGNAME`, `SHELL`, and nothing else:
no `RAY_*`, no token, no `PYTHONPATH`. In it:

1. `vbench-ray demo --out runs/demo` (the Makefile's `demo` target, with `--n 2` for time) after
   `. .venv/bin/activate`: it writes `runs/demo/` and, as any local `ray.init` does, `~/.ray/auth_token`;
2. the block between `<!-- cluster-lines ... -->` and `<!-- /cluster-lines -->` in README.md, as one bash script,
   unedited, with one addition before its last line (`kill $RAY_HEAD`): a second job whose interpreter lacks the
   project's packages, which must stop at once saying what to do.

While the block runs, this test holds Ray's default ports (6379, 8265, the dashboard agent's 52365, the Ray
Client's 10001) where they are free, as another Ray on the host would: the block must not need them. Every
process the shell starts stays in the session it leads (`start_new_session`); the block's last line must leave
none of them alive, and the test kills whatever is left, by pid, also on Ctrl-C (`tiny.procs.kill_session`).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.common import REPO
from helpers.tiny.procs import kill_session, session_pids

pytestmark = pytest.mark.slow
VENV = Path(sys.executable).parent.parent
BLOCK = re.compile(r"<!-- cluster-lines[^>]*-->\s*```bash\n(.*?)```\s*<!-- /cluster-lines -->", re.S)
DEMO_N = 2
DEFAULT_PORTS = (6379, 8265, 52365, 10001)  # GCS, dashboard, dashboard agent, Ray Client


def readme_cluster_block() -> str:
    match = BLOCK.search((REPO / "README.md").read_text())
    assert match, "README.md has no <!-- cluster-lines --> block"
    return match.group(1)


def test_readme_block_sets_what_a_login_shell_lacks():
    """The block itself turns token auth on, names no fixed port and stops only its own cluster."""
    block = readme_cluster_block()
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    assert lines[0].startswith(". .venv/bin/activate"), "the environment must be active before `ray start`"
    assert "export RAY_AUTH_MODE=token" in block, "`ray job submit` sends the token only in token mode"
    assert "ray get-auth-token --generate" in block
    assert not re.search(r"\b(6379|8265|52365|10001)\b", block), "a default port: another Ray may hold it"
    assert "--dashboard-agent-listen-port=0" in block and "--port=0" in block
    assert "ray stop" not in block, "`ray stop` stops every Ray runtime of the user on the host"
    assert lines[-1].startswith("kill $RAY_HEAD")
    # Ray's SIGTERM handler drains the node first, until it is idle or 30 s passed; a head that ran a job does not
    # report idle, so without this the kill waits 30 s
    assert "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0 \\\nray start --head" in block


def test_kill_session_ends_every_process_of_the_session_by_pid(tmp_path):
    """The clean-up these tests (and test_multinode) run on any exit, Ctrl-C included: a process in a process
    group of its own (as raylet's workers are) and one that ignores SIGTERM (as a stuck agent may) are ended
    too; a process group kill (`os.killpg`) would leave the first, SIGTERM alone the second."""
    # the subshell says "trapped" once it ignores SIGTERM (before that a SIGTERM would end it), bash "ready" once
    # it has started the three: both lines are read before anything is killed
    script = "sleep 300 & (trap '' TERM; echo trapped; sleep 300; true) & set -m; sleep 300 & echo ready; wait"
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert {proc.stdout.readline().strip(), proc.stdout.readline().strip()} == {"trapped", "ready"}
        pids = session_pids(proc.pid)
        groups = {os.getpgid(pid) for pid in pids}
        assert len(pids) >= 4 and len(groups) >= 2, (pids, groups)  # bash, 3 children, one group of its own
        stubborn = kill_session(proc.pid, grace_s=2.0)
        assert session_pids(proc.pid) == []
        assert stubborn, "the SIGTERM-ignoring subshell needed SIGKILL"
    finally:
        kill_session(proc.pid, grace_s=0.5)
        proc.wait()


def login_env(home: Path) -> dict:
    """A login-like environment: what a fresh shell has, nothing of this test session's."""
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and not p.startswith(str(VENV)) and ".venv" not in p]
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
    return {"HOME": str(home), "PATH": os.pathsep.join(path), "USER": user, "LOGNAME": user, "SHELL": "/bin/bash"}


def run_shell(script: str, cwd: Path, env: dict, timeout: float) -> tuple[int, str, list[int]]:
    """``script`` in bash, leading a session of its own; returns its exit code, its output, and the pids of
    the session still alive 120 s after it ended (then killed): a generous bound for a `ray start --block` head
    stopping its processes on a loaded machine. Everything is killed on any exit."""
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        deadline = time.monotonic() + 120
        while session_pids(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        return proc.returncode, out, session_pids(proc.pid)
    finally:
        kill_session(proc.pid)
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def user_clone(tmp_path_factory):
    """A copy of the working tree, a fresh HOME, and what `make demo` leaves there (its output too)."""
    clone = tmp_path_factory.mktemp("clone")
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file() and not rel.startswith("runs/"):
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    (clone / ".venv").symlink_to(VENV)
    home = tmp_path_factory.mktemp("home")
    env = login_env(home)
    bare = subprocess.run(
        ["bash", "-c", "python -c 'import pyarrow, ray'"], cwd=clone, env=env, capture_output=True, timeout=60
    )
    assert bare.returncode != 0, "the test shell's python already has the project's packages: it proves nothing"
    rc, out, left = run_shell(f". .venv/bin/activate && vbench-ray demo --out runs/demo --n {DEMO_N}", clone, env, 400)
    return {"clone": clone, "home": home, "env": env, "demo": (rc, out, left)}


def test_demo_runs_in_a_users_shell(user_clone):
    """`make demo`'s command with only what the README sets: it runs, says where its outputs are, and leaves
    nothing running."""
    rc, out, left = user_clone["demo"]
    assert rc == 0, out[-4000:]
    run_dir = user_clone["clone"] / "runs" / "demo" / "run"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["n_rows"] == DEMO_N and summary["failures"]["count"] == 0, summary["failures"]
    assert summary["judge"]["backend"] == "hf" and "UAS" in summary["metrics"]
    assert str(run_dir) in out and "note:" in out
    assert (user_clone["home"] / ".ray" / "auth_token").is_file(), "a local ray.init writes the user's token"
    assert not left, f"processes of the demo still running: {left}"


def _hold_default_ports() -> list[socket.socket]:
    held = []
    for port in DEFAULT_PORTS:
        s = socket.socket()
        try:
            s.bind(("0.0.0.0", port))
            s.listen()
            held.append(s)
        except OSError:  # someone else holds it already: as good
            s.close()
    return held


def _head_log(clone: Path) -> str:
    """The block's head log (`$RAY_TMP/head.log`, `$RAY_TMP` a `mktemp -d /tmp/ray-XXXXXX`): the one whose session
    ran a job from ``clone`` (the job driver's log names its output folder there)."""

    def mentions_clone(path: Path) -> bool:
        try:
            return str(clone) in path.read_text(errors="replace")
        except OSError:  # another user's Ray folder
            return False

    for log in Path("/tmp").glob("ray-*/head.log"):
        if any(mentions_clone(d) for d in log.parent.glob("session_*/logs/job-driver-*.log")):
            return log.read_text(errors="replace")
    raise AssertionError(f"no /tmp/ray-*/head.log of a session whose job ran in {clone}")


def test_readme_cluster_block_runs_as_written(user_clone):
    assert user_clone["demo"][0] == 0, "the demo failed (test_demo_runs_in_a_users_shell)"
    clone, env = user_clone["clone"], user_clone["env"]
    block = readme_cluster_block().rstrip("\n").splitlines()
    assert block[-1].startswith("kill $RAY_HEAD")
    script = "\n".join(block) + "\n"  # the README lines, unchanged, nothing before, between or after
    held = _hold_default_ports()
    try:
        rc, out, left = run_shell(script, clone, env, 560)
    finally:
        for s in held:
            s.close()
    assert "Missing authentication token" not in out, out[-3000:]
    assert "succeeded" in out, out[-5000:]
    run_dir = clone / "runs" / "cluster-demo"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["n_rows"] == DEMO_N and summary["failures"]["count"] == 0
    for name in ("SSIM", "MSM", "MF", "UAS"):
        assert name in summary["metrics"], name
    assert summary["judge"]["backend"] == "hf"
    assert (run_dir / "report.html").exists() and list((run_dir / "cases").glob("part-*.parquet"))
    assert (run_dir / "judge_log.jsonl").stat().st_size > 0

    assert rc == 0, out[-2000:]  # the last line, `kill $RAY_HEAD`, found the head still running
    assert not left, f"`kill $RAY_HEAD` left processes of the cluster running: {left}"
    head_log = _head_log(clone)
    assert "Draining for up to" not in head_log, (
        "the head drained its node on `kill $RAY_HEAD` (waits up to RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S): "
        + head_log[-1500:]
    )


def test_job_without_the_packages_says_what_to_do(tmp_path):
    """A bare interpreter (a venv with only the standard library) running a job entrypoint directly."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    for job in ("cove", "vidic", "nrv", "agentic", "compare", "sweep"):
        proc = subprocess.run(
            [str(tmp_path / "bare" / "bin" / "python"), f"jobs/{job}.py", "x=1"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 1, (job, proc.stderr)
        assert proc.stderr.count("\n") <= 1 and "lacks the packages numpy, pyarrow" in proc.stderr, proc.stderr
        assert ". .venv/bin/activate" in proc.stderr and "Traceback" not in proc.stderr
