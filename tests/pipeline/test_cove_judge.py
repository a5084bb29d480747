"""CoVEBench checklist metrics end to end with the replay backend: a perfect judge, a broken answer,
re-scoring a run from its own judge log."""

import json

import pyarrow.parquet as pq
import pytest

from helpers.common import REPO
from helpers.configs import cove_cfg
from helpers.cove_answers import JUDGE_ONLY, perfect_answers
from vbench_ray.runner import run

COVE = REPO / "configs" / "cove.yaml"


def test_perfect_judge_scores_100(cove_data, tmp_path):
    answers = tmp_path / "answers.jsonl"
    ids = perfect_answers(cove_data, answers)
    result = run(
        cove_cfg(cove_data, tmp_path / "run", JUDGE_ONLY, "judge.backend=replay", f"judge.replay_path={answers}")
    )
    m = result.summary["metrics"]
    for name in ("UAS", "IFS", "VRS", "SEM"):
        assert m[name]["value"] == pytest.approx(100.0), name
        assert m[name]["n_invalid"] == 0
    assert result.summary["judge"]["n_requests"] == len(ids) == result.summary["judge"]["n_ok"]
    judged = pq.read_table(tmp_path / "run" / "judgments.parquet").to_pylist()
    assert all(r["status"] == "ok" for r in judged) and len({r["request_id"] for r in judged}) == len(ids)
    assert set(result.summary["by_category"]) >= {"Subject", "Background", "Camera", "Motion", "Style"}
    assert all(v["UAS"]["value"] == 100.0 for v in result.summary["by_category"].values() if v["UAS"]["n"])


@pytest.mark.parametrize("parse", ["lenient", "official"])
def test_broken_answer_counts_wrong_and_rescoring_reproduces(cove_data, tmp_path, parse):
    """A request never answered validly: wrong under judge.parse=lenient, dropped from the denominator
    under official (as the official aggregation skips questions without an answer)."""
    answers = tmp_path / "answers.jsonl"
    broken = "cove/1/base/checklist/Single-TF"
    perfect_answers(cove_data, answers, break_one=broken)
    out = tmp_path / "run"
    mode = f"judge.parse={parse}"
    # one broken request of a tiny run is more than judge.max_invalid_fraction's 5%: keep the metrics anyway
    mode = (mode, "judge.max_invalid_fraction=1")
    first = run(
        cove_cfg(
            cove_data,
            out,
            JUDGE_ONLY,
            "judge.backend=replay",
            f"judge.replay_path={answers}",
            "judge.max_retries=2",
            *mode,
        )
    )
    judged = [r for r in pq.read_table(out / "judgments.parquet").to_pylist() if r["request_id"] == broken]
    dropped = parse == "official"
    assert judged and all(r["status"] == "invalid" and r["correct"] is (None if dropped else False) for r in judged)
    n_broken_ea_pl = sum(r["metric"] in ("IFS", "VRS") for r in judged)
    m = first.summary["metrics"]
    assert m["IFS"]["n_invalid"] + m["VRS"]["n_invalid"] == n_broken_ea_pl > 0
    assert first.summary["judge"]["n_invalid"] == 1
    if dropped:  # every other answer is right, so dropping the broken ones leaves 100
        assert m["IFS"]["value"] == m["VRS"]["value"] == 100.0
        assert m["IFS"]["n_dropped"] + m["VRS"]["n_dropped"] == n_broken_ea_pl
        assert m["IFS"]["other_parse"]["value"] < 100.0  # lenient counts them wrong
    else:
        assert m["UAS"]["value"] < 100.0
    assert m["IFS"]["n_scored_differently"] + m["VRS"]["n_scored_differently"] == n_broken_ea_pl
    log = [json.loads(line) for line in (out / "judge_log.jsonl").read_text().splitlines()]
    assert [r["attempt"] for r in log if r["request_id"] == broken] == [0, 1, 2]

    # re-score from the run's own judge log, in a new directory and in the same one
    again = run(
        cove_cfg(
            cove_data,
            tmp_path / "rescored",
            JUDGE_ONLY,
            "judge.backend=replay",
            f"judge.replay_path={out}",
            "judge.max_retries=2",
            *mode,
        )
    )
    same = run(
        cove_cfg(
            cove_data, out, JUDGE_ONLY, "judge.backend=replay", f"judge.replay_path={out}", "judge.max_retries=2", *mode
        )
    )
    assert again.summary["metrics"] == first.summary["metrics"] == same.summary["metrics"]
    assert again.summary["by_category"] == first.summary["by_category"]
    assert len((out / "judge_log.jsonl").read_text().splitlines()) == len(log)  # nothing asked twice


def test_per_task_aggregation_option_changes_only_the_pooling(cove_data, tmp_path):
    answers = tmp_path / "answers.jsonl"
    perfect_answers(cove_data, answers, break_one="cove/2/base/checklist/AB-MCQ")
    args = (
        "judge.backend=replay",
        f"judge.replay_path={answers}",
        "judge.max_retries=0",
        "judge.max_invalid_fraction=1",
        "judge.parse=lenient",
    )  # the broken request counts wrong (official would drop it)
    pooled = run(cove_cfg(cove_data, tmp_path / "a", JUDGE_ONLY, *args)).summary["metrics"]["IFS"]
    per_task = run(cove_cfg(cove_data, tmp_path / "a", JUDGE_ONLY, *args, "score.aggregation=per_task")).summary[
        "metrics"
    ]["IFS"]
    assert pooled["n"] == per_task["n"] and pooled["value"] != per_task["value"]
