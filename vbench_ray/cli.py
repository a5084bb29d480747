"""``vbench-ray``: evaluate video benchmarks on Ray; one command per line below (``vbench-ray COMMAND --help``).

vbench-ray list [benchmarks|metrics|judges|editors]  what can be run: one line each (paper section, scale, needs)
vbench-ray config BENCHMARK [key=value ...]  the composed config of a benchmark (cove, or a YAML) with comments
vbench-ray run CONFIG [key=value ...]        evaluate one benchmark config (local Ray or RAY_ADDRESS)
vbench-ray edit EDITOR.yaml [key=value ...]  edit CoVEBench's cases with one editing model (configs/editors/)
                                             into output.dir/{id}.mp4; resumable; Table 5 cost in summary.json
vbench-ray weights check CONFIG [key=value]  every model the config needs (metrics, editor, judges), no data:
                                             all missing ones at once, where each is published; then loads them
vbench-ray sweep SWEEP [key=value ...]       the same over a sweep's variants (fps, resolution, noise, order)
vbench-ray synth cove|vidic|nrv|agentic --out DIR  write a synthetic mini benchmark in the official layout
vbench-ray verify agentic --task T --submission S   score one AgenticVBench submission, write reward.json
vbench-ray report RUN_DIR                    (re)write RUN_DIR/report.html from the run's files
vbench-ray compare RUN_DIR RUN_DIR ... --out DIR  leaderboard with paired statistics across runs
vbench-ray demo [--out DIR]                  synth + run on the embedded default, print where things are
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from pathlib import Path

from vbench_ray.cli_run import (
    EXIT_NO_SPACE,
    EXIT_UNAVAILABLE,
    _end_unused_start,
    _print_result,
    _run_exit,
    _settle_early_start,
    _start_ray_early,
    cmd_run,
    cmd_sweep,
)
from vbench_ray.discovery import CONFIG_KEYS_HELP, LISTS, cmd_config, cmd_list, cmd_weights

REPO_CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


def cmd_edit(args: argparse.Namespace) -> int:
    """CoVEBench's cases through one editor (configs/editors/<model>.yaml), nothing evaluated: the edited videos
    in output.dir in the official layout ({id}.mp4), the run's files (cases/, summary.json with the ``edit``
    section, report.html) beside them. Evaluate later with ``run configs/cove.yaml data.edited_dir=<output.dir>``."""
    from vbench_ray.config import ConfigError
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    out = [o.split("=", 1)[1] for o in args.overrides if o.startswith("output.dir=")]
    if not out:
        raise ConfigError("vbench-ray edit needs output.dir=DIR (where the edited videos {id}.mp4 go)")
    editor = Path(args.editor).expanduser()
    for bundled in (
        REPO_CONFIGS.parent / args.editor,
        REPO_CONFIGS / args.editor,
        REPO_CONFIGS / "editors" / f"{args.editor}.yaml",
    ):
        if not editor.is_file() and bundled.is_file():  # configs/editors/vace.yaml from elsewhere, or just `vace`
            editor = bundled
    cfg = load_config(
        REPO_CONFIGS / "cove.yaml",
        [
            f"editor.include={editor.resolve()}",
            "metrics.enabled=[]",
            f"editor.output_dir={Path(out[-1]).resolve()}",
            "editor.layout=flat",
            *args.overrides,
        ],
    )
    if cfg.editor.name == "precomputed":
        raise ConfigError(f"{args.editor}: editor.name is precomputed: nothing to edit")
    if cfg.editor.name == "command" and not cfg.editor.command:
        raise ConfigError(f"{args.editor}: editor.command is not set (the model's inference command template)")
    result = run(cfg)
    edit = result.summary.get("edit", {})
    print(f"edited videos: {cfg.editor.output_dir}")
    print(f"summary:       {result.summary_path}")
    spf, peak = edit.get("mean_seconds_per_frame"), edit.get("peak_mb")
    print(
        f"{edit.get('n_edited', 0)} edited, {edit.get('n_reused', 0)} reused, {edit.get('n_failed', 0)} failed; "
        f"{'n/a' if spf is None else f'{spf:.3f}'} s/frame, peak {'n/a' if peak is None else f'{peak:,.1f}'} MB"
    )
    for case_id, error in list(edit.get("failed", {}).items())[:10]:
        print(f"  failed {case_id}: {error}", file=sys.stderr)
    return _run_exit(result.summary) or (1 if edit.get("n_failed") else 0)


def cmd_synth(args: argparse.Namespace) -> int:
    """The benchmark's synthetic mini benchmark (``Benchmark.synth``); prints its paths as JSON."""
    from vbench_ray.benchmarks import get_benchmark
    from vbench_ray.registry import UnknownName

    try:
        bench = get_benchmark(args.benchmark)  # the class: synthetic data needs no config
    except UnknownName as exc:
        print(f"vbench-ray synth: {exc}", file=sys.stderr)
        return 2
    info = bench.synth(Path(args.out), n=args.n, seed=args.seed)
    print(json.dumps({k: str(v) for k, v in info.items() if not isinstance(v, dict)}, indent=2))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """AgenticVBench: score one submission folder against its task bundle, write reward.json."""
    from vbench_ray.agentic import BundleError, verify_cli

    try:
        reward = verify_cli(Path(args.task), Path(args.submission), out_path=args.out, judge=args.judge or None)
    except BundleError as exc:  # the task bundle itself is malformed: nothing to score against (exit 2)
        print(f"error: the task bundle {args.task} cannot be used: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(reward, indent=2, default=str))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from vbench_ray.report import write_report

    print(write_report(Path(args.run_dir), n_strips=args.n_strips))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from vbench_ray.compare import CompareError, format_board, main_compare

    try:
        board, paths = main_compare(
            args.run_dirs,
            args.out,
            reference=args.reference,
            allow_mixed=args.allow_mixed,
            metrics=args.metrics or None,
            rank_by=args.rank_by,
            variant=args.variant,
            seed=args.seed,
            n_resamples=args.n_resamples,
            n_permutations=args.n_permutations,
            alpha=args.alpha,
            wandb_mode=args.wandb_mode,
            human_prefs=args.human_prefs,
            human_answers=args.human_answers,
            judge_repeats=args.judge_repeats,
        )
    except (CompareError, ValueError, OSError) as exc:  # bad runs or analysis inputs: the message names them
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_board(board))
    for kind, path in paths.items():
        if path:
            print(f"{kind + ':':<6} {path}")
    return 0


