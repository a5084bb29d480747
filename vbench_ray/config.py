"""Structured OmegaConf configs: typed defaults, YAML files, ``key=value`` overrides, validation.

Every knob has a default in a dataclass below (the schema) and the same default, with a comment, in
``configs/base.yaml`` (shared keys), the benchmark's YAML, or ``configs/judges/default.yaml`` (judge keys).
Each benchmark registers its own config class (a subclass of ``BaseConfig`` adding ``data``, ``metrics``
...), chosen by the ``benchmark`` key.
The schema is in struct mode, so a misspelt or unknown key is an error that names the key and lists
the valid ones, instead of being silently ignored.

A YAML file may start with ``extends: other.yaml``; the parent is merged first. Any mapping in a YAML file may
hold ``include: file.yaml``: the mapping becomes that file's content, with the keys beside ``include`` merged
over it (``judge: {include: judges/default.yaml, max_tokens: 512}``). This is how one judge config
(``configs/judges/*.yaml``) is shared by every benchmark config. A relative path is looked up next to the file
that names it, then in the repository's ``configs/``; includes nest, and a cycle is an error.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException


class ConfigError(ValueError):
    """A config that cannot be run: unknown key, missing required key, or invalid value."""


# ----------------------------------------------------------------------------- numeric bounds

BOUND = "vbench_ray.bound"  # dataclass field metadata key holding the field's ``Bound``


@dataclass(frozen=True)
class Bound:
    """The range a numeric config field accepts (a ``None`` value always passes: null means "not set").

    ``ge``/``gt`` bound it from below (>=, >), ``le``/``lt`` from above; ``note`` says what the value means.
    NaN and infinity are refused wherever a bound applies."""

    ge: Optional[float] = None
    gt: Optional[float] = None
    le: Optional[float] = None
    lt: Optional[float] = None
    note: str = ""

    def problem(self, key: str, value: Any) -> Optional[str]:
        """A message naming ``key`` when ``value`` is outside the range, else None."""
        if value is None:
            return None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
        ok = ok and (self.le is None or value <= self.le) and (self.lt is None or value < self.lt)
        if ok:
            return None
        parts = [
            f"{op} {_num(v)}"
            for op, v in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if v is not None
        ]
        what = "an integer" if isinstance(value, int) and not isinstance(value, bool) else "a number"
        return f"`{key}` = {value!r}: expected {what} {' and '.join(parts)}" + (f" ({self.note})" if self.note else "")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def bounded(
    default: Any,
    *,
    ge: Optional[float] = None,
    gt: Optional[float] = None,
    le: Optional[float] = None,
    lt: Optional[float] = None,
    note: str = "",
) -> Any:
    """A dataclass field with ``default`` whose value must lie in the given range (``check_bounds``)."""
    return field(default=default, metadata={BOUND: Bound(ge=ge, gt=gt, le=le, lt=lt, note=note)})


def check_bounds(node: Any, key: str = "") -> list[str]:
    """Every field of ``node`` (a structured config, walked recursively) outside its ``bounded`` range, named by
    its full key (``key`` is the node's own). Untyped mappings and lists are walked for typed nodes inside."""
    import dataclasses

    out: list[str] = []
    if isinstance(node, DictConfig):
        typ = OmegaConf.get_type(node)
        bounds = (
            {f.name: f.metadata[BOUND] for f in dataclasses.fields(typ) if BOUND in f.metadata}
            if dataclasses.is_dataclass(typ)
            else {}
        )
        for name in node.keys():
            sub = f"{key}.{name}" if key else str(name)
            if OmegaConf.is_missing(node, name):
                continue
            value = node[name]
            if name in bounds:
                problem = bounds[name].problem(sub, value)
                if problem:
                    out.append(problem)
            out += check_bounds(value, sub)
    elif isinstance(node, ListConfig):
        for i, value in enumerate(node):
            out += check_bounds(value, f"{key}[{i}]")
    return out


@dataclass
class OutputConfig:
    dir: str = MISSING  # the run directory: config.yaml, cases/, summary.json, report.html, wandb/
    resume: bool = True  # skip (case_id, variant) rows already in output.dir/cases; False: refuse a non-empty dir
    retry_failed: bool = True  # on resume, compute again the rows that carry an error_* (False: keep them)


@dataclass
class RunConfig:
    name: Optional[str] = None  # defaults to the name of output.dir
    seed: int = 0  # seeds bootstrap resampling, synthetic data and perturbations
    # evaluate only the first N cases (smoke runs)
    limit: Optional[int] = bounded(None, ge=0, note="the number of cases to evaluate; null: all")
    notes: List[str] = field(default_factory=list)  # lines shown in summary.json and the report


@dataclass
class RayConfig:
    address: Optional[str] = None  # null: RAY_ADDRESS if set, else a fresh local runtime; "auto": a `ray start` cluster
    num_cpus: Optional[int] = bounded(
        None, ge=1, note="null: Ray's default"
    )  # logical CPUs of a local runtime (null: Ray's default)
    batch_size: int = bounded(
        1, ge=1
    )  # cases per CPU-stage call (1: a case leaves the stage when done, the last tasks balance)
    judge_batch_size: int = bounded(2, ge=1)  # cases per judge-stage call: their requests reach the engine together
    workers: Optional[int] = bounded(
        None, ge=1, note="null: what the cluster holds"
    )  # cap on tasks per CPU stage and actors per pool (null: what the cluster holds)
    pools: Dict[str, List[int]] = field(default_factory=dict)  # per pool stage [min, max] actors, e.g. {MSM: [2, 8]}
    shard_rows: int = bounded(32, ge=1)  # rows per parquet shard written as results stream in ...
    shard_seconds: float = bounded(5.0, ge=0)  # ... or fewer, once this long has passed since the last shard
    # a stream from which no row came for this long fails, naming what it waits for (null: waits for ever)
    stall_s: Optional[float] = bounded(1800.0, gt=0, note="null: no limit")


@dataclass
class VideoConfig:
    backend: str = "auto"  # auto (decord, then PyAV) | decord | pyav


@dataclass
class StatsConfig:
    bootstrap_samples: int = bounded(
        1000, ge=1, note="resamples for the CIs"
    )  # resamples for 95% percentile bootstrap CIs
    confidence: float = bounded(0.95, gt=0, lt=1, note="e.g. 0.95")


@dataclass
class WandbConfig:
    mode: str = "offline"  # offline | online | disabled
    project: str = "vbench-ray"
    entity: Optional[str] = None
    group: Optional[str] = None  # sweeps put every variant's run in one group
    tags: List[str] = field(default_factory=list)
    log_cases: bool = True  # log the per-case table
    strips: int = 16  # cases in that table shown with frame strips as images (source_frames, edited_frames)


@dataclass
class ReportConfig:
    enabled: bool = True
    n_strips: int = bounded(3, ge=0)  # cases shown as sampled frame strips


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


# Where a relative `extends`/`include` path is looked up after the folder of the file naming it: the
# repository's configs/, so a user's YAML anywhere can say `extends: cove.yaml`, `include: judges/x.yaml`.
BUNDLED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"
INCLUDE_KEY = "include"


def find_config(name: Any, dirs: tuple[Path, ...], where: str) -> Path:
    """The YAML file ``name`` (absolute, or relative to the first of ``dirs``, then configs/, that holds it)."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: expected the path of a YAML file, got {name!r}")
    path = Path(name).expanduser()
    if path.is_absolute():
        candidates = [path]
    else:
        roots = list(dirs) + ([BUNDLED_CONFIGS] if BUNDLED_CONFIGS.is_dir() else [])
        candidates = list(dict.fromkeys(root.resolve() / path for root in roots))
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise ConfigError(
        f"{where}: config file not found: {name} (looked for " + ", ".join(str(c) for c in candidates) + ")"
    )


def read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> DictConfig:
    """Load a YAML config: merge the file named by its ``extends`` key first, and resolve ``include`` keys."""
    path = Path(path).resolve()
    if path in seen:
        raise ConfigError(f"config `extends`/`include` cycle: {' -> '.join(map(str, seen + (path,)))}")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    node = OmegaConf.load(path)
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path}: a config file must hold a mapping at the top level")
    check_no_resolvers(node, str(path))  # names the file, included or extended ones too
    chain = seen + (path,)
    plain = OmegaConf.to_container(node, resolve=False)
    parent = plain.pop("extends", None)
    merged = OmegaConf.create(resolve_includes(plain, (path.parent,), chain, str(path)))
    if parent is None:
        return merged
    parent_path = find_config(parent, (path.parent,), f"`extends` in {path}")
    return OmegaConf.merge(read_yaml(parent_path, chain), merged)


def resolve_includes(value: Any, dirs: tuple[Path, ...], chain: tuple[Path, ...], source: str, key: str = "") -> Any:
    """Replace every mapping holding ``include: FILE`` by FILE's config with the mapping's other keys merged over it.

    ``value`` is a plain container (``OmegaConf.to_container(..., resolve=False)``) and so is the result.
    FILE is found by ``find_config`` (``dirs``, then configs/), read by ``read_yaml`` (so it may itself
    ``extends`` or ``include``), and ``chain`` (the files being read) catches cycles.
    """
    if isinstance(value, list):
        return [resolve_includes(v, dirs, chain, source, f"{key}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out = {
        k: resolve_includes(v, dirs, chain, source, f"{key}.{k}" if key else str(k))
        for k, v in value.items()
        if k != INCLUDE_KEY
    }
    if INCLUDE_KEY not in value:
        return out
    where = f"`{key + '.' if key else ''}{INCLUDE_KEY}` in {source}"
    included = read_yaml(find_config(value[INCLUDE_KEY], dirs, where), chain)
    return OmegaConf.to_container(OmegaConf.merge(included, OmegaConf.create(out)), resolve=False)


# `${name:...}`: a resolver call (oc.env, env, oc.decode, oc.create, oc.select, any custom one). Plain node
# interpolations (`${data.root}`) have no colon and stay allowed.
_RESOLVER_CALL = re.compile(r"\$\{\s*([^\s{}:$]+)\s*:")


def check_no_resolvers(node: Any, where: str = "config") -> None:
    """Refuse any value (or key) that calls an OmegaConf resolver, naming the key.

    Why: the resolved config is written to config.yaml, summary.json, report.html, the judge log and
    wandb; ``judge.model='${oc.env:SECRET}'`` would copy the secret into all of them. Secrets belong in
    environment variables *named* by ``*_env`` keys (``judge.http.api_key_env``, ``agent.api_key_env``),
    which are read where they are used and never written. Resolvers other than ``oc.env`` are refused
    too: ``oc.decode``/``oc.create`` can rebuild an ``oc.env`` call from pieces, and a custom resolver
    may read anything. With no resolver left, ``to_yaml``/``to_dict`` can resolve safely.
    """
    plain = OmegaConf.to_container(node, resolve=False) if isinstance(node, (DictConfig, ListConfig)) else node

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                sub = f"{key}.{k}" if key else str(k)
                if isinstance(k, str) and _RESOLVER_CALL.search(k):
                    raise _resolver_error(sub, _RESOLVER_CALL.search(k).group(1), where)
                walk(v, sub)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{key}[{i}]")
        elif isinstance(value, str):
            m = _RESOLVER_CALL.search(value)
            if m:
                raise _resolver_error(key, m.group(1), where)

    walk(plain, "")


def _resolver_error(key: str, resolver: str, where: str) -> ConfigError:
    return ConfigError(
        f"config key `{key}` ({where}) uses the `${{{resolver}:...}}` interpolation, which is not allowed: resolved "
        "values are written to config.yaml, summary.json, the report, the judge log and wandb, so a secret read "
        "this way would be copied into all of them. Put secrets in an environment variable and give its *name* "
        "to a `*_env` key (e.g. judge.http.api_key_env=MY_KEY); write other values literally"
    )


def explain_key_error(schema: DictConfig, exc: OmegaConfBaseException) -> ConfigError:
    full_key = getattr(exc, "full_key", None) or ""
    parent_key, _, leaf = full_key.rpartition(".")
    parent = OmegaConf.select(schema, parent_key) if parent_key else schema
    valid = sorted(parent.keys()) if isinstance(parent, DictConfig) else []
    close = difflib.get_close_matches(leaf, valid, n=1)
    hint = f"; did you mean `{(parent_key + '.') if parent_key else ''}{close[0]}`?" if close else ""
    where = f"`{parent_key}`" if parent_key else "the top level"
    return ConfigError(f"unknown config key `{full_key}`{hint} (valid keys under {where}: {', '.join(valid)})")


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)


def to_dict(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
