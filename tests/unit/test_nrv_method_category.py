"""NRVBench's method x material-category breakdown (Fig. 6: each method across the six categories), by hand."""

from __future__ import annotations

import pytest

from vbench_ray.benchmarks.nrv_summary import by_method_category

STATS = (0, 200, 0.95)  # seed, bootstrap resamples, confidence


def _row(method, category, ssim, error=None):
    return {
        "case_id": f"{method}-{category}-{ssim}",
        "variant": "base",
        "method": method,
        "category": category,
        "SSIM": ssim,
        "error_load": error,
    }


def test_each_method_across_the_categories_by_hand():
    rows = [
        _row("m1", "ASB", 0.2),
        _row("m1", "ASB", 0.4),
        _row("m1", "CTS", 0.9),
        _row("m2", "ASB", 0.5),
        _row("m2", "ASB", None),  # no value: left out of the mean
        _row("m2", "ASB", 0.1, error="video not found"),  # a load error: not scored
        _row(None, "ASB", 0.7),  # no method: in no cell
    ]
    # the cross-judge NRVE instances and the judge answers of the same (method, category) pairs
    cross = [
        {
            "case_id": "a",
            "variant": "base",
            "method": "m1",
            "category": "ASB",
            "NRVE_Acc": 30.0,
            "S_instr": 60.0,
            "S_phy": 50.0,
            "S_temp": 40.0,
        },
        {
            "case_id": "b",
            "variant": "base",
            "method": "m1",
            "category": "ASB",
            "NRVE_Acc": 40.0,
            "S_instr": 80.0,
            "S_phy": 70.0,
            "S_temp": 20.0,
        },
        {
            "case_id": "c",
            "variant": "base",
            "method": "m1",
            "category": "CTS",
            "NRVE_Acc": 10.0,
            "S_instr": 20.0,
            "S_phy": 30.0,
            "S_temp": 40.0,
        },
    ]
    judged = [
        {"method": "m1", "category": "ASB", "component": "instr", "valid": False},
        {"method": "m1", "category": "CTS", "component": "phy", "valid": True},
    ]
    got = by_method_category(rows, cross, judged, ["SSIM"], False, STATS, True)
    assert set(got) == {"m1", "m2"} and set(got["m1"]) == {"ASB", "CTS"} and set(got["m2"]) == {"ASB"}
    assert got["m1"]["ASB"]["SSIM"]["value"] == pytest.approx(0.3) and got["m1"]["ASB"]["SSIM"]["n"] == 2
    assert got["m1"]["CTS"]["SSIM"]["value"] == pytest.approx(0.9) and got["m1"]["CTS"]["SSIM"]["n"] == 1
    assert got["m2"]["ASB"]["SSIM"]["value"] == pytest.approx(0.5) and got["m2"]["ASB"]["SSIM"]["n"] == 1
    assert got["m1"]["ASB"]["NRVE_Acc"]["value"] == pytest.approx(35.0)  # (30 + 40) / 2
    assert got["m1"]["ASB"]["S_temp"]["value"] == pytest.approx(30.0)  # (40 + 20) / 2
    assert got["m1"]["ASB"]["S_instr"]["n_invalid"] == 1 and got["m1"]["ASB"]["S_phy"]["n_invalid"] == 0
    assert got["m1"]["CTS"]["NRVE_Acc"]["value"] == pytest.approx(10.0)
    assert got["m2"]["ASB"]["NRVE_Acc"] == {"value": None, "ci95": None, "n": 0, "n_invalid": 0}  # no instance


def test_a_dead_judge_leaves_no_number_in_the_grid():
    """A metric the headline reports unavailable is null in the method x category grid too, never its fallbacks."""
    from vbench_ray.benchmarks.nrv_summary import blank_unavailable_nrv

    summary = {
        "metrics": {"NRVE_Acc": {"value": None, "unavailable": "judge answers 90% invalid"}, "SSIM": {"value": 0.5}},
        "by_method_category": {"m1": {"ASB": {"NRVE_Acc": {"value": 12.5, "ci95": [10, 15]}, "SSIM": {"value": 0.5}}}},
    }
    blank_unavailable_nrv(summary)
    cell = summary["by_method_category"]["m1"]["ASB"]
    assert cell["NRVE_Acc"] == {"value": None, "ci95": None, "unavailable": True} and cell["SSIM"] == {"value": 0.5}
