"""Scaling of the stream on CoVEBench at a realistic size, and the official way as the reference.

    python tests/perf/scale.py [--cases 384] [--size 832x480] [--frames 81] [--cpus 2,4,8,all] [--ceiling] [--out DIR]

Writes a synthetic CoVEBench (``--unique`` distinct source/edited pairs of moving textured squares,
written with OpenCV so it runs where PyAV is missing, hard-linked under every case id), then:

* runs ``vbench-ray run`` (SSIM + MSM + MF, default settings otherwise) on a fresh local Ray limited to
  N CPUs (``ray.num_cpus=N`` and, where ``taskset`` exists, the process pinned to N cores) for each N,
  and prints cases/s, the efficiency against 2 CPUs (speed-up / (N/2)), and the fixed overhead (process
  start to the first row in ``cases/``);
* with ``--ceiling``, runs k plain processes (no Ray), each pinned to one of k cores and running the same decode
  stage over every k-th case: what the machine itself gives k cores for this work (memory bus, caches, clock),
  printed beside the stream's efficiency;
* runs the same cases the official way: one process per metric, one after the other, each decoding its
  own frames with decord (the official scripts' reader) and computing the same formula on one core.

Prints the table side by side; no assert (timings belong in the note, not in CI). Run on demand:
on the GPU machine with the bundle (``source .gpu-bundle/setup.sh``) or here with ``.venv/bin/python``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
METRICS = ("SSIM", "MSM", "MF")


def write_video(path: Path, frames: np.ndarray, fps: float = 16.0) -> None:
    import cv2

    h, w = frames.shape[1:3]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    for f in frames:
        writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    writer.release()


def scene(seed: int, t: int, h: int, w: int, dx: int) -> np.ndarray:
    """Smoothed-noise background with a bright square moving ``dx`` px per frame."""
    import cv2

    rng = np.random.default_rng(seed)
    bg = cv2.GaussianBlur(rng.integers(0, 255, (h, w, 3), dtype=np.uint8), (0, 0), 3.0)
    out = np.repeat(bg[None], t, axis=0)
    s = h // 5
    for i in range(t):
        x = (20 + i * dx) % (w - s)
        out[i, h // 3 : h // 3 + s, x : x + s] = (230, 200, 40)
    return out


def make_data(root: Path, n: int, unique: int, t: int, w: int, h: int) -> dict:
    (root / "data").mkdir(parents=True)
    (root / "edited").mkdir()
    pairs = []
    for k in range(unique):
        src, edt = root / "data" / f"src{k}.mp4", root / "data" / f"edt{k}.mp4"
        write_video(src, scene(k, t, h, w, 3))
        edited = scene(k, t, h, w, 3)
        edited[:, :, :, 0] = np.clip(edited[:, :, :, 0].astype(int) + 25, 0, 255)  # a colour edit
        write_video(edt, edited)
        pairs.append((src, edt))
    tasks = []
    for i in range(n):
        src, edt = pairs[i % unique]
        os.link(edt, root / "edited" / f"{i}.mp4")
        tasks.append(
            {
                "id": i,
                "editing_instruction": "make it redder",
                "videoA_path": f"data/{src.name}",
                "category": [{"Level 1": "Color", "Level 2": "Global", "Level 3": "Tint"}],
                "evaluation_groups": [],
            }
        )
    (root / "checklist.json").write_text(json.dumps(tasks))
    return {"checklist": root / "checklist.json", "source_dir": root, "edited_dir": root / "edited"}


def run_attached(data: dict, out: Path, cpus: int, n: int) -> dict:
    """The same run against a cluster already up (``ray start --head``), as under ``ray job submit``."""
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` command, wherever Ray is installed
    subprocess.run(
        ray_cli + ["start", "--head", f"--num-cpus={cpus}", "--node-ip-address=127.0.0.1", "--include-dashboard=false"],
        check=True,
        capture_output=True,
    )
    try:
        return run_pipeline(data, out, cpus, n, address="auto")
    finally:
        subprocess.run(ray_cli + ["stop", "--force"], capture_output=True)


class CpuAccount:
    """CPU seconds used by a process and all its descendants (Ray's GCS, raylet, agents and workers), sampled
    from /proc every half second, grouped by role: where a run's CPU time goes besides the stage's work."""

    def __init__(self, root: int):
        import threading

        self.root, self.seen, self._stop = root, {}, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.is_set():
            parents, info = {}, {}
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    stat = Path(f"/proc/{d}/stat").read_text()
                    fields = stat[stat.rindex(")") + 2 :].split()
                    parents[int(d)] = int(fields[1])
                    name = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    info[int(d)] = (
                        (int(fields[11]) + int(fields[12])) / tick,
                        name or stat[stat.index("(") + 1 : stat.rindex(")")],
                    )
                except (OSError, ValueError, IndexError):
                    continue
            tree, frontier = {self.root}, [self.root]
            while frontier:
                p = frontier.pop()
                kids = [c for c, pp in parents.items() if pp == p and c not in tree]
                tree.update(kids)
                frontier += kids
            for pid in tree:
                if pid in info:
                    self.seen[pid] = info[pid]
            self._stop.wait(0.5)

    def by_role(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, (seconds, cmd) in self.seen.items():
            role = (
                "driver"
                if pid == self.root or "vbench_ray.cli" in cmd
                else "workers"
                if ("default_worker" in cmd or cmd.startswith("ray::")) and "Agent" not in cmd
                else "ray system (gcs, raylet, agents, monitors)"
            )
            out[role] = round(out.get(role, 0.0) + seconds, 1)
        return out


EXTRA_ENV: dict[str, str] = {}  # --env KEY=VALUE: set for the pipeline's process (and so its Ray workers)


def run_pipeline(data: dict, out: Path, cpus: int, n: int, address: str | None = None) -> dict:
    args = [
        sys.executable,
        "-m",
        "vbench_ray.cli",
        "run",
        str(REPO / "configs" / "cove.yaml"),
        f"data.checklist={data['checklist']}",
        f"data.source_dir={data['source_dir']}",
        f"data.edited_dir={data['edited_dir']}",
        f"output.dir={out}",
        "metrics.enabled=[SSIM,MSM,MF]",
        "metrics.exclude.SSIM.categories=[]",
        "metrics.exclude.MF.categories=[]",
        f"ray.num_cpus={cpus}",
        "wandb.mode=disabled",
        "report.enabled=false",
    ]
    if address:
        args.append(f"ray.address={address}")
    elif shutil.which("taskset"):
        args = ["taskset", "-c", f"0-{cpus - 1}"] + args
    start = time.time()
    popen = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAY_ADDRESS": "", **EXTRA_ENV},
    )
    cpu = CpuAccount(popen.pid)
    cpu.start()
    stdout, stderr = popen.communicate()
    cpu.stop()
    proc = subprocess.CompletedProcess(args, popen.returncode, stdout, stderr)
    wall = time.time() - start
    if proc.returncode != 0:
        raise RuntimeError(f"run with {cpus} CPUs failed:\n{proc.stderr[-3000:]}")
    first = min(p.stat().st_mtime for p in (out / "cases").glob("part-*.parquet"))
    import pyarrow.parquet as pq

    table = pq.read_table(out / "cases", columns=["at_frames"] + list(METRICS))
    ats = [a for a in table.column("at_frames").to_pylist() if a]
    return {
        "cpus": cpus,
        "wall_s": wall,
        "cases_per_s": n / wall,
        "first_row_s": first - start,
        "cpu_seconds": cpu.by_role(),
        "first_decoded_s": min(ats) - start if ats else None,
        "timing": json.loads((out / "summary.json").read_text()).get("timing"),
        "stream_s": max(ats) - min(ats) if ats else None,
        "means": {m: float(np.nanmean(np.array(table.column(m).to_pylist(), dtype=float))) for m in METRICS},
    }


OFFICIAL = r'''
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[4])
import decord
from omegaconf import OmegaConf
from vbench_ray.metrics.base import build_metric
name, checklist, root = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = OmegaConf.load(sys.argv[4] + "/configs/cove.yaml").metrics[name]
metric = build_metric(name, cfg)
metric.setup()
from vbench_ray.video.io import VideoInfo
def frames(path):
    vr = decord.VideoReader(path, num_threads=1)
    h, w = vr[0].shape[:2]
    info = VideoInfo(path=path, num_frames=len(vr), fps=float(vr.get_avg_fps()), height=h, width=w, backend="decord")
    return vr.get_batch(metric.sampling().indices(info)).asnumpy()
scores = []
for task in json.load(open(checklist)):
    e = frames(f"{root}/edited/{task['id']}.mp4")
    s = frames(f"{root}/{task['videoA_path']}") if metric.needs_source else None
    scores.append(metric.compute(e, s))
print(json.dumps({"mean": float(np.nanmean(scores))}))
'''


def run_official(data: dict, n: int, core: int = 0) -> dict:
    """One process per metric, sequential, each decoding its own frames with decord, on one core (``core``)."""
    out = {}
    total = 0.0
    for m in METRICS:
        args = [sys.executable, "-c", OFFICIAL, m, str(data["checklist"]), str(data["source_dir"]), str(REPO)]
        if shutil.which("taskset"):
            args = ["taskset", "-c", str(core)] + args
        start = time.time()
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        )
        seconds = time.time() - start
        if proc.returncode != 0:
            raise RuntimeError(f"official-style {m} failed:\n{proc.stderr[-3000:]}")
        out[m] = {"seconds": seconds, **json.loads(proc.stdout.strip().splitlines()[-1])}
        total += seconds
    out["total_s"] = total
    out["cases_per_s"] = n / total
    return out


PLAIN = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from omegaconf import OmegaConf
from vbench_ray.metrics.stage import FrameMetricsStage
repo, checklist, source_dir, edited_dir, k, n, start_at = sys.argv[1:8]
cfg = OmegaConf.merge(OmegaConf.load(repo + "/configs/base.yaml"), OmegaConf.load(repo + "/configs/cove.yaml"))
specs = {m: OmegaConf.to_container(cfg.metrics[m]) for m in sys.argv[8].split(",")}
tasks = json.load(open(checklist))
rows = [{"case_id": str(t["id"]), "source_path": f"{source_dir}/{t['videoA_path']}",
         "edited_path": f"{edited_dir}/{t['id']}.mp4"} for t in tasks]
stage = FrameMetricsStage(specs, cfg.video.backend)
stage(rows[0])  # imports, the metrics' tables: what a Ray worker's first task pays, outside the timed part
time.sleep(max(0.0, float(start_at) - time.time()))  # every process starts its timed part at once
t0 = time.time()
mine = rows[int(k) :: int(n)]
for r in mine:
    stage(r)
print(json.dumps({"seconds": time.time() - t0, "cases": len(mine)}))
'''


def plain_ceiling(data: dict, k: int, lead_s: float = 20.0) -> dict:
    """The machine's own ceiling for ``k`` cores, without Ray: ``k`` plain processes, process ``i`` pinned to core
    ``i`` (``taskset``), each running the decode stage (``FrameMetricsStage``, the run's metrics and video backend)
    over every ``k``-th case, all starting their timed part at the same moment after one warm-up case each.
    Cases/s = all cases / the slowest process's seconds: what k cores give this work when nothing else runs,
    so the stream's efficiency can be read against the machine's (memory bandwidth, caches, turbo), not against
    a perfect k/2."""
    start_at = time.time() + lead_s  # past every process's imports and warm-up case
    procs = []
    for i in range(k):
        args = [sys.executable, "-c", PLAIN, str(REPO), str(data["checklist"]), str(data["source_dir"])]
        args += [str(data["edited_dir"]), str(i), str(k), repr(start_at), ",".join(METRICS)]
        if shutil.which("taskset"):
            args = ["taskset", "-c", str(i)] + args
        env = {**os.environ, "OMP_NUM_THREADS": "1", **EXTRA_ENV}
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outs = []
    for p in procs:
        stdout, stderr = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"plain process failed:\n{stderr[-3000:]}")
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    slowest = max(o["seconds"] for o in outs)
    cases = sum(o["cases"] for o in outs)
    return {"processes": k, "cases": cases, "seconds": slowest, "cases_per_s": cases / slowest}


def in_process(data: dict, n: int) -> dict:
    """Per-case seconds of the decode stage vs the official loop, both in this process on one core (no Ray):
    isolates the per-case work from scheduling, with the stage's top functions by cumulative time."""
    import cProfile
    import io
    import pstats

    import decord
    from omegaconf import OmegaConf

    from vbench_ray.metrics.base import build_metric
    from vbench_ray.metrics.stage import FrameMetricsStage
    from vbench_ray.video.io import VideoInfo

    cfg = OmegaConf.load(REPO / "configs" / "cove.yaml").metrics
    specs = {m: OmegaConf.to_container(cfg[m]) for m in METRICS}
    tasks = json.loads(Path(data["checklist"]).read_text())[:n]
    rows = [
        {
            "case_id": str(t["id"]),
            "source_path": str(Path(data["source_dir"]) / t["videoA_path"]),
            "edited_path": str(Path(data["edited_dir"]) / f"{t['id']}.mp4"),
        }
        for t in tasks
    ]
    stage = FrameMetricsStage(specs, "decord")
    stage(rows[0])  # warm up
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for r in rows:
        stage(r)
    prof.disable()
    stage_s = (time.perf_counter() - t0) / len(rows)
    metrics = [build_metric(m, cfg[m]) for m in METRICS]

    def frames(path, metric):
        vr = decord.VideoReader(path, num_threads=1)
        h, w = vr[0].shape[:2]
        info = VideoInfo(
            path=path, num_frames=len(vr), fps=float(vr.get_avg_fps()), height=h, width=w, backend="decord"
        )
        return vr.get_batch(metric.sampling().indices(info)).asnumpy()

    t0 = time.perf_counter()
    for r in rows:
        for m in metrics:
            m.compute(frames(r["edited_path"], m), frames(r["source_path"], m) if m.needs_source else None)
    official_s = (time.perf_counter() - t0) / len(rows)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(14)
    return {"stage_s_per_case": stage_s, "official_s_per_case": official_s, "profile": text.getvalue()}


def bytecode(compile_now: bool) -> None:
    """Say whether Ray's modules have compiled bytecode (without it, every Ray process: dashboard, agents, each
    worker, compiles Ray's sources as it imports them: on the GPU machine's bundle that added ~1 s to ``import ray``
    and ~5 s to a run's start); with ``compile_now``, compile them and the project's like ``pip install`` does."""
    import compileall
    import importlib.util

    ray_dir = Path(importlib.util.find_spec("ray").origin).parent
    if compile_now:
        t0 = time.time()
        for d in (ray_dir, REPO / "vbench_ray"):
            compileall.compile_dir(str(d), quiet=1, workers=os.cpu_count() or 1)
        print(f"bytecode compiled in {time.time() - t0:.1f} s: {ray_dir}, {REPO / 'vbench_ray'}", flush=True)
    has = any((ray_dir / "__pycache__").glob("*.pyc"))
    print(
        f"Ray's bytecode: {'compiled' if has else 'NONE (every Ray process compiles Ray; see --compile-bytecode)'}"
        f"{'; PYTHONDONTWRITEBYTECODE is set' if os.environ.get('PYTHONDONTWRITEBYTECODE') else ''}",
        flush=True,
    )


def n_cases(run: dict) -> int:
    return max(1, ((run["timing"] or {}).get("stages", {}).get("frames", {}) or {}).get("rows", 1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=384)
    ap.add_argument("--unique", type=int, default=8)
    ap.add_argument("--size", default="832x480")
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--cpus", default="2,4,8,all")
    ap.add_argument("--out", default=None, help="write the results as JSON here too")
    ap.add_argument("--skip-official", action="store_true")
    ap.add_argument("--official-only", action="store_true", help="only the official-way reference")
    ap.add_argument(
        "--concurrent-official",
        action="store_true",
        help="run the official way at the same time as the runs, on the first core none of them uses "
        "(one call on the GPU machine fits both; the two share the memory bus and L3 cache)",
    )
    ap.add_argument(
        "--in-process",
        type=int,
        default=0,
        metavar="N",
        help="only compare the decode stage with the official loop on N cases in this process",
    )
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="also run k plain processes (no Ray) pinned to k cores for each --cpus k: the machine's own scaling of "
        "the decode stage, printed beside the stream's",
    )
    ap.add_argument(
        "--attach",
        action="store_true",
        help="also time a run attached to a `ray start` cluster started beforehand (the ray job submit "
        "path: no Ray start in the run)",
    )
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment for the pipeline runs (e.g. OPENBLAS_NUM_THREADS=1), repeatable",
    )
    ap.add_argument(
        "--compile-bytecode",
        action="store_true",
        help="compile Ray's and the project's bytecode first, as `pip install` does (a bundle unpacked "
        "with PYTHONDONTWRITEBYTECODE=1 has none, and every Ray process then compiles Ray anew)",
    )
    args = ap.parse_args()
    EXTRA_ENV.update(kv.split("=", 1) for kv in args.env)
    bytecode(args.compile_bytecode)
    w, h = map(int, args.size.split("x"))
    total_cpus = os.cpu_count() or 2
    cpus = sorted({total_cpus if c == "all" else min(int(c), total_cpus) for c in args.cpus.split(",") if c})
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        data = make_data(Path(tmp) / "cove", args.cases, args.unique, args.frames, w, h)
        print(
            f"data: {args.cases} cases ({args.unique} distinct pairs) at {w}x{h}, {args.frames} frames, "
            f"written in {time.time() - t0:.1f} s; {total_cpus} CPUs here",
            flush=True,
        )
        if args.in_process:
            out = in_process(data, args.in_process)
            print(out["profile"])
            print(
                f"per case, one process: decode stage {out['stage_s_per_case']:.3f} s, official loop "
                f"{out['official_s_per_case']:.3f} s"
            )
            return
        runs = []
        beside = None
        if args.concurrent_official and not args.skip_official and not args.official_only:
            if max(cpus) >= total_cpus:
                raise SystemExit("--concurrent-official needs a core the runs do not use: drop 'all' from --cpus")
            import threading

            beside = {}
            thread = threading.Thread(target=lambda: beside.update(run_official(data, args.cases, core=max(cpus))))
            thread.start()
            print(f"the official way runs meanwhile on core {max(cpus)}", flush=True)
        for c in cpus if not args.official_only else []:
            r = run_pipeline(data, Path(tmp) / f"run{c}", c, args.cases)
            runs.append(r)
            print(
                f"  {c:3d} CPUs: {r['wall_s']:7.1f} s  {r['cases_per_s']:6.2f} cases/s  first case decoded after "
                f"{r['first_decoded_s']:5.1f} s, first row on disk after {r['first_row_s']:5.1f} s, decoding "
                f"spanned {r['stream_s']:.1f} s",
                flush=True,
            )
            print(
                f"        CPU seconds by role: {r['cpu_seconds']}; stage seconds per case "
                f"{(r['timing'] or {}).get('stages', {}).get('frames', {}).get('seconds_total', 0) / n_cases(r):.3f}",
                flush=True,
            )
            t = r["timing"] or {}
            print(
                "        run's own timing (s from its start): "
                + ", ".join(f"{k} {t[k]}" for k in ("ray_ready", "first_row", "stream_done", "judged") if k in t),
                flush=True,
            )
        ceiling = {}
        for c in cpus if args.ceiling and not args.official_only else []:
            ceiling[c] = plain_ceiling(data, c)
            print(
                f"  {c:3d} plain processes: {ceiling[c]['seconds']:7.1f} s  {ceiling[c]['cases_per_s']:6.2f} cases/s",
                flush=True,
            )
        attached = run_attached(data, Path(tmp) / "attached", cpus[-1], args.cases) if args.attach else None
        if beside is not None:
            thread.join()
            official = beside
        else:
            official = None if args.skip_official else run_official(data, args.cases)
    if not runs:
        print(json.dumps({"official": official, "attached": attached}, indent=1))
        if args.out:
            Path(args.out).write_text(json.dumps({"runs": [], "official": official, "attached": attached}, indent=2))
        return
    base = next((r for r in runs if r["cpus"] == 2), runs[0])
    # wall: launch to exit (Ray's start, the first tasks' imports and the exit included); stream: the cases decoded
    # between the first and the last case leaving the decode stage, i.e. the throughput once running
    print(
        "\n| CPUs | wall s | cases/s (wall) | efficiency vs 2 CPUs (wall) | cases/s (stream) | efficiency vs 2 CPUs "
        "(stream) | start to first row s | stage s per case |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        eff = (r["cases_per_s"] / base["cases_per_s"]) / (r["cpus"] / base["cpus"])
        stream = (args.cases - 1) / r["stream_s"] if r["stream_s"] else float("nan")
        base_stream = (args.cases - 1) / base["stream_s"] if base["stream_s"] else float("nan")
        stage = (r["timing"] or {}).get("stages", {}).get("frames", {}).get("seconds_total", 0) / n_cases(r)
        print(
            f"| {r['cpus']} | {r['wall_s']:.1f} | {r['cases_per_s']:.2f} | {eff:.2f} | {stream:.2f} | "
            f"{(stream / base_stream) / (r['cpus'] / base['cpus']):.2f} | {r['first_row_s']:.1f} | {stage:.3f} |"
        )
    if ceiling:
        print(
            "\n| CPUs | stream cases/s | stream efficiency vs 2 CPUs | plain processes cases/s | plain efficiency vs 2 "
            "processes | stream / plain efficiency | stream / plain cases/s |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        plain_base = ceiling.get(base["cpus"])
        base_stream = (args.cases - 1) / base["stream_s"] if base["stream_s"] else float("nan")
        for r in runs:
            c = ceiling.get(r["cpus"])
            if not c or not plain_base:
                continue
            stream = (args.cases - 1) / r["stream_s"] if r["stream_s"] else float("nan")
            s_eff = (stream / base_stream) / (r["cpus"] / base["cpus"])
            p_eff = (c["cases_per_s"] / plain_base["cases_per_s"]) / (r["cpus"] / base["cpus"])
            print(
                f"| {r['cpus']} | {stream:.2f} | {s_eff:.2f} | {c['cases_per_s']:.2f} | {p_eff:.2f} | "
                f"{s_eff / p_eff:.2f} | {stream / c['cases_per_s']:.2f} |"
            )
    if official:
        per = " + ".join(f"{m} {official[m]['seconds']:.1f} s" for m in METRICS)
        where = f"core {max(cpus)}, beside the runs" if args.concurrent_official else "1 core"
        print(
            f"\nofficial way (one process per metric, sequential, {where}): {per} = {official['total_s']:.1f} s, "
            f"{official['cases_per_s']:.2f} cases/s, CPU-s per case {official['total_s'] / args.cases:.3f}"
        )
        print(f"this project on 2 CPUs vs the official way: {official['total_s'] / base['wall_s']:.2f}x faster (wall)")
        for m in METRICS:
            print(f"  {m}: mean {base['means'][m]:.4f} here, {official[m]['mean']:.4f} the official way")
    if attached:
        print(
            f"\nattached to a running cluster ({attached['cpus']} CPUs): {attached['wall_s']:.1f} s, "
            f"{attached['cases_per_s']:.2f} cases/s, first row on disk after {attached['first_row_s']:.1f} s"
        )
    if args.out:
        Path(args.out).write_text(
            json.dumps({"runs": runs, "official": official, "attached": attached, "ceiling": ceiling}, indent=2)
        )


if __name__ == "__main__":
    main()
