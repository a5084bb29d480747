"""Ids that become path components, and paths derived from them, checked before they touch the disk.

Task bundles, checklists and sweep files come from data providers; their ids end up in folder and file
names under the run directory (``submissions/<task_id>/<rep>``, ``variants/<spec>/...``, per-case media
folders). An id such as ``/home/me`` or ``../..`` would otherwise make the harness write, or delete, outside
the run. Two checks, used together:

* :func:`safe_id` for ids we define the layout of (agentic task ids, repetitions): a conservative character
  set, no separators, not ``.``/``..``, bounded length. A bad id is refused where it is loaded, with a
  message naming the field and the value.
* :func:`within` for every derived path: it resolves the joined path (``..``, absolute parts and symlinks
  included) and refuses anything that is not strictly inside ``root``. Benchmarks whose official ids may
  hold odd characters (CoVE, ViDiC, NRV case ids) are not rejected at load; their path joins go through
  :func:`within` (or :func:`component`) instead, so one bad id becomes that case's error.

:func:`component` maps any text onto a harmless single path component (for names that are only labels);
:func:`unique_component` does the same one-to-one, for files that stand for a case (an edited video): two ids
never share a file, and whoever writes and whoever reads the file name it with this one function.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

SAFE_ID = re.compile(r"[A-Za-z0-9._+=-]+")
MAX_ID_LEN = 128


def safe_id(value: object, what: str = "id") -> str:
    """``value`` if it is a usable path component; else ``ValueError`` naming ``what`` and the value.

    Allowed: 1 to 128 characters of ``A-Z a-z 0-9 . _ - + =``, not starting with ``-`` (it would read
    as an option to the command-line tools that see these paths), and not ``.`` or ``..``.
    """
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected a string, got {type(value).__name__} {value!r}")
    if not value:
        raise ValueError(f"{what}: empty")
    if len(value) > MAX_ID_LEN:
        raise ValueError(f"{what}: {value[:40]!r}... is {len(value)} characters long (at most {MAX_ID_LEN})")
    if value in (".", "..") or not SAFE_ID.fullmatch(value) or value.startswith("-"):
        raise ValueError(
            f"{what}: {value!r} cannot be used as a folder or file name (allowed: letters, digits "
            f"and . _ - + =, not starting with -, not . or ..; no / or other separators)"
        )
    return value


def within(root: str | Path, *parts: object) -> Path:
    """``root/parts...`` resolved, if it lies strictly inside ``root`` (resolved); else ``ValueError``.

    Absolute parts, ``..`` and symlinks that lead out are all caught, because the check is made on the
    resolved path. ``root`` itself is refused too: a derived path that collapses onto its root (``a/..``)
    must never be written over or deleted as if it were a case's own folder.
    """
    if not parts:
        raise ValueError("within(): name at least one part below the root")
    base = Path(root).resolve()
    text = [str(p) for p in parts]
    for p in text:
        if "\x00" in p:
            raise ValueError(f"path part {p!r} holds a NUL byte")
    path = base.joinpath(*text).resolve()
    if path == base or not path.is_relative_to(base):
        raise ValueError(f"path {'/'.join(text)!r} escapes {base}")
    return path


def component(text: object, default: str = "_") -> str:
    """Any text as one harmless path component: unsafe characters become ``_``; ``.``-only names and a
    leading ``-`` are neutralised; long names keep a readable head. For labels only (two different
    texts may map to the same name)."""
    name = re.sub(r"[^A-Za-z0-9._+=-]", "_", str(text))[:MAX_ID_LEN]
    if not name.strip("."):
        name = name.replace(".", "_") or default
    if name.startswith("-"):
        name = "_" + name[1:]
    return name


HASH_MARK = "~"  # never in component()'s output: a hashed name can never equal a name kept as it was
HASH_DIGITS = 16


def unique_component(text: object) -> str:
    """``text`` as one harmless path component, one-to-one: the text itself when it already is one (official
    ids such as ``204`` keep the official name ``204.mp4``), else its :func:`component` form, ``~`` and 16 hex
    digits of the text's SHA-256 (``a b`` -> ``a_b~...``, distinct from ``a_b`` and, short of a 64-bit hash
    collision, from any other id). ``component`` alone maps ``a b`` and ``a_b`` to one file: the second case
    would be scored on the first case's edited video."""
    text = str(text)
    name = component(text)
    if name == text:
        return name
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]
    return f"{name[: MAX_ID_LEN - HASH_DIGITS - 1]}{HASH_MARK}{digest}"
