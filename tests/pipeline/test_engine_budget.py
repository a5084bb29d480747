"""Ray Data's budget leaves out what the judge engines hold (``runner._budget_without_engines``), through an option
Ray 2.60 does not deprecate: a stream on the session's runtime (4 CPUs, one fake GPU) plans with the CPUs and GPUs
the engines left, and with all of them again once a run has no engine."""

from __future__ import annotations

import time
import warnings

import ray
from ray.data import DataContext
from ray.data._internal.execution.execution_callback import ExecutionCallback
from ray.util.annotations import RayDeprecationWarning

from vbench_ray import runner
from vbench_ray.pipeline import cluster_capacity


def _stream_limits() -> tuple[float, float]:
    """The largest CPU and GPU limits Ray Data's resource manager planned a small stream with (its first reads
    may come before the autoscaling coordinator's answer: zero)."""
    seen: list = []

    class Probe(ExecutionCallback):
        def on_execution_step(self, executor) -> None:
            seen.append(executor._resource_manager.get_global_limits())

    def slow(batch):
        time.sleep(0.3)
        return batch

    classes = DataContext.get_current().custom_execution_callback_classes
    classes.append(Probe)
    try:
        ds = ray.data.range(8, override_num_blocks=8).map_batches(slow, batch_size=None, num_cpus=0.5)
        assert len(ds.take_all()) == 8
    finally:
        classes.remove(Probe)
    return max(limit.cpu for limit in seen), max(limit.gpu for limit in seen)


def test_the_engines_hold_is_left_out_of_ray_datas_budget_without_a_deprecated_option(ray_local):
    capacity = cluster_capacity()
    assert (capacity["CPU"], capacity["GPU"], capacity["autoscales"]) == (4.0, 1.0, False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RayDeprecationWarning)  # exclude_resources: deprecated in Ray 2.60
            runner._budget_without_engines({"CPU": 1.0, "GPU": 0.5})
        assert _stream_limits() == (4.0 - 1.0, 1.0 - 0.5)
    finally:
        runner._budget_without_engines({"CPU": 0.0, "GPU": 0.0})
    assert _stream_limits() == (4.0, 1.0)  # a run without engines: the whole cluster again
