"""``vbench-ray run`` and ``vbench-ray sweep``: a benchmark config evaluated, its numbers printed, its exit status
(a failure never exits 0: an unavailable metric, every case failed); and the command's first step, Ray's start
begun before the project's imports and the config's load (``ray_start.start_ray_early``). ``vbench_ray.cli``
builds the parsers and wires these in."""

from __future__ import annotations

import argparse
import os
import sys

from vbench_ray.board_text import format_groups


def cmd_run(args: argparse.Namespace) -> int:
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    cfg = load_config(args.config, args.overrides)
    if args.dry_run:
        from vbench_ray.run_plan import dry_run

        print("\n".join(dry_run(cfg)))
        return 0
    result = run(cfg)
    _print_result(result)
    return _run_exit(result.summary)


# Exit statuses: 1 some edits failed (`edit`), 2 a config or data error (nothing ran), 3 a metric unavailable (a dead
# judge: summary.json written, but the number is not a score), 4 no space left on device, 5 every case failed
# (summary.json written, nothing scored), 130 interrupted (Ctrl-C: vbench_ray.interrupt).
EXIT_UNAVAILABLE = 3
EXIT_NO_SPACE = 4
EXIT_ALL_FAILED = 5


def _run_exit(summary: dict) -> int:
    """The exit status of a finished run: a run in which every case failed (videos that do not
    load, an editor that made nothing) scored nothing, whatever its metrics say: say why, exit non-zero."""
    code = _unavailable_exit(summary)
    n, failures = summary.get("n_rows") or 0, summary.get("failures") or {}
    if n and failures.get("count", 0) >= n:
        first = (failures.get("examples") or [{}])[0]
        stages = ", ".join(f"{stage}: {count}" for stage, count in (failures.get("by_stage") or {}).items())
        print(
            f"error: every case failed ({n} of {n}; {stages}): nothing was scored. The first: case "
            f"{first.get('case_id')!r}: {first.get('error')} (every failure is in summary.json's `failures`; "
            f"fix the input and run the same command again: failed cases are computed again)",
            file=sys.stderr,
        )
        return EXIT_ALL_FAILED
    return code


def _unavailable_exit(summary: dict) -> int:
    """A metric whose judge answers were mostly unusable is no score; say so, exit non-zero."""
    from vbench_ray.benchmarks.base import unavailable_metrics

    bad = unavailable_metrics(summary)
    for name, reason in bad.items():
        print(f"error: metric {name} is unavailable: {reason}", file=sys.stderr)
    return EXIT_UNAVAILABLE if bad else 0


def _print_result(result) -> None:
    metrics = result.summary.get("metrics", {})
    print(f"run directory: {result.run_dir}")
    print(f"summary:       {result.summary_path}")
    print(f"report:        {result.report_path}")
    by_rows = (result.summary.get("sweep") or {}).get("rows_by_variant")
    if by_rows:  # a sweep: the summary's n_rows is the base variant's; the run holds every variant's rows
        print(
            f"computed {result.n_computed} rows in {result.seconds:.1f} s; {sum(by_rows.values())} rows in the run "
            f"({len(by_rows)} variants: " + ", ".join(f"{v} {n}" for v, n in by_rows.items()) + ")"
        )
    else:
        print(
            f"computed {result.n_computed} rows in {result.seconds:.1f} s; {result.summary.get('n_rows', 0)} rows "
            "in the run"
        )
    for name, m in metrics.items():
        ci = m.get("ci95")
        ci_txt = f"[{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "n/a"
        value = f"{m['value']:.4g}" if m.get("value") is not None else "n/a"
        print(
            f"  {name:<8} {value:>8}  95% CI {ci_txt:<20} n={m.get('n', 0)}"
            + (f" excluded={m['n_excluded']}" if m.get("n_excluded") else "")
            + (f" failed={m['n_failed']}" if m.get("n_failed") else "")
            + (f" invalid-judge-answers={m['n_invalid']}" if m.get("n_invalid") else "")
            + (
                f" ({m.get('note') or m.get('unavailable')})"
                if m.get("value") is None and (m.get("note") or m.get("unavailable"))
                else ""
            )
            + (
                f" (includes {m['n_fallback']} never-valid answers scored wrong / Score-MCQ 1, not the judge's)"
                if m.get("n_fallback") and m.get("value") is not None
                else ""
            )
        )
    by_method = result.summary.get("by_method")
    if isinstance(by_method, dict) and by_method:  # NRVBench: the paper's Tables 2 and 3 are per method
        print("per method:")
        print("\n".join(format_groups(by_method, "method", list(metrics))))
    failures = result.summary.get("failures", {})
    if failures.get("count"):
        print(f"  {failures['count']} case(s) failed: {failures['by_stage']} (details in summary.json)")


def cmd_sweep(args: argparse.Namespace) -> int:
    from vbench_ray.runner import run
    from vbench_ray.configure import load_sweep

    sweep = load_sweep(args.sweep, args.overrides)
    result = run(sweep.config, variants=sweep.variants)
    _print_result(result)
    _print_variants(result.summary)
    return _run_exit(result.summary)


def _print_variants(summary: dict) -> None:
    """Every metric of every variant of a sweep: value, 95% CI and n."""
    by_variant = summary.get("by_variant") or {}
    if by_variant:
        print("per variant (value [95% CI] n):")
        print("\n".join(format_groups(by_variant, "variant", list(summary.get("metrics") or {}))))


def _start_ray_early(args: argparse.Namespace) -> bool:
    """``run`` (not ``--dry-run``): begin Ray's start now, before the project's imports, the config's load and
    checks and the plan (``ray_start.start_ray_early``), with the settings ``quick_ray_settings`` reads. Not
    under ``ray job submit`` (its driver has ``RAY_JOB_CONFIG_JSON_ENV_VAR``): there ``ray.init`` sets up the
    job's runtime environment, and the project's imports beside it failed (``vbench_ray/jobs.py``)."""
    if args.command != "run" or args.dry_run or "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        return False
    from vbench_ray.ray_start import quick_ray_settings, ray_imported, start_ray_early

    settings = quick_ray_settings(args.config, args.overrides)
    if settings is None or not start_ray_early(*settings):
        return False
    # Ray's import first, alone: the driver's imports beside it would share the interpreter's lock and delay the
    # connection (the job's workers start when the driver registers); the project's imports, the config and the
    # plan then overlap ray.init, which mostly waits (a connection, Ray's own processes)
    ray_imported()
    return True


def _settle_early_start() -> None:
    """After Ctrl-C: the early start (if any) finished or failed, never left with ``ray.init`` half done."""
    ray_start = sys.modules.get("vbench_ray.ray_start")
    if ray_start is not None:
        ray_start.settle_ray_start()


def _end_unused_start() -> None:
    """A command that stopped before its run took the early start over: shut that start down."""
    ray_start = sys.modules.get("vbench_ray.ray_start")
    if ray_start is not None:
        ray_start.end_unused_start()
