"""Is a case dearer inside a Ray worker than in a plain process? Same decode stage, same cases, both ways.

    python tests/perf/worker_cost.py [--cases 16] [--cpus 2]

Runs ``FrameMetricsStage`` (SSIM+MSM+MF) over the same cases (a) in this process pinned to one core and (b) in
one Ray task on a local Ray of ``--cpus`` CPUs pinned to as many cores, and prints seconds per case and the CPU
seconds of each thread of the process that did the work (by thread name), so a thread pool that burns CPU
beside the work shows up. No assert: numbers for the note.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402  (the synthetic CoVEBench writer)

REPO = Path(__file__).resolve().parents[2]


def thread_cpu() -> dict[str, float]:
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def work(rows: list[dict]) -> dict:
    from omegaconf import OmegaConf

    from vbench_ray.metrics.stage import FrameMetricsStage

    cfg = OmegaConf.load(REPO / "configs" / "cove.yaml").metrics
    stage = FrameMetricsStage({m: OmegaConf.to_container(cfg[m]) for m in scale.METRICS}, "decord")
    stage(rows[0])
    before, t0, c0 = thread_cpu(), time.perf_counter(), time.process_time()
    for r in rows:
        stage(r)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    after = thread_cpu()
    threads = {
        k: round(after.get(k, 0) - before.get(k, 0), 2) for k in after if after.get(k, 0) - before.get(k, 0) > 0.05
    }
    return {
        "s_per_case": wall / len(rows),
        "cpu_per_case": cpu / len(rows),
        "threads": threads,
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "affinity": sorted(os.sched_getaffinity(0)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=16)
    ap.add_argument("--cpus", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = scale.make_data(Path(tmp) / "c", args.cases, 4, 81, 832, 480)
        tasks = json.loads(Path(data["checklist"]).read_text())
        rows = [
            {
                "case_id": str(t["id"]),
                "source_path": str(Path(data["source_dir"]) / t["videoA_path"]),
                "edited_path": str(Path(data["edited_dir"]) / f"{t['id']}.mp4"),
            }
            for t in tasks
        ]
        os.sched_setaffinity(0, {0})
        plain = work(rows)
        print("plain process, 1 core:", json.dumps(plain), flush=True)
        os.sched_setaffinity(0, set(range(args.cpus)))  # Ray's processes inherit this
        import ray

        ray.init(num_cpus=args.cpus, include_dashboard=False, _node_ip_address="127.0.0.1")
        in_ray = ray.get(ray.remote(num_cpus=1)(work).remote(rows))
        print("Ray task:", json.dumps(in_ray), flush=True)
        in_ray2 = ray.get([ray.remote(num_cpus=1)(work).remote(rows) for _ in range(args.cpus)])
        print(f"{args.cpus} Ray tasks at once:", json.dumps(in_ray2), flush=True)
        ray.shutdown()


if __name__ == "__main__":
    main()
