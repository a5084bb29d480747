"""Per-process start timeline for ``tests/perf/startup.py --trace`` (perf only: never on a user's path).

Put this folder first on ``PYTHONPATH`` with ``VBENCH_START_TRACE=<dir>``: every Python process started with
that environment (the run's driver, Ray's workers, Ray's own Python daemons) appends JSON lines to
``<dir>/<pid>.jsonl``: when the process was created (``/proc``), when the interpreter reached site, when each
watched module's import began and ended, and the first start and end of the calls that make a first row (a
decode task in a worker, the driver's first shard write). Without ``VBENCH_START_TRACE`` it does nothing.
"""

from __future__ import annotations

import os

if os.environ.get("VBENCH_START_TRACE"):
    import importlib.abc
    import json
    import sys
    import time

    _DIR = os.environ["VBENCH_START_TRACE"]
    _WATCH = {
        "ray",
        "ray.data",
        "ray.data._internal.execution.operators.map_operator",
        "ray.data._internal.planner.plan_udf_map_op",
        "pandas",
        "pyarrow",
        "pyarrow.fs",
        "numpy",
        "cv2",
        "decord",
        "av",
        "scipy.optimize",
        "skimage.metrics",
        "torch",
        "omegaconf",
        "vbench_ray.pipeline",
        "vbench_ray.metrics.stage",
        "vbench_ray.ray_start",
        "vbench_ray.runner",
        "vbench_ray.cli",
    }
    _WORKER = any("default_worker" in a for a in sys.argv[:2])
    _out = open(os.path.join(_DIR, f"{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115

    def _mark(name: str, at: float | None = None) -> None:
        _out.write(json.dumps({"mark": name, "t": time.time() if at is None else at}) + "\n")

    def _created() -> float:
        with open("/proc/stat") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith("btime"))
        with open("/proc/self/stat") as f:
            ticks = float(f.read().rsplit(")", 1)[1].split()[19])
        return boot + ticks / os.sysconf("SC_CLK_TCK")

    _out.write(json.dumps({"argv": sys.argv[:3], "orig_argv": getattr(sys, "orig_argv", [])[:4]}) + "\n")
    _mark("created", _created())
    _mark("site")

    def _once(cls, attr: str, label: str) -> None:
        """Mark the first start and end of ``cls.attr`` in this process."""
        inner = getattr(cls, attr)
        seen: set = set()

        def wrapper(*args, **kwargs):
            first = not seen
            seen.add(1)
            if first:
                _mark(f"{label} start")
            try:
                return inner(*args, **kwargs)
            finally:
                if first:
                    _mark(f"{label} end")

        setattr(cls, attr, wrapper)

    def _patch(name: str, module) -> None:
        if name.startswith("vbench_ray."):
            _out.write(json.dumps({"file": getattr(module, "__file__", None)}) + "\n")
        if name == "vbench_ray.pipeline" and _WORKER:
            _once(module._TaskRunner, "__call__", "decode task")
        elif name == "vbench_ray.pipeline":
            _once(module, "build_dataset", "build_dataset")
        elif name == "vbench_ray.ray_start" and _WORKER:
            _once(module, "_import_modules", "prewarm task")
        elif name == "vbench_ray.ray_start":  # the driver's steps (the runner binds these names after this patch)
            for attr in ("_init_ray", "prewarm_common", "import_ray_data", "prewarm", "start_data_actors"):
                _once(module, attr, attr)
        elif name == "vbench_ray.sinks":
            _once(module.CaseSink, "write", "sink write")

    class _Loader(importlib.abc.Loader):
        def __init__(self, inner, name):
            self.inner, self.name = inner, name

        def __getattr__(self, attr):  # get_code, is_package, ...: the wrapped loader's (runpy needs them)
            return getattr(self.inner, attr)

        def create_module(self, spec):
            return self.inner.create_module(spec)

        def exec_module(self, module):
            _mark(f"import {self.name} start")
            self.inner.exec_module(module)
            _mark(f"import {self.name} end")
            _patch(self.name, module)

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in _WATCH and name != "vbench_ray.sinks":
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _Loader(spec.loader, name)
                    return spec
            return None

    sys.meta_path.insert(0, _Finder())
