"""Helpers to put the TEST-ONLY ``torchvision`` stand-in (``./torchvision``) on a process's import path.

This directory is meant to be a ``PYTHONPATH`` entry, never imported into the pytest process itself: once
``torchvision`` is importable, transformers caches ``is_torchvision_available() == True`` for the rest of the
process, which would change what unrelated tests see. Use :func:`stub_env` for subprocesses and for Ray
``runtime_env={"env_vars": ...}``.
"""

from __future__ import annotations

import os
from pathlib import Path

STUB_ROOT = Path(__file__).resolve().parent


def stub_path() -> str:
    """The directory to prepend to ``PYTHONPATH`` so that ``import torchvision`` finds the stand-in."""
    return str(STUB_ROOT)


def stub_env(base: dict | None = None) -> dict:
    """Env vars that put the stand-in first on ``PYTHONPATH`` (kept entries of ``base``/``os.environ`` follow).

    Returns only the variables to set (currently just ``PYTHONPATH``), so the result can be merged into a
    subprocess environment (``{**os.environ, **stub_env()}``) or passed as a Ray ``runtime_env["env_vars"]``.
    """
    env = os.environ if base is None else base
    parts = [stub_path()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != stub_path()]
    return {"PYTHONPATH": os.pathsep.join(parts)}
