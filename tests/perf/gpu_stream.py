"""The five-metric CoVEBench stream on GPUs: SSIM (decode stage, CPU) and the MSM (RAFT-large), AES, TQ and SRC pools
on CUDA, random weights at the real model sizes, synthetic CoVEBench videos (1280x720, 121 frames by default).

    python tests/perf/gpu_stream.py --cases 626 --gpus 1,2 [--work DIR] [--src-probe] [--set KEY=VALUE]
    python tests/perf/gpu_stream.py --tiny --cases 6 --gpus 0      # CPU smoke test: toy models, no CUDA

Each ``--gpus`` entry is one ``vbench-ray run`` (the CLI, every default but what this needs: the paths, the
devices, SRC accepting every box and mask of its random models so it does its full work) in a fresh local Ray that
sees that many GPUs (``CUDA_VISIBLE_DEVICES``). Printed per run: wall (launch to exit), cases/s, the run's own
timing (Ray ready, first row), each stage's first and last row (seconds from launch) and GPU time per case (mean of
its ``seconds_<stage>`` column), the pool plan the run logged (actors and GPU fraction per pool), GPU utilisation
per GPU (``nvidia-smi`` every 0.5 s: mean over the run and over the stream, first to last SRC row), peak GPU memory
per GPU and per pool process, each metric's mean, the projection to CoVEBench's 626 tasks (the wall plus the
remaining cases at the last stage's first-to-last-row rate) and, per metric, how far apart its values are over the
copies of one input pair (case ``i`` reuses pair ``i % --unique``: 0 for a metric that depends on its inputs only);
between runs, how many cases' values differ. ``--src-probe`` then runs SRC in this process on fixed inputs, a case
alone twice and inside a pool call of four: whether a case's SRC depends on the cases sharing its pool call; and
SRC's throughput there (``--probe-cases``).
``--work DIR`` keeps the models and videos between calls (a warm GPU machine keeps /tmp). No assert: timings
belong in the note, not in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "perf"))

POOLS = ("MSM", "AES", "TQ", "SRC")
TASKS = 626  # CoVEBench's tasks
STAGES = ("frames",) + POOLS
ENTITIES = ["young woman on the left", "red car"]


def build(work: Path, tiny: bool, device: str) -> dict[str, dict]:
    """``{metric: overrides}``: random-weight AES, TQ, SRC (tests/perf/model_metrics.py) and RAFT-large."""
    from model_metrics import SRC_ACCEPT_ALL, build_models

    done = work / "models.json"
    if done.exists():
        return json.loads(done.read_text())
    cfgs = build_models(work / "models", tiny, device, ["AES", "TQ", "SRC"])
    keep = {"AES": ("encoder", "weights"), "TQ": ("weights",), "SRC": ("grounding_dino", "sam2", "dinov2")}
    out = {m: {k: cfgs[m][k] for k in keys} for m, keys in keep.items()}
    out["SRC"].update(SRC_ACCEPT_ALL)
    if tiny:  # toy models throughout (TQ's tiny arch, SRC's few frames) and Farneback for MSM
        out["TQ"].update(
            {k: cfgs["TQ"][k] for k in ("arch", "clip_len", "num_clips", "frame_interval", "fsize", "aligned")}
        )
        out["SRC"]["max_frames"] = cfgs["SRC"]["max_frames"]
        out["MSM"] = {"flow": "farneback"}
    else:
        import torch
        from torchvision.models.optical_flow import raft_large

        torch.manual_seed(0)
        torch.save(raft_large(weights=None).state_dict(), work / "models" / "raft_weights.pth")
        out["MSM"] = {"flow": "raft", "raft_weights": str(work / "models" / "raft_weights.pth")}
    done.write_text(json.dumps(out))
    return out


def data(work: Path, cases: int, unique: int, frames: int, w: int, h: int) -> dict:
    """A synthetic CoVEBench checklist of ``cases`` tasks over ``unique`` distinct pairs (tests/perf/scale.py's),
    each task with preserved entities for SRC."""
    from scale import make_data

    root = work / f"cove_{cases}_{unique}_{w}x{h}x{frames}"
    if not (root / "checklist.json").exists():
        if root.exists():
            import shutil

            shutil.rmtree(root)
        make_data(root, cases, unique, frames, w, h)
        tasks = json.loads((root / "checklist.json").read_text())
        for t in tasks:
            t["preserved_entities"] = ENTITIES
        (root / "checklist.json").write_text(json.dumps(tasks))
    return {"checklist": root / "checklist.json", "source_dir": root, "edited_dir": root / "edited"}


class GpuMonitor:
    """``nvidia-smi`` every 0.5 s: utilisation and memory per GPU, and the peak memory of each process."""

    def __init__(self):
        self.samples: list[tuple[float, int, float, float]] = []  # (time, gpu, util %, memory MiB)
        self.procs: dict[int, float] = {}
        self.names: dict[int, str] = {}  # read while the process lives (Ray's actors are gone by the end)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        q = ["nvidia-smi", "--format=csv,noheader,nounits"]
        while not self._stop.is_set():
            now = time.time()
            try:
                gpus = subprocess.run(
                    q + ["--query-gpu=index,utilization.gpu,memory.used"], capture_output=True, text=True, timeout=5
                ).stdout
                apps = subprocess.run(
                    q + ["--query-compute-apps=pid,used_memory"], capture_output=True, text=True, timeout=5
                ).stdout
            except (OSError, subprocess.SubprocessError):
                return
            for line in gpus.strip().splitlines():
                i, util, mem = (x.strip() for x in line.split(","))
                self.samples.append((now, int(i), float(util), float(mem)))
            for line in apps.strip().splitlines():
                parts = [x.strip() for x in line.split(",")]
                if len(parts) == 2 and parts[0].isdigit() and parts[1].replace(".", "").isdigit():
                    self.procs[int(parts[0])] = max(self.procs.get(int(parts[0]), 0.0), float(parts[1]))
                    if int(parts[0]) not in self.names or self.names[int(parts[0])] == "?":
                        self.names.update(process_names([int(parts[0])]))
            self._stop.wait(0.5)

    def utilisation(self, start: float = 0.0, end: float = float("inf")) -> dict[int, float]:
        by: dict[int, list[float]] = {}
        for t, i, util, _ in self.samples:
            if start <= t <= end:
                by.setdefault(i, []).append(util)
        return {i: round(sum(v) / len(v), 1) for i, v in sorted(by.items())}

    def peak_memory(self) -> dict[int, float]:
        out: dict[int, float] = {}
        for _, i, _, mem in self.samples:
            out[i] = max(out.get(i, 0.0), mem)
        return out


def process_names(pids) -> dict[int, str]:
    """Ray sets each actor's process title (``ray::...Stage_SRC...``): the pool a GPU process belongs to."""
    out = {}
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmd = "?"
        hit = re.search(r"Stage_(\w+)|MapBatches\((\w+)\)", cmd)
        out[pid] = (hit.group(1) or hit.group(2)) if hit else cmd[:60]
    return out


def run(d: dict, models: dict, out: Path, n: int, gpus: int, device: str, extra: list[str]) -> dict:
    import pyarrow.parquet as pq

    args = [
        sys.executable,
        "-m",
        "vbench_ray.cli",
        "run",
        str(REPO / "configs" / "cove.yaml"),
        f"data.checklist={d['checklist']}",
        f"data.source_dir={d['source_dir']}",
        f"data.edited_dir={d['edited_dir']}",
        f"output.dir={out}",
        "metrics.enabled=[SSIM,MSM,AES,TQ,SRC]",
        "metrics.exclude.SSIM.categories=[]",
        "wandb.mode=disabled",
        "report.enabled=false",
    ]
    for m, keys in models.items():
        args += [f"metrics.{m}.{k}={v}" for k, v in keys.items()]
        if m != "MSM" or keys.get("flow") == "raft":
            args.append(f"metrics.{m}.device={device}")
    args += extra
    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONUNBUFFERED": "1"}
    if device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    start = time.time()
    with GpuMonitor() as mon:
        proc = subprocess.run(args, capture_output=True, text=True, env=env)
    names = mon.names
    wall = time.time() - start
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"run on {gpus} GPU(s) failed (exit {proc.returncode}):\n{log[-4000:]}")
    table = pq.read_table(out / "cases").to_pydict()
    stages = {}
    for s in STAGES:
        at = [a for a in table.get(f"at_{s}", []) if a]
        secs = [x for x in table.get(f"seconds_{s}", []) if x is not None]
        if at:
            stages[s] = {
                "first_s": round(min(at) - start, 1),
                "last_s": round(max(at) - start, 1),
                "s_per_case": round(sum(secs) / max(1, len(secs)), 4),
                "rows": len(at),
            }
    src_at = [a for a in table.get("at_SRC", []) if a] or [start]
    errors = {c: sum(1 for v in vals if v) for c, vals in table.items() if c.startswith("error_")}
    means = {m: _mean(table.get(m, [])) for m in ("SSIM",) + POOLS}
    plan = [line.split("stage ", 1)[1] for line in log.splitlines() if "pool of" in line and "stage " in line]
    fitted = [line for line in log.splitlines() if "fitted by cost" in line]
    loads = [line for line in log.splitlines() if re.search(r"pool \w+ \(pid \d+.*(loading|loaded in)", line)]
    per_case = {
        m: {str(c): v for c, v in zip(table["case_id"], table.get(m, [])) if v is not None and v == v}
        for m in ("SSIM",) + POOLS
    }
    return {
        "per_case": per_case,
        "gpus": gpus,
        "cases": n,
        "wall_s": round(wall, 1),
        "cases_per_s": round(n / wall, 3),
        "timing": json.loads((out / "summary.json").read_text()).get("timing"),
        "stages": stages,
        "gpu_util_run": mon.utilisation(),
        "gpu_util_stream": mon.utilisation(min(src_at), max(src_at)),
        "gpu_peak_mib": mon.peak_memory(),
        "proc_peak_mib": {f"{names.get(p, p)}:{p}": m for p, m in sorted(mon.procs.items())},
        "plan": plan,
        "fitted": fitted,
        "loads": loads,
        "errors": errors,
        "means": means,
    }


