"""ViDiC judge analyses (Table 3 concordance, multi-round stability), Krippendorff's alpha, NRVBench
inter-annotator agreement (Table 5) and the analyses as wandb tables; every expected value by hand or by a
direct computation in this file."""

from __future__ import annotations

import itertools
import json
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from vbench_ray.agreement import agreement_summary, inter_annotator, read_human_scores
from vbench_ray.analyses.agreement import krippendorff_alpha
from vbench_ray.benchmarks.nrv_summary import report_tables
from vbench_ray.compare import CompareError, analysis_tables, compare, log_wandb

N = None


# ----------------------------------------------------------------------------- Krippendorff's alpha


def _alpha_pairwise(units, delta):
    """Alpha from its pairwise definition: D_o over ordered pairs within units (weight 1/(m_u - 1)), D_e over
    all ordered pairs of pairable values."""
    units = [[x for x in u if x is not None] for u in units]
    units = [u for u in units if len(u) >= 2]
    values = [x for u in units for x in u]
    n = len(values)
    d_o = (
        sum(sum(delta(u[i], u[j]) for i, j in itertools.permutations(range(len(u)), 2)) / (len(u) - 1) for u in units)
        / n
    )
    d_e = sum(delta(values[i], values[j]) for i, j in itertools.permutations(range(n), 2)) / (n * (n - 1))
    return 1 - d_o / d_e


