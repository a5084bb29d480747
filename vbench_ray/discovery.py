"""The commands that say what there is and what it needs: ``vbench-ray list``, ``vbench-ray config`` and
``vbench-ray weights check`` (``vbench_ray.cli`` wires them into the parser)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vbench_ray.config import BUNDLED_CONFIGS


def _config_path(name: str) -> Path:
    """A YAML path as given, or a bundled benchmark's by its name (``cove`` -> configs/cove.yaml)."""
    path = Path(name).expanduser()
    bundled = BUNDLED_CONFIGS / f"{name}.yaml"
    if path.is_file() or not bundled.is_file():
        if not path.is_file() and path.suffix not in (".yaml", ".yml") and len(path.parts) == 1:
            from vbench_ray.benchmarks import BENCHMARKS
            from vbench_ray.config import ConfigError

            raise ConfigError(f"{BENCHMARKS.unknown(name)} (or give the path of a YAML config)")
        return path
    return bundled


def cmd_weights(args: argparse.Namespace) -> int:
    """Every model the config needs: the enabled metrics' weights, the editor's model and each judge's model. Reads
    no data (``data.*`` and ``output.dir`` may be unset). First every missing one at once, each with the key to set
    and where the official weights are published; then the metrics' and the editor's weights are loaded by the
    loaders the run uses (the judges' models are loaded by the run: a 100B judge is not loaded to check it)."""
    import time

    from vbench_ray import preflight
    from vbench_ray.configure import load_config
    from vbench_ray.metrics.base import METRICS, build_metric

    cfg = load_config(_config_path(args.config), args.overrides, require_all=False)
    problems = preflight.weights_problems(cfg)
    if problems:
        print(
            f"error: {len(problems)} problem{'s' if len(problems) > 1 else ''} with the weights and models this "
            f"config needs (metrics, editor, judges):",
            file=sys.stderr,
        )
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    enabled = [m for m in (cfg.metrics.get("enabled") or []) if m in METRICS]
    models = [m for m in enabled if build_metric(m, cfg.metrics[m]).in_pool()]
    failed = []
    for name in models:
        start = time.perf_counter()
        try:
            build_metric(name, cfg.metrics[name]).setup()
        except Exception as exc:  # a file that exists but does not load: name the metric and the error, go on
            failed.append(f"metrics.{name}: the weights do not load: {type(exc).__name__}: {exc}")
            continue
        print(f"{name}: loaded in {time.perf_counter() - start:.1f} s")
    for problem in failed:
        print(f"error: {problem}", file=sys.stderr)
    if failed:
        return 2
    editor = cfg.get("editor")
    if editor is not None and editor.name not in ("precomputed", "identity"):
        # what `edit` will do: its own loader (diffusers' from_pretrained reads every component; a folder that
        # preflight's file checks pass can still fail here), not a guess at it
        from vbench_ray.editors import EDITORS

        start = time.perf_counter()
        try:
            EDITORS[editor.name](editor).setup()
        except Exception as exc:
            text = " ".join(str(exc).split())[:600]
            print(
                f"error: editor ({editor.name}, editor.weights={editor.get('weights')}): the model does not load: "
                f"{type(exc).__name__}: {text}",
                file=sys.stderr,
            )
            return 2
        print(f"editor ({editor.name}): loaded in {time.perf_counter() - start:.1f} s")
        models.append(f"editor ({editor.name})")
    print(
        f"weights ok: {', '.join(models) if models else 'no enabled metric or editor needs weights'}"
        f"{'; judge models found (loaded by the run)' if _has_judge(cfg) else ''}"
    )
    return 0


def _has_judge(cfg) -> bool:
    from vbench_ray.benchmarks import bench_for

    try:
        return bool(bench_for(cfg).judge_phases())
    except Exception:  # noqa: BLE001 - only decides a word of the summary line; preflight checked the judges
        return False


LISTS = ("benchmarks", "metrics", "judges", "editors")

CONFIG_KEYS_HELP = """config keys (key=value, dotted; lists as metrics.enabled=[SSIM,MSM]; a file as a node:
  judge.include=judges/gpt5_mini_http.yaml, editor=vace)
  every benchmark: output.dir (required), output.resume, run.limit, run.seed, run.name, ray.address, ray.num_cpus,
  ray.workers, ray.pools, video.backend, stats.bootstrap_samples, stats.confidence, wandb.mode, wandb.project,
  report.enabled ...; per benchmark: data.*, metrics.enabled, metrics.<METRIC>.*, judge.* (and vqr.*, model.*,
  judges[...]), editor.*, score.* ...
  `vbench-ray config BENCHMARK` prints every key of a benchmark with its default and what it does;
  `vbench-ray list` the benchmarks, metrics, judge backends and editors there are."""


def cmd_list(args: argparse.Namespace) -> int:
    """The registries, one line per entry: name, paper section (or what it is), scale, what it needs to run."""
    from vbench_ray.benchmarks import BENCHMARKS
    from vbench_ray.editors import EDITORS
    from vbench_ray.judges.backends import BACKENDS
    from vbench_ray.metrics import METRICS
    from vbench_ray.registry import Entry

    registries = {"benchmarks": BENCHMARKS, "metrics": METRICS, "judges": BACKENDS, "editors": EDITORS}
    for kind in [args.what] if args.what else LISTS:
        entries = registries[kind].entries()
        if kind == "editors":  # editor.name's default, not a registered editor: no editor stage
            entries.insert(0, Entry("precomputed", "the edited videos already in data.edited_dir (the default)"))
        if kind == "metrics":  # then those a benchmark scores itself, with its judge or verifiers
            entries += [
                Entry(name, f"{section} [{bench}]", scale, f"{bench}'s judge or verifiers")
                for bench, cls in BENCHMARKS.items()
                for name, (section, scale) in cls.scored_metrics.items()
            ]
        print(f"{kind} ({len(entries)}):")
        width = max(len(e.name) for e in entries)
        for entry in entries:
            print(f"  {entry.line(width)}")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    """The composed config of a benchmark with the comments of the files it is composed from."""
    from vbench_ray.config_show import show_config

    sys.stdout.write(show_config(_config_path(args.benchmark), args.overrides))
    return 0
