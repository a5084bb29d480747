"""ViDiC-1K in ``vbench-ray compare`` (``VidicBench``'s compare hooks): Sim, Diff and Avg accuracy per case from
the judged checklist items (paper §3.3.2, Table 2), the fixed decoding of the model under test that decides its
descriptions (App. E, Table 5), and the judge analyses (:mod:`vbench_ray.analyses.vidic`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where it is used: a run's driver imports this module and needs none of it
    import pandas as pd

from vbench_ray.compare_base import CompareError, decoding_options, flatten_options

# leaderboard metric -> the checklist section it is accuracy over (None: all questions)
SECTIONS = {"Sim": "Similarities", "Diff": "Differences", "Avg": None}


def compare_units(j: pd.DataFrame, config: dict, binary: dict) -> dict:
    """``{metric: {case: (correct questions x 100, questions)}}``, pooled over the section's questions (an
    unanswered question counts as wrong); ``binary`` gets each question as correct or not."""
    import pandas as pd

    if not {"section", "k", "correct"} <= set(j.columns):
        return {}
    out = {}
    for m, section in SECTIONS.items():
        sub = j if section is None else j[j["section"] == section]
        per_case: dict[str, list[float]] = {}
        for r in sub.to_dict("records"):
            ok = bool(r["correct"]) if r["correct"] is not None and not pd.isna(r["correct"]) else False
            per_case.setdefault(str(r["case_id"]), []).append(100.0 * ok)
            binary.setdefault(m, {})[(str(r["case_id"]), str(r["section"]), str(r["k"]))] = ok
        if per_case:
            out[m] = {c: (float(np.sum(v)), float(len(v))) for c, v in per_case.items() if v}
    return out


def comparison_options(config: dict) -> dict:
    """The model under test's decoding (``compare_base.decoding_options``: ``model.temperature``, ``max_tokens``,
    ``max_retries``, and ``top_p``, ``top_k`` and ``seed`` where it samples: App. E's temperature 0.7, top_p 0.9)
    and video sampling (``model.video.*``): they decide the descriptions the judge scores. Its identity is what
    the leaderboard compares, so it is none of these."""
    model = config.get("model")
    if not isinstance(model, dict):
        return {}
    return flatten_options("model.video", model.get("video") or {}, decoding_options("model", model))


def analyses(
    runs: dict,
    human_prefs: str | Path | None = None,
    human_answers: str | Path | None = None,
    judge_repeats: list | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
) -> dict:
    """Judge-human concordance and judge stability (:func:`vbench_ray.analyses.vidic.vidic_analyses`); a bad
    analysis input is a ``CompareError``."""
    from vbench_ray.analyses.vidic import vidic_analyses

    if human_prefs:
        raise CompareError(
            "--human-prefs is a CoVEBench analysis; these runs are vidic "
            "(ViDiC takes --human-answers and --judge-repeats)"
        )
    try:
        return vidic_analyses(runs, human_answers=human_answers, judge_repeats=judge_repeats)
    except (ValueError, FileNotFoundError) as exc:
        raise CompareError(str(exc)) from None
