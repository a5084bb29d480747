"""Shared body of the thin entrypoints in ``jobs/``: default config per benchmark, then ``vbench-ray run``."""

from __future__ import annotations

from pathlib import Path

from vbench_ray.cli import REPO_CONFIGS, main


def job_main(benchmark: str, argv: list[str]) -> int:
    """``[CONFIG] [key=value ...]``; CONFIG defaults to ``configs/<benchmark>.yaml``. No early Ray start
    (``cli.main`` with an ``argv``): under ``ray job submit --working-dir`` the driver's ``ray.init`` sets up the job's
    runtime environment, and the project's imports beside it failed (``ImportError`` of the project's own modules
    from the job's working directory, every time on the local multi-node cluster, tests/cluster/test_multinode.py),
    so a job imports the project, checks its config and plans before Ray's start begins (``runner.run``)."""
    if not argv or "=" in argv[0]:
        argv = [str(REPO_CONFIGS / f"{benchmark}.yaml"), *argv]
    if not Path(argv[0]).exists():
        raise SystemExit(f"config not found: {argv[0]}")
    return main(["run", *argv])
