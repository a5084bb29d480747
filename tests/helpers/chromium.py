"""Headless Chromium for the tests that check a page as rendered (report.html, leaderboard.html)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def chromium_exe() -> str:
    """The chromium executable; a skip when it is not installed (a failure on CI, which must render pages)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    reason = "chromium is not installed (apt-get install -y chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + "; CI must render the report")
    pytest.skip(reason)


def run_chromium(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with its own profile folder and no network side traffic, ``args`` appended."""
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)
