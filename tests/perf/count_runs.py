"""A pytest plugin that counts, per test module, the pipeline runs (``vbench_ray.runner.run`` in the test's process)
and the CLI runs (subprocesses of ``vbench_ray.cli``, ``vbench-ray`` or ``jobs/``) its tests start, and prints the
modules with the most at the end. In one process (pytest-xdist's workers would keep their counts to themselves):

    PYTHONPATH=tests/perf .venv/bin/python -m pytest -q -p count_runs tests/pipeline tests/e2e

Which tests start many runs, beside ``--durations`` for which are slow (docs/testing.md). A run started by a fixture
counts for the first test that asked for it; a run in a grandchild process (a CLI's own Ray) is not seen.
"""

from __future__ import annotations

import subprocess
from collections import Counter, defaultdict

import pytest

_current: list[str] = []  # the module of the test running now
_counts: dict[str, Counter] = defaultdict(Counter)
_popen_init = subprocess.Popen.__init__


def _count(kind: str) -> None:
    _counts[_current[0] if _current else "(outside a test)"][kind] += 1


def _popen(self, args, *rest, **kwargs):
    command = " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
    if any(mark in command for mark in ("vbench_ray.cli", "vbench-ray", "jobs/")):
        _count("cli")
    return _popen_init(self, args, *rest, **kwargs)


def pytest_configure(config):
    import vbench_ray.runner as runner

    run = runner.run

    def counted_run(*args, **kwargs):  # tests import ``run`` inside the test, after this wraps it
        _count("run")
        return run(*args, **kwargs)

    runner.run = counted_run
    subprocess.Popen.__init__ = _popen


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current[:] = [item.nodeid.split("::")[0]]
    yield
    _current.clear()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("pipeline runs (run) and CLI runs (cli) per module")
    for module, c in sorted(_counts.items(), key=lambda kv: -(kv[1]["run"] + kv[1]["cli"]))[:25]:
        terminalreporter.write_line(f"{c['run']:4d} run {c['cli']:4d} cli  {module}")
