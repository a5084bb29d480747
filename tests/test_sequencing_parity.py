"""Issue 24: the AgenticVBench sequencing score, side by side with the official judge on messy submissions.

The oracle transcribes the official scorer (PhiloLabs/AgentVBench 193db62..., ``verifiers/sequencing/score.py``,
``score_task`` / ``metric_nd`` / ``metric_lis`` / ``metric_adj``; the per-task judges of PhiloLabs/agentic-vbench
b241e7b, ``tasks/agentic_vbench_sequencing/*/steps/solve/tests/judge.py``, add the slot-count and
``solution.mp4`` checks): ``str(source)`` of each segment against the answer key as written, 0 unless the
sources are a permutation of the key, else ``(1 - ND) * LIS * ADJ``.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vbench_ray.agentic.bundle import TaskBundle
from vbench_ray.agentic.verifiers import sequencing


def official_reward(solution: dict, correct: list[str], has_mp4: bool = True) -> float:
    segments = solution.get("segments")
    if not isinstance(segments, list):
        return 0.0
    pred = [str(seg.get("source", "")) for seg in segments]
    if len(pred) != len(correct) or sorted(pred) != sorted(correct):
        return 0.0
    n = len(correct)
    pos = {c: i for i, c in enumerate(pred)}
    nd = sum(abs(pos[c] - i) for i, c in enumerate(correct)) / ((n * n) // 2) if (n * n) // 2 else 0.0
    rank = {c: i for i, c in enumerate(correct)}
    tails: list[int] = []
    for x in [rank[c] for c in pred]:
        i = bisect_left(tails, x)
        tails[i:i + 1] = [x]
    lis = len(tails) / len(pred)
    adj = 1.0 if n <= 1 else sum(pos.get(correct[i + 1], -2) - pos.get(correct[i], -1) == 1
                                 for i in range(n - 1)) / (n - 1)
    return (1.0 - nd) * adj * lis if has_mp4 else 0.0


def _variants(name: str) -> list:
    stem = name[:-4]
    number = int(stem.split("_")[-1])
    return [name, name, name, stem, number, str(number), f"clips/{name}", name.upper(), None]


@st.composite
def submissions(draw):
    n = draw(st.integers(1, 7))
    key = [f"clip_{i:02d}.mp4" for i in draw(st.permutations(range(1, n + 1)))]
    order = draw(st.permutations(key))
    sources = [draw(st.sampled_from(_variants(c))) for c in order]
    if draw(st.booleans()) and sources:
        sources[draw(st.integers(0, len(sources) - 1))] = draw(st.sampled_from(key))  # maybe a duplicate
    if draw(st.integers(0, 9)) == 0:
        sources = sources[:-1]
    segments = [{"output": [i, i + 1], "source_range": [0, 1], **({} if s is None else {"source": s})}
                for i, s in enumerate(sources)]
    return key, {"segments": segments}, draw(st.integers(0, 5)) > 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(submissions())
def test_sequencing_matches_the_official_scorer(tmp_path, case):
    key, solution, has_mp4 = case
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    (sub / "solution.json").write_text(json.dumps(solution))
    mp4 = sub / "solution.mp4"
    if has_mp4:
        mp4.write_bytes(b"\x00")
    elif mp4.exists():
        mp4.unlink()
    task = TaskBundle(root=tmp_path, meta={"task_id": "s", "family": "sequencing"}, truth={"order": key})
    got = sequencing.verify(task, sub).reward
    assert abs(got - official_reward(solution, key, has_mp4)) <= 1e-9


def test_missing_solution_mp4_scores_zero_with_the_reason(tmp_path):
    """(b) a perfect order without the required ``solution.mp4`` was 1.0; it is 0 with the reason."""
    key = ["clip_01.mp4", "clip_02.mp4"]
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "solution.json").write_text(json.dumps({"segments": [{"source": c} for c in key]}))
    task = TaskBundle(root=tmp_path, meta={"task_id": "s", "family": "sequencing"}, truth={"order": key})
    v = sequencing.verify(task, sub)
    assert v.reward == 0.0 and v.status == "missing" and "solution.mp4 is missing" in v.details["reason"]
    assert v.details["strict"] == 1  # the order's own metrics stay in details
    (sub / "solution.mp4").write_bytes(b"\x00")
    assert sequencing.verify(task, sub).reward == 1.0
