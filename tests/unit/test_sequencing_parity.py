"""Issue 24: the AgenticVBench sequencing score, side by side with the official judge on messy submissions.

The oracle transcribes the official scorer (PhiloLabs/AgentVBench 193db62..., ``verifiers/sequencing/score.py``,
``score_task`` / ``metric_nd`` / ``metric_lis`` / ``metric_adj``; the per-task judges of PhiloLabs/agentic-vbench
b241e7b, ``tasks/agentic_vbench_sequencing/*/steps/solve/tests/judge.py``, add the slot-count and
``solution.mp4`` checks): ``str(source)`` of each segment against the answer key as written, 0 unless the
sources are a permutation of the key, else ``(1 - ND) * LIS * ADJ``; that part is fuzzed with
``sequencing.video=exists``. The judge's frame check (agentic-vbench 4ed7ffc, the sequencing task1 judge:
``reward = honesty_factor * ordering``, every slot's segment checked against its clip in ``solution.mp4``) is
the oracle ``agentic_oracles.sequencing_judge``, fuzzed on real clips and generated ``solution.mp4`` files
(honest, a slot showing another clip, clips trimmed but declared whole, empty, junk, missing; ranges
malformed) in the official layout (key ``["3", "1", ...]``, clips ``3.mp4``...).
"""

from __future__ import annotations

import json
import shutil
from bisect import bisect_left
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers import agentic_oracles as O
from vbench_ray.agentic.bundle import TaskBundle
from vbench_ray.agentic.media import write_media
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
        tails[i : i + 1] = [x]
    lis = len(tails) / len(pred)
    adj = (
        1.0
        if n <= 1
        else sum(pos.get(correct[i + 1], -2) - pos.get(correct[i], -1) == 1 for i in range(n - 1)) / (n - 1)
    )
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
    segments = [
        {"output": [i, i + 1], "source_range": [0, 1], **({} if s is None else {"source": s})}
        for i, s in enumerate(sources)
    ]
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
    got = sequencing.verify(task, sub, sequencing.SequencingConfig(video="exists")).reward
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
    assert sequencing.verify(task, sub, sequencing.SequencingConfig(video="exists")).reward == 1.0
    v = sequencing.verify(task, sub)  # default: the frames must show the clips (none can be read here)
    assert v.reward == 0.0 and v.details["honesty_factor"] == 0.0 and "slot 0" in v.details["reason"]


# ----------------------------------------------------------------------------- the frame check

N_CLIPS, CLIP_FRAMES, FPS = 6, 6, 10.0


def _clip_frames(c: int) -> np.ndarray:
    """Clip ``c``: a still of 8x8-pixel grey blocks of its own (frames of two clips: SSIM far below 0.95)."""
    blocks = np.random.default_rng(c).integers(0, 256, size=(6, 8), dtype=np.uint8)
    grey = np.kron(blocks, np.ones((8, 8), dtype=np.uint8))
    return np.repeat(np.stack([grey] * 3, axis=-1)[None], CLIP_FRAMES, axis=0)


@pytest.fixture(scope="module")
def materials(tmp_path_factory):
    root = tmp_path_factory.mktemp("seq_frames")
    for c in range(1, N_CLIPS + 1):
        write_media(root / "inputs" / "clips" / f"{c}.mp4", _clip_frames(c), FPS)
    return root


@st.composite
def shown_submissions(draw):
    n = draw(st.integers(2, 5))
    key = [str(c) for c in draw(st.permutations(range(1, N_CLIPS + 1)))[:n]]
    order = list(draw(st.permutations(key))) if draw(st.integers(0, 3)) else list(key)
    sources = list(order)
    if draw(st.integers(0, 9)) == 0:
        sources[0] = sources[0] + ".mp4"  # the official key has no extension: a slot set mismatch
    shown = [
        draw(st.sampled_from([str(c) for c in range(1, N_CLIPS + 1)])) if draw(st.integers(0, 4)) == 0 else c
        for c in order
    ]  # a slot of the video showing another clip
    kind = draw(st.sampled_from(("video", "video", "video", "trimmed", "empty", "junk", "missing")))
    length = CLIP_FRAMES // 2 if kind == "trimmed" else CLIP_FRAMES  # trimmed: half of each clip, declared whole
    segments = []
    for i, src in enumerate(sources):
        t0, d = i * CLIP_FRAMES / FPS, CLIP_FRAMES / FPS
        seg = {"source": src, "output": [t0, t0 + d], "source_range": [0.0, d]}
        flaw = draw(st.integers(0, 15))
        if flaw == 0:
            del seg["output"]
        elif flaw == 1:
            seg["source_range"] = [0.3, 0.3]
        segments.append(seg)
    return key, {"segments": segments}, kind, [(int(c), length) for c in shown]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shown_submissions())
