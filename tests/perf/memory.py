"""Bounded memory at benchmark scale: driver peak RSS, object-store peak and time to first row, by case count.

    .venv/bin/python tests/perf/memory.py                 # 1k, 10k, 100k cases
    .venv/bin/python tests/perf/memory.py 1000 10000      # chosen sizes

Each size is a synthetic CoVEBench checklist whose N tasks all point at the same few tiny videos (the edited
videos are hard links, `{id}.mp4`, so N cases cost N directory entries, not N videos), run with SSIM only on a
local Ray runtime, in a fresh process per size (so `ru_maxrss` is that run's driver peak). Printed per size:
cases, seconds to load, to the first row on disk (`summary.timing.first_row`), to the end, rows/s, the driver's
peak RSS, its RSS growth per 1k cases over the baseline after `import ray`, and the object store's peak use
(sampled every 0.2 s from the raylet: total minus available `object_store_memory`).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def make_checklist(root: Path, n: int) -> dict:
    """N tasks over the 8 synthetic ones' videos; edited videos hard-linked per id."""
    from vbench_ray.synth.cove import synth_cove

    base = synth_cove(root / "base", n=8, seed=0, **({}))
    tasks = json.loads(Path(base["checklist"]).read_text())
    edited = root / "edited"
    edited.mkdir()
    out = []
    for i in range(n):
        t = dict(tasks[i % len(tasks)])
        t["id"] = f"{i:07d}"
        os.link(Path(base["edited_dir"]) / f"{tasks[i % len(tasks)]['id']}.mp4", edited / f"{t['id']}.mp4")
        out.append(t)
    checklist = root / "checklist.json"
    checklist.write_text(json.dumps(out))
    return {"checklist": checklist, "source_dir": Path(base["source_dir"]), "edited_dir": edited}


def one(n: int) -> dict:
    """Run N cases in this process; returns the measurements."""
    import ray  # noqa: F401  (the baseline includes Ray's own import)

    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    root = Path(tempfile.mkdtemp(prefix=f"vbr-mem-{n}-"))
    t = time.perf_counter()
    data = make_checklist(root, n)
    make_s = time.perf_counter() - t
    cfg = load_config(REPO / "configs" / "cove.yaml", [
        f"data.checklist={data['checklist']}", f"data.source_dir={data['source_dir']}",
        f"data.edited_dir={data['edited_dir']}", f"output.dir={root / 'run'}", "metrics.enabled=[SSIM]",
        "wandb.mode=disabled", "report.enabled=false", "ray.num_cpus=4", "stats.bootstrap_samples=200"])
    peak = {"store": 0.0}
    done = threading.Event()

    def sample():
        import ray

        while not done.is_set():
            if ray.is_initialized():
                try:
                    total = ray.cluster_resources().get("object_store_memory", 0.0)
                    free = ray.available_resources().get("object_store_memory", total)
                    peak["store"] = max(peak["store"], total - free)
                except Exception:
                    pass
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()
    t = time.perf_counter()
    result = run(cfg)
    done.set()
    timing = result.summary.get("timing", {})
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"cases": n, "rows": result.summary.get("n_rows"), "make_s": round(make_s, 1),
            "loaded_s": timing.get("cases_loaded"), "first_row_s": timing.get("first_row"),
            "stream_s": timing.get("stream_done"), "total_s": round(time.perf_counter() - t, 1),
            "rows_per_s": round(n / max(1e-9, timing.get("stream_done") or 1e-9), 1),
            "driver_peak_rss_mb": round(rss_kb / 1024), "rss_over_baseline_mb": round((rss_kb - baseline_kb) / 1024),
            "object_store_peak_mb": round(peak["store"] / 2**20, 1)}


def main(sizes: list[int]) -> None:
    print(f"{'cases':>7} {'rows':>7} {'load s':>7} {'1st row s':>9} {'stream s':>9} {'rows/s':>7} "
          f"{'driver RSS MB':>13} {'over base MB':>12} {'store peak MB':>13}", flush=True)
    for n in sizes:
        proc = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True,
                              env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode or not lines:
            print(f"{n:>7} failed: {proc.stderr[-1500:]}", flush=True)
            continue
        r = json.loads(lines[-1])
        print(f"{r['cases']:>7} {r['rows']:>7} {r['loaded_s']:>7} {r['first_row_s']:>9} {r['stream_s']:>9} "
              f"{r['rows_per_s']:>7} {r['driver_peak_rss_mb']:>13} {r['rss_over_baseline_mb']:>12} "
              f"{r['object_store_peak_mb']:>13}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        import logging

        logging.basicConfig(level=logging.WARNING)
        print(json.dumps(one(int(sys.argv[2]))))
    else:
        main([int(a) for a in sys.argv[1:]] or [1000, 10000, 100000])
