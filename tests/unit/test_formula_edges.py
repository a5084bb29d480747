"""Edges of the scoring formulas, path safety and redaction that ``make mutate`` found untested (issue 29, item 5;
docs/testing.md): each test pins a value worked out by hand, or an exact message, that a survivor changed.
Papers: NRVBench Eq. 1 and App. E.5 (NRVE-Acc, ratings); CoVEBench App. F.3 (SSIM, MSM, MF); AgenticVBench §2.6
(sequencing)."""

import hashlib
import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from vbench_ray import safepaths, stats
from vbench_ray.agentic.verifiers.sequencing import sequencing_metrics
from vbench_ray.benchmarks import nrv_scoring as nrv
from vbench_ray.judges.backends.media import scrub
from vbench_ray.metrics.fidelity import ssim_frames, ssim_video
from vbench_ray.metrics.motion import motion_fidelity, summarize_tracks
from vbench_ray.metrics.smoothness import jitter_map, motion_mask, msm_score, official_pair_score, paper_pair_jitter

# ----------------------------------------------------------------------------- NRVBench


def test_ratings_default_to_app_e5():
    assert nrv.normalize_rating(5) == 1.0 and nrv.normalize_rating(3) == 0.5  # (r - 1) / 4
    assert nrv.lowest_score("phy") == 0.0 and nrv.lowest_score("instr") == 0.0
    assert nrv.lowest_score("phy", "eq3") == pytest.approx(0.2)  # r / 5


def _weights(i, p, t):
    return SimpleNamespace(w_instr=i, w_phy=p, w_temp=t)


def test_weights_may_be_zero_and_sum_to_one_within_1e_6():
    assert nrv.weights_of(_weights(0.0, 0.5, 0.5)) == {"instr": 0.0, "phy": 0.5, "temp": 0.5}
    assert nrv.weights_of(_weights(0.5, 0.25, 0.2500005))["temp"] == 0.2500005  # sum 1 + 5e-7: accepted
    with pytest.raises(ValueError, match="sum to 1"):
        nrv.weights_of(_weights(0.5, 0.25, 0.26))
    with pytest.raises(ValueError, match="non-negative"):
        nrv.weights_of(_weights(-0.5, 0.75, 0.75))


def _judged(case, judge, instr, phy, temp, invalid=0):
    base = {
        "case_id": case,
        "variant": "base",
        "judge": judge,
        "method": "m",
        "instance_id": case,
        "category": "LFS",
        "difficulty": "L1",
    }
    return [
        {**base, "component": c, "score": s, "valid": i >= invalid}
        for i, (c, s) in enumerate((("instr", instr), ("phy", phy), ("temp", temp)))
    ]


def test_instance_scores_use_the_configured_weights_and_epsilon():
    cfg = SimpleNamespace(w_instr=0.5, w_phy=0.25, w_temp=0.25, epsilon=0.01)
    (row,) = nrv.instance_scores(_judged("1", "a", 1.0, 0.25, 1.0, invalid=1), cfg)
    # Eq. 1 by hand: 100 (1.01)^0.5 (0.26)^0.25 (1.01)^0.25
    assert row["NRVE_Acc"] == pytest.approx(100 * 1.01**0.5 * 0.26**0.25 * 1.01**0.25, rel=1e-12)
    assert row["n_invalid"] == 1 and (row["S_instr"], row["S_phy"], row["S_temp"]) == (1.0, 0.25, 1.0)


def test_percent_rows():
    (row,) = nrv.percent_rows([{"case_id": "1", "S_instr": 0.5, "S_phy": 0.25, "S_temp": 1.0, "NRVE_Acc": 40.0}])
    assert row == {"case_id": "1", "S_instr": 50.0, "S_phy": 25.0, "S_temp": 100.0, "NRVE_Acc": 40.0}


def test_cross_judge_rows_and_stats():
    cfg = SimpleNamespace(w_instr=1 / 3, w_phy=1 / 3, w_temp=1 / 3, epsilon=0.0)
    inst = nrv.instance_scores(_judged("1", "a", 1.0, 1.0, 1.0) + _judged("1", "b", 0.0, 1.0, 1.0, invalid=2), cfg)
    (row,) = nrv.cross_judge_instances(inst)
    assert (row["n_judges"], row["n_invalid"]) == (2, 2)
    assert row["S_instr"] == 50.0 and row["NRVE_Acc"] == pytest.approx(50.0)  # (100 + 0) / 2
    s = nrv.cross_judge_stats({"a": 30.0, "b": 20.0, "c": None})
    assert s == {"per_judge": {"a": 30.0, "b": 20.0, "c": None}, "n_judges": 2, "mean": 25.0, "std": 5.0}
    assert nrv.cross_judge_stats({"a": None}) == {"per_judge": {"a": None}, "n_judges": 0, "mean": None, "std": None}


