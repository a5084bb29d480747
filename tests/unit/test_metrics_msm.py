"""MSM (CoVEBench App. F.2, Motion Smoothness): hand-built flows, the official variant, and frames."""

import math
import sys

import cv2
import numpy as np
import pytest

from vbench_ray.metrics import MissingWeightsError, build_metric
from vbench_ray.metrics.smoothness import MSM, MSMConfig, jitter_map, msm_score, official_pair_score, paper_pair_jitter
from vbench_ray.video.flow import flow_to_color


def const_flow(vx, vy, h=4, w=5):
    return np.broadcast_to(np.array([vx, vy], np.float32), (h, w, 2)).copy()


def texture(h, w, seed=0):
    """Smoothed noise, so every pixel has gradients for the flow estimator."""
    noise = np.random.default_rng(seed).random((h, w)).astype(np.float32)
    smooth = cv2.GaussianBlur(noise, (0, 0), 2.0)
    smooth = (smooth - smooth.min()) / (smooth.max() - smooth.min()) * 255
    return np.repeat(smooth.astype(np.uint8)[..., None], 3, axis=2)


def translated_video(offsets, size=224, margin=48, seed=0):
    """Frame t is a window of a larger texture, moved so the content sits at offsets[t] = (dx, dy)."""
    big = texture(size + 2 * margin, size + 2 * margin, seed)
    return np.stack([big[margin - dy : margin - dy + size, margin - dx : margin - dx + size] for dx, dy in offsets])


# ------------------------------------------------------------------------------- paper formula


def test_constant_flow_is_perfectly_smooth():
    flows = np.stack([const_flow(1.5, -0.5)] * 4)
    assert msm_score(flows, "paper_text") == pytest.approx(1.0, abs=1e-9)
    assert msm_score(flows, "official") == pytest.approx(1.0, abs=1e-6)


def test_alternating_flow_has_full_jitter():
    # F_{t+1} = -F_t: J = ||-2v|| / (2||v|| + eps) = 1 everywhere
    v = const_flow(2.0, 1.0)
    flows = np.stack([v, -v, v, -v])
    assert msm_score(flows, "paper_text") == pytest.approx(0.0, abs=1e-6)


def test_jitter_is_bounded_by_one():
    # triangle inequality: ||F1 - F0|| <= ||F1|| + ||F0||, so the min(1, .) cap never bites
    rng = np.random.default_rng(0)
    j = jitter_map(rng.normal(size=(50, 50, 2)), rng.normal(size=(50, 50, 2)))
    assert j.max() <= 1.0


def mixed_pair():
    """One flow pair (T = 3 frames) on a 1x4 image, pixel by pixel:

    a: F0=(1,0),     F1=(1,0)      J = 0
    b: F0=(1,0),     F1=(0,1)      J = ||(-1,1)|| / 2 = sqrt(2)/2 = 0.707107
    c: F0=(0.03,0),  F1=(-0.03,0)  below the 0.05 px threshold in both: outside M_t (its J would be 1)
    d: F0=(3,0),     F1=(1,0)      J = 2 / 4 = 0.5
    """
    f0 = np.array([[[1, 0], [1, 0], [0.03, 0], [3, 0]]], np.float64)
    f1 = np.array([[[1, 0], [0, 1], [-0.03, 0], [1, 0]]], np.float64)
    return np.stack([f0, f1])


def test_mask_excludes_still_pixels_paper():
    # MSM = 1 - (0 + 0.707107 + 0.5) / 3 = 1 - 0.402369 = 0.597631
    assert msm_score(mixed_pair(), "paper_text") == pytest.approx(1 - (math.sqrt(2) / 2 + 0.5) / 3, abs=1e-6)
    assert msm_score(mixed_pair(), "paper_text") == pytest.approx(0.597631, abs=1e-6)


def test_msm_averages_over_the_t_minus_2_pairs():
    v = const_flow(1.0, 0.0)
    flows = np.stack([v, v, -v])  # pair 1: J = 0, pair 2: J = 1 → MSM = 1 - (0 + 1) / 2
    assert msm_score(flows, "paper_text") == pytest.approx(0.5, abs=1e-6)
    # official: pair 1 scores 1.0, pair 2 (reversal) scores 0.3 → mean 0.65
    assert msm_score(flows, "official") == pytest.approx(0.65, abs=1e-6)


