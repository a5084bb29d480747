"""Every breakdown of a summary reaches W&B (``sinks.log_to_wandb``): ``metrics`` and each ``by_*`` block, keyed
``<block>/<group>[/<group>]/<metric>/value|ci_lo|ci_hi|n``, and NRVBench's ``cross_judge``; a metric without a value
is its reason (text) in the run's summary, never a number. Real wandb offline runs, read back from their ``.wandb``
files."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from helpers import wandb_records
from vbench_ray.sinks import log_to_wandb

WANDB = {"mode": "offline", "project": "t", "entity": None, "group": None, "tags": [], "log_cases": False, "strips": 0}
DEAD = "12 of 12 judge answers (100%) never got a usable answer; the judge answered: 'HTTP 500' (12x)"


def _logged(tmp_path: Path, summary: dict) -> tuple[dict, dict]:
    """(the numbers of the run's history steps, merged; the run's summary)"""
    log_to_wandb(tmp_path, OmegaConf.create(WANDB), "run", {}, summary, None)
    [path] = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    steps: dict = {}
    for step in wandb_records.history(path):
        steps.update({k: v for k, v in step.items() if not k.startswith("_")})
    return steps, wandb_records.summary(path)


def _m(value, lo=None, hi=None, n=4, **extra) -> dict:
    return {"value": value, "ci95": None if lo is None else [lo, hi], "n": n, **extra}


def test_nrv_breakdowns_method_difficulty_grid_and_judges(tmp_path: Path):
    summary = {
        "benchmark": "nrv",
        "methods": ["TokenFlow", "VM-Edit"],
        "metrics": {
            "NRVE_Acc": _m(None, n=4, n_invalid=12, unavailable=DEAD, scale="[0,100]", higher_is_better=True),
            "BG_MSE": _m(2.5, 1.0, 4.0, n=4, scale="[0,inf)", higher_is_better=False),
        },
        "by_method": {
            "VM-Edit": {"NRVE_Acc": _m(None, n=2, unavailable=True), "BG_MSE": _m(1.5, 1.0, 2.0, n=2)},
            "TokenFlow": {"NRVE_Acc": _m(None, n=2, unavailable=True), "BG_MSE": _m(3.5, 3.0, 4.0, n=2)},
        },
        "by_difficulty": {"L1": {"BG_MSE": _m(2.5, 1.0, 4.0, n=4)}},
        "by_method_category": {"VM-Edit": {"ASB": {"BG_MSE": _m(1.25, n=1)}}, "TokenFlow": {}},
        "by_judge": {"judge-a": {"NRVE_Acc": _m(31.25, 25.0, 37.5, n=4), "n_invalid": 3}},
        "cross_judge": {"NRVE_Acc": {"mean": 31.25, "std": 0.0}},
        "failures": {"count": 0, "by_stage": {}},
    }
    steps, run_summary = _logged(tmp_path, summary)
    expected = {
        "metrics/BG_MSE/value": 2.5,
        "metrics/BG_MSE/ci_lo": 1.0,
        "metrics/BG_MSE/ci_hi": 4.0,
        "metrics/BG_MSE/n": 4,
        "metrics/NRVE_Acc/n": 4,
        "metrics/NRVE_Acc/n_invalid": 12,
        "by_method/VM-Edit/BG_MSE/value": 1.5,
        "by_method/VM-Edit/BG_MSE/ci_lo": 1.0,
        "by_method/VM-Edit/BG_MSE/ci_hi": 2.0,
        "by_method/VM-Edit/BG_MSE/n": 2,
        "by_method/VM-Edit/NRVE_Acc/n": 2,
        "by_method/TokenFlow/BG_MSE/value": 3.5,
        "by_method/TokenFlow/BG_MSE/ci_lo": 3.0,
        "by_method/TokenFlow/BG_MSE/ci_hi": 4.0,
        "by_method/TokenFlow/BG_MSE/n": 2,
        "by_method/TokenFlow/NRVE_Acc/n": 2,
        "by_difficulty/L1/BG_MSE/value": 2.5,
        "by_difficulty/L1/BG_MSE/ci_lo": 1.0,
        "by_difficulty/L1/BG_MSE/ci_hi": 4.0,
        "by_difficulty/L1/BG_MSE/n": 4,
        "by_method_category/VM-Edit/ASB/BG_MSE/value": 1.25,  # one case: no CI, so no ci_lo / ci_hi
        "by_method_category/VM-Edit/ASB/BG_MSE/n": 1,
        "by_judge/judge-a/NRVE_Acc/value": 31.25,
        "by_judge/judge-a/NRVE_Acc/ci_lo": 25.0,
        "by_judge/judge-a/NRVE_Acc/ci_hi": 37.5,
        "by_judge/judge-a/NRVE_Acc/n": 4,
        "by_judge/judge-a/n_invalid": 3,
        "cross_judge/NRVE_Acc/mean": 31.25,
        "cross_judge/NRVE_Acc/std": 0.0,
    }
    assert steps == expected  # nothing else: no number for a metric without one, no failures
    for key, value in expected.items():
        assert run_summary[key] == value
    # the dead judge's metric: its reason, in the headline and in each breakdown that only says "unavailable"
    for key in ("metrics", "by_method/VM-Edit", "by_method/TokenFlow"):
        assert run_summary[f"{key}/NRVE_Acc/value"] == DEAD


def test_vidic_classes_and_a_metric_with_a_note(tmp_path: Path):
    summary = {
        "benchmark": "vidic",
        "metrics": {
            "Sim": _m(50.0, 25.0, 75.0, n=4, n_cases=2, other_parse={"parse": "lenient", "value": 62.5}),
            "Diff": _m(None, n=3, n_cases=2, note="no valid judge answer: no number"),
        },
        "by_category": {
            "Subject": {"Sim": _m(None, n=0, n_cases=0), "Diff": _m(100.0, 100.0, 100.0, n=2, n_cases=2)},
            "Playback Technique": {"Sim": _m(0.0, 0.0, 0.0, n=1, n_cases=1)},
        },
        "question_status": {"ok": 7},
    }
    steps, run_summary = _logged(tmp_path, summary)
    expected = {
        "metrics/Sim/value": 50.0,
        "metrics/Sim/ci_lo": 25.0,
        "metrics/Sim/ci_hi": 75.0,
        "metrics/Sim/n": 4,
        "metrics/Sim/n_cases": 2,
        "metrics/Sim/other_parse/value": 62.5,
        "metrics/Diff/n": 3,
        "metrics/Diff/n_cases": 2,
        "by_category/Subject/Sim/n": 0,
        "by_category/Subject/Sim/n_cases": 0,
        "by_category/Subject/Diff/value": 100.0,
        "by_category/Subject/Diff/ci_lo": 100.0,
        "by_category/Subject/Diff/ci_hi": 100.0,
        "by_category/Subject/Diff/n": 2,
        "by_category/Subject/Diff/n_cases": 2,
        "by_category/Playback Technique/Sim/value": 0.0,  # a real zero stays a number
        "by_category/Playback Technique/Sim/ci_lo": 0.0,
        "by_category/Playback Technique/Sim/ci_hi": 0.0,
        "by_category/Playback Technique/Sim/n": 1,
        "by_category/Playback Technique/Sim/n_cases": 1,
    }
    assert steps == expected
    assert run_summary["metrics/Diff/value"] == "no valid judge answer: no number"
    assert run_summary["by_category/Subject/Sim/value"] == "no value: nothing scored (n=0)"


def test_nrv_cross_judge_block(tmp_path: Path):
    """Table 2's cross-judge block: each judge's mean, the judges' mean and (ddof=0) std, overall and per method.
    Judges a = 30.0 and b = 40.0: mean 35.0, std 5.0; VM-Edit judged by a alone: mean 20.0, std 0.0, b's mean a
    reason; TokenFlow's NRVE_Acc blanked (the headline's reason: the dead judge); S_phy scored by no judge."""
    summary = {
        "benchmark": "nrv",
        "metrics": {
            "NRVE_Acc": _m(None, n=4, unavailable=DEAD, scale="[0,100]"),
            "S_phy": _m(None, n=0, scale="[0,100]"),
        },
        "cross_judge": {
            "NRVE_Acc": {"per_judge": {"a": 30.0, "b": 40.0}, "n_judges": 2, "mean": 35.0, "std": 5.0},
            "S_phy": {"per_judge": {"a": None, "b": None}, "n_judges": 0, "mean": None, "std": None},
            "by_method": {
                "VM-Edit": {"NRVE_Acc": {"per_judge": {"a": 20.0, "b": None}, "n_judges": 1, "mean": 20.0, "std": 0.0}},
                "TokenFlow": {
                    "NRVE_Acc": {
                        "per_judge": {"a": 10.0, "b": 12.0},
                        "n_judges": 2,
                        "mean": None,
                        "std": None,
                        "unavailable": True,
                    }
                },
            },
        },
    }
    steps, run_summary = _logged(tmp_path, summary)
    assert steps == {
        "metrics/NRVE_Acc/n": 4,
        "metrics/S_phy/n": 0,
        "cross_judge/NRVE_Acc/mean": 35.0,
        "cross_judge/NRVE_Acc/std": 5.0,
        "cross_judge/NRVE_Acc/n_judges": 2,
        "cross_judge/NRVE_Acc/per_judge/a": 30.0,
        "cross_judge/NRVE_Acc/per_judge/b": 40.0,
        "cross_judge/S_phy/n_judges": 0,
        "cross_judge/by_method/VM-Edit/NRVE_Acc/mean": 20.0,
        "cross_judge/by_method/VM-Edit/NRVE_Acc/std": 0.0,
        "cross_judge/by_method/VM-Edit/NRVE_Acc/n_judges": 1,
        "cross_judge/by_method/VM-Edit/NRVE_Acc/per_judge/a": 20.0,
        "cross_judge/by_method/TokenFlow/NRVE_Acc/n_judges": 2,
        "cross_judge/by_method/TokenFlow/NRVE_Acc/per_judge/a": 10.0,
        "cross_judge/by_method/TokenFlow/NRVE_Acc/per_judge/b": 12.0,
    }
    no_judge = "no value: no judge scored it"
    assert (run_summary["cross_judge/S_phy/mean"], run_summary["cross_judge/S_phy/std"]) == (no_judge, no_judge)
    assert run_summary["cross_judge/S_phy/per_judge/a"] == "no value: this judge scored none of its instances"
    assert run_summary["cross_judge/by_method/VM-Edit/NRVE_Acc/per_judge/b"].startswith("no value: this judge")
    assert run_summary["cross_judge/by_method/TokenFlow/NRVE_Acc/mean"] == DEAD
    assert run_summary["cross_judge/by_method/TokenFlow/NRVE_Acc/std"] == DEAD