def test_the_frame_check_matches_the_official_judge(materials, tmp_path, case):
    key, solution, kind, shown = case
    sub = tmp_path / "sub"
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir()
    (sub / "solution.json").write_text(json.dumps(solution))
    mp4 = sub / "solution.mp4"
    if kind in ("video", "trimmed"):
        write_media(mp4, np.concatenate([_clip_frames(c)[:length] for c, length in shown]), FPS)
    elif kind == "empty":
        mp4.write_bytes(b"")
    elif kind == "junk":
        mp4.write_bytes(b"\x00" * 64)
    task = TaskBundle(root=materials, meta={"task_id": "s", "family": "sequencing"}, truth={"order": key})
    got = sequencing.verify(task, sub)
    want = O.sequencing_judge(sub / "solution.json", mp4, materials / "inputs" / "clips", key)
    event(f"official honesty {want.get('honesty')}, reward {'0' if not want['reward'] else '(0, 1]'}")
    assert abs(got.reward - want["reward"]) <= 1e-9, (got.details, want)
    if "honesty" in want:
        assert abs(got.details["honesty_factor"] - want["honesty"]) <= 1e-9


def _submit(root: Path, order: list[str], shown: list[int], shape: str = "segments") -> Path:
    sub = root / f"sub_{shape}_{'_'.join(order)}_{'_'.join(map(str, shown))}"
    sub.mkdir(parents=True)
    write_media(sub / "solution.mp4", np.concatenate([_clip_frames(c) for c in shown]), FPS)
    d = CLIP_FRAMES / FPS
    segments = [{"source": c, "output": [i * d, (i + 1) * d], "source_range": [0.0, d]} for i, c in enumerate(order)]
    (sub / "solution.json").write_text(json.dumps({"segments": segments} if shape == "segments" else {"order": order}))
    return sub


def test_a_right_order_with_a_wrong_video_scores_as_the_official_judge(materials, tmp_path):
    """The right order was 1.0 whatever solution.mp4 showed; the official judge multiplies the ordering by the
    share of slots the video shows as declared. By hand, key 3 1 2: the right video 1.0; a video of
    clips 3 1 4 (slot 3 shows clip 4) 2/3; one of 2 1 3 (slots 1 and 3 swapped) 1/3; an empty file 0;
    an ``order``-only answer (no ranges to check) 0; with ``sequencing.video=exists`` all 1.0."""
    key = ["3", "1", "2"]
    task = TaskBundle(root=materials, meta={"task_id": "s", "family": "sequencing"}, truth={"order": key})
    cases = {
        "right": ([3, 1, 2], "segments", 1.0),
        "one wrong": ([3, 1, 4], "segments", 2 / 3),
        "two swapped": ([2, 1, 3], "segments", 1 / 3),
        "order only": ([3, 1, 2], "order", 0.0),
    }
    exists = sequencing.SequencingConfig(video="exists")
    for name, (shown, shape, want) in cases.items():
        sub = _submit(tmp_path, key, shown, shape)
        v = sequencing.verify(task, sub)
        assert abs(v.reward - want) <= 1e-9, (name, v.details)
        assert (
            abs(
                v.reward
                - O.sequencing_judge(sub / "solution.json", sub / "solution.mp4", materials / "inputs" / "clips", key)[
                    "reward"
                ]
            )
            <= 1e-9
        ), name
        assert v.details["strict"] == 1 and sequencing.verify(task, sub, exists).reward == 1.0
        if want < 1.0:
            assert "solution.mp4 shows" in v.details["reason"], v.details
    sub = _submit(tmp_path / "empty", key, [3, 1, 2], "segments")
    (sub / "solution.mp4").write_bytes(b"")
    v = sequencing.verify(task, sub)
    assert v.reward == 0.0 and "frame read failed" in v.details["reason"]


def test_the_oracle_agent_still_scores_one_on_synthetic_bundles(tmp_path):
    """The project's own bundles key clips by file name (``shot_a48d.mp4``): the baseline oracle's answer,
    segments with their ranges and the clips concatenated, passes the frame check."""
    from vbench_ray.agentic.baselines import sequencing_oracle, sequencing_random
    from vbench_ray.agentic.bundle import list_tasks, load_task
    from vbench_ray.agentic.synth import synth_agentic

    synth_agentic(
        tmp_path / "b", seed=3, n_assembly=0, n_sequencing=1, n_repair=0, n_repurpose=0, sequencing_clips=(4, 4)
    )
    task = load_task(list_tasks(tmp_path / "b" / "tasks")[0])
    sequencing_oracle(task, tmp_path / "o", np.random.default_rng(0))
    v = sequencing.verify(task, tmp_path / "o")
    assert v.reward == 1.0 and v.details["n_honest"] == 4, v.details
    sequencing_random(task, tmp_path / "r", np.random.default_rng(1))
    v = sequencing.verify(task, tmp_path / "r")
    assert v.details["n_honest"] == 4 and abs(v.reward - v.details["adjusted"]) <= 1e-12


def test_an_unknown_video_check_is_refused_before_anything_runs(tmp_path):
    from helpers.common import REPO
    from vbench_ray.config import ConfigError
    from vbench_ray.configure import load_config

    with pytest.raises(ConfigError, match=r"sequencing.video` = 'pixels' is not one of \['frames', 'exists'\]"):
        load_config(
            REPO / "configs" / "agentic.yaml",
            ["sequencing.video=pixels", f"data.tasks_dir={tmp_path}", f"output.dir={tmp_path / 'o'}"],
        )
