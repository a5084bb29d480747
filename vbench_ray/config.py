"""Structured OmegaConf configs: typed defaults, YAML files, ``key=value`` overrides, validation.

Every knob has a default in a dataclass below (the schema) and the same default, with a comment, in
``configs/base.yaml`` (shared keys) or the benchmark's YAML. Each benchmark registers its own config
class (a subclass of ``BaseConfig`` adding ``data``, ``metrics`` ...), chosen by the ``benchmark`` key.
The schema is in struct mode, so a misspelt or unknown key is an error that names the key and lists
the valid ones, instead of being silently ignored.

A YAML file may start with ``extends: other.yaml`` (relative to itself); the parent is merged first.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError


class ConfigError(ValueError):
    """A config that cannot be run: unknown key, missing required key, or invalid value."""


@dataclass
class OutputConfig:
    dir: str = MISSING  # the run directory: config.yaml, cases/, summary.json, report.html, wandb/
    resume: bool = True  # skip (case_id, variant) rows already in output.dir/cases; False: refuse a non-empty dir


@dataclass
class RunConfig:
    name: Optional[str] = None  # defaults to the name of output.dir
    seed: int = 0  # seeds bootstrap resampling, synthetic data and perturbations
    limit: Optional[int] = None  # evaluate only the first N cases (smoke runs)
    notes: List[str] = field(default_factory=list)  # lines shown in summary.json and the report


@dataclass
class RayConfig:
    address: Optional[str] = None  # null: RAY_ADDRESS if set, else a fresh local runtime; "auto": a `ray start` cluster
    num_cpus: Optional[int] = None  # logical CPUs of a local runtime (null: Ray's default)
    batch_size: int = 2  # cases per map_batches call
    workers: int = 2  # tasks / actors per CPU stage
    shard_rows: int = 32  # rows per parquet shard written as results stream in


@dataclass
class VideoConfig:
    backend: str = "auto"  # auto (decord, then PyAV) | decord | pyav


@dataclass
class StatsConfig:
    bootstrap_samples: int = 1000  # resamples for 95% percentile bootstrap CIs
    confidence: float = 0.95


@dataclass
class WandbConfig:
    mode: str = "offline"  # offline | online | disabled
    project: str = "vbench-ray"
    entity: Optional[str] = None
    group: Optional[str] = None  # sweeps put every variant's run in one group
    tags: List[str] = field(default_factory=list)
    log_cases: bool = True  # log the per-case table


@dataclass
class ReportConfig:
    enabled: bool = True
    n_strips: int = 3  # cases shown as sampled frame strips


@dataclass
class BaseConfig:
    benchmark: str = MISSING
    output: OutputConfig = field(default_factory=OutputConfig)
    run: RunConfig = field(default_factory=RunConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    video: VideoConfig = field(default_factory=VideoConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    report: ReportConfig = field(default_factory=ReportConfig)


# Allowed values of string-valued keys, checked after merging (key suffix -> choices).
CHOICES: dict[str, tuple[str, ...]] = {
    "video.backend": ("auto", "decord", "pyav"),
    "wandb.mode": ("offline", "online", "disabled"),
}


def _read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> DictConfig:
    """Load a YAML config, merging the file named by its ``extends`` key first."""
    path = path.resolve()
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if path in seen:
        raise ConfigError(f"config `extends` cycle: {' -> '.join(map(str, seen + (path,)))}")
    node = OmegaConf.load(path)
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path}: a config file must hold a mapping at the top level")
    parent = node.pop("extends", None)
    if parent is None:
        return node
    return OmegaConf.merge(_read_yaml(path.parent / str(parent), seen + (path,)), node)


def _schema_for(benchmark: Any) -> type:
    from vbench_ray.benchmarks import BENCHMARKS

    if benchmark in (None, MISSING, "???"):
        raise ConfigError("config key `benchmark` is not set (one of: " + ", ".join(sorted(BENCHMARKS)) + ")")
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {benchmark!r}; known: {sorted(BENCHMARKS)}")
    return BENCHMARKS[benchmark].config_class


def _explain_key_error(schema: DictConfig, exc: OmegaConfBaseException) -> ConfigError:
    full_key = getattr(exc, "full_key", None) or ""
    parent_key, _, leaf = full_key.rpartition(".")
    parent = OmegaConf.select(schema, parent_key) if parent_key else schema
    valid = sorted(parent.keys()) if isinstance(parent, DictConfig) else []
    close = difflib.get_close_matches(leaf, valid, n=1)
    hint = f"; did you mean `{(parent_key + '.') if parent_key else ''}{close[0]}`?" if close else ""
    where = f"`{parent_key}`" if parent_key else "the top level"
    return ConfigError(f"unknown config key `{full_key}`{hint} (valid keys under {where}: {', '.join(valid)})")


def _check_choices(cfg: DictConfig) -> None:
    from vbench_ray.benchmarks import BENCHMARKS

    choices = dict(CHOICES)
    choices.update(getattr(BENCHMARKS[cfg.benchmark], "config_choices", {}))
    for key, allowed in choices.items():
        value = OmegaConf.select(cfg, key)
        if value is not None and value not in allowed:
            raise ConfigError(f"config key `{key}` = {value!r} is not one of {list(allowed)}")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> DictConfig:
    """Load ``path`` (YAML, may ``extends`` another), apply ``key=value`` overrides, validate.

    Returns a read-only structured config. Raises ``ConfigError`` with a message naming the key.
    """
    user = _read_yaml(Path(path)) if path else OmegaConf.create({})
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
    try:
        user = OmegaConf.merge(user, OmegaConf.from_dotlist(list(overrides or [])))
    except OmegaConfBaseException as exc:
        raise ConfigError(f"cannot parse overrides {overrides}: {exc}") from exc
    schema = OmegaConf.structured(_schema_for(user.get("benchmark")))
    try:
        cfg = OmegaConf.merge(schema, user)
    except (ConfigKeyError, ConfigAttributeError) as exc:
        raise _explain_key_error(schema, exc) from None
    except ValidationError as exc:
        raise ConfigError(f"invalid value for config key `{exc.full_key}`: {exc.msg}") from None
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError("required config keys are not set: " + ", ".join(f"`{k}`" for k in missing)
                          + " (set them in the YAML or as key=value)")
    _check_choices(cfg)
    OmegaConf.set_readonly(cfg, True)
    return cfg


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)


def to_dict(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