def spread_over_copies(values: dict[str, float], unique: int) -> tuple[float, int]:
    """The largest (max - min) of a metric over the copies of one input pair (case ``i`` is pair ``i % unique``:
    the same two videos, the same entities) and how many pairs differ at all: a metric that depends only on its
    inputs gives 0 and 0."""
    by: dict[int, list[float]] = {}
    for case, v in values.items():
        by.setdefault(int(case) % unique, []).append(v)
    spreads = [max(v) - min(v) for v in by.values()]
    return (max(spreads) if spreads else 0.0), sum(1 for x in spreads if x > 0)


def projected(r: dict, tasks: int) -> float:
    """Seconds for ``tasks`` cases: this run's wall plus the rest at the rate of its last stage to finish, measured
    between that stage's first and last row (its steady state: the start is paid once, already in the wall)."""
    last = max(r["stages"].values(), key=lambda v: v["last_s"])
    rate = (last["last_s"] - last["first_s"]) / max(1, last["rows"] - 1)
    return r["wall_s"] + max(0, tasks - r["cases"]) * rate


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None and v == v]
    return round(sum(vals) / len(vals), 6) if vals else None


def show(r: dict) -> None:
    t = r["timing"] or {}
    print(
        f"\n== {r['gpus']} GPU(s), {r['cases']} cases: wall {r['wall_s']} s, {r['cases_per_s']} cases/s; Ray ready "
        f"{t.get('ray_ready')} s, first row {t.get('first_row')} s (the run's own clock)",
        flush=True,
    )
    for line in r["plan"] + r["fitted"]:
        print("   plan:", line.strip()[:200])
    for line in r.get("loads", []):
        print("   load:", line.strip()[:240])
    print("   | stage | first row s | last row s | s per case in its actor | rows |")
    for s, v in r["stages"].items():
        print(f"   | {s} | {v['first_s']} | {v['last_s']} | {v['s_per_case']} | {v['rows']} |")
    print(
        f"   GPU util % (run): {r['gpu_util_run']}; (first to last SRC row): {r['gpu_util_stream']}; "
        f"peak MiB per GPU {r['gpu_peak_mib']}"
    )
    print(f"   peak MiB per process: {r['proc_peak_mib']}")
    print(f"   errors: {r['errors']}; means: {r['means']}", flush=True)
    for m in ("SSIM",) + POOLS:
        spread, pairs = spread_over_copies(r["per_case"].get(m, {}), r["unique"])
        print(f"   {m}: over the copies of one input pair, max - min {spread:.6f} ({pairs} pair(s) differ)")
    print(f"   projected to {TASKS} tasks: {projected(r, TASKS) / 60:.2f} min", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=626)
    ap.add_argument("--unique", type=int, default=8, help="distinct source/edited pairs (hard-linked per case)")
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--frames", type=int, default=121)
    ap.add_argument("--gpus", default="1,2", help="GPU counts, one run each (0: CPU, with --tiny)")
    ap.add_argument("--tiny", action="store_true", help="toy models, CPU (smoke test)")
    ap.add_argument("--work", default="/tmp/gpu_stream", help="models and videos, kept between calls")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more run overrides")
    ap.add_argument("--src-probe", action="store_true", help="then SRC on fixed inputs, alone and batched")
    ap.add_argument("--probe-cases", type=int, default=32, help="--src-probe's throughput: cases")
    ap.add_argument("--json", default=None, help="append each run's result here (one JSON per line)")
    args = ap.parse_args()
    device = "cpu" if args.tiny else "cuda"
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    models = build(work, args.tiny, device)
    w, h = map(int, args.size.split("x"))
    d = data(work, args.cases, args.unique, args.frames, w, h)
    print(
        f"models and {args.cases} cases ({args.unique} distinct pairs, {w}x{h}x{args.frames}) ready in "
        f"{time.time() - t0:.1f} s",
        flush=True,
    )
    results = []
    for g in (int(x) for x in args.gpus.split(",") if x):
        out = work / f"run_{g}gpu_{int(time.time())}"
        r = run(d, models, out, args.cases, g, device, args.set)
        r["unique"] = args.unique
        results.append(r)
        show(r)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            print(
                f"\n{r['gpus']} vs {base['gpus']} GPU(s): wall x{base['wall_s'] / r['wall_s']:.2f}; SRC stage "
                f"(first to last row) x{_span(base, 'SRC') / max(1e-9, _span(r, 'SRC')):.2f}; projected to {TASKS} "
                f"tasks x{projected(base, TASKS) / projected(r, TASKS):.2f}; means equal: {r['means'] == base['means']}"
            )
            for m in POOLS:
                a, b = base["per_case"].get(m, {}), r["per_case"].get(m, {})
                diffs = [abs(a[c] - b[c]) for c in a.keys() & b.keys()]
                print(
                    f"   {m} per case, {r['gpus']} vs {base['gpus']} GPU(s): {sum(1 for x in diffs if x > 0)} of "
                    f"{len(diffs)} differ, by at most {max(diffs, default=0.0):.6f}"
                )
    if args.src_probe:  # after the runs: its models never share a GPU with theirs
        try:
            src_probe(d, models, device, args.unique, args.probe_cases)
        except Exception as exc:  # noqa: BLE001  (a probe failure must not hide the runs' numbers above)
            print(f"SRC probe failed: {type(exc).__name__}: {exc}", flush=True)


