"""Fail fast: every check a config can fail before any compute, in about a second.

``check(cfg)`` runs at the start of ``runner.run``, before Ray starts, a video is opened or a model is
loaded, and raises one ``ConfigError`` listing every problem found, each naming its config key:

* every numeric field against the range its schema declares (``vbench_ray.config.bounded``): ``run.limit`` >= 0,
  ``ray.workers`` / ``ray.batch_size`` / ``ray.shard_rows`` ... >= 1, ``ray.shard_seconds`` >= 0,
  ``stats.confidence`` strictly between 0 and 1, ``judge.temperature`` >= 0, ``judge.max_tokens`` >= 1,
  ``judge.video.fps`` > 0, ``judge.http.retry_wait_s`` >= 0 ... (each judge the run calls, too);
* the run: ``output.dir`` neither an existing file nor one of the data folders; something to compute
  (``metrics.enabled`` not empty, or an editor to run);
* metrics (the enabled ones): ``frames`` >= 1 (or null: every frame), weights that exist (each metric's
  own ``FrameMetric.check_weights``: RAFT, CoTracker, LPIPS, CLIP, DINO, NIQE ...), ``device: cuda`` only
  where a GPU is (this machine's torch, or the attached Ray cluster);
* the editor (``editor.name`` other than ``precomputed``): its own ``Editor.check_weights`` (a diffusers model
  folder with ``model_index.json`` and its components, a command template), ``editor.device: cuda`` only where a
  GPU is;
* each judge the run will call (``judge``, ViDiC's ``model``, NRVBench's ``judges``): ``model`` set, a local
  model path that exists (vllm, hf), ``http.base_url`` set, the ``http.api_key_env`` variable set,
  ``replay_path`` set and existing, and its numeric ranges (``max_retries`` >= 0, ``max_invalid_fraction`` in [0, 1]);
* NRVBench's ``agreement.human_scores``: readable, valid, finite scores.

Per-case problems (a malformed task, an undecodable video) are not checked here: they become that case's
recorded failure (README, "Bad input").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vbench_ray import cfgutil
from vbench_ray.config import ConfigError, check_bounds

Problems = list[str]


def check(cfg: DictConfig, bench: Any = None) -> None:
    """Raise ``ConfigError`` naming every problem of ``cfg`` that would stop or falsify the run later. ``bench``: the
    benchmark the run bound to ``cfg`` (``bench_for(cfg)``), whose judges and own checks are asked; bound here if
    not given."""
    if bench is None:
        from vbench_ray.benchmarks import bench_for

        bench = bench_for(cfg)
    problems: Problems = []
    for step in (
        _check_bounds,
        _check_output,
        _check_something_to_compute,
        _check_metrics,
        _check_editor,
        lambda cfg: _check_judges(cfg, bench),
        lambda cfg: bench.check_config(),  # the benchmark's own checks (``Benchmark.check_config``)
    ):
        try:
            problems += step(cfg)
        except ConfigError as exc:  # a check that raises (e.g. a benchmark's own validation) is one problem
            problems.append(str(exc))
    problems = list(dict.fromkeys(problems))  # a judge node is checked on its own and as part of the config
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(
            f"the config cannot run ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n{lines}"
        )


def weights_problems(cfg: DictConfig) -> Problems:
    """Every problem of what ``cfg``'s models need, all at once: the enabled metrics' weights, the editor's model and
    each judge's model (``vbench-ray weights check``). Reads no data (``data.*`` and ``output.dir`` may be unset);
    each message names the key to set and, where known, where the official weights are published."""
    problems: Problems = []
    for step in (_check_metrics, _check_editor, _check_judges):
        try:
            problems += step(cfg)
        except ConfigError as exc:
            problems.append(str(exc))
    return list(dict.fromkeys(problems))


def _int_at_least(cfg: Any, key: str, low: int, nullable: bool = True, what: str = "") -> Problems:
    value = cfgutil.get(cfg, key)
    if value is None and nullable:
        return []
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        return [f"`{key}` = {value!r}: expected an integer >= {low}{what}"]
    return []


# ----------------------------------------------------------------------------- run, ray, stats, output


def _check_bounds(cfg: DictConfig) -> Problems:
    """Every numeric field outside the range its schema declares (``config.bounded``: ``run.limit``, ``ray.*``,
    ``stats.*``, ``judge.*`` sampling, video, http and engine settings, ``editor.*`` resources ...)."""
    return check_bounds(cfg)


def _data_paths(cfg: DictConfig) -> dict[str, Path]:
    """``data.*`` values that name an existing folder or file."""
    data = cfgutil.get(cfg, "data")
    out = {}
    if not isinstance(data, DictConfig):
        return out
    for key, value in data.items():
        if isinstance(value, str) and value not in ("???", "") and Path(value).exists():
            out[f"data.{key}"] = Path(value).resolve()
    return out


def _check_something_to_compute(cfg: DictConfig) -> Problems:
    """``metrics.enabled: []`` with no editor to run: the run would compute nothing and report no metric.
    (``vbench-ray edit`` empties it on purpose: its editor is the work.)"""
    enabled = cfgutil.get(cfg, "metrics.enabled")
    editor = cfgutil.get(cfg, "editor.name")
    if enabled is not None and len(enabled) == 0 and editor in (None, "precomputed"):
        return [
            "`metrics.enabled` is empty: the run would compute and score nothing; enable at least one metric "
            "(e.g. metrics.enabled=[SSIM])"
        ]
    return []


def _check_output(cfg: DictConfig) -> Problems:
    out_dir = Path(str(cfg.output.dir))
    if out_dir.exists() and not out_dir.is_dir():
        return [
            f"`output.dir` = {str(out_dir)!r} is an existing file, not a folder: choose a new or existing run folder"
        ]
    resolved = out_dir.resolve()
    clashes = [k for k, p in _data_paths(cfg).items() if p == resolved]
    if clashes:
        return [
            f"`output.dir` = {str(out_dir)!r} is the data folder `{'`, `'.join(clashes)}`: the run would write "
            f"cases/, summary.json and the judge log among the benchmark's files; choose a separate folder"
        ]
    return []


# ----------------------------------------------------------------------------- metrics


def _enabled_metric_nodes(cfg: DictConfig) -> list[tuple[str, Any]]:
    """``(name, node)`` of every enabled metric that has a config node of its own."""
    metrics = cfgutil.get(cfg, "metrics")
    if not isinstance(metrics, DictConfig):
        return []
    enabled = metrics.get("enabled")
    names = list(enabled) if enabled is not None else [k for k in metrics.keys()]
    return [(n, metrics.get(n)) for n in dict.fromkeys(names) if isinstance(metrics.get(n), DictConfig)]


def _check_metrics(cfg: DictConfig) -> Problems:
    from vbench_ray.metrics import METRICS

    out: Problems = []
    gpu_keys = []
    for name, node in _enabled_metric_nodes(cfg):
        if "frames" in node:
            out += _int_at_least(node, "frames", 1, what=" (frames sampled per video; null: every frame)")
            out = [p.replace("`frames`", f"`metrics.{name}.frames`") for p in out]
        if name in METRICS:  # (a MissingWeightsError's message says where the weights are published already)
            sources = {f"metrics.{name}.{k}": v for k, v in METRICS[name].weights_from.items()}
            out += [_with_source(p, sources, "official weights") for p in METRICS[name].check_weights(node)]
        if "device" in node and str(node.device).startswith("cuda"):
            gpu_keys.append(f"metrics.{name}.device")
    return out + _check_gpu(cfg, gpu_keys)


def _check_gpu(cfg: DictConfig, keys: list[str]) -> Problems:
    """``keys`` ask for CUDA: there must be a GPU here, or in the Ray cluster the run is attached to."""
    if not keys:
        return []
    from vbench_ray.ray_start import early_start_in_flight, ray_imported

    ray_imported()  # the command's early start imports Ray: never two threads at once
    import ray

    if ray.is_initialized() and not early_start_in_flight():  # attached by the caller (not this command's start)
        if ray.cluster_resources().get("GPU", 0) >= 1:
            return []
        where = "the attached Ray cluster has no GPU"
    elif cfg.ray.address or os.environ.get("RAY_ADDRESS"):
        return []  # a cluster not yet attached: its GPU nodes may join (ray up's autoscaler); Ray waits for one
    else:
        if local_gpus() > 0:
            return []
        where = "this machine has no usable GPU (no NVIDIA GPU visible to Ray here) and no Ray cluster is attached"
    return [f"`{k}` = cuda but {where}: set it to cpu, or run on a GPU machine or cluster" for k in keys]


def local_gpus() -> int:
    """The GPUs a local ``ray.init`` here would give the run: Ray's own count (NVML through its bundled pynvml,
    less any ``CUDA_VISIBLE_DEVICES`` restriction), as Ray counts them when it starts. No torch import: in the
    driver, importing torch and initialising CUDA only to ask cost 2-4 s before Ray could start (a GPU run on
    an H200 machine: Ray's start began 4.8 s after the run's, 0.5-0.7 s in a CPU run)."""
    try:
        from ray._private.accelerators import NvidiaGPUAcceleratorManager as nvidia
    except ImportError:  # another Ray: ask torch, as before
        try:
            import torch

            return torch.cuda.device_count() if torch.cuda.is_available() else 0
        except ImportError:
            return 0
    visible = nvidia.get_current_process_visible_accelerator_ids()
    count = nvidia.get_current_node_num_accelerators()
    return count if visible is None else min(count, len(visible))


# ----------------------------------------------------------------------------- editor


def _check_editor(cfg: DictConfig) -> Problems:
    editor = cfgutil.get(cfg, "editor")
    if not isinstance(editor, DictConfig) or editor.get("name") in (None, "precomputed"):
        return []
    from vbench_ray.editors import EDITORS

    if editor.name not in EDITORS:
        return [f"`editor.name`: {EDITORS.unknown(editor.name)}"]
    cls = EDITORS[editor.name]
    out = [
        _with_source(p, {f"editor.{k}": v for k, v in cls.weights_from.items()}, "official weights")
        for p in cls.check_weights(editor)
    ]
    device = editor.get("device")
    return out + _check_gpu(cfg, ["editor.device"] if device and str(device).startswith("cuda") else [])


# ----------------------------------------------------------------------------- judges


def _with_source(problem: str, sources: dict[str, str], what: str) -> str:
    """``problem`` followed by where the weights of the config keys it names are published (``sources``: key ->
    text), unless it says so already."""
    found = [(key, source) for key, source in sources.items() if f"`{key}`" in problem and source]
    if not found or f"; {what}: " in problem:
        return problem
    if len(found) == 1:
        return f"{problem}; {what}: {found[0][1]}"
    return f"{problem}; {what}: " + "; ".join(f"`{key}`: {source}" for key, source in found)


def _check_judge(node: Any, key: str, source: str | None = None) -> Problems:
    """One judge config (``key``: where it sits in the config, e.g. ``judge``, ``model``, ``judges[1]``; ``source``:
    the model the paper used there, said beside a model that is not set or not found)."""
    out = [_with_source(p, {f"{key}.model": source or ""}, "the paper's model") for p in _judge_problems(node, key)]
    return out


def _judge_problems(node: Any, key: str) -> Problems:
    """The checks of the judge's backend (its registry entry's ``problems``), then its numeric ranges."""
    from vbench_ray.judges.backends import BACKENDS

    backend = cfgutil.get(node, "backend")
    if backend not in BACKENDS:
        return [f"`{key}.backend`: {BACKENDS.unknown(backend)}"]
    out: Problems = list(BACKENDS[backend].problems(node, key))
    if isinstance(node, DictConfig):  # its numeric ranges (NRVBench's `judges` entries are merged, not in the walk)
        out += check_bounds(node, key)
    return out


def _check_judges(cfg: DictConfig, bench: Any = None) -> Problems:
    """Each judge the run will call (its judge phases'), checked once; ``bench``: ``cfg``'s benchmark, bound here if
    not given."""
    if bench is None:
        from vbench_ray.benchmarks import bench_for

        bench = bench_for(cfg)
    try:
        phases = bench.judge_phases()
    except ConfigError as exc:
        return [str(exc)]
    except Exception as exc:  # noqa: BLE001 - a benchmark's own data check; load_cases reports it properly
        return [] if type(exc).__name__ == "DataError" else [f"judge phases: {type(exc).__name__}: {exc}"]
    out: Problems = []
    seen: set[int] = set()
    for phase in phases:
        node = phase.judge_cfg
        key = bench.judge_key(phase.name)
        if id(node) in seen or key is None:  # None: the phase's answers are replayed from a file the run writes
            continue
        seen.add(id(node))
        out += _check_judge(node, key, bench.judge_models.get(key.split("[")[0].replace("judges", "judge")))
    gpu = [p.split(":", 1)[1] for p in out if p.startswith("__gpu__:")]
    return [p for p in out if not p.startswith("__gpu__:")] + _check_gpu(cfg, gpu)