DEMO_NOTE = (
    "The checklist judge of this demo is a tiny model with random weights, built offline: its "
    "answers are mostly invalid, so UAS/IFS/VRS/SEM are n/a or mean nothing. It shows the "
    "judge path running end to end; point judge.model at a real VLM for real scores."
)


def cmd_demo(args: argparse.Namespace) -> int:
    """The embedded default: a synthetic mini CoVEBench, objective metrics and a tiny random judge, on local Ray."""
    from vbench_ray.configure import load_config
    from vbench_ray.judges.tiny import build_tiny_judge
    from vbench_ray.runner import run
    from vbench_ray.synth.cove import synth_cove

    out = Path(args.out).resolve()
    data = synth_cove(out / "data", n=args.n, seed=args.seed)
    judge = build_tiny_judge(out / "tiny-judge", seed=args.seed)
    cfg = load_config(
        REPO_CONFIGS / "cove.yaml",
        [
            f"data.checklist={data['checklist']}",
            f"data.source_dir={data['source_dir']}",
            f"data.edited_dir={data['edited_dir']}",
            f"output.dir={out / 'run'}",
            f"run.seed={args.seed}",
            "judge.backend=hf",
            f"judge.model={judge}",
            "judge.name=tiny-random-judge",
            "judge.max_tokens=48",
            "judge.max_retries=1",
            "judge.video.max_frames=4",
            "judge.max_invalid_fraction=1.0",  # the random judge's answers are mostly invalid, by design (DEMO_NOTE)
            "judge.parse=lenient",  # never-valid answers count wrong (official parsing would drop them all: no number)
            f"run.notes=[{json.dumps(DEMO_NOTE)}]",
            *args.overrides,
        ],
    )
    result = run(cfg)
    print(f"synthetic data: {out / 'data'}")
    _print_result(result)
    print(f"note: {DEMO_NOTE}")
    return 0


