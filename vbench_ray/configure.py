"""Resolve a run's config (the benchmark's schema from the registry, the YAML, the overrides, validation) and
a sweep file's (its base config and its variants).

This sits above ``vbench_ray.benchmarks`` (it needs the registry to pick the schema) while
``vbench_ray.config`` below it holds the mechanics every module may import (schemas, ``ConfigError``,
YAML ``extends`` and ``include``, the resolver check), so no module imports back up the layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from vbench_ray.benchmarks import BENCHMARKS
from vbench_ray.config import (
    BUNDLED_CONFIGS,
    CHOICES,
    INCLUDE_KEY,
    ConfigError,
    check_no_resolvers,
    explain_key_error,
    find_config,
    read_yaml,
    resolve_includes,
)
from vbench_ray.sweeps import Variant, variants_from_axes


def _schema_for(benchmark: Any) -> type:
    if benchmark in (None, MISSING, "???"):
        raise ConfigError("config key `benchmark` is not set (one of: " + ", ".join(sorted(BENCHMARKS)) + ")")
    if benchmark not in BENCHMARKS:
        raise ConfigError(f"config key `benchmark`: {BENCHMARKS.unknown(benchmark)}")
    return BENCHMARKS[benchmark].config_class


def _check_choices(cfg: DictConfig) -> None:
    choices = dict(CHOICES)
    choices.update(BENCHMARKS[cfg.benchmark].choices())  # a judge backend registered by now counts
    for key, allowed in choices.items():
        value = OmegaConf.select(cfg, key)
        if value is not None and value not in allowed:
            raise ConfigError(f"config key `{key}` = {value!r} is not one of {list(allowed)}")


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None, *, require_all: bool = True
) -> DictConfig:
    """Load ``path`` (YAML, may ``extends`` another and ``include`` files), apply ``key=value`` overrides, validate.

    Returns a read-only structured config. Raises ``ConfigError`` with a message naming the key.
    ``require_all=False`` leaves required keys unset (``???``: the data paths, ``output.dir``) for commands that
    never read them (``vbench-ray weights check``, ``vbench-ray config``).
    """
    user = read_yaml(Path(path)) if path else OmegaConf.create({})
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
    user = _apply_overrides(user, list(overrides or []), Path(path).resolve().parent if path else None)
    check_no_resolvers(user, f"{Path(path).name} or the overrides" if path else "the overrides")
    schema = OmegaConf.structured(_schema_for(user.get("benchmark")))
    try:
        cfg = OmegaConf.merge(schema, user)
    except (ConfigKeyError, ConfigAttributeError) as exc:
        raise explain_key_error(schema, exc) from None
    except ValidationError as exc:
        raise ConfigError(f"invalid value for config key `{exc.full_key}`: {exc.msg}") from None
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing and require_all:
        raise ConfigError(
            "required config keys are not set: "
            + ", ".join(f"`{k}`" for k in missing)
            + " (set them in the YAML or as key=value)"
        )
    _check_choices(cfg)
    if "editor" in cfg and cfg.editor.name != "precomputed":  # the editor's hash goes in config.yaml
        from vbench_ray.editors import editor_config_hash

        cfg.editor.config_hash = editor_config_hash(cfg.editor)
    OmegaConf.set_readonly(cfg, True)
    return cfg


def _apply_overrides(user: DictConfig, overrides: list[str], config_dir: Path | None) -> DictConfig:
    """Merge ``key=value`` overrides; ``KEY.include=FILE`` first replaces the node KEY by FILE's config
    (``editor=<model>`` is ``editor.include=editors/<model>.yaml``: ``_expand_group``).

    ``judge.include=judges/gpt5_mini_http.yaml judge.model=gpt-5-mini`` switches the whole judge block to
    that file, then sets one of its keys. FILE is looked up in the working directory, next to the config
    file, then in the repository's configs/. ``{include: FILE}`` inside a value (``judges=[{include: ...}]``)
    is resolved like in a YAML file.
    """
    dirs = (Path.cwd(),) + ((config_dir,) if config_dir else ())
    plain = []
    for item in map(_expand_group, overrides):
        key, _, value = item.partition("=")
        key = key.strip()
        if key != INCLUDE_KEY and not key.endswith("." + INCLUDE_KEY):
            plain.append(item)
            continue
        node = key[: -len(INCLUDE_KEY) - 1]
        if not node:
            raise ConfigError(
                f"override {item!r}: name the key whose block the file replaces, e.g. "
                f"judge.{INCLUDE_KEY}=judges/default.yaml (a whole config: pass it as the config file)"
            )
        included = read_yaml(find_config(value.strip(), dirs, f"override `{item}`"))
        try:
            OmegaConf.update(user, node, included, merge=False)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"cannot apply override {item!r}: {exc}") from exc
    try:
        parsed = OmegaConf.to_container(OmegaConf.from_dotlist(plain), resolve=False)
        return OmegaConf.merge(user, OmegaConf.create(resolve_includes(parsed, dirs, (), "the overrides")))
    except yaml.YAMLError:
        raise _yaml_error(plain) from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"cannot parse overrides {overrides}: {exc}") from exc


def _yaml_error(items: list[str]) -> ConfigError:
    """The override whose value is not YAML, named, with the parser's complaint in one line, not
    a ``yaml.parser.ParserError`` traceback (e.g. for ``metrics.enabled=[SSIM,${...}]``)."""
    for item in items:
        try:
            OmegaConf.from_dotlist([item])
        except yaml.YAMLError as exc:
            reason = " ".join(str(getattr(exc, "problem", None) or exc).split())
            hint = (
                " A `${...}` inside [...] or {...} must be quoted to parse (\"${...}\"), and a resolver call such as "
                "${oc.env:...} is refused anyway: give a secret's environment variable *name* to a `*_env` key."
                if "${" in item
                else ""
            )
            return ConfigError(f"override {item!r}: the value is not valid YAML ({reason}).{hint}")
    return ConfigError(f"cannot parse overrides {items}")


# `KEY=NAME` picks a bundled file for a whole block: `editor=vace` is `editor.include=editors/vace.yaml`.
CONFIG_GROUPS = {"editor": "editors"}
BUILTIN_EDITORS = ("precomputed",)  # editor names with no file: `editor=precomputed` is `editor.name=precomputed`


def _expand_group(item: str) -> str:
    """``editor=<model>`` -> ``editor.include=<configs/editors/<model>.yaml>``; an unknown name is an error that lists
    the known ones. A value naming a YAML file (``editor=my/vace.yaml``) includes that file."""
    key, _, value = item.partition("=")
    key, value = key.strip(), value.strip()
    if key not in CONFIG_GROUPS:
        return item
    if value.endswith((".yaml", ".yml")):
        return f"{key}.{INCLUDE_KEY}={value}"
    if key == "editor" and value in BUILTIN_EDITORS:
        return f"editor.name={value}"
    folder = BUNDLED_CONFIGS / CONFIG_GROUPS[key]
    known = sorted(p.stem for p in folder.glob("*.yaml"))
    if value in known:
        return f"{key}.{INCLUDE_KEY}={folder / (value + '.yaml')}"
    names = (list(BUILTIN_EDITORS) if key == "editor" else []) + known
    raise ConfigError(
        f"override {item!r}: unknown {key} {value!r}; known {key}s: {', '.join(names)} "
        f"(configs/{CONFIG_GROUPS[key]}/<name>.yaml), or the path of a YAML file"
    )


@dataclass
class Sweep:
    name: str
    config: DictConfig
    variants: list[Variant]


def load_sweep(path: str | Path, overrides: list[str] | None = None) -> Sweep:
    """A sweep file: its base benchmark config (with overrides applied) and its variants."""
    path = Path(path).resolve()
    if not path.exists():
        raise ConfigError(f"sweep file not found: {path}")
    raw = OmegaConf.load(path)
    check_no_resolvers(raw, str(path))  # `name` becomes the wandb group and a summary field: no ${oc.env:...}
    spec = OmegaConf.to_container(raw, resolve=True)
    unknown = set(spec) - {"base", "name", "axes"}
    if unknown:
        raise ConfigError(f"{path}: unknown sweep keys {sorted(unknown)} (expected base, name, axes)")
    if "base" not in spec or "axes" not in spec:
        raise ConfigError(f"{path}: a sweep needs `base` (a benchmark config) and `axes`")
    name = spec.get("name") or path.stem
    cfg = load_config(path.parent / spec["base"], [f"wandb.group={name}", *(overrides or [])])
    return Sweep(name, cfg, variants_from_axes(spec["axes"] or {}))