def _ordinal_delta(units):
    values = [x for u in units for x in u if x is not None and sum(y is not None for y in u) >= 2]
    counts = {v: values.count(v) for v in set(values)}
    order = sorted(counts)

    def delta(c, k):
        lo, hi = sorted((c, k))
        between = sum(counts[g] for g in order if lo <= g <= hi)
        return (between - (counts[c] + counts[k]) / 2) ** 2

    return delta


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 observers x 12 units example
KRIPP = list(
    zip(
        [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
        [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
    )
)


def test_krippendorff_alpha_by_hand_and_published_example():
    # units [1,1], [1,2], [2,2]: o_11 = 2, o_12 = o_21 = 1, o_22 = 2; n = 6; D_o = 2/6; D_e = 2*3*3/(6*5)
    assert krippendorff_alpha([[1, 1], [1, 2], [2, 2]]) == pytest.approx(1 - (2 / 6) / (18 / 30))
    # the paper's published values: nominal .743, ordinal .815, interval .849
    assert krippendorff_alpha(KRIPP, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(KRIPP, "ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(KRIPP, "interval") == pytest.approx(0.849, abs=5e-4)
    # and exactly the pairwise definition
    assert krippendorff_alpha(KRIPP, "nominal") == pytest.approx(_alpha_pairwise(KRIPP, lambda a, b: float(a != b)))
    assert krippendorff_alpha(KRIPP, "interval") == pytest.approx(_alpha_pairwise(KRIPP, lambda a, b: (a - b) ** 2))
    assert krippendorff_alpha(KRIPP, "ordinal") == pytest.approx(_alpha_pairwise(KRIPP, _ordinal_delta(KRIPP)))


def test_krippendorff_alpha_edges():
    assert krippendorff_alpha([[3, 3, 3], [1, 1], [5, 5]], "ordinal") == pytest.approx(1.0)
    assert krippendorff_alpha([[2, 2], [2, 2]]) is None  # one value only: no expected disagreement
    assert krippendorff_alpha([[1], [2]]) is None  # nothing pairable
    # a lone rating in a unit does not count: same as without it
    assert krippendorff_alpha([[1, 1], [1, 2], [2, 2], [4, N]], "interval") == pytest.approx(
        krippendorff_alpha([[1, 1], [1, 2], [2, 2]], "interval")
    )
    # systematic disagreement is below 0
    assert krippendorff_alpha([[1, 2], [2, 1], [1, 2]]) < 0
    with pytest.raises(ValueError):
        krippendorff_alpha([[1, 2]], "ratio")


# ----------------------------------------------------------------------------- NRVBench Table 5


def _nrv_records(tmp_path):
    rows = []
    instr = {"s1": [1, 1, 1], "s2": [1, 0.5, 1], "s3": [0, 0, 0.5], "s4": [1, 0]}
    phy = {"s1": [5, 4, 5], "s2": [3, 3, 2], "s3": [1, 2, 1], "s4": [4, 2]}
    temp = {"s1": [5, 5, 5], "s2": [2, 3, 3], "s3": [1, 1, 2], "s4": [3, 3]}
    for sid in instr:
        for a, (i, p, t) in enumerate(zip(instr[sid], phy[sid], temp[sid])):
            rows.append(
                {
                    "method": "m1" if sid != "s4" else "m2",
                    "id": sid,
                    "annotator": f"a{a}",
                    "instr": i,
                    "phy": p,
                    "temp": t,
                }
            )
    rows.append({"method": "m2", "id": "s5", "annotator": "a0", "instr": 1, "phy": 5, "temp": 5})  # one annotator
    path = tmp_path / "human.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_human_scores(path), phy, temp


def test_nrv_inter_annotator_fleiss_and_alpha(tmp_path):
    records, phy, temp = _nrv_records(tmp_path)
    out = inter_annotator(records)
    assert out["n_samples"] == 4 and out["n_annotations"] == 11
    assert out["annotators_per_sample"] == {"2": 1, "3": 3}
    # Fleiss over s1-s3 (3 annotators each; s4 has 2): counts (0, .5, 1): (0,0,3), (0,1,2), (2,1,0)
    # P_i = 1, 1/3, 1/3 -> P_bar = 5/9; p_j = 2/9, 2/9, 5/9 -> P_e = 33/81; kappa = (5/9 - 33/81) / (1 - 33/81) = 1/4
    assert out["instr"]["value"] == pytest.approx(0.25)
    assert (out["instr"]["n_samples"], out["instr"]["n_annotators"]) == (3, 3)
    units = [[1, 1, 1], [1, 0.5, 1], [0, 0, 0.5], [1, 0]]
    assert out["instr"]["krippendorff_alpha_nominal"] == pytest.approx(
        _alpha_pairwise(units, lambda a, b: float(a != b))
    )
    for key, table in (("phy", phy), ("temp", temp)):
        u = list(table.values())
        assert out[key]["value"] == pytest.approx(_alpha_pairwise(u, _ordinal_delta(u)))
        assert out[key]["interval"] == pytest.approx(_alpha_pairwise(u, lambda a, b: (a - b) ** 2))
        assert out[key]["n_samples"] == 4
    # temporal ratings agree more than physics ones here, as the direct computation says
    assert out["temp"]["value"] > out["phy"]["value"]


def test_nrv_inter_annotator_in_summary_and_report(tmp_path):
    records, _, _ = _nrv_records(tmp_path)
    assert inter_annotator([r for r in records if r["id"] == "s5"]) is None  # single annotations: nothing to say
    judge_rows = {
        "j": [
            {"method": m, "instance_id": s, "category": "HFF", "NRVE_Acc": v, "S_instr": v, "S_phy": v, "S_temp": v}
            for m, s, v in (("m1", "s1", 50.0), ("m1", "s2", 40.0), ("m2", "s4", 30.0))
        ]
    }
    summary = agreement_summary(judge_rows, records, "e5", {"instr": 1 / 3, "phy": 1 / 3, "temp": 1 / 3}, 1e-6)
    assert summary["inter_annotator"]["instr"]["value"] == pytest.approx(0.25)
    tables = {t["title"]: t for t in report_tables({"agreement": summary}, [], False)}
    table = tables["Inter-annotator agreement of the human scores (Table 5)"]
    assert table["rows"][0][:3] == ["Instruction alignment", "Fleiss' kappa", "0.250"]
    assert [r[0] for r in table["rows"]].count("Temporal consistency") == 2


# ----------------------------------------------------------------------------- ViDiC runs on disk


def vidic_run(
    root: Path, name: str, answers: dict[tuple[str, str, int], tuple[str | None, str]], avg: float | None = None
) -> Path:
    """A finished ViDiC run: ``answers[(case, section, k)] = (judge answer, status)``; gold is always yes."""
    run = root / name
    run.mkdir(parents=True)
    config = {
        "benchmark": "vidic",
        "run": {"name": None, "seed": 0},
        "stats": {"confidence": 0.95},
        "judge": {"backend": "replay", "model": "/m/judge", "name": None, "temperature": 0.0},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    rows = [
        {
            "case_id": c,
            "variant": "base",
            "section": s,
            "k": k,
            "answer": a,
            "correct_answer": "yes",
            "correct": a == "yes",
            "status": st,
        }
        for (c, s, k), (a, st) in answers.items()
    ]
    pd.DataFrame(rows).to_parquet(run / "judgments.parquet")
    acc = 100.0 * np.mean([r["correct"] for r in rows])
    summary = {
        "benchmark": "vidic",
        "run_name": name,
        "n_cases": len({r["case_id"] for r in rows}),
        "metrics": {
            m: {
                "value": avg if avg is not None else acc,
                "ci95": [0.0, 100.0],
                "n": len(rows),
                "higher_is_better": True,
            }
            for m in ("Avg", "Sim", "Diff")
        },
    }
    (run / "summary.json").write_text(json.dumps(summary))
    return run


S, D = "Similarities", "Differences"
A_ANSWERS = {
    ("1", S, 0): ("yes", "ok"),
    ("1", S, 1): ("no", "ok"),
    ("1", D, 0): ("yes", "ok"),
    ("2", S, 0): ("yes", "ok"),
    ("2", D, 0): ("no", "ok"),
    ("2", D, 1): (None, "invalid"),
    ("3", S, 0): (None, "describe_missing"),
}
HUMAN = [
    {"model": "A", "case_id": "1", "question_id": "sim0", "answer": "yes"},
    {"model": "A", "case_id": "1", "question_id": "sim1", "answer": "Yes"},
    {"model": "A", "case_id": "1", "section": "difference", "k": 0, "answer": "yes"},
    {"model": "A", "case_id": "2", "question_id": "sim0", "answer": "yes"},
    {"model": "A", "case_id": "2", "question_id": "diff0", "answer": "no"},
    {"model": "A", "case_id": "2", "question_id": "diff1", "answer": "yes"},
    {"model": "A", "case_id": "3", "question_id": "sim0", "answer": "no"},  # the judge never saw it
    {"model": "R1", "case_id": "1", "question_id": "sim0", "answer": "yes"},  # labels for the repeats
    {"model": "R1", "case_id": "1", "question_id": "sim1", "answer": "no"},
]
ROUNDS = {
    ("1", S, 0): ("yes", "yes", "yes"),
    ("1", S, 1): ("no", "no", "yes"),
    ("1", D, 0): ("yes", "yes", "yes"),
    ("2", D, 0): ("no", "no", "no"),
}


def _kappa(a, b):
    cats = sorted(set(a) | set(b))
    a, b = np.array(a), np.array(b)
    po = np.mean(a == b)
    pe = sum(np.mean(a == c) * np.mean(b == c) for c in cats)
    return (po - pe) / (1 - pe)


@pytest.fixture
def vidic_board(tmp_path):
    a = vidic_run(tmp_path, "A", A_ANSWERS)
    b = vidic_run(tmp_path, "B", {k: ("no", "ok") for k in A_ANSWERS})
    repeats = [
        vidic_run(tmp_path, f"R{i + 1}", {k: (v[i], "ok") for k, v in ROUNDS.items()}, avg=avg)
        for i, avg in enumerate((70.0, 69.5, 71.0))
    ]
    human = tmp_path / "human.jsonl"
    human.write_text("".join(json.dumps(r) + "\n" for r in HUMAN))
    return compare([a, b], n_resamples=50, n_permutations=50, human_answers=human, judge_repeats=repeats)


def test_vidic_concordance_table_3(vidic_board):
    jh = vidic_board["analyses"]["judge_human"]
    assert set(jh) == {"A"}  # R1's lines belong to the stability analysis
    r = jh["A"]
    # matched: judge yes,no,yes,yes,no,<invalid> vs human yes,yes,yes,yes,no,yes; case 3 never judged
    assert (r["n"], r["n_unmatched"]) == (6, 1)
    assert r["accuracy"] == pytest.approx(4 / 6)
    # p_o = 24/36, p_e = (3/6)(5/6) + (2/6)(1/6) = 17/36 -> kappa = 7/19
    assert r["kappa"] == pytest.approx(7 / 19)
    assert r["kappa"] == pytest.approx(_kappa(list("ynyyni"), list("yyyyny")))
    sim, diff = r["by_section"]["Similarity"], r["by_section"]["Difference"]
    assert (sim["n"], sim["accuracy"], sim["kappa"]) == (3, pytest.approx(2 / 3), pytest.approx(0.0))
    assert (diff["n"], diff["accuracy"], diff["kappa"]) == (3, pytest.approx(2 / 3), pytest.approx(0.5))


def test_vidic_multi_round_stability(vidic_board):
    json.dumps(vidic_board)  # leaderboard.json can hold it
    st = vidic_board["analyses"]["judge_stability"]
    assert st["n_runs"] == 3 and st["n_questions"] == 4
    assert st["agreement"] == pytest.approx(3 / 4) and st["n_flipped"] == 1
    assert st["flipped"] == [{"case_id": "1", "section": S, "k": 1, "answers": ["no", "no", "yes"]}]
    # counts (yes, no): [3,0] [1,2] [3,0] [0,3]: P_bar = 5/6, P_e = (7/12)^2 + (5/12)^2 = 37/72 -> 23/35
    assert st["fleiss_kappa"] == pytest.approx(23 / 35)
    assert st["by_section"]["Similarity"] == {"n_questions": 2, "agreement": 0.5, "fleiss_kappa": pytest.approx(0.25)}
    assert st["by_section"]["Difference"]["fleiss_kappa"] == pytest.approx(1.0)
    avg = st["metrics"]["Avg"]
    assert avg["range"] == pytest.approx(1.5) and avg["std"] == pytest.approx(np.std([70.0, 69.5, 71.0], ddof=1))
    human = st["human"]["per_run"]
    assert human["R1"]["accuracy"] == 1.0 and human["R3"]["accuracy"] == 0.5
    assert (st["human"]["accuracy_min"], st["human"]["accuracy_max"]) == (0.5, 1.0)


def test_vidic_analyses_refusals(tmp_path):
    a = vidic_run(tmp_path, "A", A_ANSWERS)
    b = vidic_run(tmp_path, "B", A_ANSWERS)
    prefs = tmp_path / "p.jsonl"
    prefs.write_text("{}\n")
    with pytest.raises(CompareError, match="--human-prefs is a CoVEBench analysis"):
        compare([a, b], n_resamples=20, n_permutations=20, human_prefs=prefs)
    bad = tmp_path / "h.jsonl"
    bad.write_text(json.dumps({"model": "A", "case_id": "1", "question_id": "q7", "answer": "yes"}) + "\n")
    with pytest.raises(CompareError, match="question tag"):
        compare([a, b], n_resamples=20, n_permutations=20, human_answers=bad)
    bad.write_text(json.dumps({"model": "A", "case_id": "1", "question_id": "sim0", "answer": "maybe"}) + "\n")
    with pytest.raises(CompareError, match="yes or no"):
        compare([a, b], n_resamples=20, n_permutations=20, human_answers=bad)
    with pytest.raises(CompareError, match="at least two repeated runs"):
        compare([a, b], n_resamples=20, n_permutations=20, judge_repeats=[a])


# ----------------------------------------------------------------------------- wandb


def test_analysis_tables_and_wandb_logging(vidic_board, tmp_path, monkeypatch):
    tables = analysis_tables(vidic_board)
    jh = tables["judge_human"]
    assert list(jh["subset"]) == ["all", "Similarity", "Difference"]
    assert jh.loc[jh["subset"] == "Difference", "kappa"].item() == pytest.approx(0.5)
    st = tables["judge_stability"].set_index("subset")
    assert st.loc["all", "fleiss_kappa"] == pytest.approx(23 / 35) and st.loc["Similarity", "agreement"] == 0.5
    m = tables["judge_stability_metrics"]
    assert list(m.loc[m["metric"] == "Avg", "value"]) == [70.0, 69.5, 71.0]
    assert list(tables["judge_stability_human"]["accuracy"]) == [
        1.0,
        1.0,
        0.5,
    ]  # R2 answers sim1 "no" like the human; R3 "yes"
    # CoVEBench sections flatten too: one row per (attribute, model, bin) and per correlation cell
    cove = {
        "analyses": {
            "breakdowns": {
                "edit_points": {
                    "bins": ["1", "2"],
                    "runs": {
                        "x": [
                            {"bin": "1", "value": 50.0, "ci95": [40.0, 60.0], "n_cases": 3},
                            {"bin": "2", "value": None, "ci95": None, "n_cases": 0},
                        ]
                    },
                }
            },
            "correlations": {"metrics": ["A", "B"], "rho": [[1.0, 0.3], [0.3, 1.0]], "n": [[4, 4], [4, 4]]},
        }
    }
    t = analysis_tables(cove)
    b = t["breakdowns"]
    assert b["bin"].tolist() == ["1", "2"] and b["n_cases"].tolist() == [3, 0]
    assert b["ci_lo"].iloc[0] == 40.0 and pd.isna(b["ci_lo"].iloc[1])
    assert len(t["correlations"]) == 4 and t["correlations"]["rho"].tolist()[1] == 0.3

    logged: dict = {}

    class FakeRun:
        summary: dict = {}
        dir = str(tmp_path)

        def log(self, d):
            logged.update(d)

        def finish(self):
            pass

    fake = types.SimpleNamespace(
        init=lambda **kw: FakeRun(), Table=lambda dataframe: dataframe, Html=lambda html, inject=False: html
    )
    monkeypatch.setitem(sys.modules, "wandb", fake)
    log_wandb(vidic_board, tmp_path / "out", mode="offline")
    assert {
        "analyses/judge_human",
        "analyses/judge_stability",
        "analyses/judge_stability_metrics",
        "analyses/judge_stability_human",
    } <= set(logged)
    assert logged["analyses/judge_human"].equals(jh)


def test_vidic_analyses_on_the_leaderboard_page(vidic_board):
    from vbench_ray.leaderboard_html import render

    page = render(vidic_board)
    assert "ViDiC Table 3" in page and "<th>Similarity</th><th>Difference</th>" in page
    assert "66.67% (κ 0.5)" in page  # Difference: 2/3 concordance, kappa 0.5
    assert "identical answers on 75" in page and "R3 50" in page