def _overview() -> str:
    """The module docstring as ``--help``'s description, its command lines indented by four spaces (the
    formatter keeps docstrings flush left)."""
    head, _, commands = __doc__.partition("\n\n")
    return f"{head}\n\n{textwrap.indent(commands, '    ')}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vbench-ray", description=_overview(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list benchmarks, metrics, judge backends and editors (paper section, needs)")
    p.add_argument("what", nargs="?", choices=LISTS, help="one registry (default: all four)")
    p.set_defaults(fn=cmd_list)

    p = sub.add_parser(
        "config",
        help="print a benchmark's composed config, every key with its comment",
        epilog="Save it, edit it, run it: vbench-ray config cove > my.yaml; vbench-ray run my.yaml ...",
    )
    p.add_argument("benchmark", help="a benchmark's name (cove, vidic, nrv, agentic: configs/<name>.yaml) or a YAML")
    p.add_argument("overrides", nargs="*", help="key=value overrides applied first, e.g. editor=vace")
    p.set_defaults(fn=cmd_config)

    p = sub.add_parser(
        "run",
        help="evaluate a benchmark config",
        epilog=CONFIG_KEYS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", help="YAML config, e.g. configs/cove.yaml")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. output.dir=runs/x")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (stages, pools and their resources, cases, judge requests), compute nothing "
        "(starts Ray only to read the cluster's size)",
    )
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("edit", help="edit CoVEBench's cases with one editing model ({id}.mp4 in output.dir)")
    p.add_argument(
        "editor", help="editor YAML, e.g. configs/editors/vace.yaml, or a bundled one's name (vace, identity)"
    )
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. data.checklist=... output.dir=...")
    p.set_defaults(fn=cmd_edit)

    p = sub.add_parser("weights", help="check every model a config needs (metrics, editor, judges); no data needed")
    p.add_argument("action", choices=["check"], help="check: report every missing weight at once, then load them")
    p.add_argument("config", help="YAML config, e.g. configs/cove.yaml, or a benchmark's name (cove)")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. metrics.enabled=[SSIM,AES]")
    p.set_defaults(fn=cmd_weights)

    p = sub.add_parser("sweep", help="evaluate a config over the variants of a sweep file")
    p.add_argument("sweep", help="sweep YAML, e.g. configs/sweeps/vidic_robustness.yaml")
    p.add_argument("overrides", nargs="*", help="key=value overrides of the base config")
    p.set_defaults(fn=cmd_sweep)

    p = sub.add_parser("synth", help="write a synthetic mini benchmark")
    p.add_argument("benchmark", help="which benchmark's layout (cove, vidic, nrv, agentic; `vbench-ray list`)")
    p.add_argument("--out", required=True, help="folder to write the data into (its paths are printed as JSON)")
    p.add_argument("--n", type=int, default=8, help="number of cases (default: 8; agentic: one task per family)")
    p.add_argument("--seed", type=int, default=0, help="seeds the videos and annotations (default: 0)")
    p.set_defaults(fn=cmd_synth)

    p = sub.add_parser("verify", help="verify one AgenticVBench submission (writes reward.json)")
    p.add_argument("benchmark", choices=["agentic"], help="the benchmark (AgenticVBench)")
    p.add_argument("--task", required=True, help="the task bundle folder")
    p.add_argument("--submission", required=True, help="the folder holding the deliverables")
    p.add_argument("--out", default=None, help="where reward.json goes (default: SUBMISSION/reward.json)")
    p.add_argument("--judge", nargs="*", default=[], help="judge key=value settings for Repurpose rubric items")
    p.set_defaults(fn=cmd_verify)

    p = sub.add_parser("report", help="write RUN_DIR/report.html")
    p.add_argument("run_dir", help="a run directory (output.dir of a run)")
    p.add_argument("--n-strips", type=int, default=3, help="cases shown as sampled frame strips (default: 3)")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("compare", help="leaderboard of runs of one benchmark with paired statistics")
    p.add_argument("run_dirs", nargs="+", help="run directories (two or more)")
    p.add_argument("--out", required=True, help="folder for leaderboard.json/.csv/.html and wandb/")
    p.add_argument(
        "--reference", default=None, help="run (label or dir) the forest plot subtracts; default: the top one"
    )
    p.add_argument("--allow-mixed", action="store_true", help="compare runs scored with different options")
    p.add_argument("--metrics", nargs="*", default=[], help="only these metrics (default: all in summary.json)")
    p.add_argument("--rank-by", default=None, help="metric that orders the table (default: the benchmark's headline)")
    p.add_argument("--variant", default="base", help="the sweep variant compared (default: base)")
    p.add_argument("--seed", type=int, default=0, help="seeds the bootstrap and permutation resamples (default: 0)")
    p.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples (CIs, rank intervals)")
    p.add_argument("--n-permutations", type=int, default=10000, help="permutation-test resamples")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after Holm's correction")
    p.add_argument(
        "--wandb-mode",
        default="offline",
        choices=["offline", "online", "disabled"],
        help="W&B logging of the leaderboard (default: offline, under OUT/wandb)",
    )
    p.add_argument("--human-prefs", default=None, help="CoVEBench: human pairwise preferences (docs/analyses.md)")
    p.add_argument("--human-answers", default=None, help="CoVEBench / ViDiC: human answers to checklist questions")
    p.add_argument(
        "--judge-repeats",
        nargs="*",
        default=[],
        help="CoVEBench / ViDiC: runs of one model repeated with other judge seeds",
    )
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("demo", help="synthetic CoVEBench on local Ray")
    p.add_argument(
        "--out", default="runs/demo", help="folder for the data, the tiny judge and the run (default: runs/demo)"
    )
    p.add_argument("--n", type=int, default=8, help="number of synthetic cases (default: 8)")
    p.add_argument("--seed", type=int, default=0, help="seeds the data, the judge's weights and the run (default: 0)")
    p.add_argument("overrides", nargs="*", help="key=value overrides of the run's config (configs/cove.yaml)")
    p.set_defaults(fn=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line (``argv``: default ``sys.argv``). With the process's own command line (``vbench-ray``),
    Ray's start begins as the first step (``_start_ray_early``); a command that stops before its run takes that
    start over shuts it down. With an ``argv`` (tests, ``jobs.job_main``) it does not."""
    from vbench_ray.interrupt import ctrl_c_guard, exit_interrupted

    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    with ctrl_c_guard():  # Ctrl-C: a clean stop within seconds, a second one at once (vbench_ray.interrupt)
        try:
            if argv is None:
                _start_ray_early(args)
            return _main(args)
        except KeyboardInterrupt:
            _settle_early_start()  # never an exit with ray.init half done
            exit_interrupted(
                "interrupted: the rows finished so far are kept (cases/, the judge log); run the "
                "same command again to resume"
            )
        finally:
            _end_unused_start()


def _main(args: argparse.Namespace) -> int:
    from vbench_ray.benchmarks.base import DataError
    from vbench_ray.config import ConfigError
    from vbench_ray.judges.base import JudgeUnavailable
    from vbench_ray.registry import UnknownName

    try:
        return args.fn(args)
    except (ConfigError, DataError, UnknownName) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except JudgeUnavailable as exc:  # the judge endpoint is not there: rows and answers so far are kept
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except Exception as exc:
        full = _no_space(exc)
        if full is None:
            raise
        print(
            f"error: no space left on device{f' (writing {full})' if full else ''}: the run stopped; its "
            f"finished rows and judge answers are kept. Free some space (or choose another output.dir) and run "
            f"the same command again to resume.",
            file=sys.stderr,
        )
        return EXIT_NO_SPACE


def _no_space(exc: BaseException) -> str | None:
    """The file being written when the disk filled up ('' when unknown), or None when ``exc`` is not that.
    Looks through chained exceptions and Ray's wrapped worker errors (their text names ENOSPC)."""
    import errno

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return str(exc.filename or "")
        if "No space left on device" in str(exc) or "[Errno 28]" in str(exc):
            return ""
        exc = exc.__cause__ or exc.__context__
    return None


if __name__ == "__main__":
    sys.exit(main())
