"""Benchmarks, one module each. Importing this package registers them in ``BENCHMARKS``."""

from vbench_ray.benchmarks.base import BENCHMARKS, Benchmark, DataError, bench_for, get_benchmark, register_benchmark
from vbench_ray.benchmarks import cove  # noqa: F401  (registration)
from vbench_ray.benchmarks import vidic  # noqa: F401  (registration)
from vbench_ray.benchmarks import agentic  # noqa: F401  (registration)
from vbench_ray.benchmarks import nrv  # noqa: F401  (registration)

__all__ = ["BENCHMARKS", "Benchmark", "DataError", "bench_for", "get_benchmark", "register_benchmark"]
