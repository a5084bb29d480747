"""NRVBench's cross-judge block (Table 2) when the headline NRVE_Acc is unavailable (a dead judge): no number
that rests on it survives, overall or per method, in summary.json, report.html's Table 2 and W&B; each says
why (the headline's reason). The live judge's own mean is earned and stays, as in ``by_judge``."""

from __future__ import annotations

import copy

DEAD = "12 of 12 judge 'b' answers (100%) never got a usable answer"


def _stats(a, b):
    """Judge a's and b's means with the cross-judge mean and population std (Table 2's columns)."""
    return {"per_judge": {"a": a, "b": b}, "n_judges": 2, "mean": (a + b) / 2, "std": abs(a - b) / 2}


def _summary(judges=("a", "b")) -> dict:
    """Judge b answered nothing: its NRVE_Acc is its fallback lowest scores (0.0), the cross-judge mean
    (30 + 0) / 2 = 15 and std 15 average them in; the components are scored by both judges (none dead)."""
    per = {
        "NRVE_Acc": _stats(30.0, 0.0),
        "S_phy": _stats(60.0, 40.0),
        "S_temp": _stats(10.0, 20.0),
        "S_instr": _stats(70.0, 90.0),
    }
    return {
        "judges": list(judges),
        "metrics": {"NRVE_Acc": {"value": None, "ci95": None, "unavailable": DEAD}, "S_phy": {"value": 50.0}},
        "by_judge": {
            "a": {"NRVE_Acc": {"value": 30.0}, "S_phy": {"value": 60.0}},
            "b": {"NRVE_Acc": {"value": None, "unavailable": DEAD}, "S_phy": {"value": 40.0}},
        },
        "cross_judge": {**copy.deepcopy(per), "by_method": {"m1": copy.deepcopy(per)}},
    }


def test_every_cross_judge_number_resting_on_an_unavailable_headline_is_blanked_with_its_reason():
    from vbench_ray.benchmarks.nrv_summary import blank_unavailable_nrv, report_tables
    from vbench_ray.sinks import wandb_summary

    summary = _summary()
    blank_unavailable_nrv(summary)
    cross = summary["cross_judge"]
    for block in (cross, cross["by_method"]["m1"]):  # overall (was 15.0 / 15.0 before) and per method
        nrve = block["NRVE_Acc"]
        assert (nrve["mean"], nrve["std"], nrve["unavailable"]) == (None, None, True)
        assert nrve["per_judge"] == {"a": 30.0, "b": None} and nrve["unavailable_judges"] == ["b"]
        assert block["S_phy"] == _stats(60.0, 40.0)  # an available metric keeps every number

    table = report_tables(summary, [], False)[0]  # report.html's Table 2
    assert table["columns"] == ["Method", "S_phy", "S_temp", "S_instr", "a", "b", "Mean", "Std"]
    assert table["title"] == f"NRVE-Acc by method and judge (Table 2) (NRVE_Acc n/a: {DEAD})"
    assert table["rows"] == [["m1", "50.00", "15.00", "80.00", "30.00", "n/a", "n/a", "n/a"]]  # b was 0.00

    numbers, reasons = wandb_summary(summary)
    for prefix in ("cross_judge/NRVE_Acc", "cross_judge/by_method/m1/NRVE_Acc"):
        assert f"{prefix}/mean" not in numbers and f"{prefix}/std" not in numbers
        assert f"{prefix}/per_judge/b" not in numbers and numbers[f"{prefix}/per_judge/a"] == 30.0
        assert reasons[f"{prefix}/mean"] == reasons[f"{prefix}/std"] == reasons[f"{prefix}/per_judge/b"] == DEAD
    assert numbers["cross_judge/S_phy/mean"] == 50.0 and numbers["cross_judge/S_phy/std"] == 10.0


def test_with_one_judge_its_cross_judge_mean_is_the_unavailable_headline():
    """One judge: ``by_judge`` does not mark it (the headline is its availability), so that judge's mean goes."""
    from vbench_ray.benchmarks.nrv_summary import blank_unavailable_nrv

    summary = _summary(judges=("a",))
    summary.pop("by_judge")
    for block in (summary["cross_judge"], summary["cross_judge"]["by_method"]["m1"]):
        block["NRVE_Acc"] = {"per_judge": {"a": 0.0}, "n_judges": 1, "mean": 0.0, "std": 0.0}
    blank_unavailable_nrv(summary)
    for block in (summary["cross_judge"], summary["cross_judge"]["by_method"]["m1"]):
        assert block["NRVE_Acc"] == {
            "per_judge": {"a": None},
            "n_judges": 1,
            "mean": None,
            "std": None,
            "unavailable": True,
            "unavailable_judges": ["a"],
        }
