"""A toy benchmark that ``vbench-ray compare`` knows only through its class's compare hooks (``ToyRank``,
registered by the tests that use it, never here), finished run folders of it, and the ``compare`` command as those
tests call it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from vbench_ray.benchmarks import Benchmark
from vbench_ray.cli import main


def _hit_units(j: pd.DataFrame, config: dict, binary: dict) -> dict:
    """Hit: the share of a case's rubric items the judge marked hit, pooled over items; each item a binary unit."""
    per_case: dict[str, list[bool]] = {}
    for r in j.to_dict("records"):
        per_case.setdefault(str(r["case_id"]), []).append(bool(r["hit"]))
        binary.setdefault("Hit", {})[(str(r["case_id"]), str(r["item"]))] = bool(r["hit"])
    return {"Hit": {c: (float(sum(v)), float(len(v))) for c, v in per_case.items()}}


class ToyRank(Benchmark):
    name = "toyrank"
    primary_metric = "Hit"
    judged_metrics = ("Hit",)
    compare_units = staticmethod(_hit_units)
    comparison_options = staticmethod(lambda config: {"model.prompt": (config.get("model") or {}).get("prompt")})
    judge_reads_video = False
    analyses = staticmethod(lambda runs, **inputs: {"runs": list(runs), "repeats": len(inputs["judge_repeats"])})


# Edge (a per-case column of cases/) favours A; Hit (judged items) favours B
EDGE = {"A": {"c1": 0.9, "c2": 0.8, "c3": 0.7}, "B": {"c1": 0.5, "c2": 0.6, "c3": 0.4}}
HITS = {
    "A": {"c1": [True, False], "c2": [False, False, True], "c3": [False]},
    "B": {"c1": [True, True], "c2": [True, True, True], "c3": [True]},
}


def toy_run(root: Path, name: str, edge: dict, hits: dict, prompt: str = "v1", fps: float = 2.0) -> Path:
    """A finished toyrank run folder: config.yaml, summary.json, cases/ with Edge, judgments.parquet with Hit."""
    run = root / name
    (run / "cases").mkdir(parents=True)
    config = {
        "benchmark": "toyrank",
        "stats": {"confidence": 0.95},
        "model": {"prompt": prompt},
        "judge": {"model": "toy-judge", "video": {"fps": fps}},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    pd.DataFrame({"case_id": list(edge), "variant": "base", "Edge": list(edge.values())}).to_parquet(
        run / "cases" / "part-00000.parquet"
    )
    items = [
        {"case_id": c, "variant": "base", "item": k, "hit": hit} for c, v in hits.items() for k, hit in enumerate(v)
    ]
    pd.DataFrame(items).to_parquet(run / "judgments.parquet")
    n_hit = sum(i["hit"] for i in items)
    summary = {
        "benchmark": "toyrank",
        "run_name": name,
        "n_cases": len(edge),
        "metrics": {  # Edge first: without the benchmark's headline, compare ranks by the first metric
            "Edge": {"value": sum(edge.values()) / len(edge), "ci95": [0, 1], "n": len(edge), "higher_is_better": True},
            "Hit": {"value": n_hit / len(items), "ci95": [0, 1], "n": len(items), "higher_is_better": True},
        },
    }
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def _compare(capsys, *args: str) -> tuple[int, str]:
    rc = main(["compare", *args, "--wandb-mode", "disabled", "--n-resamples", "200", "--n-permutations", "500"])
    return rc, capsys.readouterr().err