def test_no_motion_counts_as_smooth():
    flows = np.zeros((3, 4, 4, 2))
    assert msm_score(flows, "paper_text") == 1.0
    assert msm_score(flows, "official") == 1.0


def test_fewer_than_two_flows_is_nan():
    assert math.isnan(msm_score(np.zeros((1, 4, 4, 2))))


@pytest.mark.parametrize("frames", [1, 2])
def test_too_short_video_is_a_failure_not_a_perfect_score(frames):
    # issue 10 item 1: with repeated indices a 1-frame (frozen) video used to score MSM = 1.0; now the
    # sampler gives min(T, 10) distinct frames and MSM refuses fewer than 3 with a clear message
    from vbench_ray.metrics.base import VideoTooShortError
    from vbench_ray.video.io import VideoInfo

    metric = MSM()
    idx = metric.sampling().indices(
        VideoInfo(path="v.mp4", num_frames=frames, fps=24.0, height=8, width=8, backend="test")
    )
    assert idx == list(range(frames))
    with pytest.raises(VideoTooShortError, match=f"MSM needs at least 3 frames of the edited video, got {frames}"):
        metric.compute(np.zeros((len(idx), 8, 8, 3), np.uint8))


def test_three_distinct_frames_of_constant_motion_are_smooth():
    # a 3-frame video is sampled as frames 0, 1, 2 (no repeats): two equal flows, official score 1.0,
    # where the repeated sampling [0,0,0,0,1,1,1,2,2,2] gave zero flows between repeats and scored 0.5
    video = translated_video([(0, 0), (2, 0), (4, 0)])
    assert MSM().compute(video) > 0.9


def test_unknown_formula_raises():
    with pytest.raises(ValueError, match="formula"):
        msm_score(np.zeros((2, 4, 4, 2)), "nope")


# ---------------------------------------------------------------------------- official formula


def test_official_reversal_scores_direction_zero_magnitude_one():
    # cos = -1 → direction (−1 + 1)/2 = 0; equal speeds → magnitude 1; 0.7*0 + 0.3*1 = 0.3
    v = const_flow(2.0, 1.0)
    assert msm_score(np.stack([v, -v]), "official") == pytest.approx(0.3, abs=1e-6)


def test_official_on_mixed_pair():
    # a: cos 1 → 0.7*1 + 0.3*1 = 1.0
    # b: cos 0 → 0.7*0.5 + 0.3*1 = 0.65
    # c: outside the mask
    # d: cos 1, magnitude 1 - |3-1|/(3+1) = 0.5 → 0.7 + 0.15 = 0.85
    # mean = (1.0 + 0.65 + 0.85) / 3 = 0.833333
    assert msm_score(mixed_pair(), "official") == pytest.approx(2.5 / 3, abs=1e-6)


# ------------------------------------------------------------------ the norms msm_score passes down


def cached_pair():
    """Two pixels and norms given at twice the flows' own (``mags``: what msm_score computes once per flow).
    A: F0 = F1 = (0.03, 0): norm 0.03, under the 0.05 threshold, but 0.06 as given; B: F0 = (3, 0), F1 = (0, 4)."""
    f0 = np.array([[[0.03, 0.0], [3.0, 0.0]]])
    f1 = np.array([[[0.03, 0.0], [0.0, 4.0]]])
    mags = (np.array([[0.06, 6.0]]), np.array([[0.06, 8.0]]))
    return f0, f1, mags


