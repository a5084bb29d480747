"""A Serve LLM judge's run as a user starts it, timed: the installed judge's CLI run (``test_judge_vllm_installed.py``)
without its replica kill and re-asks.

    python tests/perf/serve_judge_run.py [--repeat 1] [--before REV]

``vbench-ray run configs/cove.yaml`` with the default judge backend (``vllm``: a Serve LLM deployment) on the tiny
random-weight Qwen2-VL (``tests/helpers/tiny``), one synthetic CoVEBench case, IFS only (4 judge requests with
videos). Printed per run: the command's wall seconds, and from the run's ``summary.json`` ``timing`` the judge stage's
time from the stream's start (``stream_planned``, after the deployment is up) to its first row (``first_row``): the
judge stage's first task (its imports) and its 4 requests. With ``--before REV`` the same runs of the code at git
revision ``REV`` (``git archive`` into a temporary folder; the checkout is not changed) alternate with this tree's. One
vLLM cache for all runs (warmed by an untimed run of this tree first), so model inspection is not what is timed. No
assert: numbers for the notes (docs/performance.md, "Fixed overhead").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]


def one_run(code: Path, model: Path, data: dict, out: Path, cache: Path) -> dict:
    from helpers.common import cove_overrides, user_env

    args = cove_overrides(
        data,
        out,
        "metrics.enabled=[IFS]",
        "run.limit=1",
        f"judge.model={model}",
        "judge.vllm.cpu=true",
        "judge.vllm.max_model_len=4096",
        "judge.max_tokens=16",
        "judge.max_retries=0",
        "judge.max_invalid_fraction=1.0",
        "ray.num_cpus=4",
    )
    env = user_env(HF_HUB_OFFLINE="1", VLLM_CACHE_ROOT=str(cache), PYTHONPATH=str(code))
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "vbench_ray.cli", "run", str(code / "configs" / "cove.yaml"), *args],
        env=env,
        cwd=out.parent,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    timing = json.loads((out / "summary.json").read_text())["timing"]
    return {"wall_s": wall, "judge_stage_s": timing["first_row"] - timing["stream_planned"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--before", help="a git revision to compare with, its runs alternating with this tree's")
    args = parser.parse_args()

    from helpers.tiny.models import build_tiny_qwen2_vl
    from vbench_ray.synth.cove import synth_cove

    work = Path(tempfile.mkdtemp(prefix="serve_judge_run_"))
    model = build_tiny_qwen2_vl(work / "qwen2_vl")
    data = synth_cove(work / "cove", n=2, seed=0)
    cache = work / "vllm_cache"
    codes = {"this tree": REPO}
    if args.before:
        codes = {"before": work / "before", **codes}
        codes["before"].mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.before], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(codes["before"])], input=archive.stdout, check=True)
    one_run(REPO, model, data, work / "warmup" / "run", cache)  # fills the vLLM cache: not timed
    results: dict[str, list[dict]] = {name: [] for name in codes}
    for i in range(args.repeat):
        for name, code in codes.items():
            r = one_run(code, model, data, work / f"{name.replace(' ', '_')}{i}" / "run", cache)
            results[name].append(r)
            print(f"{name:10s} run {i}: command {r['wall_s']:6.1f} s, judge stage {r['judge_stage_s']:5.1f} s")
    print(f"\nmedians of {args.repeat} ({os.cpu_count()} CPUs):")
    for name, rs in results.items():
        wall = statistics.median(r["wall_s"] for r in rs)
        stage = statistics.median(r["judge_stage_s"] for r in rs)
        print(f"{name:10s} command {wall:6.1f} s, judge stage {stage:5.1f} s")


if __name__ == "__main__":
    main()
