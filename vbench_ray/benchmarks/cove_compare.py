"""CoVEBench in ``vbench-ray compare`` (``CoveBench``'s compare hooks): the checklist metrics' per-case units
exactly as the run scored them (paper App. F.1, F.3: ``cove_checklist.case_units``), the binary units McNemar
pairs, and the analyses of §4.2 and App. G (:mod:`vbench_ray.analyses.cove`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where it is used: a run's driver imports this module and needs none of it
    import pandas as pd

from vbench_ray import cfgutil
from vbench_ray.compare_base import decoding_options, finite, judge_identity

# the metrics the checklist judge scores (the leaderboard's judged columns)
CHECKLIST = ("UAS", "IFS", "VRS", "SEM")


def compare_units(j: pd.DataFrame, config: dict, binary: dict) -> dict:
    """``{metric: {case: (num, den)}}`` of IFS, VRS, SEM and UAS under the run's ``score.aggregation``,
    ``score.uas_unit`` and ``score.sem_questions``; ``binary`` gets each IFS/VRS question and each UAS unit (an
    edit point, or the task with ``uas_unit: task``) as correct or not."""
    import pandas as pd

    from vbench_ray.benchmarks.cove_checklist import case_units

    if not {"metric", "correct", "score", "group"} <= set(j.columns):
        return {}
    aggregation = cfgutil.get(config, "score.aggregation", "pooled")
    uas_unit = cfgutil.get(config, "score.uas_unit", "group")
    rows = [
        {
            **r,
            "case_id": str(r["case_id"]),
            "correct": None if r.get("correct") is None or pd.isna(r["correct"]) else bool(r["correct"]),
            "score": r["score"] if finite(r.get("score")) else None,
        }
        for r in j.to_dict("records")
    ]
    out: dict[str, dict] = {}
    for m in ("IFS", "VRS", "SEM", "UAS"):
        per_case = case_units(
            rows, m, uas_unit, aggregation == "per_task", cfgutil.get(config, "score.sem_questions", "routed")
        )
        if per_case:
            out[m] = {
                c: (
                    (float(np.mean([v for v, _ in u])), 1.0)
                    if aggregation == "per_task"
                    else (float(sum(v * w for v, w in u)), float(sum(w for _, w in u)))
                )
                for c, u in per_case.items()
            }
    groups: dict[tuple, bool] = {}
    for r in rows:
        if r["metric"] in ("IFS", "VRS") and r["correct"] is not None:
            binary.setdefault(r["metric"], {})[(r["case_id"], str(r["question_id"]))] = r["correct"]
            key = (r["case_id"], str(r["group"]) if uas_unit == "group" else "task")
            groups[key] = groups.get(key, True) and r["correct"]
    if groups:
        binary["UAS"] = groups
    return out


def comparison_options(config: dict) -> dict:
    """Where VQR is scored, its judge (``vqr``: VisualQuality-R1) as the checklist judge is compared: its identity
    (``vqr``) and decoding (``compare_base.decoding_options``: temperature, max_tokens, max_retries, and top_p,
    top_k and seed where it samples, as the official script does: ``do_sample=True, top_k=50``, seeded). Its
    frames (10 per video) and parser are fixed, so its video and parse keys decide nothing."""
    if "VQR" not in (cfgutil.get(config, "metrics.enabled") or []):
        return {}
    vqr = config.get("vqr")
    return {"vqr": judge_identity(vqr), **decoding_options("vqr", vqr)} if isinstance(vqr, dict) else {}


def analyses(
    runs: dict,
    human_prefs: str | Path | None = None,
    human_answers: str | Path | None = None,
    judge_repeats: list | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
) -> dict:
    """Every CoVEBench analysis the inputs allow (:func:`vbench_ray.analyses.cove.cove_analyses`)."""
    from vbench_ray.analyses.cove import cove_analyses

    return cove_analyses(
        runs,
        human_prefs=human_prefs,
        human_answers=human_answers,
        judge_repeats=judge_repeats,
        seed=seed,
        n_resamples=n_resamples,
    )
