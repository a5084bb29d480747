"""One small registry for everything chosen by name: benchmarks, metrics, editors, judge backends.

Modelled on lm-evaluation-harness's ``Registry`` (EleutherAI/lm-evaluation-harness, commit 03a6e1a,
``lm_eval/api/registry.py``), reimplemented with what this project needs:

* a name is registered once: a second, different object under a taken name is refused (``DuplicateName``)
  instead of silently replacing the first; registering the same object again is a no-op, and a lazy
  ``"module:object"`` entry may be replaced by the object it names (the module registering itself on import);
* an unknown name fails with ``UnknownName``: "unknown <kind> 'x'; available: a, b, c";
* an entry may be a ``"module:object"`` string, imported on first lookup (judge backends: vLLM and
  transformers are heavy, so naming them must not import them);
* each entry carries what ``vbench-ray list`` prints (``Entry``: paper section, scale, what it needs to run),
  given at registration or, for a registered class, read from the class by the registry's ``describe``.

A registry is a mutable mapping of name -> object (``name in R``, ``R[name]``, ``sorted(R)``; ``R[name] = obj``
registers, ``del R[name]`` unregisters), so tests can add a toy entry with ``monkeypatch.setitem``.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator


class UnknownName(KeyError, ValueError):
    """A name no entry of the registry has; the message lists the ones it has. A ``KeyError`` (a failed lookup)
    and a ``ValueError`` (a bad value in a config), so callers catching either see it."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class DuplicateName(ValueError):
    """A second, different object registered under a name already taken."""


@dataclass(frozen=True)
class Entry:
    """What ``vbench-ray list`` shows of one registered name."""

    name: str
    section: str = ""  # the paper section or official code it implements, e.g. "CoVEBench App. F.3"
    scale: str = ""  # the scale its numbers are reported on (metrics), e.g. "[0,1]"
    needs: str = ""  # what it needs to run beyond the CPU: "weights (metrics.AES.encoder, ...)", "GPU"; "" none

    def line(self, width: int = 12) -> str:
        """``name  section  [scale ...]  needs: ...`` on one line (no scale: left out)."""
        parts = [f"{self.name:<{width}}", self.section or "-"]
        if self.scale:
            parts.append(f"scale {self.scale}")
        parts.append(f"needs: {self.needs or 'CPU only'}")
        return "  ".join(parts)


def _path(obj: Any) -> str:
    """``"module:qualname"`` of a class or function (what a lazy entry for it would say)."""
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


def load_target(target: str) -> Any:
    """The object a ``"module:object"`` string names (imported now)."""
    return _load(target)


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"a lazy registry entry must be 'module:object', got {target!r}")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Registry(MutableMapping):
    """Named objects of one kind (``kind``: the word used in messages, e.g. "metric").

    ``describe(obj) -> dict`` gives an ``Entry``'s fields from a registered object (used for the fields the
    registration left empty); ``extra`` names accepted beside the entries (``editor.name=precomputed``), listed
    first in the "available" of an unknown-name message."""

    def __init__(self, kind: str, *, describe: Callable[[Any], dict] | None = None, extra: tuple[str, ...] = ()):
        self.kind = kind
        self._describe = describe
        self._extra = tuple(extra)
        self._objs: dict[str, Any] = {}
        self._meta: dict[str, Entry] = {}

    # -- registration

    def add(self, name: str, target: Any, **meta: str) -> Any:
        """Register ``target`` (an object, or a ``"module:object"`` string loaded on first lookup) under ``name``,
        with ``Entry`` fields ``meta`` (section, scale, needs). Returns ``target``."""
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")
        current = self._objs.get(name)
        if current is not None and current is not target:
            same = (isinstance(current, str) and not isinstance(target, str) and current == _path(target)) or (
                not isinstance(current, str) and not isinstance(target, str) and _path(current) == _path(target)
            )
            if not same:
                shown = current if isinstance(current, str) else _path(current)
                new = target if isinstance(target, str) else _path(target)
                raise DuplicateName(
                    f"{self.kind} {name!r} is already registered ({shown}); registering {new} "
                    f"under the same name would replace it: choose another name"
                )
        self._objs[name] = target
        if meta or name not in self._meta:
            self._meta[name] = Entry(name, **meta)
        return target

    def register(self, name: str | None = None, **meta: str) -> Callable[[Any], Any]:
        """Decorator: ``@R.register("name", section=...)`` (``name`` defaults to the object's ``name`` attribute)."""

        def decorate(obj: Any) -> Any:
            return self.add(name or getattr(obj, "name", None) or obj.__name__, obj, **meta)

        return decorate

    def __setitem__(self, name: str, target: Any) -> None:
        self.add(name, target)

    def __delitem__(self, name: str) -> None:
        if name not in self._objs:
            raise self.unknown(name)
        del self._objs[name]
        self._meta.pop(name, None)

    # -- lookup

    def unknown(self, name: Any) -> UnknownName:
        """The error for a name that is not registered."""
        available = ", ".join([*self._extra, *sorted(self._objs)]) or "none"
        return UnknownName(f"unknown {self.kind} {name!r}; available: {available}")

    def __getitem__(self, name: str) -> Any:
        try:
            target = self._objs[name]
        except (KeyError, TypeError):
            raise self.unknown(name) from None
        if isinstance(target, str):  # a lazy entry: import it now, once
            target = _load(target)
            self._objs[name] = target
        return target

    def lookup(self, name: str) -> Any:
        """``self[name]``: the object (imported if lazy), or ``UnknownName``."""
        return self[name]

    def __contains__(self, name: object) -> bool:
        return name in self._objs

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._objs))

    def __len__(self) -> int:
        return len(self._objs)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._objs)})"

    # -- what `vbench-ray list` prints

    def entry(self, name: str) -> Entry:
        """The entry of ``name``: its registration's fields, the empty ones filled by ``describe`` from the
        object (a lazy entry is not imported for this)."""
        if name not in self._objs:
            raise self.unknown(name)
        entry = self._meta.get(name) or Entry(name)
        target = self._objs[name]
        if self._describe is not None and not isinstance(target, str):
            described = {k: v for k, v in self._describe(target).items() if v and not getattr(entry, k)}
            entry = replace(entry, **described)
        return entry

    def entries(self) -> list[Entry]:
        """Every entry, in registration order."""
        return [self.entry(name) for name in self._objs]