def src_probe(d: dict, models: dict, device: str, unique: int, cases: int) -> None:
    """SRC on fixed inputs in this process, outside Ray: case 0 alone twice (are the kernels deterministic for one
    pass layout?), first and last in a pool call of four, and the other cases alone vs in the call (equal to the last
    bit where a case's score depends on that case alone); then the throughput on ``cases`` cases (copies of the
    distinct pairs) in calls of ``pool_batch``, after one warm-up call, best of two, with its phases' seconds.
    Prints the scores to 8 decimals and PyTorch's numerics flags."""
    from dataclasses import asdict

    import torch
    from omegaconf import OmegaConf

    from vbench_ray.metrics.base import build_metric
    from vbench_ray.metrics.src import SRCConfig
    from vbench_ray.video.io import VideoReader

    cfg = OmegaConf.create(asdict(SRCConfig(**{**models["SRC"], "device": device})))
    metric = build_metric("SRC", cfg)
    metric.setup()
    tasks = json.loads(Path(d["checklist"]).read_text())[: min(8, unique)]

    def frames(path: Path):
        reader = VideoReader(path)
        return reader.read(metric.sampling().indices(reader.info))

    items = [
        (frames(Path(d["edited_dir"]) / f"{t['id']}.mp4"), frames(Path(d["source_dir"]) / t["videoA_path"]))
        for t in tasks
    ]
    items = [(e, s, {"entities": ENTITIES}) for e, s in items]
    first = items[:4]
    alone = [metric.compute_many(it) for it in ([first[0]], [first[0]], *[[it] for it in first[1:]])]
    batch, turned = metric.compute_many(first), metric.compute_many(first[1:] + first[:1])
    own = [alone[0][0]] + [a[0] for a in alone[2:]]
    same = sum(x == y for x, y in zip(own, batch)) + (turned[-1] == own[0])
    print(
        f"\nSRC probe ({len(items)} distinct cases, {len(items[0][0])} sampled frames a video): case 0 alone "
        f"{f8(alone[0][0])}, alone again {f8(alone[1][0])}; first of a call of {len(first)} {f8(batch[0])}; last of "
        f"it {f8(turned[-1])}; the other cases alone vs in the call: "
        + ", ".join(f"{f8(a)} vs {f8(b)}" for a, b in zip(own[1:], batch[1:]))
        + f"; bit-identical to alone: {same} of {len(first) + 1}; cudnn.benchmark {torch.backends.cudnn.benchmark}, "
        f"cudnn.allow_tf32 {torch.backends.cudnn.allow_tf32}, matmul.allow_tf32 {torch.backends.cuda.matmul.allow_tf32}"
        f", bf16 {cfg.bf16}",
        flush=True,
    )
    work = [items[i % len(items)] for i in range(cases)]
    step = int(cfg.pool_batch)
    metric.compute_many(work[:step])  # warm-up
    best, phases = float("inf"), {}
    for _ in range(2):
        metric.phase_seconds = {}
        began = time.perf_counter()
        for at in range(0, len(work), step):
            metric.compute_many(work[at : at + step])
        took = time.perf_counter() - began
        if took < best:
            best, phases = took, {k: round(v, 2) for k, v in metric.phase_seconds.items()}
    print(
        f"   {len(work)} cases in calls of {step}: {best:.2f} s, {len(work) / best:.3f} cases/s "
        f"({1000 * best / len(work):.0f} ms a case); phases s {phases}",
        flush=True,
    )


def f8(x) -> str:
    return f"{x:.8f}" if isinstance(x, float) else type(x).__name__


def _span(r: dict, stage: str) -> float:
    s = r["stages"].get(stage) or {}
    return (s.get("last_s") or 0.0) - (s.get("first_s") or 0.0)


if __name__ == "__main__":
    main()
