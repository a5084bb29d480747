"""AgenticVBench verifier formulas on hand-built cases (paper §2.4 Eq. 1, §2.6/App. H.2 Eqs. 2-7,
App. H.1 rescaling, §2.7 rubric score): perfect, reversed, one swap, invalid, chance level."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vbench_ray.agentic.bundle import TaskBundle
from vbench_ray.agentic.verifiers import assembly, sequencing
from vbench_ray.agentic.verifiers import repurpose as rp
from vbench_ray.agentic.verifiers.measures import envelope_correlation, lsd, psnr, rescale, si_sdr, xcorr_peak
from vbench_ray.agentic.verifiers.repair import match_ranges, parse_ranges
from vbench_ray.agentic.verifiers.base import InvalidSubmission

# ----------------------------------------------------------------------------- sequencing


def test_sequencing_perfect_order_scores_one():
    m = sequencing.sequencing_metrics(list("abcdefg"), list("abcdefg"))
    assert (m["nd"], m["lis"], m["adj"], m["strict"], m["adjusted"]) == (0.0, 1.0, 1.0, 1, 1.0)


def test_sequencing_reversed_order():
    n = 8
    truth = [f"c{i}" for i in range(n)]
    m = sequencing.sequencing_metrics(truth[::-1], truth)
    # reversal: total displacement sum |n-1-2i| = n^2/2 = floor(n^2/2) -> ND = 1; LIS = 1/n; ADJ = 0
    assert m["nd"] == pytest.approx(1.0)
    assert m["lis"] == pytest.approx(1 / n)
    assert m["adj"] == 0.0 and m["strict"] == 0 and m["adjusted"] == 0.0
    odd = [f"c{i}" for i in range(7)]
    m7 = sequencing.sequencing_metrics(odd[::-1], odd)  # sum = 24, floor(49/2) = 24
    assert m7["nd"] == pytest.approx(1.0)


def test_sequencing_one_adjacent_swap_by_hand():
    truth = list("abcdefghij")  # n = 10
    pred = list("abdcefghij")  # c and d exchanged
    m = sequencing.sequencing_metrics(pred, truth)
    assert m["nd"] == pytest.approx(2 / 50)  # |3-2| + |2-3| over floor(100/2)
    assert m["lis"] == pytest.approx(9 / 10)
    # predicted pairs: ab, bd, dc, ce, ef, fg, gh, hi, ij -> ab ef fg gh hi ij correct = 6 of 9
    assert m["adj"] == pytest.approx(6 / 9)
    assert m["adjusted"] == pytest.approx((1 - 0.04) * 0.9 * 6 / 9)
    assert m["weighted"] == pytest.approx(0.4 * 0.96 + 0.3 * 0.9 + 0.3 * 6 / 9)


def test_sequencing_distant_swap_by_hand():
    truth = list("abcdefg")  # n = 7
    pred = list("gbcdefa")  # first and last exchanged
    m = sequencing.sequencing_metrics(pred, truth)
    assert m["nd"] == pytest.approx(12 / 24)
    assert m["lis"] == pytest.approx(5 / 7)
    assert m["adj"] == pytest.approx(4 / 6)  # bc cd de ef


def test_lis_length():
    assert sequencing.lis_length([3, 1, 2, 5, 4, 6]) == 4
    assert sequencing.lis_length([]) == 0
    assert sequencing.lis_length([5, 4, 3]) == 1


def test_sequencing_chance_level():
    """Random permutations: E[ADJ] = 1/n exactly and E[sum|displacement|] = (n^2 - 1)/3, so the
    multiplicative score of a random order is near 0."""
    rng = np.random.default_rng(0)
    n, trials = 12, 4000
    truth = list(range(n))
    ms = [sequencing.sequencing_metrics(list(rng.permutation(n)), truth) for _ in range(trials)]
    adj = np.mean([m["adj"] for m in ms])
    nd = np.mean([m["nd"] for m in ms])
    assert adj == pytest.approx(1 / n, abs=0.01)
    assert nd == pytest.approx(((n * n - 1) / 3) / (n * n // 2), abs=0.01)
    assert np.mean([m["adjusted"] for m in ms]) < 0.05
    assert np.mean([m["strict"] for m in ms]) == 0.0


def _seq_task(tmp_path: Path, clips: list[str]) -> TaskBundle:
    return TaskBundle(root=tmp_path, meta={"task_id": "s", "family": "sequencing"}, truth={"order": clips})


@pytest.mark.parametrize(
    "content, reason",
    [
        (None, "solution.json is missing"),
        ("{not json", "not valid JSON"),
        (json.dumps({"order": "a,b,c"}), "expected"),
        (json.dumps({"order": ["a.mp4", "b.mp4"]}), "not a permutation"),
        (json.dumps({"order": ["a.mp4", "b.mp4", "b.mp4"]}), "more than once"),
        (json.dumps({"order": ["a.mp4", "b.mp4", "zz.mp4"]}), "unknown clip"),
        (json.dumps({"order": ["a.mp4", "b.mp4", "c.mp4", "d.mp4"]}), "unknown clip"),
    ],
)
def test_sequencing_invalid_submissions_score_zero_with_reason(tmp_path, content, reason):
    task = _seq_task(tmp_path, ["a.mp4", "b.mp4", "c.mp4"])
    sub = tmp_path / "sub"
    sub.mkdir()
    if content is not None:
        (sub / "solution.json").write_text(content)
    v = sequencing.verify(task, sub)
    assert v.reward == 0.0 and v.status in ("invalid", "missing")
    assert reason in v.details["reason"]
    assert v.status == ("missing" if content is None else "invalid")


# the order part of the score (the frame check of solution.mp4 is tested in test_sequencing_parity.py)
EXISTS = sequencing.SequencingConfig(video="exists")
LENIENT = sequencing.SequencingConfig(names="lenient", video="exists")


def _seq_sub(tmp_path: Path) -> Path:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "solution.mp4").write_bytes(b"\x00")  # the required deliverable is there (content unchecked: EXISTS)
    return sub


def test_sequencing_accepts_stems_and_a_bare_list(tmp_path):
    task = _seq_task(tmp_path, ["a.mp4", "b.mp4", "c.mp4"])
    sub = _seq_sub(tmp_path)
    (sub / "solution.json").write_text(json.dumps(["a", "b.mp4", "c"]))
    v = sequencing.verify(task, sub, LENIENT)
    assert v.reward == 1.0 and v.details["strict"] == 1
    official = sequencing.verify(task, sub)  # the official judge: names as the key writes them, else 0
    assert official.reward == 0.0 and "unknown clip" in official.details["reason"]
    (sub / "solution.json").write_text(json.dumps({"order": ["b", "a", "c"]}))
    v = sequencing.verify(
        task, sub, sequencing.SequencingConfig(score="official_weighted", names="lenient", video="exists")
    )
    m = sequencing.sequencing_metrics(["b.mp4", "a.mp4", "c.mp4"], ["a.mp4", "b.mp4", "c.mp4"])
    assert v.reward == pytest.approx(m["weighted"]) and v.details["adjusted"] == pytest.approx(m["adjusted"])


@pytest.mark.parametrize(
    "sources", [["3", "1", "2", "4"], [3, 1, 2, 4], ["clip_03.mp4", "clip_01", "2", "clip_04.mp4"]]
)
def test_sequencing_reads_the_official_segments_format(tmp_path, sources):
    """Issue 10 item 8: the official harness writes {"segments": [{"source": <clip number>, ...}]}."""
    clips = ["clip_03.mp4", "clip_01.mp4", "clip_04.mp4", "clip_02.mp4"]  # the true order
    task = _seq_task(tmp_path, clips)
    sub = _seq_sub(tmp_path)
    segments = [{"output": [float(i), i + 1.0], "source": s, "source_range": [0.0, 1.0]} for i, s in enumerate(sources)]
    (sub / "solution.json").write_text(json.dumps({"segments": segments}))
    v = sequencing.verify(task, sub, LENIENT)
    # predicted 3,1,2,4 -> true ranks [0, 1, 3, 2]: ND = (0+0+1+1) / floor(16/2) = 0.25, LIS = 3/4,
    # ADJ = 1/3 (only 3->1 is a true successor pair); paper score 0.75 * 0.75 / 3 = 0.1875
    assert v.status == "ok" and v.details["predicted"] == ["clip_03.mp4", "clip_01.mp4", "clip_02.mp4", "clip_04.mp4"]
    assert (v.details["nd"], v.details["lis"], v.details["adj"]) == pytest.approx((0.25, 0.75, 1 / 3))
    assert v.reward == pytest.approx(0.1875)
    weighted = sequencing.verify(
        task, sub, sequencing.SequencingConfig(score="official_weighted", names="lenient", video="exists")
    )
    assert weighted.reward == pytest.approx(0.4 * 0.75 + 0.3 * 0.75 + 0.3 / 3)  # 0.625


def test_sequencing_official_segments_perfect_and_malformed(tmp_path):
    task = _seq_task(tmp_path, ["1.mp4", "2.mp4", "3.mp4"])
    sub = _seq_sub(tmp_path)
    (sub / "solution.json").write_text(json.dumps({"segments": [{"source": "1"}, {"source": "2"}, {"source": "3"}]}))
    assert sequencing.verify(task, sub, LENIENT).reward == 1.0
    assert sequencing.verify(task, sub).reward == 0.0  # official: "1" is not the key's "1.mp4"
    (sub / "solution.json").write_text(json.dumps({"segments": [{"source": f"{k}.mp4"} for k in (1, 2, 3)]}))
    assert sequencing.verify(task, sub, EXISTS).reward == 1.0
    (sub / "solution.json").write_text(json.dumps({"segments": "1,2,3"}))
    v = sequencing.verify(task, sub)
    assert v.reward == 0.0 and "segments is not a list" in v.details["reason"]
    (sub / "solution.json").write_text(json.dumps({"segments": [{"source": "1"}, {"source": "2"}, {"output": [0, 1]}]}))
    assert sequencing.verify(task, sub).reward == 0.0  # a segment without a source is no clip


# ----------------------------------------------------------------------------- assembly


def test_chance_adjustment_by_hand():
    assert assembly.chance_adjusted(1.0, 1 / 3) == 1.0
    assert assembly.chance_adjusted(1 / 3, 1 / 3) == pytest.approx(0.0)  # chance level scores 0
    assert assembly.chance_adjusted(0.0, 1 / 3) == 0.0  # floored
    assert assembly.chance_adjusted(0.75, 1 / 3) == pytest.approx((0.75 - 1 / 3) * 1.5)  # official form
    assert assembly.chance_adjusted(0.5, 1.0) == 0.5  # a single candidate: no chance to remove


def _asm_task(tmp_path: Path, k: int = 3, n: int = 4) -> TaskBundle:
    slots = [
        {
            "slot": f"S{i + 1}",
            "golden": f"g{i}.mp4",
            "candidates": [f"g{i}.mp4"] + [f"d{i}_{j}.mp4" for j in range(k - 1)],
        }
        for i in range(n)
    ]
    return TaskBundle(root=tmp_path, meta={"task_id": "a", "family": "assembly"}, truth={"slots": slots})


def _asm_submit(tmp_path: Path, content) -> Path:
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    (sub / "solution.json").write_text(content if isinstance(content, str) else json.dumps(content))
    return sub


SLOTS = assembly.AssemblyConfig(scheme="slots")  # the project's reading: plain accuracy, chance 1/k


def test_assembly_perfect_one_wrong_and_chance(tmp_path):
    task = _asm_task(tmp_path)
    perfect = {"slots": {f"S{i + 1}": f"g{i}.mp4" for i in range(4)}}
    assert assembly.verify(task, _asm_submit(tmp_path, perfect), SLOTS).reward == 1.0
    one_wrong = {"slots": {**perfect["slots"], "S2": "d1_0.mp4"}}
    v = assembly.verify(task, _asm_submit(tmp_path, one_wrong), SLOTS)
    assert v.details["accuracy"] == 0.75 and v.reward == pytest.approx((0.75 - 1 / 3) / (2 / 3))
    # list form, stems, a missing slot and a clip from another slot's candidates all count wrong
    listed = {"slots": [{"slot": "S1", "clip": "g0"}, {"slot": "S2", "clip": "g0.mp4"}, {"slot": "S3", "clip": "d2_1"}]}
    v = assembly.verify(task, _asm_submit(tmp_path, listed), SLOTS)
    assert v.details["n_correct"] == 1 and v.reward == 0.0  # r = 1/4 < 1/3: floored
    all_wrong = {f"S{i + 1}": f"d{i}_0.mp4" for i in range(4)}  # bare mapping
    assert assembly.verify(task, _asm_submit(tmp_path, all_wrong), SLOTS).reward == 0.0


def test_assembly_random_selection_is_chance():
    rng = np.random.default_rng(1)
    k, n, trials = 3, 30, 2000
    rs = [np.mean(rng.integers(0, k, size=n) == 0) for _ in range(trials)]
    assert np.mean(rs) == pytest.approx(1 / k, abs=0.01)
    assert assembly.chance_adjusted(float(np.mean(rs)), 1 / k) == pytest.approx(0.0, abs=0.02)


@pytest.mark.parametrize(
    "content, reason",
    [
        ("[1, 2", "not valid JSON"),
        (json.dumps("S1=g0"), "expected"),
        (json.dumps({"slots": [["S1", "g0"]]}), "slots[0]"),
    ],
)
def test_assembly_malformed_json_scores_zero(tmp_path, content, reason):
    v = assembly.verify(_asm_task(tmp_path), _asm_submit(tmp_path, content), SLOTS)
    assert v.reward == 0.0 and v.status == "invalid" and reason in v.details["reason"]
    official = assembly.verify(_asm_task(tmp_path), _asm_submit(tmp_path, content))  # the task judge's reading
    assert official.reward == 0.0 and official.status == "invalid" and official.details["reason"]


def test_assembly_missing_solution_is_a_missing_rollout(tmp_path):
    (tmp_path / "sub").mkdir()
    v = assembly.verify(_asm_task(tmp_path), tmp_path / "sub")
    assert v.reward == 0.0 and v.status == "missing"


# ----------------------------------------------------------------------------- repair: rescaling and ranges


def test_rescale_places_output_between_broken_and_golden():
    assert rescale(25.0, 20.0, 40.0) == pytest.approx(0.25)
    assert rescale(20.0, 20.0, 40.0) == 0.0  # the broken input scores 0
    assert rescale(40.0, 20.0, 40.0) == 1.0  # the golden scores 1
    assert rescale(50.0, 20.0, 40.0) == 1.0 and rescale(10.0, 20.0, 40.0) == 0.0  # clipped
    # lower is better (LSD, CIEDE2000): the sign flips
    assert rescale(4.0, 10.0, 2.0, higher_is_better=False) == pytest.approx(0.75)
    assert rescale(12.0, 10.0, 2.0, higher_is_better=False) == 0.0
    # a degenerate reference: at least as good as golden -> 1, else 0
    assert rescale(5.0, 5.0, 5.0) == 1.0 and rescale(4.0, 5.0, 5.0) == 0.0


def test_window_reward_combination_by_hand():
    s_in, s_out = rescale(30.0, 20.0, 40.0), rescale(35.0, 20.0, 40.0)
    assert 0.9 * s_in + 0.1 * s_out == pytest.approx(0.9 * 0.5 + 0.1 * 0.75)


def test_range_match_tolerance_and_no_reuse():
    truth = [[1.0, 1.5], {"range": [3.0, 3.5], "equivalent": [[2.5, 3.0]]}]
    m = match_ranges(truth, [(1.1, 1.4), (2.45, 3.05)], tolerance=0.25)
    assert [x["matched"] for x in m] == [True, True]  # the second matches the equivalent form
    m = match_ranges(truth, [(1.1, 1.8)], tolerance=0.25)  # end 0.3 s off
    assert [x["matched"] for x in m] == [False, False]
    m = match_ranges([[1.0, 1.5], [1.0, 1.5]], [(1.0, 1.5)], tolerance=0.1)  # one prediction, used once
    assert sum(x["matched"] for x in m) == 1


@pytest.mark.parametrize(
    "solution",
    [
        {"ranges": "1-2"},
        {"ranges": [[2.0, 1.0]]},
        {"ranges": [[0.5]]},
        {"ranges": [[-1, 0.5]]},
        {"ranges": [[0.5, 99.0]]},
        {"ranges": [["a", "b"]]},
        {"ranges": [[True, 2]]},
        "ranges",
    ],
)
def test_malformed_ranges_are_rejected(solution):
    with pytest.raises(InvalidSubmission, match="malformed ranges"):
        parse_ranges(solution, duration=4.0, fps=12.0)


def test_ranges_forms():
    assert parse_ranges({"ranges": [[0.5, 1.0], {"start": 2, "end": 2.5}]}, 4.0, 12.0) == [(0.5, 1.0), (2.0, 2.5)]
    assert parse_ranges([[0, 4.05]], 4.0, 12.0) == [(0.0, 4.05)]  # one frame of slack at the end


# ----------------------------------------------------------------------------- measures


def test_measures_on_known_signals():
    a = np.full((8, 8, 3), 100, np.uint8)
    b = a.copy()
    b[0, 0, 0] = 110  # mse = 100 / 192
    assert psnr(a, a, cap=60) == 60.0
    assert psnr(a, b) == pytest.approx(10 * np.log10(255**2 / (100 / 192)))
    sr = 16000
    t = np.arange(sr) / sr
    x = np.sin(2 * np.pi * 440 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    noise = np.random.default_rng(0).normal(0, 0.1, sr)
    assert si_sdr(3 * x, x, cap=60) == 60.0  # scale-invariant
    assert si_sdr(x + noise, x) == pytest.approx(10 * np.log10(np.sum(x**2) / np.sum(noise**2)), abs=0.2)
    assert lsd(x, x, sr) == pytest.approx(0.0, abs=1e-9)
    assert lsd(x + noise, x, sr) > 1.0
    assert envelope_correlation(x, x, sr) == pytest.approx(1.0)
    assert envelope_correlation(x + 3 * noise, x, sr) < envelope_correlation(x + noise, x, sr) < 1.0
    peak, lag = xcorr_peak(np.concatenate([np.zeros(80), x]), x, max_lag=400)
    assert peak > 0.99 and lag == 80


# ----------------------------------------------------------------------------- repurpose rubric

ITEMS = [
    {"weight": 2.0, "pass": True, "pillar": "format"},
    {"weight": 2.0, "pass": False, "pillar": "visual"},
    {"weight": 1.0, "pass": True, "pillar": "sound"},
    {"weight": -2.0, "pass": True, "pillar": "penalty"},  # a violation, present
    {"weight": -1.0, "pass": False, "pillar": "penalty", "narrative_essential": True},  # a requirement, failed
]


def test_rubric_score_signed_weights_by_hand():
    # never (paper): sum(pass * w) = 2 + 1 - 2 = 1 over positive weights 5
    assert rp.rubric_score(ITEMS, "never")["reward"] == pytest.approx(1 / 5)
    # narrative_essential (official): the failed essential item costs its weight: 1 - 1 = 0
    assert rp.rubric_score(ITEMS, "narrative_essential")["reward"] == pytest.approx(0.0)
    # always: every negative item is a requirement: the present violation passes (no cost), the failed one costs
    assert rp.rubric_score(ITEMS, "always")["reward"] == pytest.approx((2 + 1 - 1) / 5)
    # clamped to [0, 1]
    assert (
        rp.rubric_score([{"weight": 1.0, "pass": False, "pillar": "v"}, {"weight": -3.0, "pass": True, "pillar": "p"}])[
            "reward"
        ]
        == 0.0
    )
    assert rp.rubric_score([{"weight": 1.0, "pass": True, "pillar": "v"}])["reward"] == 1.0


@pytest.mark.parametrize(
    "text, ok, value",
    [
        ('{"pass": true, "why": "the red circle is visible at t=1s"}', True, True),
        ('Thinking...</think>```json\n{"pass": false, "why": "no"}\n```', True, False),
        ('{"pass": "yes", "why": "x"}', True, True),
        ('[{"pass": false, "why": "x"}]', True, False),
        ('{"pass": "maybe", "why": "x"}', False, None),
        ('{"verdict": true}', False, None),
        ("I think it passes.", False, None),
    ],
)
def test_rubric_item_parser(text, ok, value):
    parsed = rp.parse_rubric_item(text, {"item_id": "V1"})
    assert parsed.ok is ok
    if ok:
        assert parsed.value["pass"] is value
