"""Issue 24, "no number where none was earned", on a run: a missing or misnamed edited video counts as a wrong
answer under ``score.missing_output=wrong`` and is listed."""

from __future__ import annotations

import pyarrow.parquet as pq

from helpers.common import REPO, cove_overrides
from helpers.cove_answers import JUDGE_ONLY, perfect_answers
from vbench_ray.configure import load_config

COVE = REPO / "configs" / "cove.yaml"


def test_a_missing_or_misnamed_edited_video_counts_under_missing_output(cove_copy, tmp_path):
    """(a) Task 1's edited video deleted, task 2's renamed to a name no pattern reads: both count wrong under
    the default ``score.missing_output=wrong`` (a perfect judge answers the rest), and are listed."""
    from vbench_ray.runner import run

    answers = tmp_path / "answers.jsonl"
    perfect_answers(cove_copy, answers)
    edited = cove_copy["edited_dir"]
    (edited / "1.mp4").unlink()
    (edited / "2.mp4").rename(edited / "my_model_output.mp4")
    cfg = load_config(
        COVE,
        cove_overrides(cove_copy, tmp_path / "run", JUDGE_ONLY, "judge.backend=replay", f"judge.replay_path={answers}"),
    )
    result = run(cfg)
    assert result.summary["missing_output"] == {"rule": "wrong", "n_cases": 2, "cases": ["1", "2"]}
    judged = pq.read_table(tmp_path / "run" / "judgments.parquet").to_pylist()
    lost = [r for r in judged if r["case_id"] in ("1", "2")]
    assert lost and all(r["status"] == "no_output" and "not found" in r["error"] for r in lost)
    assert all(r["correct"] is False for r in lost if r["type"] != "Score-MCQ")
    ifs = result.summary["metrics"]["IFS"]
    right = [r for r in judged if r["metric"] == "IFS" and r["correct"]]
    total = [r for r in judged if r["metric"] == "IFS" and r["correct"] is not None]
    assert ifs["value"] == 100.0 * len(right) / len(total) < 100.0
