"""The agent sandbox: escapes fail (files outside it, the task's hidden truth, the network, fork bombs, memory,
CPU, time) and the harness-side reads refuse symlinks. Needs Linux namespaces (``unshare``); skipped, with the
reason, only where they are genuinely unavailable."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from vbench_ray.agents.sandbox import Sandbox, SandboxLimits, check_support
from vbench_ray.agents.tools import Tools

REASON = check_support()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"agent sandbox unavailable here: {REASON}")


@pytest.fixture
def bundle(tmp_path):
    """A hand-made task bundle with public inputs and hidden truth."""
    task = tmp_path / "tasks" / "t1"
    (task / "inputs").mkdir(parents=True)
    (task / "truth").mkdir()
    (task / "inputs" / "notes.txt").write_text("public input\n")
    (task / "truth" / "truth.json").write_text(json.dumps({"order": ["HIDDEN-ANSWER"]}))
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    return {"task": task, "secret": secret}


@pytest.fixture
def box(bundle, tmp_path):
    sb = Sandbox(tmp_path / "rollout", key=f"test|{tmp_path}", limits=SandboxLimits(nproc=16, memory_mb=1024, cpu_s=30))
    sb.prepare(bundle["task"] / "inputs", "the instruction")
    yield sb
    sb.cleanup()


def test_only_inputs_are_visible_and_outside_files_are_not(box, bundle):
    r = box.run("cat inputs/notes.txt; cat instruction.md; ls /", timeout_s=30)
    assert r.exit_code == 0 and "public input" in r.stdout and "the instruction" in r.stdout
    assert "work" not in r.stdout.split() and "root" not in r.stdout.split()
    truth = bundle["task"] / "truth" / "truth.json"
    for path in (bundle["secret"], truth, bundle["task"] / "task.json"):
        r = box.run(f"cat {path}", timeout_s=30)
        assert r.exit_code != 0 and "No such file" in r.stderr, (path, r)
    r = box.run(
        "grep -rs HIDDEN-ANSWER / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr; "
        "grep -rs TOP-SECRET / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr; echo done",
        timeout_s=60,
    )
    assert "HIDDEN-ANSWER" not in r.stdout and "TOP-SECRET" not in r.stdout and "done" in r.stdout
    assert not (box.work / "inputs" / "truth").exists() and not list(box.work.rglob("truth.json"))


def test_only_the_sandbox_is_writable_and_inputs_are_read_only(box, bundle):
    r = box.run(
        "echo x > outputs/a.txt && echo ok; echo x > inputs/notes.txt; echo x > /usr/x; echo x > /etc/x; id -u",
        timeout_s=30,
    )
    assert "ok" in r.stdout and (box.work / "outputs" / "a.txt").read_text() == "x\n"
    assert r.stderr.count("Permission denied") + r.stderr.count("Read-only file system") >= 3, r.stderr
    assert (bundle["task"] / "inputs" / "notes.txt").read_text() == "public input\n"  # hard link untouched
    if os.geteuid() == 0:
        assert int(r.stdout.split()[-1]) == box.uid != 0


def test_no_network_not_even_loopback(box):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        srv.settimeout(0.5)
        port = srv.getsockname()[1]
        accepted = []

        def accept():
            deadline = time.monotonic() + 6
            while time.monotonic() < deadline:
                try:
                    accepted.append(srv.accept())
                except OSError:
                    pass

        th = threading.Thread(target=accept, daemon=True)
        th.start()
        r = box.run(
            f"echo hi > /dev/tcp/127.0.0.1/{port}; echo bash=$?; "
            f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\"; echo py=$?",
            timeout_s=30,
        )
        th.join()
    assert not accepted, "the sandbox reached a listener on the host's loopback"
    assert "bash=1" in r.stdout and "py=1" in r.stdout and "unreachable" in r.stderr.lower(), r


def test_fork_past_the_process_limit_fails(box):
    script = (
        "import os, time\nn = 0\nfor i in range(64):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n"
        "    n += 1\nprint(n)\n"
    )
    r = box.run(f"python3 -c '{script}'", timeout_s=30)
    assert r.exit_code == 0, r
    n = int(r.stdout.strip())
    if os.geteuid() == 0:  # RLIMIT_NPROC binds non-root uids only (the sandbox uid); nproc=16
        assert 1 <= n < 16, n
    else:
        pytest.skip(f"not root: nproc counts the invoking user's processes ({n} forks)")


def test_memory_and_cpu_limits(box):
    r = box.run("python3 -c 'x = bytearray(2 * 1024**3)'; echo rc=$?", timeout_s=30)
    assert "MemoryError" in r.stderr and "rc=1" in r.stdout, r
    tight = Sandbox(box.root, key=box.key, limits=SandboxLimits(cpu_s=1))
    r = tight.run("python3 -c 'while True: pass'; echo rc=$?", timeout_s=120)
    # ended by its CPU limit (SIGXCPU or, at the hard limit, SIGKILL), not by the wall-clock timeout, however long a
    # loaded machine takes to give it one CPU second
    assert not r.timed_out and ("rc=152" in r.stdout or "rc=137" in r.stdout), r


def test_timeout_kills_the_whole_process_tree(box):
    marker = f"vbr-sleep-{os.getpid()}"
    r = box.run(f"(exec -a {marker} sleep 300) & (exec -a {marker} sleep 300) & wait", timeout_s=2)
    assert r.timed_out and r.exit_code is None and r.wall_s < 10
    time.sleep(0.5)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                left.append(pid)
        except OSError:
            pass
    assert not left, f"processes outlived the timeout: {left}"


def test_harness_reads_refuse_symlinks_and_escapes(box, bundle):
    r = box.run(
        f"ln -s {bundle['secret']} outputs/solution.json; ln -s /etc/passwd outputs/report.md; "
        "ln -s / outputs/root; echo ok",
        timeout_s=30,
    )
    assert "ok" in r.stdout
    got = box.collect(["solution.json", "report.md"], box.root / "collected")
    assert got == [] and not list((box.root / "collected").iterdir())
    tools = Tools(box)
    for args in (
        {"path": "outputs/solution.json"},
        {"path": "outputs/root/etc/passwd"},
        {"path": "/etc/passwd"},
        {"path": "../secret.txt"},
    ):
        res = tools.call("read_file", args)
        assert not res.ok and "TOP-SECRET" not in res.text and "root:" not in res.text, (args, res.text)
    res = tools.call("write_file", {"path": "inputs/notes.txt", "content": "overwritten"})
    assert not res.ok and (bundle["task"] / "inputs" / "notes.txt").read_text() == "public input\n"


# --------------------------------------------------------------------------------------------------------------
# limits the harness itself needs: no hang on FIFOs, a total disk quota, bounded output, no host paths
# --------------------------------------------------------------------------------------------------------------


def test_a_fifo_deliverable_neither_hangs_collect_nor_read_file(box):
    """A FIFO (or any non-regular file) at a deliverable's name is skipped at once; real files still come back."""
    r = box.run("mkfifo outputs/solution.json && printf '# report' > outputs/report.md && echo ok", timeout_s=30)
    assert "ok" in r.stdout, r
    result = {}

    def collect():
        result["got"] = box.collect(["solution.json", "report.md"], box.root / "collected")
        result["read"] = Tools(box).call("read_file", {"path": "outputs/solution.json"})

    th = threading.Thread(target=collect, daemon=True)
    th.start()
    th.join(timeout=15)
    assert not th.is_alive(), "collect()/read_file blocked on a FIFO"
    assert result["got"] == ["report.md"]
    assert (box.root / "collected" / "report.md").read_text() == "# report"
    assert not (box.root / "collected" / "solution.json").exists()
    assert not result["read"].ok and "not a regular file" in result["read"].text


