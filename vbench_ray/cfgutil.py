"""Reading config values whatever their container: an OmegaConf node, a dataclass, a dict, or a plain object.

``plain`` turns a config node into plain Python values (what pickles cheaply to Ray workers and what JSON
writes); ``get`` reads a dotted key from any of these containers, None (or ``default``) where it is absent.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def plain(value: Any) -> Any:
    """``value`` as plain Python: an OmegaConf node as dicts/lists (interpolations resolved), a dataclass
    instance as a dict; anything else as it is."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a core dependency
        pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def get(node: Any, key: str, default: Any = None) -> Any:
    """``node``'s dotted ``key`` (``"judge.http.base_url"``) read through OmegaConf nodes, dicts, dataclasses
    and objects; ``default`` when a part is absent, unset (``???``) or None."""
    for part in key.split("."):
        if node is None:
            return default
        try:
            if hasattr(node, "get") and not dataclasses.is_dataclass(node):
                node = node.get(part)
            else:
                node = getattr(node, part, None)
        except Exception:  # noqa: BLE001  (omegaconf: a mandatory value not set, a struct node's unknown key)
            return default
    return default if node is None else node
