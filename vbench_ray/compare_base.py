"""What ``vbench-ray compare`` (:mod:`vbench_ray.compare`) and the benchmarks' compare hooks
(``Benchmark.compare_units``, ``comparison_options``, ``analyses``) share: the error, a finished run as read from
its folder, and the helpers that turn a run's config into comparable options and its rows into units.

It imports nothing else of the package but the registries it reads (judge backends, metrics), inside the functions
that read them, so a benchmark's hook module may import it without an import circle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where it is used: a run's driver imports this module and needs none of it
    import pandas as pd

# config keys, in any section, that do not change a score (where things run, how fast, where weights sit). ``seed``
# is not one: a metric's own seed picks what it samples (TQ's clip and fragment offsets), a judge's seed picks its
# tokens when it samples (``decoding_options``); ``run.seed``, which seeds the bootstrap CIs, is compared only where
# the benchmark says it picks what is scored (``Benchmark.run_seed_scores``). ``dtype`` is not one either: a metric's
# weights in bfloat16 score other values than in float32. A judge backend's own section (``judge.vllm``,
# ``judge.http`` ...: how the judge is served) is one, read from the backend registry, less the keys its config class
# declares change what the model computes (``SCORING_KEYS``: ``hf.dtype``, ``vllm.engine_kwargs``,
# ``http.send_sampling``; ``backend_options``), and so are the keys a metric
# declares on its class (``FrameMetric.runtime_keys``, e.g. TQ's ``pool_batch``): ``runtime_keys``. ``backend``
# (the judge's) is no scoring option but a note in the leaderboard (``served_by``): the same model served another
# way decodes with other kernels and video loaders, so its answers can move, yet a replayed judge log gives exactly
# the answers of the backend that wrote it
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
}
# the decoding keys of a judge-like section (``judge``, a ``judges`` entry, CoVEBench's ``vqr``, ViDiC's ``model``,
# AgenticVBench's ``agent``) that decide its answers at any temperature, and those that pick tokens only when it
# samples: at temperature 0 vLLM decodes greedily and resets top_p to 1 and top_k to 0 (vllm 0.29
# ``vllm/sampling_params.py``, ``SamplingParams.__post_init__``), the hf backend calls ``generate`` without
# ``do_sample`` and with ``top_p=top_k=None`` (``backends/hf_worker.py``), so neither they nor the seed change an
# answer there
DECODING_KEYS = ("temperature", "max_tokens", "max_retries")
SAMPLED_KEYS = ("top_p", "top_k", "seed")


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
    served: dict[str, str] = field(default_factory=dict)  # judge-like section -> the backend that answered for it
    variant: str = "base"  # the variant compared (a sweep's or NRVBench's control variant: its rows alone)


def finite(x: Any) -> bool:
    """``x`` is a finite number (not None, NaN, inf, or text)."""
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def runtime_keys(metric: str | None = None) -> set[str]:
    """``RUNTIME_KEYS``, every registered judge backend's config section name and, with ``metric``, the keys of
    ``metrics.<metric>`` that its class declares do not change its score (``FrameMetric.runtime_keys``; a metric
    not registered in this installation declares none)."""
    from vbench_ray.judges.backends import BACKENDS  # the registry alone: no backend module is imported

    keys = RUNTIME_KEYS | set(BACKENDS.config_classes())
    if metric is not None:
        import vbench_ray.metrics  # noqa: F401  (importing the package registers every metric module)
        from vbench_ray.metrics.base import METRICS

        keys |= set(METRICS[metric].runtime_keys) if metric in METRICS else set()
    return keys


def resolved_settings(metric: str, section: dict) -> dict:
    """``metrics.<metric>``'s settings as they resolved where the metric ran (``FrameMetric.resolved_settings``:
    AES's ``dtype: auto`` is float32 on the CPU, bfloat16 on CUDA); nothing for a metric not registered here."""
    import vbench_ray.metrics  # noqa: F401  (importing the package registers every metric module)
    from vbench_ray.metrics.base import METRICS

    return METRICS[metric].resolved_settings(section) if metric in METRICS else {}


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
    ``vqr``, ViDiC's ``model``, AgenticVBench's ``agent``): it samples where its ``temperature`` is above 0, or
    unset (an agent's ``null``: the provider's default, which samples unless the provider says otherwise), and
    only then does its ``seed`` change the answers (vLLM's per-request ``seed``, ``torch.manual_seed`` before
    ``generate`` with ``do_sample``); at temperature 0 decoding is greedy and the seed picks nothing. A key the
    section lacks comes from ``base``."""
    section = section if isinstance(section, dict) else {}
    base = base if isinstance(base, dict) else {}
    temperature = section.get("temperature", base.get("temperature"))
    samples = temperature is None or (isinstance(temperature, (int, float)) and temperature > 0)
    return samples, section.get("seed", base.get("seed"))


def decoding_options(prefix: str, section: Any, base: Any = None, keys: tuple = DECODING_KEYS) -> dict[str, Any]:
    """``{"prefix.key": value}`` of how a judge-like section decodes: ``keys`` (``DECODING_KEYS``) at any
    temperature and ``SAMPLED_KEYS`` (top_p, top_k, seed) only where it samples (``sampling_seed``); a key the
    section lacks comes from ``base``, one neither has is left out. The one rule for every judge, judged model
    and agent that compare reads."""
    section = section if isinstance(section, dict) else {}
    base = base if isinstance(base, dict) else {}
    wanted = keys + (SAMPLED_KEYS if sampling_seed(section, base)[0] else ())
    out = {f"{prefix}.{k}": section.get(k, base.get(k)) for k in wanted if k in section or k in base}
    return {**out, **backend_options(prefix, section, base)}


def backend_options(prefix: str, section: Any, base: Any = None) -> dict[str, Any]:
    """``{"prefix.<backend>.key": value}`` of the settings of the section's own judge backend that change what its
    model computes: the keys its config class declares in ``SCORING_KEYS`` (``hf.dtype``; ``vllm.engine_kwargs``, a
    mapping less the entries in the class's ``RUNTIME_KEYS`` and ``runtime_keys()``; ``http.send_sampling``). The
    rest of a backend's section is runtime (where and how fast it is served), and another backend's section does
    not apply (``judge.hf`` of a run served by vllm). A key the section lacks comes from ``base``."""
    from vbench_ray.judges.backends import BACKENDS

    section = section if isinstance(section, dict) else {}
    base = base if isinstance(base, dict) else {}
    backend = section.get("backend", base.get("backend"))
    cls = BACKENDS.config_classes().get(backend) if isinstance(backend, str) else None
    if cls is None:
        return {}
    own = section.get(backend) if isinstance(section.get(backend), dict) else {}
    inherited = base.get(backend) if isinstance(base.get(backend), dict) else {}
    skip = runtime_keys() | set(getattr(cls, "RUNTIME_KEYS", ()))
    out = {}
    for key in getattr(cls, "SCORING_KEYS", ()):
        if key in own or key in inherited:
            value = own.get(key, inherited.get(key))
            if isinstance(value, dict):  # one option: an entry that one run sets and the other lacks differs too
                value = {k: v for k, v in sorted(value.items()) if k not in skip}
            out[f"{prefix}.{backend}.{key}"] = value
    return out


def judge_identity(section: Any, summary_judge: Any = None) -> str | None:
    """Who a judge-like section is: its ``name``, else its model's basename (the same model sits elsewhere per
    machine), else the model the run's summary.json names."""
    section = section if isinstance(section, dict) else {}
    if section.get("name"):
        return str(section["name"])
    if section.get("model"):
        return str(section["model"]).rstrip("/").rsplit("/", 1)[-1]
    if isinstance(summary_judge, dict):
        return summary_judge.get("model")
    return None


def served_by(section: Any, base: Any = None) -> str | None:
    """The backend that answered for a judge-like section (a key it lacks from ``base``), or None for a section
    without one and for a backend that asks no model (``JudgeBackend.asks_a_model``: ``replay``, whose answers are
    those of whichever backend wrote its log)."""
    from vbench_ray.judges.backends import BACKENDS

    section = section if isinstance(section, dict) else {}
    base = base if isinstance(base, dict) else {}
    backend = section.get("backend", base.get("backend"))
    if backend is None or (backend in BACKENDS and not getattr(BACKENDS[backend], "asks_a_model", True)):
        return None
    return str(backend)