# ----------------------------------------------------------------------------- AgenticVBench sequencing


def test_sequencing_refuses_what_is_not_a_permutation():
    with pytest.raises(ValueError, match="^pred must be a permutation of truth$"):
        sequencing_metrics(["a", "b"], ["a", "c"])
    with pytest.raises(ValueError, match="^pred must be a permutation of truth$"):
        sequencing_metrics(["a", "a"], ["a", "a"])  # a repeated clip in the key
    out = sequencing_metrics(["b", "a"], ["a", "b"])
    assert out["n"] == 2 and out["strict"] == 0


# ----------------------------------------------------------------------------- SSIM, MSM, MF


def test_ssim_edges():
    with pytest.raises(ValueError, match=r"source \(1, 8, 8\) and edited \(1, 8, 9\)"):
        ssim_frames(np.zeros((1, 8, 8), np.uint8), np.zeros((1, 8, 9), np.uint8))
    assert math.isnan(ssim_video(np.zeros((0, 8, 8), np.uint8), np.zeros((0, 8, 8), np.uint8)))


def test_jitter_default_epsilon_and_pairs_without_cached_norms():
    f0 = np.array([[[1.0, 0.0]]])
    f1 = np.array([[[0.0, 0.0]]])
    assert jitter_map(f0, f1)[0, 0] == pytest.approx(1 / (1 + 1e-6))  # |f1 - f0| / (|f0| + |f1| + 1e-6)
    assert paper_pair_jitter(f0, f1, 0.05, 1e-6) == pytest.approx(1 / (1 + 1e-6))


def test_motion_mask_either_flow_strictly_above_the_threshold():
    f0 = np.array([[[1.0, 0.0], [0.5, 0.0], [0.0, 0.0], [0.0, 0.0]]])  # 1 x 4 pixels
    f1 = np.array([[[0.0, 0.0], [0.0, 0.0], [0.0, 0.4], [0.0, 0.5]]])
    # per pixel (no cached norms): only f0 moves; f0 at the threshold (not above); f1 below it; f1 at it
    assert motion_mask(f0, f1, 0.5).tolist() == [[True, False, False, False]]


def test_msm_pairs_consecutive_flows():
    flows = np.array([[[[1.0, 0.0]]], [[[2.0, 0.0]]], [[[0.0, 3.0]]]])  # T-1 = 3 flows of one pixel

    def pair(a, b):  # the official per-pair score written out: 0.7 direction + 0.3 speed agreement
        ma, mb = math.hypot(*a), math.hypot(*b)
        cos = (a[0] * b[0] + a[1] * b[1]) / (ma * mb + 1e-6)
        return 0.7 * (cos + 1) / 2 + 0.3 * (1 - abs(ma - mb) / (ma + mb + 1e-6))

    expected = (pair((1, 0), (2, 0)) + pair((2, 0), (0, 3))) / 2  # 0.9 and 0.59
    assert msm_score(flows) == pytest.approx(expected, rel=1e-9) and expected == pytest.approx(0.745, abs=1e-5)


def test_official_msm_pair_by_hand():
    f0, f1 = np.array([[[3.0, 0.0]]]), np.array([[[4.0, 4.0]]])
    m0, m1, eps = 3.0, math.sqrt(32.0), 0.5
    cos = 12.0 / (m0 * m1 + eps)  # f0 . f1 = 12
    speed = 1.0 - abs(m0 - m1) / (m0 + m1 + eps)
    expected = 0.7 * (cos + 1.0) / 2.0 + 0.3 * speed
    assert official_pair_score(f0, f1, 0.05, eps) == pytest.approx(expected, rel=1e-12)
    assert official_pair_score(f0 * 0.01, f1 * 0.01, 0.5, eps) == 1.0  # nothing moves more than 0.5 px


