"""Ray started in the background while the driver loads the cases (``ray_start.start_ray``; issue 15's fixed overhead).

Runs in a fresh interpreter: the test session's own Ray (``ray_local``) is already up, and ``start_ray`` does
nothing when Ray is. One local Ray start, ~5-10 s on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers.common import REPO, run_script, user_env

SCRIPT = r'''
import json, signal, sys, time
from omegaconf import OmegaConf
import vbench_ray.ray_start as ray_start

cfg = OmegaConf.create({"ray": {"address": None, "num_cpus": 2}})
out = {}

# a failure in the background start reaches the caller of ensure_ray, and the start can be tried again
real_init = ray_start._init_ray
def broken(cfg):
    raise RuntimeError("no Ray today")
ray_start._init_ray = broken
out["began_broken"] = ray_start.start_ray(cfg)
try:
    ray_start.ensure_ray(cfg)
    out["broken_raised"] = None
except RuntimeError as exc:
    out["broken_raised"] = str(exc)
ray_start._init_ray = real_init

import ray
from vbench_ray.metrics.stage import FrameMetricsStage
from vbench_ray.pipeline import Stage
stage = Stage("frames", FrameMetricsStage, {"SSIM": "float"}, init_kwargs={"metrics": {"SSIM": {}}})
out["ray_data_before"] = "ray.data" in sys.modules
out["began"] = ray_start.start_ray(cfg, warm=[stage])
out["up_at_return"] = ray.is_initialized()  # start_ray returned before ray.init finished
out["began_twice"] = ray_start.start_ray(cfg)  # a second call while the first is under way starts nothing
ray_start.ensure_ray(cfg)
out["ray_data_after"] = "ray.data" in sys.modules  # imported by the starting thread, not the main one
out["warmed"] = stage.token in ray_start._WARMED  # the starting thread had the workers import the stage's modules
out["warmed_again"] = ray_start.prewarm([stage], {"CPU": 2.0, "GPU": 0.0})  # the runner's own call: nothing twice
out["up"] = ray.is_initialized()
out["cpus"] = ray.cluster_resources().get("CPU")
handler = signal.getsignal(signal.SIGTERM)
out["sigterm_handler"] = callable(handler) and handler not in (signal.SIG_DFL, signal.SIG_IGN)
# Ray's GCS and raylet die with the thread that started them (PR_SET_PDEATHSIG): they must outlive ensure_ray
time.sleep(2.0)

@ray.remote(num_cpus=1)
def square(x):
    return x * x

out["task"] = ray.get(square.remote(7), timeout=120)
ray_start.start_data_actors()
coordinator = ray.get_actor("AutoscalingCoordinator", namespace="AutoscalingCoordinator")
out["coordinator"] = coordinator is not None

# a stream starts with the budget the coordinator reserved for it, not with the empty first read Ray Data's
# client returns (only one task may run until its next read, a second later): a probe called just after
# ray_start's callback, before the executor's loop starts, finds the budget already read
import ray.data
from ray.data import DataContext
from ray.data._internal.execution.execution_callback import ExecutionCallback
ray.get(coordinator.__ray_ready__.remote())
budgets = []
class Probe(ExecutionCallback):
    def before_execution_starts(self, executor):
        budgets.append(executor._cluster_autoscaler.get_total_resources().cpu)
DataContext.get_current().custom_execution_callback_classes.append(Probe)
out["rows"] = len(ray.data.range(4, override_num_blocks=4).map_batches(lambda b: b, batch_size=None).take_all())
out["first_budget_cpus"] = budgets
print("@@RESULT@@ " + json.dumps(out), flush=True)
ray.shutdown()
'''


@pytest.mark.slow
def test_ray_started_in_the_background_is_waited_for_and_outlives_its_thread(tmp_path):
    out, proc = run_script(SCRIPT, tmp_path, timeout=300)
    assert out["began_broken"] is True and out["broken_raised"] == "no Ray today"
    assert out["began"] is True and out["up_at_return"] is False and out["began_twice"] is False
    assert out["ray_data_before"] is False and out["ray_data_after"] is True
    assert out["warmed"] is True and out["warmed_again"] == []
    assert out["up"] is True and out["cpus"] == 2.0
    assert out["sigterm_handler"] is True  # set from the main thread, as ray.init would have
    assert out["task"] == 49
    assert out["coordinator"] is True
    assert out["rows"] == 4 and out["first_budget_cpus"] == [2.0]  # ray_start._read_budget_before_stream_starts
    # ray.init outside the main thread warns that it set no SIGTERM handler: silenced, since one is set
    assert "SIGTERM handler is not set" not in proc.stderr


# The CI failure of 2026-11-27: an import of ray.data that failed part-way in a background thread left its
# submodules in sys.modules; the main thread's own import then made a ray.data they were never bound to.
FAILED_IMPORT = r'''
import importlib.abc, sys
import vbench_ray.ray_start as ray_start

class FailOnce(importlib.abc.MetaPathFinder):
    """ray.data.dataset's import fails once, as a half-made module from another thread makes it fail."""
    failed = False
    def find_spec(self, name, path, target=None):
        if name == "ray.data.dataset" and not FailOnce.failed:
            FailOnce.failed = True
            raise ImportError("cannot import name 'Dataset' from partially initialized module")
        return None

sys.meta_path.insert(0, FailOnce())
ray_start.import_ray_data()  # swallows the failure, and takes out what it half-imported
print("@@FAILED@@", FailOnce.failed, flush=True)
import ray.data
from ray.data._internal.utils.arrow_utils import _check_pyarrow_version  # noqa: F401
ray.data._internal.util._check_pyarrow_version()  # reads ray.data._internal... off the package: bound?
print("@@BOUND@@", ray.data.Dataset is sys.modules["ray.data.dataset"].Dataset, flush=True)
'''


def test_a_failed_background_import_of_ray_data_leaves_no_half_made_modules(tmp_path):
    """Without the clean-up the last call raises ``module 'ray.data' has no attribute '_internal'`` (checked)."""
    env = user_env(PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", FAILED_IMPORT], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert "@@FAILED@@ True" in proc.stdout, proc.stdout + proc.stderr[-3000:]  # the failure did happen
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "@@BOUND@@ True" in proc.stdout