def test_the_norms_given_are_the_ones_used():
    """The per-pair functions read ||F|| from ``mags`` when given (each flow's norm is computed once by msm_score,
    not again per pair), for the mask as for the formulas. Norms given at twice the flows' own tell them apart."""
    f0, f1, mags = cached_pair()
    # J = ||F1 - F0|| / (m0 + m1): A 0 / 0.12 = 0; B ||(-3, 4)|| / (6 + 8) = 5/14 (the flows' own norms: 5/7)
    assert jitter_map(f0, f1, 0.0, mags)[0].tolist() == pytest.approx([0.0, 5 / 14], abs=1e-12)
    # mask from the given norms holds A (0.06 > 0.05) and B: mean(0, 5/14) = 5/28 (own norms: B only, 5/7)
    assert paper_pair_jitter(f0, f1, 0.05, 0.0, mags) == pytest.approx(5 / 28, abs=1e-12)
    # official: A cos = 0.0009 / (0.06 * 0.06) = 0.25 -> direction 0.625, speed 1 -> 0.7 * 0.625 + 0.3 = 0.7375;
    # B cos 0 -> direction 0.5, speed 1 - |6 - 8| / 14 = 6/7 -> 0.35 + 0.3 * 6/7; mean of the two (own norms: B only)
    expected = (0.7375 + 0.35 + 0.3 * 6 / 7) / 2  # 0.672321
    assert official_pair_score(f0, f1, 0.05, 0.0, mags) == pytest.approx(expected, abs=1e-12)


def test_float32_flows_are_scored_in_float64():
    """OpenCV's Farneback flows are float32; the score is computed on their float64 copies. One pixel, F = (3, 0),
    (0, 4), (3, 0): each pair has cos 0 -> direction 0.5 and speed 1 - 1 / (7 + eps), so
    MSM = 0.35 + 0.3 * (1 - 1 / (7 + 1e-6)) = 0.607143 (in float32 it is off by about 1e-8)."""
    flows = np.array([[[[3.0, 0.0]]], [[[0.0, 4.0]]], [[[3.0, 0.0]]]], np.float32)
    assert msm_score(flows, "official") == pytest.approx(0.35 + 0.3 * (1 - 1 / (7 + 1e-6)), abs=1e-12)


# -------------------------------------------------------------------------------- from frames


def test_constant_translation_is_smooth():
    video = translated_video([(2 * t, 0) for t in range(10)])
    score = MSM().compute(video)
    assert score > 0.9


def test_jittered_translation_is_less_smooth():
    rng = np.random.default_rng(3)
    offsets, x, y = [], 0, 0
    for _ in range(10):
        offsets.append((x, y))
        angle = rng.uniform(0, 2 * np.pi)
        x, y = x + int(round(4 * np.cos(angle))), y + int(round(4 * np.sin(angle)))
    smooth = MSM().compute(translated_video([(2 * t, 0) for t in range(10)]))
    paper_text = MSM(MSMConfig(formula="paper_text"))
    smooth = paper_text.compute(translated_video([(2 * t, 0) for t in range(10)]))
    jittery = paper_text.compute(translated_video(offsets))
    assert jittery < 0.7 < smooth
    official = MSM(MSMConfig(formula="official"))
    steady = translated_video([(2 * t, 0) for t in range(10)])
    assert official.compute(translated_video(offsets)) < official.compute(steady)


# ------------------------------------------------------------------------------- config, RAFT


def test_raft_without_weights_names_the_config_key(monkeypatch):
    # torchvision made unimportable: the weights check must fail first, with the config key
    monkeypatch.setitem(sys.modules, "torchvision", None)
    with pytest.raises(MissingWeightsError, match="metrics.MSM.raft_weights"):
        MSM(MSMConfig(flow="raft")).setup()
    with pytest.raises(MissingWeightsError, match="metrics.MSM.raft_weights"):
        MSM(MSMConfig(flow="raft", raft_weights="/nonexistent/raft_small.pth")).setup()


def test_unknown_flow_raises():
    with pytest.raises(ValueError, match="metrics.MSM.flow"):
        MSM(MSMConfig(flow="pwc"))


def test_defaults_and_registry():
    metric = build_metric("MSM")
    assert isinstance(metric, MSM) and not metric.needs_source
    assert metric.cfg.formula == "official" and metric.cfg.flow == "farneback"
    assert metric.sampling().n == 10


def test_flow_to_color():
    flow = np.zeros((4, 6, 2), np.float32)
    flow[:, 3:] = (2.0, 0.0)
    img = flow_to_color(flow)
    assert img.shape == (4, 6, 3) and img.dtype == np.uint8
    assert img[:, :3].max() == 0  # no motion → black
    assert tuple(img[0, 4]) == (255, 0, 0)  # rightward (hue 0) at full magnitude → red


