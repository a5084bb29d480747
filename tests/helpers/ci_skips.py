"""Loud skips (issue 29, item 6): a test that cannot run here skips with its reason (``-ra`` prints every reason in
the summary); in CI (``CI=true``) a security, sandbox or browser test, or one that needs PyAV (a dependency on every
platform), that skips *fails* instead, naming the reason: CI must give it what it needs (root, user namespaces,
Chromium; ``.ci/run``), not pass without it. decord is not installed on arm64 (pyproject), so its skips stay skips.

Imported by ``tests/conftest.py`` (the hook below is registered from there); a pytest plugin of its own
(``-p ci_skips``) for the test that checks it.
"""

from __future__ import annotations

import os

import pytest

# modules whose skips fail in CI: the agent sandbox and its escapes, secrets and hardening, the browser render
MUST_RUN_IN_CI = (
    "test_agent_sandbox.py",
    "test_agent_loop.py",
    "test_security.py",
    "test_security_run.py",
    "test_hardening.py",
    "test_hardening_editors.py",
    "test_hardening_exits.py",
    "test_report.py",
)
MUST_IMPORT_IN_CI = ("could not import 'av'",)  # importorskip("av") anywhere


def skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)
    return reason.removeprefix("Skipped: ")


def must_run(item, reason: str) -> bool:
    return item.path.name in MUST_RUN_IN_CI or any(s in reason for s in MUST_IMPORT_IN_CI)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or os.environ.get("CI") != "true":
        return
    reason = skip_reason(report)
    if must_run(item, reason):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI=true), where it must run: {reason}"
