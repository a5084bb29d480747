"""What ``vbench-ray compare`` (:mod:`vbench_ray.compare`) and the benchmarks' compare hooks
(``Benchmark.compare_units``, ``comparison_options``, ``analyses``) share: the error, a finished run as read from
its folder, and the helpers that turn a run's config into comparable options and its rows into units.

It imports nothing else of the package but the judge backends' registry (when it flattens options), so a
benchmark's hook module may import it without an import circle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where it is used: a run's driver imports this module and needs none of it
    import pandas as pd

# config keys that do not change a score (where things run, how fast, where weights sit). ``seed`` is not one: a
# metric's own seed picks what it samples (TQ's clip and fragment offsets), a judge's seed picks its tokens when it
# samples (``sampling_seed``); ``run.seed``, which seeds the bootstrap CIs, is compared only where the benchmark
# says it picks what is scored (``Benchmark.run_seed_scores``). A judge backend's own section (``judge.vllm``,
# ``judge.http`` ...: how the judge is served) is one too, read from the backend registry (``runtime_keys``)
RUNTIME_KEYS = {
    "device",
    "batch_size",
    "workers",
    "num_gpus",
    "gpu_fraction",
    "num_cpus",
    "backend",
    "replay_path",
    "env_vars",
    "concurrency",
    "dtype",
}


class CompareError(ValueError):
    """Runs that cannot be compared; the message says which runs and which option."""


@dataclass
class Run:
    """A finished run read from its folder (:func:`vbench_ray.compare_runs.load_run`): its ``config.yaml`` and
    ``summary.json`` as dicts, its case rows and judged items as frames, and what compare derives from them."""

    path: Path
    label: str
    benchmark: str
    config: dict
    summary: dict
    cases: pd.DataFrame
    judgments: pd.DataFrame | None
    units: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # metric -> case -> (num, den)
    binary: dict[str, dict[tuple, bool]] = field(default_factory=dict)  # metric -> unit key -> correct
    options: dict[str, Any] = field(default_factory=dict)
    variant: str = "base"  # the variant compared (a sweep's or NRVBench's control variant: its rows alone)


def finite(x: Any) -> bool:
    """``x`` is a finite number (not None, NaN, inf, or text)."""
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def runtime_keys() -> set[str]:
    """``RUNTIME_KEYS`` and every registered judge backend's config section name."""
    from vbench_ray.judges.backends import BACKENDS  # the registry alone: no backend module is imported

    return RUNTIME_KEYS | set(BACKENDS.config_classes())


def flatten_options(prefix: str, node: Any, out: dict, skip: set[str] | None = None) -> dict:
    """``node``'s leaves into ``out`` as ``{"prefix.key": value}``, leaving out ``runtime_keys()``; a list of dicts
    as ``prefix[i].key``; a model or weights path by its last part (the same model sits elsewhere per machine)."""
    skip = runtime_keys() if skip is None else skip
    if isinstance(node, dict):
        for k, v in node.items():
            if k in skip:
                continue
            flatten_options(f"{prefix}.{k}" if prefix else str(k), v, out, skip)
    elif isinstance(node, list) and node and all(isinstance(x, dict) for x in node):
        for i, v in enumerate(node):
            flatten_options(f"{prefix}[{i}]", v, out, skip)
    else:
        if isinstance(node, str) and (prefix.endswith("_weights") or prefix.endswith(".model")) and "/" in node:
            node = node.rstrip("/").rsplit("/", 1)[-1]
        out[prefix] = node
    return out


def sampling_seed(section: Any, base: Any = None) -> tuple[bool, Any]:
    """``(samples, seed)`` of a judge-like section (``judge``, a ``judges`` entry over ``base``, CoVEBench's
    ``vqr``, ViDiC's ``model``): it samples where its ``temperature`` is above 0, and only then does its ``seed``
    change the answers (vLLM's per-request ``seed``, ``torch.manual_seed`` before ``generate`` with ``do_sample``);
    at temperature 0 decoding is greedy and the seed picks nothing. A key the section lacks comes from ``base``."""
    section = section if isinstance(section, dict) else {}
    base = base if isinstance(base, dict) else {}
    temperature = section.get("temperature", base.get("temperature"))
    samples = isinstance(temperature, (int, float)) and temperature > 0
    return samples, section.get("seed", base.get("seed"))