def test_mf_epsilon_enters_the_cosine():
    pos, vel = np.array([[0.0, 0.0]]), np.array([[1.0, 0.0]])
    # identical moving trajectories: cost = 0.5 * 0 + 0.5 * (1 - 1 / (1 + eps)); eps = 0.5 -> 1/6
    assert motion_fidelity(pos, vel, pos, vel, eps=0.5) == pytest.approx(5 / 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing computed on an empty side (no mean of an empty slice)
        assert math.isnan(motion_fidelity(np.zeros((0, 2)), np.zeros((0, 2)), pos, vel))


def test_track_summary_counts_steps_from_visible_frames():
    tracks = np.array([[[0.0, 0.0]], [[2.0, 0.0]], [[2.0, 6.0]]])  # T=3, N=1
    pos, vel = summarize_tracks(tracks, [[0], [1], [0]])  # visible only at t=1 (given as 0/1)
    assert pos.tolist() == [[2.0, 0.0]] and vel.tolist() == [[0.0, 6.0]]  # the step 1 -> 2 alone


# ----------------------------------------------------------------------------- bootstrap defaults


def test_describe_defaults_are_seed_0_and_1000_resamples():
    from scipy.stats import bootstrap

    values = [0.1 * i + (i % 3) * 0.37 + (i % 7) * 0.013 for i in range(40)]  # 40 values: resampled means vary
    res = bootstrap(
        (np.array(values),),
        np.mean,
        n_resamples=1000,
        confidence_level=0.9,
        method="percentile",
        rng=np.random.default_rng(0),
        vectorized=True,
    )
    d = stats.describe(values, confidence=0.9)
    assert d["ci95"] == [
        pytest.approx(res.confidence_interval.low, abs=1e-12),
        pytest.approx(res.confidence_interval.high, abs=1e-12),
    ]
    assert d["value"] == pytest.approx(np.mean(values)) and d["n"] == 40
    num = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    den = np.array([4.0, 2.0, 5.0, 3.0, 5.0, 9.0, 7.0, 6.0])
    res = bootstrap(
        (num, den),
        lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=1000,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(0),
    )
    assert stats.ratio_ci(num, den) == [
        pytest.approx(res.confidence_interval.low, abs=1e-12),
        pytest.approx(res.confidence_interval.high, abs=1e-12),
    ]
    assert stats.finite([1, None, float("nan"), 2]).dtype == np.float64
    assert stats.bootstrap_ci(np.array(values), confidence=0.9) == d["ci95"]  # its own default seed is 0 too
    assert stats.bootstrap_ci(np.array([2.0, 2.0, 2.0])) == [2.0, 2.0]  # every resample has the same mean
    assert stats.bootstrap_ci(np.array([2.0])) is None


# ----------------------------------------------------------------------------- path safety: exact messages


def test_safe_id_and_within_messages(tmp_path):
    with pytest.raises(ValueError, match=r"^id: expected a string, got int 5$"):
        safepaths.safe_id(5)
    long = "a" * 50 + "b" * 100
    with pytest.raises(ValueError, match=r"^case: 'a{40}'\.\.\. is 150 characters long \(at most 128\)$"):
        safepaths.safe_id(long, "case")
    with pytest.raises(ValueError, match=r"^within\(\): name at least one part below the root$"):
        safepaths.within(tmp_path)
    with pytest.raises(ValueError, match=r"^path part 'a\\x00b' holds a NUL byte$"):
        safepaths.within(tmp_path, "a\x00b")
    with pytest.raises(ValueError, match=r"^path 'x/\.\./\.\.' escapes "):
        safepaths.within(tmp_path, "x", "..", "..")
    assert safepaths.within(tmp_path, "x", "y") == tmp_path.resolve() / "x" / "y"


def test_component_and_unique_component():
    assert safepaths.component("a b/c") == "a_b_c" and safepaths.component("..") == "__"
    assert safepaths.component("") == "_" and safepaths.component("", default="z") == "z"
    assert safepaths.component("-rf") == "_rf" and len(safepaths.component("x" * 300)) == 128
    assert safepaths.component("AbC-1.x+=") == "AbC-1.x+=" and safepaths.component("X.X") == "X.X"
    lone = "a\ud800"  # a lone surrogate (from a filesystem name): hashed as its UTF-8 bytes, not refused
    assert safepaths.unique_component(lone) == "a_~" + hashlib.sha256(b"a\xed\xa0\x80").hexdigest()[:16]
    assert safepaths.unique_component("204") == "204"
    hashed = safepaths.unique_component("a b")

    assert hashed == "a_b~" + hashlib.sha256(b"a b").hexdigest()[:16]
    long = safepaths.unique_component("é" * 300)
    assert len(long) == 128 and long.startswith("_" * 111 + "~")


# ----------------------------------------------------------------------------- redaction


def test_masked_ends_and_short_keys():
    key = "sk-live-Q7w9ZpL2xR4mN8vB6tY1"
    assert scrub("named sk-liv...tY1 here", [key]) == "named *** here"
    assert scrub("named sk-live-Q...", [key]) == "named ***..."
    eight = "Ab3xY9Zq"  # exactly 8: its ends around a mask are redacted too
    assert scrub("key Ab3...Zq end", [eight]) == "key *** end"
    # a character whose lower case is two characters long does not shift the window
    assert scrub("İİ " + key, [key]) == "İİ ***"
