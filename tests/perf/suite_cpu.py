"""Where a command's CPU time goes, by kind of process: run it, sample every process on the host, print the CPU
seconds of each kind that started while it ran (Ray actors and tasks by their names, Ray's own daemons, vLLM's
engine processes, the CLI's runs, pytest's workers).

    python tests/perf/suite_cpu.py -- make test
    python tests/perf/suite_cpu.py --interval 0.25 --top 40 -- .venv/bin/python -m pytest -q tests/pipeline

On a 2-core machine the suite is CPU-bound (docs/testing.md): its time is this total over the two cores, so this
says what a cut would buy. A process is read from ``/proc`` every ``--interval`` seconds; one that lives shorter
than that is missed, and its CPU with it (a lower bound). Linux only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter

TICKS = os.sysconf("SC_CLK_TCK")
RAY_DAEMONS = ("raylet", "gcs_server", "log_monitor", "monitor.py", "dashboard.py", "runtime_env")


def kind(cmdline: str, comm: str) -> str:
    """What a process is, from its command line (a Ray worker renames itself ``ray::<actor or task>``)."""
    if cmdline.startswith("ray::MapWorker(MapBatches("):  # a Ray Data pool actor: by its stage's class
        return "ray::MapWorker(" + cmdline[len("ray::MapWorker(MapBatches(") :].split(")")[0] + ")"
    if cmdline.startswith("ray::"):
        return "ray::" + cmdline[5:].split("(")[0].split(" ")[0].split(".")[0]
    if "default_worker.py" in cmdline:
        return "ray worker, before its first task"
    if "multiprocessing.spawn" in cmdline or "VLLM" in comm:
        return "spawned (vLLM EngineCore / workers)"
    if "vllm.model_executor.models.registry" in cmdline:
        return "vLLM model inspection"
    if "vllm.entrypoints" in cmdline:
        return "vLLM OpenAI server"
    if "pytest-xdist running" in cmdline:
        return "pytest worker"
    if "vbench_ray.cli" in cmdline or "/vbench-ray " in cmdline:
        return "vbench-ray CLI"
    for daemon in RAY_DAEMONS:
        if daemon in cmdline:
            return f"ray {daemon}"
    return f"other: {comm}"


def read(pid: str) -> tuple[tuple[str, str], str, str, float] | None:
    """``((pid, start time), cmdline, comm, CPU seconds)`` of a live process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    end = stat.rfind(")")
    fields = stat[end + 2 :].split()  # after "pid (comm) "; utime, stime and starttime are fields 14, 15 and 22
    return (pid, fields[19]), cmdline, stat[stat.find("(") + 1 : end], (int(fields[11]) + int(fields[12])) / TICKS


def sample(before: set, seen: dict) -> None:
    """One pass over /proc: each process's latest CPU; its kind from the first informative command line (a Ray
    worker keeps the first actor or task name it took, not a later ``ray::IDLE``)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or (got := read(pid)) is None or got[0] in before:
            continue
        key, cmdline, comm, cpu = got
        now = kind(cmdline, comm)
        if (entry := seen.get(key)) is None:
            seen[key] = [now, cpu]
            continue
        if not named(entry[0]) and now.startswith("ray::") and (named(now) or not entry[0].startswith("ray::")):
            entry[0] = now
        entry[1] = cpu


def named(name: str) -> bool:
    return name.startswith("ray::") and name != "ray::IDLE"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--top", type=int, default=30, help="kinds to print")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    before = {got[0] for pid in os.listdir("/proc") if pid.isdigit() and (got := read(pid))}
    seen: dict = {}
    started = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        sample(before, seen)
        time.sleep(args.interval)
    sample(before, seen)
    wall = time.monotonic() - started
    cpu, count = Counter(), Counter()
    for name, seconds in seen.values():
        cpu[name] += seconds
        count[name] += 1
    total = sum(cpu.values())
    print(f"\n{'CPU s':>8} {'share':>6} {'procs':>6}  kind")
    for name, seconds in cpu.most_common(args.top):
        print(f"{seconds:8.0f} {seconds / total:6.1%} {count[name]:6d}  {name}")
    cores = os.cpu_count() or 1
    busy = total / (wall * cores)
    print(f"total {total:.0f} CPU s in {wall:.0f} s on {cores} cores: {busy:.0%} busy (exit {proc.returncode})")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
