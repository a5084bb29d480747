"""The workers' imports ahead of the stream (``ray_start.prewarm``): after them, a decode task imports nothing more.

A fresh worker process (a runtime environment of its own: Ray starts a new one for it) imports what the prewarm
imports, then runs the decode stage (SSIM and MF, the start measurement's metrics: docs/performance.md) on a real
pair of videos; every module its first case still imports is on the first row's path.
"""

from __future__ import annotations

import uuid

import pytest

from helpers.common import moving_square_video


def _first_case_imports(modules: list[str], init_kwargs: dict, row: dict) -> dict:
    """In this worker: import ``modules`` as the prewarm does, then build the stage and compute one case; return
    the modules the case imported, and its values."""
    import sys

    from vbench_ray.metrics.stage import FrameMetricsStage
    from vbench_ray.ray_start import _import_modules

    _, held = _import_modules(modules)
    before = set(sys.modules)
    out = FrameMetricsStage(**init_kwargs)(row)
    return {"held": held, "new": sorted(set(sys.modules) - before), "SSIM": out.get("SSIM"), "MF": out.get("MF")}


@pytest.mark.ray
def test_the_first_decode_after_the_prewarm_imports_nothing(ray_local, tmp_path):
    """scikit-image loads ``structural_similarity``'s module (and SciPy's ndimage, 40-odd modules) only when the
    attribute is first read: the prewarm reads it (``skimage.metrics:structural_similarity``), so SSIM's first
    case does not; and the worker holds ``ray.data``, which Ray Data's map task imports before its first batch."""
    from dataclasses import asdict

    import ray

    from vbench_ray.metrics.base import METRICS
    from vbench_ray.metrics.stage import FrameMetricsStage
    from vbench_ray.pipeline import Stage
    from vbench_ray.ray_start import RAY_DATA_TASK_MODULES, prewarm
    from vbench_ray.video.encode import write_video

    src = write_video(tmp_path / "src.mp4", moving_square_video(t=16, h=48, w=64, seed=1))
    edited = write_video(tmp_path / "edited.mp4", moving_square_video(t=16, h=48, w=64, step=3, seed=1))
    metrics = {name: asdict(METRICS[name].config_class()) for name in ("SSIM", "MF")}  # their defaults
    init_kwargs = {"metrics": metrics, "video_backend": "auto"}  # decord, as a run reads by default
    stage = Stage("frames", FrameMetricsStage, {"SSIM": "float", "MF": "float"}, init_kwargs=init_kwargs)
    modules = [stage.fn.__module__, *FrameMetricsStage.warm_modules(init_kwargs), *RAY_DATA_TASK_MODULES]
    assert ray.get(prewarm([stage], {"CPU": 1.0, "GPU": 0.0}), timeout=300)[0][1] == modules  # what it imports

    fresh = {"env_vars": {"VBENCH_TEST_FRESH_WORKER": uuid.uuid4().hex}}  # a new runtime env: a new process
    task = ray.remote(num_cpus=1, max_retries=0, runtime_env=fresh)(_first_case_imports)
    row = {"case_id": "0", "variant": "base", "source_path": str(src), "edited_path": str(edited)}
    got = ray.get(task.remote(modules, init_kwargs, row), timeout=300)
    assert got["held"] == modules
    assert got["SSIM"] is not None and got["MF"] is not None
    assert got["new"] == []


class _Undeclarable:
    """A CPU stage whose declared modules cannot be listed."""

    @staticmethod
    def warm_modules(init_kwargs: dict) -> list[str]:
        raise KeyError("metrics")

    def __call__(self, row: dict) -> dict:
        return {}


@pytest.mark.ray
def test_a_prewarm_that_cannot_list_its_modules_raises_nothing(ray_local):
    """The prewarm runs in the thread that starts Ray, whose end ``ensure_ray`` waits for: a stage whose modules
    cannot be listed leaves the workers cold (its first task imports them), and never ends that thread."""
    from vbench_ray.pipeline import Stage
    from vbench_ray.ray_start import prewarm

    assert prewarm([Stage("odd", _Undeclarable, {"x": "float"})], {"CPU": 2.0, "GPU": 0.0}) == []
