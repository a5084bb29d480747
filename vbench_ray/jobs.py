"""Shared body of the thin entrypoints in ``jobs/``: default config per benchmark, then ``vbench-ray run``."""

from __future__ import annotations

from pathlib import Path

from vbench_ray.cli import REPO_CONFIGS, main


def job_main(benchmark: str, argv: list[str], *, start_ray_early: bool = False) -> int:
    """``[CONFIG] [key=value ...]``; CONFIG defaults to ``configs/<benchmark>.yaml``. The job scripts pass
    ``start_ray_early=True`` (their ``argv`` is the process's own command line: ``cli.main``)."""
    if not argv or "=" in argv[0]:
        argv = [str(REPO_CONFIGS / f"{benchmark}.yaml"), *argv]
    if not Path(argv[0]).exists():
        raise SystemExit(f"config not found: {argv[0]}")
    return main(["run", *argv], start_ray_early=start_ray_early)
