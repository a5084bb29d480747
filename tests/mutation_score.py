"""``make mutate``: mutation testing (mutmut 3, configured in ``pyproject.toml`` ``[tool.mutmut]``) of the functions
that turn answers and frames into numbers, keep paths inside their roots, and redact keys; then the score per
module. See docs/testing.md for how to read it and for the survivors that are explained rather than killed.

    python tests/mutation_score.py            # run the mutants not yet checked, then print the scores
    python tests/mutation_score.py --report   # print the scores of the last run only
    python tests/mutation_score.py --survivors  # also list every surviving mutant (``mutmut show NAME`` shows it)
    python tests/mutation_score.py --module stats --module metrics.fidelity  # only these modules, run and scores

A mutant is *killed* when a selected test fails (or times out) with it in place; a *survivor* changed the code
and every test still passed. Only functions named in ``TARGETS`` count: a module's request building or I/O is
not what this measures. Exit status 0 when every module reaches ``GOAL``, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL = 90.0

# module -> the functions whose mutants count (mutmut names module-level functions ``x_<name>``)
TARGETS: dict[str, tuple[str, ...]] = {
    "vbench_ray.benchmarks.cove_checklist": (
        "gold_answer",
        "official_float",
        "score_answer",
        "row_value",
        "_scored",
        "_sem_rule",
        "case_units",
        "metric_rows",
        "_value",
        "_swap",
        "aggregate",
        "by_category",
        "_question_categories",
    ),
    "vbench_ray.benchmarks.nrv_scoring": (
        "normalize_rating",
        "lowest_score",
        "instr_score",
        "weights_of",
        "nrve_acc",
        "instance_scores",
        "cross_judge_instances",
        "percent_rows",
        "cross_judge_stats",
    ),
    "vbench_ray.benchmarks.vidic_scoring": ("_correct", "accuracy", "section_metrics", "by_class", "error_type_counts"),
    "vbench_ray.agentic.verifiers.sequencing": ("lis_length", "sequencing_metrics"),
    "vbench_ray.agentic.verifiers.assembly": ("chance_adjusted",),
    "vbench_ray.metrics.fidelity": ("ssim_frames", "ssim_video"),
    "vbench_ray.metrics.smoothness": (
        "_magnitudes",
        "motion_mask",
        "jitter_map",
        "paper_pair_jitter",
        "official_pair_score",
        "msm_score",
    ),
    "vbench_ray.metrics.motion": ("summarize_tracks", "matching_cost", "motion_fidelity"),
    "vbench_ray.stats": ("finite", "bootstrap_ci", "describe", "ratio_ci"),
    "vbench_ray.safepaths": ("safe_id", "within", "component", "unique_component"),
    "vbench_ray.judges.backends.media": ("scrub", "_redact_one"),
}
KILLED = {1, 3, 36, -24, 24, 152, 255, 37}  # test failure, pytest internal error, timeouts, type check (mutmut 3)
SURVIVED = {0}


def selected(modules: list[str] | None) -> dict[str, tuple[str, ...]]:
    """``TARGETS`` restricted to the modules whose dotted name ends with one of ``modules`` (all when None)."""
    if not modules:
        return TARGETS
    out = {m: names for m, names in TARGETS.items() if any(m == s or m.endswith("." + s) for s in modules)}
    if len(out) < len(set(modules)):
        raise SystemExit(f"--module {modules}: a name matches none of {sorted(TARGETS)}")
    return out


def patterns(targets: dict[str, tuple[str, ...]]) -> list[str]:
    return [f"{module}.x_{name}__mutmut_*" for module, names in targets.items() for name in names]


def results(root: Path) -> dict[str, dict[str, int | None]]:
    """``{module: {mutant name: exit code}}`` for the targeted functions, from mutmut's ``.meta`` files."""
    out: dict[str, dict[str, int | None]] = {m: {} for m in TARGETS}
    for meta in (root / "mutants").rglob("*.py.meta"):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            module, _, rest = name.partition(".x_")
            if module in TARGETS and rest.split("__mutmut_")[0] in TARGETS[module]:
                out[module][name] = code
    return out


def report(root: Path, survivors: bool, targets: dict[str, tuple[str, ...]] = TARGETS) -> bool:
    ok = True
    print(f"{'module':45s} {'killed':>7s} {'survived':>8s} {'other':>6s} {'score':>7s}")
    for module, codes in results(root).items():
        if module not in targets:
            continue
        killed = sum(c in KILLED for c in codes.values())
        survived = sorted(n for n, c in codes.items() if c in SURVIVED)
        other = len(codes) - killed - len(survived)  # not checked, no tests, suspicious, segfault
        score = 100.0 * killed / len(codes) if codes else 0.0
        ok &= bool(codes) and score >= GOAL
        print(f"{module:45s} {killed:7d} {len(survived):8d} {other:6d} {score:6.1f}%")
        if survivors:
            for name in survived:
                print(f"    survived: {name}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", action="store_true", help="print the scores of the last run; run nothing")
    ap.add_argument("--survivors", action="store_true", help="list the surviving mutants")
    ap.add_argument("--max-children", default="2", help="mutants checked at once (default 2)")
    ap.add_argument(
        "--module", action="append", help="only this module (a dotted name or its tail, e.g. stats); repeatable"
    )
    args = ap.parse_args()
    targets = selected(args.module)
    if not args.report:
        mutmut = Path(sys.executable).with_name("mutmut")
        subprocess.run(
            [str(mutmut), "run", "--max-children", args.max_children, *patterns(targets)],
            cwd=REPO,
            check=False,
            stdout=subprocess.DEVNULL,
        )
    ok = report(REPO, args.survivors, targets)
    print(f"goal: {GOAL:.0f} % of each module's mutants killed: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
