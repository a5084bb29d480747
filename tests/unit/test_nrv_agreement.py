"""Agreement with humans (NRVBench §5, App. B.2, Table 6): human scores mapped to the NRVE-Acc space,
annotator averaging before Eq. 1, Spearman/Kendall over methods, per-dimension agreement, mean judge."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from vbench_ray.agreement import (
    HumanScoresError,
    agreement_summary,
    human_samples,
    method_means,
    rank_agreement,
    read_human_scores,
)
from vbench_ray.benchmarks.nrv_scoring import nrve_acc

W = {"instr": 1 / 3, "phy": 1 / 3, "temp": 1 / 3}


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_rank_agreement_equals_scipy_and_table_6_mean():
    judge = {"a": 33.05, "b": 32.20, "c": 36.88, "d": 30.24, "e": 30.35, "f": 34.71}
    human = {"a": 40.0, "b": 35.0, "c": 45.0, "d": 30.0, "e": 33.0, "f": 41.0}
    out = rank_agreement(judge, human)
    keys = sorted(judge)
    a, b = [judge[k] for k in keys], [human[k] for k in keys]
    assert out["rho"] == pytest.approx(spearmanr(a, b).statistic)
    assert out["tau"] == pytest.approx(kendalltau(a, b).statistic)
    assert out["n"] == 6 and out["signed_deviation"] == pytest.approx(np.mean(np.subtract(a, b)))
    assert rank_agreement({"a": 1.0}, {"a": 2.0})["rho"] is None  # one method: undefined
    assert rank_agreement({"a": 1.0, "b": 1.0}, {"a": 2.0, "b": 3.0})["tau"] is None  # constant: undefined
    # Table 6's "Mean judge" is the mean of the judges' coefficients
    assert np.mean([0.658, 0.771, 0.886, 0.914, 0.943]) == pytest.approx(0.834, abs=5e-4)


def test_human_scores_are_averaged_over_annotators_then_eq1(tmp_path):
    path = _write(
        tmp_path / "h.jsonl",
        [
            {"method": "m", "id": "x", "annotator": "1", "instr": "correct", "phy": 5, "temp": 3},
            {"method": "m", "id": "x", "annotator": "2", "instr": "partial", "phy": 3, "temp": 3},
            {"method": "n", "id": "x", "instr": 0, "phy": 1, "temp": 5},
        ],
    )
    records = read_human_scores(path)
    samples = {(s["method"], s["instance_id"]): s for s in human_samples(records, "e5", W, 1e-6)}
    m = samples[("m", "x")]
    assert (m["S_instr"], m["S_phy"], m["S_temp"]) == pytest.approx((75.0, 75.0, 50.0))
    assert m["NRVE_Acc"] == pytest.approx(nrve_acc({"instr": 0.75, "phy": 0.75, "temp": 0.5}, W))
    assert m["n_annotators"] == 2
    assert samples[("n", "x")]["NRVE_Acc"] == pytest.approx(nrve_acc({"instr": 0.0, "phy": 0.0, "temp": 1.0}, W))
    eq3 = {(s["method"]): s for s in human_samples(records, "eq3", W, 1e-6)}
    assert eq3["m"]["S_phy"] == pytest.approx(80.0)  # (5/5 + 3/5) / 2
    csv = tmp_path / "h.csv"
    csv.write_text("method,id,annotator,instr,phy,temp\nm,x,1,correct,5,3\nm,x,2,partial,3,3\n")
    assert human_samples(read_human_scores(csv), "e5", W, 1e-6)[0]["S_phy"] == pytest.approx(75.0)


@pytest.mark.parametrize(
    "record, message",
    [
        ({"id": "x", "instr": 1, "phy": 3, "temp": 3}, "'method'"),
        ({"method": "m", "instr": 1, "phy": 3, "temp": 3}, r"\.id"),
        ({"method": "m", "id": "x", "instr": "maybe", "phy": 3, "temp": 3}, r"\.instr"),
        ({"method": "m", "id": "x", "instr": 1, "phy": 6, "temp": 3}, r"\.phy.*1-5"),
        ({"method": "m", "id": "x", "instr": 1, "phy": 3}, "missing temp"),
    ],
)
def test_human_scores_errors_name_the_record_and_field(tmp_path, record, message):
    with pytest.raises(HumanScoresError, match=r"h.jsonl:1" + ".*" + message):
        read_human_scores(_write(tmp_path / "h.jsonl", [record]))


def test_agreement_summary_per_dimension_category_and_subset():
    judge_rows = {"j1": [], "j2": []}
    human_records = []
    truth = {"good": (1.0, 5, 5), "mid": (0.5, 3, 3), "bad": (0.0, 2, 1)}
    for method, (instr, phy, temp) in truth.items():
        for iid, cat in (("i1", "CTS"), ("i2", "LFS"), ("i3", "CTS")):
            if iid != "i3":  # humans rated a subset (B.2): i3 must not count for the judges either
                human_records.append(
                    {
                        "method": method,
                        "id": iid,
                        "annotator": None,
                        "level": "sample",
                        "instr": instr,
                        "phy": phy,
                        "temp": temp,
                    }
                )
            base = {"good": 90.0, "mid": 50.0, "bad": 10.0}[method]
            for label, bias in (("j1", 0.0), ("j2", 5.0)):
                skew = -80.0 if iid == "i3" and method == "good" else 0.0
                judge_rows[label].append(
                    {
                        "method": method,
                        "instance_id": iid,
                        "category": cat,
                        "NRVE_Acc": base + bias + skew,
                        "S_instr": base,
                        "S_phy": base + bias,
                        "S_temp": 100 - base if label == "j2" else base,
                    }
                )
    out = agreement_summary(judge_rows, human_records, "e5", W, 1e-6, {"i1": "CTS", "i2": "LFS", "i3": "CTS"})
    assert out["n_methods"] == 3 and out["n_samples"] == 6
    j1, j2 = out["judges"]["j1"], out["judges"]["j2"]
    assert j1["n_samples"] == 6  # i3 left out
    assert j1["NRVE_Acc"]["rho"] == pytest.approx(1.0) and j1["NRVE_Acc"]["tau"] == pytest.approx(1.0)
    assert j2["S_temp"]["rho"] == pytest.approx(-1.0)  # the inverted dimension shows up on its own
    human = method_means(human_samples(human_records, "e5", W, 1e-6))
    assert j2["S_phy"]["signed_deviation"] == pytest.approx(
        np.mean([judge - human[m]["S_phy"] for m, judge in (("good", 95.0), ("mid", 55.0), ("bad", 15.0))])
    )
    assert set(j1["by_category"]) == {"CTS", "LFS"} and j1["by_category"]["CTS"]["NRVE_Acc"]["rho"] == pytest.approx(
        1.0
    )
    assert out["mean_judge"]["S_temp"]["rho"] == pytest.approx(0.0)  # mean of +1 and -1
    assert out["mean_judge"]["NRVE_Acc"] == {"rho": pytest.approx(1.0), "tau": pytest.approx(1.0), "n_judges": 2}
