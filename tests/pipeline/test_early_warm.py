"""The command's early start has the workers import what every stream needs before the run's config is checked
(``ray_start.prewarm_common``): attached to a running cluster, the job's first worker process otherwise starts
only when the run hands the start its stages, seconds after the connection (docs/performance.md).

Runs in a fresh interpreter (the test session's own Ray is not the command's), one local Ray start: ~5-10 s on
2 cores.
"""

from __future__ import annotations

import pytest

from helpers.common import run_script

SCRIPT = r'''
import json, time
import vbench_ray.ray_start as ray_start

out = {"began": ray_start.start_ray_early(None, 2)}  # the command's first step; no run takes it over here
box = ray_start._ray_start
ray_start.ray_imported()
import ray

deadline, up = time.time() + 240, None
while "common_warm" not in box and box["error"] is None and time.time() < deadline:
    up = up or (ray.is_initialized() and time.time())
    if up and time.time() - up > 10:  # Ray up for 10 s and nothing sent to its workers
        break
    time.sleep(0.05)
out["error"] = repr(box["error"]) if box["error"] is not None else None
out["handed_over"] = box["go"].is_set()  # the run's go-ahead (its config checked, its plan built): not given
got = ray.get(box.get("common_warm") or [], timeout=240)
out["held"] = [held for _, held in got]
out["processes"] = len({pid for pid, _ in got})
ray_start.end_unused_start()  # a config error now: the start is shut down, the workers' imports with it
out["up_after_end"] = ray.is_initialized()
print("@@RESULT@@ " + json.dumps(out), flush=True)
'''


@pytest.mark.slow
def test_the_early_start_warms_every_cpu_before_the_config_is_checked(tmp_path):
    """Two CPUs: two workers import Ray Data and the task runner before any go-ahead; a start no run takes over is
    shut down as before. Without ``prewarm_common`` no task runs before the go-ahead (``held`` is empty)."""
    out, _ = run_script(SCRIPT, tmp_path, timeout=400)
    assert out["began"] is True and out["error"] is None
    assert out["handed_over"] is False
    assert out["held"] == [["ray.data", "vbench_ray.pipeline"]] * 2
    assert out["processes"] == 2  # one task per CPU, each in a worker of its own
    assert out["up_after_end"] is False
