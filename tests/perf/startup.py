"""Where the fixed overhead of a run goes: Ray start, the first task, the first actor, the first Ray Data row.

    python tests/perf/startup.py [--cpus 2] [--repeat 2]

Each step is timed in a fresh process (so nothing is warm from the previous step) and printed as a table:
interpreter + project import, ``ray.init`` (local, as ``ensure_ray`` starts it), the first task round trip,
the first actor, the first row out of a one-stage Ray Data pipeline, and the threads a worker holds after
importing the decode stage's libraries (a BLAS or OpenCV pool sized to the machine, not to the task's one CPU,
is contention the official one-process scripts do not have). No assert: numbers for the note.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpus", default="2")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    for cpus in [int(c) for c in args.cpus.split(",")]:
        results = [probe(cpus) for _ in range(args.repeat)]
        keys = list(results[0]["marks"])
        print(f"\nray.num_cpus={cpus}: seconds since the process was launched (one column per repeat)")
        for k in keys:
            print(f"  {k:20s} " + "  ".join(f"{r['marks'][k]:6.2f}" for r in results))
        print(f"  worker after imports: {results[-1]['worker']}")


if __name__ == "__main__":
    main()