@pytest.mark.skipif(os.geteuid() != 0, reason="the /sandbox quota is a tmpfs mounted by root")
def test_sandbox_has_a_total_disk_and_inode_quota(bundle, tmp_path):
    """Files each under fsize, together over disk_mb, fail with ENOSPC; so does creating more than disk_inodes
    files. The inputs copied in do not count against the agent's share; cleanup unmounts."""
    limits = SandboxLimits(fsize_mb=32)
    limits.disk_mb, limits.disk_inodes = 40, 200
    sb = Sandbox(tmp_path / "quota", key="quota", limits=limits)
    sb.prepare(bundle["task"] / "inputs", "the instruction")
    try:
        assert os.path.ismount(sb.work)
        r = sb.run(
            "for i in 1 2 3; do head -c 16M /dev/zero > outputs/big$i || echo FAIL$i; done; du -sm outputs | cut -f1",
            timeout_s=60,
        )
        assert "FAIL1" not in r.stdout and "FAIL2" not in r.stdout, r
        assert "FAIL3" in r.stdout and "No space left on device" in r.stderr, r
        assert int(r.stdout.split()[-1]) <= 42  # MiB, rounded up by du
        r = sb.run(
            "rm -f outputs/big*; n=0; for i in $(seq 1 1000); do : > outputs/f$i 2>/dev/null || break; "
            "n=$i; done; echo created=$n; cat inputs/notes.txt",
            timeout_s=60,
        )
        created = int(r.stdout.split("created=")[1].split()[0])
        assert 150 <= created < 250, r.stdout
        assert "public input" in r.stdout
    finally:
        sb.cleanup()
    assert not os.path.ismount(sb.work) and not sb.root.exists()