def _raft_like(width: int, mask_predictor: bool) -> dict:
    """A state dict with the two things that tell torchvision's RAFT variants apart (raft.py of
    pytorch/vision@07a929e8): the feature encoder's 7x7 stem (64 channels in raft_large, 32 in raft_small) and the
    mask predictor only raft_large has."""
    import torch

    state = {
        "feature_encoder.convnormrelu.0.weight": torch.zeros(width, 3, 7, 7),
        "feature_encoder.conv.weight": torch.zeros(256, 128, 1, 1),
    }
    if mask_predictor:
        state["mask_predictor.conv.weight"] = torch.zeros(576, 256, 1, 1)
    return state


def test_raft_variant_is_read_from_the_weights_not_the_file_name(tmp_path):
    """Files named for the other variant are read as what they hold; a file that is no RAFT state dict is one
    message naming metrics.MSM.raft_weights at preflight (check_weights), before any compute."""
    import torch

    from vbench_ray.config import ConfigError
    from vbench_ray.video.flow import raft_variant_of

    large, small, other = tmp_path / "raft_small_C_T.pth", tmp_path / "raft_large.pth", tmp_path / "raft_large_x.pth"
    torch.save(_raft_like(64, True), large)
    torch.save(_raft_like(32, False), small)
    torch.save({"backbone.conv.weight": torch.zeros(8, 3, 3, 3)}, other)
    assert raft_variant_of(torch.load(large)) == "large" and raft_variant_of(torch.load(small)) == "small"
    for path in (large, small):
        assert MSM.check_weights(MSMConfig(flow="raft", raft_weights=str(path))) == []
    problems = MSM.check_weights(MSMConfig(flow="raft", raft_weights=str(other)))
    assert len(problems) == 1 and "metrics.MSM.raft_weights" in problems[0] and "not a torchvision RAFT" in problems[0]
    with pytest.raises(ConfigError, match="metrics.MSM.raft_weights.*lacks the mask_predictor"):
        raft_variant_of(_raft_like(64, False))


def _torchvision_raft():
    """torchvision's RAFT builders, or a skip where torchvision cannot be imported (the CPU stack has none that
    works beside CPU torch; the GPU stack has it)."""
    try:
        from torchvision.models.optical_flow import raft_large, raft_small
    except Exception as exc:  # ImportError, or torchvision's "operator torchvision::nms does not exist"
        pytest.skip(f"torchvision's RAFT cannot be imported here: {exc}")
    return raft_small, raft_large


def test_torchvision_raft_weights_under_misleading_names_load_as_their_variant(tmp_path):
    """torchvision raft_small and raft_large with random weights, each saved under the other's name: MSM loads
    each as what it is and scores a video; a raft_large file with one tensor of the wrong shape is a ConfigError
    naming metrics.MSM.raft_weights and the key (not a wall of size-mismatch lines)."""
    import torch

    from vbench_ray.config import ConfigError

    raft_small, raft_large = _torchvision_raft()
    torch.manual_seed(0)
    paths = {"large": tmp_path / "raft_small.pth", "small": tmp_path / "raft_large.pth"}
    torch.save(raft_large(weights=None).state_dict(), paths["large"])
    torch.save(raft_small(weights=None).state_dict(), paths["small"])
    video = translated_video([(2 * t, 0) for t in range(3)], size=128)
    for variant, path in paths.items():
        metric = MSM(MSMConfig(flow="raft", raft_weights=str(path), frames=3, size=128))
        metric.setup()
        assert metric.raft_variant == variant
        assert 0.0 <= metric.compute(video) <= 1.0
    state = raft_large(weights=None).state_dict()
    state["update_block.flow_head.conv1.weight"] = state["update_block.flow_head.conv1.weight"][:, :64]
    torch.save(state, tmp_path / "raft_large_bad.pth")
    with pytest.raises(ConfigError, match=r"metrics\.MSM\.raft_weights.*update_block\.flow_head\.conv1\.weight"):
        MSM(MSMConfig(flow="raft", raft_weights=str(tmp_path / "raft_large_bad.pth"), size=128)).setup()
