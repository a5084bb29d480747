"""Where the fixed overhead of a run goes: Ray start, the first task, the first actor, the first Ray Data row.

    python tests/perf/startup.py [--cpus 2] [--repeat 2]

Each step is timed in a fresh process (so nothing is warm from the previous step) and printed as a table:
interpreter + project import, ``ray.init`` (local, as ``ensure_ray`` starts it), the first task round trip,
the first actor, the first row out of a one-stage Ray Data pipeline, and the threads a worker holds after
importing the decode stage's libraries (a BLAS or OpenCV pool sized to the machine, not to the task's one CPU,
is contention the official one-process scripts do not have). No assert: numbers for the note.

    python tests/perf/startup.py --cli 5 [--before REV] [--attach] [--cpus 2] [--trace] [--warmup 1]

``--cli N``: a real ``vbench-ray run`` (CoVEBench, SSIM + MF, 8 tiny synthetic cases) N times, timed from the command
to the first row in ``RUN_DIR/cases/`` (polled every 20 ms) and to its exit, with the run's own milestones
(``summary.json`` ``timing``, seconds from the run's start: ``run start`` after the command, once the interpreter, the
CLI's imports, Ray's import (the command's early start) and the config's load are done; ``ray_start`` is negative when
the command began Ray's start before the run); with ``--before REV`` the same runs of the code at git revision ``REV``
(extracted with ``git archive`` into a temporary folder, nothing in the checkout changes) alternate with this tree's,
and the medians are printed side by side. ``--attach`` runs them against a cluster started beforehand (``ray start
--head`` in a session of its own, ended by pid afterwards): the ``ray job submit`` path, where the run starts no Ray.
``--trace``: every Python process of each run (driver, Ray's workers and daemons) writes its own timeline
(``start_trace/sitecustomize.py``: interpreter up, watched imports, the first prewarm and decode task, the driver's
steps and first shard), printed after each run in seconds from the command. ``--warmup N``: N untimed runs of this
tree first: Ray starts idle workers when a cluster's first driver registers (``prestart_worker_first_driver``);
the first job that leases them is spared a worker's start and they end with it, so later jobs find none; and the
first run reads every file cold.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r'''
import json, os, sys, time
t0 = float(sys.argv[1]); cpus = int(sys.argv[2])
marks = {"python_up": time.time() - t0}
import vbench_ray.runner, vbench_ray.metrics.stage  # what the driver imports before Ray
marks["project_imported"] = time.time() - t0
from omegaconf import OmegaConf
from vbench_ray.ray_start import ensure_ray
cfg = OmegaConf.create({"ray": {"address": None, "num_cpus": cpus}})
os.environ.pop("RAY_ADDRESS", None)
ensure_ray(cfg)
import ray
marks["ray_init"] = time.time() - t0

@ray.remote(num_cpus=1)
def threads():
    def count():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("Threads:"))
    before = count()
    import vbench_ray.metrics.stage  # noqa: F401  (cv2, numpy, scipy, skimage: what a decode task loads)
    import numpy as np
    np.dot(np.ones((256, 256)), np.ones((256, 256)))  # wakes a BLAS thread pool if one exists
    return {
        "threads_before_imports": before,
        "threads_after": count(),
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "affinity": len(os.sched_getaffinity(0)),
    }

first = ray.get(threads.remote())
marks["first_task"] = time.time() - t0

@ray.remote(num_cpus=1)
class A:
    def ping(self):
        return 1

ray.get(A.remote().ping.remote())
marks["first_actor"] = time.time() - t0
import ray.data
marks["ray_data_imported"] = time.time() - t0
ds = ray.data.range(8, override_num_blocks=8).map_batches(lambda b: b, batch_size=1)
it = iter(ds.iter_rows())
next(it)
marks["first_data_row"] = time.time() - t0
list(it)
marks["data_done"] = time.time() - t0
ray.shutdown()
marks["shutdown"] = time.time() - t0
print(json.dumps({"marks": marks, "worker": first}))
'''


def probe(cpus: int) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{os.environ.get('PYTHONPATH', '')}"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, repr(time.time()), str(cpus)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


RUN_ENV: dict[str, str] = {}  # the attached runs' Ray token (``head``)
TRACE = REPO / "tests" / "perf" / "start_trace"  # its sitecustomize writes each process's timeline (``--trace``)


def trace_env(trace_dir: Path | None, pythonpath: str) -> dict[str, str]:
    """The environment that has every Python process of a run write its start timeline to ``trace_dir``."""
    if trace_dir is None:
        return {"PYTHONPATH": pythonpath}
    return {"PYTHONPATH": os.pathsep.join([str(TRACE), pythonpath]), "VBENCH_START_TRACE": str(trace_dir)}


def timeline(trace_dir: Path, start: float, end: float) -> str:
    """One line per process that marked something between ``start`` and ``end``: seconds from ``start``."""
    lines = []
    for f in sorted(trace_dir.glob("*.jsonl")):
        head_, marks = {}, []
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if "mark" in rec:
                marks.append((rec["mark"], rec["t"]))
            elif "argv" in rec:
                head_ = rec
        marks = [(m, t) for m, t in marks if start - 0.5 <= t <= end]
        if not any(m not in ("created", "site") for m, _ in marks) and not any(
            m == "created" and t >= start for m, t in marks
        ):
            continue
        cmd = " ".join(head_.get("orig_argv") or head_.get("argv") or [])
        role = "worker" if "default_worker" in cmd else "driver" if "vbench_ray.cli" in cmd else cmd[-60:]
        spans, opened = [], {}
        for m, t in marks:
            if m.endswith(" start"):
                opened[m[: -len(" start")]] = t
            elif m.endswith(" end") and m[: -len(" end")] in opened:
                key = m[: -len(" end")]
                began = opened.pop(key)
                spans.append((began, f"{key} {began - start:.2f}-{t - start:.2f}"))
            else:
                spans.append((t, f"{m} {t - start:.2f}"))
        spans += [(t, f"{k} {t - start:.2f}-?") for k, t in opened.items()]
        first = min((t for t, _ in spans), default=end)
        lines.append((first, f"  {f.stem:>7} {role}: " + ", ".join(text for _, text in sorted(spans))))
    return "\n".join(text for _, text in sorted(lines))


def cli_run(code: Path, data: Path, out: Path, cpus: int, address: str | None, trace_dir: Path | None = None) -> dict:
    """One ``vbench-ray run`` of the code in ``code``: seconds from the command to the first row file and to exit
    (with ``trace_dir``: and each of its processes' timeline, ``timeline``)."""
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    args = [sys.executable, "-m", "vbench_ray.cli", "run", str(code / "configs" / "cove.yaml")]
    args += [f"data.checklist={data / 'checklist.json'}", f"data.source_dir={data}"]
    args += [f"data.edited_dir={data / 'edited'}"]
    args += [f"output.dir={out}", "metrics.enabled=[SSIM,MF]", "metrics.exclude.SSIM.categories=[]"]
    args += ["metrics.exclude.MF.categories=[]", "wandb.mode=disabled", "report.enabled=false"]
    args += [f"ray.address={address}"] if address else [f"ray.num_cpus={cpus}"]
    path = os.pathsep.join([str(code)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env = {**os.environ, "RAY_ADDRESS": "", **RUN_ENV, **trace_env(trace_dir, path)}
    start = time.time()
    log_path = out.parent / f"{out.name}.log"  # a file, not a pipe: nothing drains a pipe while the run is polled
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(args, cwd=code, env=env, stdout=log_file, stderr=subprocess.STDOUT, text=True)
    first = None
    while proc.poll() is None:
        if first is None and any((out / "cases").glob("*.parquet")):
            first = time.time() - start
        time.sleep(0.02)
    log = log_path.read_text()
    wall = time.time() - start
    if proc.returncode != 0:
        raise RuntimeError(f"run of {code} failed (exit {proc.returncode}):\n{log[-3000:]}")
    if first is None:  # written between two polls, just before the exit
        first = min(f.stat().st_mtime for f in (out / "cases").glob("*.parquet")) - start
    timing = json.loads((out / "summary.json").read_text()).get("timing") or {}
    # the run's own milestones count from its start (``runner.run``: after the interpreter and the CLI's imports)
    result = {"first_row": first, "wall": wall}
    result.update({f"run {k}": v for k, v in timing.items() if isinstance(v, (int, float)) and k != "wall_start"})
    result["run start"] = timing["wall_start"] - start
    if trace_dir is not None:
        result["timeline"] = timeline(trace_dir, start, start + wall)
    return result


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def head(cpus: int, token: Path, trace_dir: Path | None = None):
    """``ray start --head --block`` in a session of its own, with a token of its own (Ray 2.60 turns token
    authentication on; ``~/.ray/auth_token`` is shared by every user of the host) and free ports; returns
    (process, GCS address) once it answers. The runs get the same token through ``RUN_ENV``."""
    import secrets

    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    RUN_ENV.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    port = free_port()
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", f"--port={port}"]
    ray_cli += [f"--num-cpus={cpus}", "--node-ip-address=127.0.0.1", "--include-dashboard=false"]
    ray_cli += [f"--dashboard-port={free_port()}", f"--ray-client-server-port={free_port()}"]
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **RUN_ENV}
    env.update(trace_env(trace_dir, env.get("PYTHONPATH", "")))
    err = token.parent / "head.err"  # a file, not a pipe: a head that writes much would block on a full pipe
    with err.open("w") as err_file:
        proc = subprocess.Popen(ray_cli, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err_file)
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        status = subprocess.run(
            [sys.executable, "-m", "ray.scripts.scripts", "status", f"--address={address}"],
            capture_output=True,
            text=True,
            env=env,
        )
        if status.returncode == 0:
            return proc, address
        if proc.poll() is not None:
            end_session(proc)  # what it started before it failed
            raise RuntimeError(f"ray start failed: {err.read_text()[-2000:]}")
        time.sleep(1.0)
    end_session(proc)  # never left running: the caller has no handle on it yet
    raise RuntimeError("the head did not come up in 300 s")


def end_session(proc) -> None:
    """SIGTERM then SIGKILL every process of the head's session, by pid (never ``ray stop``: other users' Ray)."""
    import signal

    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and _in_session(int(d), proc.pid)]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.time() + wait
        while time.time() < deadline and any(_in_session(p, proc.pid) for p in pids):
            time.sleep(0.2)


def _in_session(pid: int, sid: int) -> bool:
    try:
        return os.getsid(pid) == sid and not Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False


def cli_main(args) -> None:
    import statistics
    import tempfile

    sys.path.insert(0, str(REPO / "tests" / "perf"))
    from scale import make_data

    cpus = int(args.cpus.split(",")[0])
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        make_data(tmp / "cove", 8, 2, 24, 160, 96)
        codes = {"after": REPO}
        if args.before and Path(args.before).is_dir():  # a copy of the code already extracted (no git there)
            codes = {"before": Path(args.before).resolve(), **codes}
        elif args.before:
            codes = {"before": tmp / "before", **codes}
            codes["before"].mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.before], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(codes["before"])], input=archive.stdout, check=True)
        trace_dir = tmp / "trace" if args.trace else None
        if trace_dir:
            trace_dir.mkdir()
        cluster = head(cpus, tmp / "auth_token", trace_dir) if args.attach else None
        try:
            for i in range(args.warmup):  # untimed: the cluster's first job, cold file caches
                r = cli_run(REPO, tmp / "cove", tmp / "run_warmup", cpus, cluster[1] if cluster else None)
                print(f"  warm-up #{i + 1} (not counted): first row {r['first_row']:.2f} s", flush=True)
            results: dict[str, list[dict]] = {k: [] for k in codes}
            for i in range(args.cli):
                for name, code in codes.items():  # alternating: the machine's load falls on both alike
                    address = cluster[1] if cluster else None
                    r = cli_run(code, tmp / "cove", tmp / f"run_{name}", cpus, address, trace_dir)
                    results[name].append(r)
                    print(f"  {name} #{i + 1}: first row {r['first_row']:.2f} s, exit {r['wall']:.2f} s", flush=True)
                    if trace_dir:
                        print(r["timeline"], flush=True)
        finally:
            if cluster:
                end_session(cluster[0])
    where = f"attached to a running {cpus}-CPU cluster" if args.attach else f"a fresh local Ray of {cpus} CPUs"
    print(f"\n{where}: medians of {args.cli} runs (seconds from the command)")
    keys = ["first_row", "wall", "run start", "run ray_start", "run cases_loaded", "run ray_ready"]
    keys += ["run stream_planned", "run first_row"]
    print("| " + " | ".join(["", *codes]) + " |")
    print("|---" * (len(codes) + 1) + "|")
    for k in keys:
        cells = []
        for name in codes:
            vals = [r[k] for r in results[name] if k in r]
            cells.append(f"{statistics.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})" if vals else "-")
        label = k[len("run ") :] + " (run's clock)" if k.startswith("run ") and k != "run start" else k
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpus", default="2")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cli", type=int, default=0, metavar="N", help="time N real runs to their first row")
    ap.add_argument("--before", default=None, metavar="REV", help="with --cli: also git REV or folder REV")
    ap.add_argument("--attach", action="store_true", help="with --cli: against a cluster started beforehand")
    ap.add_argument("--trace", action="store_true", help="with --cli: print each run's per-process start timeline")
    ap.add_argument("--warmup", type=int, default=0, metavar="N", help="with --cli: N untimed runs of this tree first")
    args = ap.parse_args()
    if args.cli:
        cli_main(args)
        return
    for cpus in [int(c) for c in args.cpus.split(",")]:
        results = [probe(cpus) for _ in range(args.repeat)]
        keys = list(results[0]["marks"])
        print(f"\nray.num_cpus={cpus}: seconds since the process was launched (one column per repeat)")
        for k in keys:
            print(f"  {k:20s} " + "  ".join(f"{r['marks'][k]:6.2f}" for r in results))
        print(f"  worker after imports: {results[-1]['worker']}")


if __name__ == "__main__":
    main()