def test_command_output_is_capped_while_it_streams(box):
    """200 MB of output: the harness keeps a head and a tail, says how much was cut, and never holds the
    whole stream in memory (traced Python allocations stay far below the output size)."""
    import tracemalloc

    tracemalloc.start()
    try:
        r = box.run(
            "printf HEAD-MARK; head -c 200M /dev/zero | tr '\\0' x; printf TAIL-MARK; echo err >&2",
            timeout_s=120,
            max_output=64 * 1024,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB while reading 200 MiB of output"
    total = 200 * 2**20 + len("HEAD-MARK") + len("TAIL-MARK")
    assert r.exit_code == 0 and r.stdout_bytes == total, (r.exit_code, r.stdout_bytes)
    assert r.stdout.startswith("HEAD-MARKx") and r.stdout.endswith("xTAIL-MARK")
    assert f"{total - 64 * 1024} bytes cut" in r.stdout and len(r.stdout) < 64 * 1024 + 200
    assert r.stderr == "err\n" and r.stderr_bytes == 4
    # the default comes from limits.output_kb (agent.limits.output_kb in the config)
    r = Sandbox(box.root, key=box.key, limits=SandboxLimits(output_kb=2)).run("head -c 5000 /dev/zero", timeout_s=30)
    assert r.stdout_bytes == 5000 and f"{5000 - 2048} bytes cut" in r.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="/sandbox is its own tmpfs only as root")
def test_mountinfo_shows_no_host_paths(box, tmp_path):
    """Inside the sandbox the mount table names no host folder: not the run directory, not the repository
    or its virtualenv (where ffmpeg comes from)."""
    r = box.run("cat /proc/self/mountinfo /proc/1/mountinfo; echo; cat /proc/mounts", timeout_s=30)
    assert r.exit_code == 0 and "/sandbox" in r.stdout, r
    repo = str(Path(__file__).resolve().parents[2])
    for host in (str(tmp_path), str(box.root), repo, "site-packages", "imageio_ffmpeg"):
        assert host not in r.stdout, (host, r.stdout)
    sandbox_line = next(line for line in r.stdout.splitlines() if line.split()[4:5] == ["/sandbox"])
    assert sandbox_line.split()[3] == "/", sandbox_line  # the root of its own filesystem
