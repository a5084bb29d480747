"""Loud skips (issue 29, item 6; ``tests/helpers/ci_skips.py``): a pytest run of a throw-away test directory, as a
subprocess with the plugin, outside CI and with ``CI=true``."""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CASES = {
    "test_security.py": "import pytest\n\ndef test_escape():\n    pytest.skip('user namespaces are restricted here')\n",
    "test_report.py": "import pytest\n\n@pytest.mark.skipif(True, reason='chromium is not installed')\n"
    "def test_render():\n    pass\n",
    # importorskip's own words for a missing PyAV (which is installed here, so it cannot really be missing)
    "test_video.py": "import pytest\n\ndef test_pyav():\n"
    "    pytest.skip(\"could not import 'av': No module named 'av'\")\n\n"
    "def test_decode():\n    pytest.importorskip('decord_not_here')\n",
}


def _pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess:
    for name, text in CASES.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-ra",
            "-p",
            "helpers.ci_skips",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_outside_ci_every_skip_says_why(tmp_path):
    done = _pytest(tmp_path, None)
    assert done.returncode == 0, done.stdout
    assert "4 skipped" in done.stdout
    for why in ("user namespaces are restricted here", "chromium is not installed", "decord_not_here"):
        assert why in done.stdout, done.stdout


def test_in_ci_a_security_or_browser_skip_fails_with_its_reason(tmp_path):
    done = _pytest(tmp_path, "true")
    assert done.returncode == 1, done.stdout
    out = done.stdout
    assert "skipped in CI (CI=true), where it must run: user namespaces are restricted here" in out
    assert "skipped in CI (CI=true), where it must run: chromium is not installed" in out
    assert "skipped in CI (CI=true), where it must run: could not import 'av'" in out
    assert "1 skipped" in out  # the decord test only: decord is not installed on every platform
    assert "decord_not_here" in out
