"""MF (CoVEBench App. F.3, Motion Fidelity): the matching formula, track summaries, the LK tracker, frames."""

import itertools
import math
import sys

import cv2
import numpy as np
import pytest

from vbench_ray.metrics import MissingWeightsError, build_metric
from vbench_ray.metrics.motion import (
    MF,
    LKTracker,
    MFConfig,
    grid_points,
    matching_cost,
    motion_fidelity,
    summarize_tracks,
)


def texture(h, w, seed=0):
    """Smoothed noise, so every point has gradients for Lucas-Kanade."""
    noise = np.random.default_rng(seed).random((h, w)).astype(np.float32)
    smooth = cv2.GaussianBlur(noise, (0, 0), 2.0)
    smooth = (smooth - smooth.min()) / (smooth.max() - smooth.min()) * 255
    return np.repeat(smooth.astype(np.uint8)[..., None], 3, axis=2)


def translated_video(vx, vy, frames=8, size=128, margin=40, seed=0):
    """Content moving by (vx, vy) px per frame (integer), cut from a larger texture."""
    big = texture(size + 2 * margin, size + 2 * margin, seed)
    return np.stack(
        [big[margin - vy * t : margin - vy * t + size, margin - vx * t : margin - vx * t + size] for t in range(frames)]
    )


def random_trajectories(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 384, size=(n, 2)), rng.normal(0, 3, size=(n, 2))


# ------------------------------------------------------------------------------------- formula


def test_identical_trajectories_score_one():
    pos, vel = random_trajectories()
    # each matched cost is 0.5 * (1 - |v|^2 / (|v|^2 + eps)) ≈ 0.5 * eps / |v|^2
    assert motion_fidelity(pos, vel, pos, vel) == pytest.approx(1.0, abs=1e-6)


def test_permutation_is_matched_back():
    pos, vel = random_trajectories()
    perm = np.random.default_rng(1).permutation(len(pos))
    assert motion_fidelity(pos, vel, pos[perm], vel[perm]) == pytest.approx(motion_fidelity(pos, vel, pos, vel))


def test_reversed_velocities_score_zero():
    # a whole scene moving one way, then the other: every pairing has cosine -1, so the cheapest
    # assignment is the positional identity with cost 0.5 * 0 + 0.5 * (1 - (-1)) = 1 → MF = 0
    pos, _ = random_trajectories()
    vel = np.tile([2.0, 1.0], (len(pos), 1))
    assert motion_fidelity(pos, vel, pos, -vel, alpha=0.5) == pytest.approx(0.0, abs=1e-6)


def test_hungarian_may_pair_reversed_trajectories_with_others():
    # with mixed directions the matching is free to pair a reversed trajectory with another one that
    # happens to move its way, so MF of fully reversed mixed motion is above 0
    pos, vel = random_trajectories()
    assert motion_fidelity(pos, vel, pos, -vel) > 0.0


def test_static_trajectories_cost_half():
    # zero velocity: the cosine term is 0 / (0 + eps) = 0, so cost = 0.5 * (1 - 0) even for a perfect match
    pos = np.array([[10.0, 20.0], [100.0, 50.0]])
    zero = np.zeros_like(pos)
    assert motion_fidelity(pos, zero, pos, zero, alpha=0.5) == pytest.approx(0.5)


def test_hand_computed_single_pair():
    # position: ||(0,0) - (30,40)|| / 100 = 0.5; direction: (1,0).(0,1) = 0 → 1 - 0 = 1
    # cost = 0.5 * 0.5 + 0.5 * 1 = 0.75 → MF = 0.25
    mf = motion_fidelity(
        np.array([[0.0, 0.0]]),
        np.array([[1.0, 0.0]]),
        np.array([[30.0, 40.0]]),
        np.array([[0.0, 1.0]]),
        alpha=0.5,
        dmax=100.0,
    )
    assert mf == pytest.approx(0.25, abs=1e-9)
    # alpha = 1: position only → 1 - 0.5
    mf = motion_fidelity(
        np.array([[0.0, 0.0]]),
        np.array([[1.0, 0.0]]),
        np.array([[30.0, 40.0]]),
        np.array([[0.0, 1.0]]),
        alpha=1.0,
        dmax=100.0,
    )
    assert mf == pytest.approx(0.5)


def test_hungarian_finds_the_cheapest_assignment():
    pos_a, vel_a = random_trajectories(5, seed=2)
    pos_b, vel_b = random_trajectories(5, seed=3)
    cost = matching_cost(pos_a, vel_a, pos_b, vel_b, 0.5, math.sqrt(2) * 384)
    best = min(sum(cost[i, p[i]] for i in range(5)) / 5 for p in itertools.permutations(range(5)))
    assert motion_fidelity(pos_a, vel_a, pos_b, vel_b) == pytest.approx(1 - best, abs=1e-12)


# ------------------------------------------------------------------------------------ summaries


def test_summary_uses_visible_frames_and_steps():
    tracks = np.array([[[0, 0]], [[1, 0]], [[3, 0]], [[10, 10]]], np.float64)  # (T=4, N=1, 2)
    visible = np.array([[True], [True], [False], [False]])
    pos, vel = summarize_tracks(tracks, visible)
    # position: mean of (0,0), (1,0) = (0.5, 0)
    # velocity: steps starting at a visible frame: (1,0) and (2,0) → (1.5, 0)
    np.testing.assert_allclose(pos, [[0.5, 0.0]])
    np.testing.assert_allclose(vel, [[1.5, 0.0]])


def test_summary_falls_back_to_all_frames_when_never_visible():
    tracks = np.array([[[0, 0]], [[2, 0]], [[4, 2]]], np.float64)
    pos, vel = summarize_tracks(tracks, np.zeros((3, 1), bool))
    np.testing.assert_allclose(pos, [[2.0, 2 / 3]])
    np.testing.assert_allclose(vel, [[2.0, 1.0]])


def test_grid_points_follow_the_inset_grid():
    pts = grid_points(10, 384, 384)
    assert pts.shape == (100, 2)
    np.testing.assert_allclose(pts[0], [6.0, 6.0])  # inset 384 / 64 = 6
    np.testing.assert_allclose(pts[-1], [378.0, 378.0])
    np.testing.assert_allclose(pts[1], [6.0 + 372 / 9, 6.0])  # row-major: x varies first


# ----------------------------------------------------------------------------------- LK tracker


def test_lk_recovers_a_known_translation():
    vx, vy = 3, -2
    tracks, visible = LKTracker(grid_size=6).track(translated_video(vx, vy, frames=6))
    assert tracks.shape == (6, 36, 2) and visible.shape == (6, 36)
    # points that stay clear of the border (LK's 21x21 window fits in the frame) must all survive
    x0, y0 = tracks[0, :, 0], tracks[0, :, 1]
    inside = (x0 > 10) & (x0 + 5 * vx < 117) & (y0 + 5 * vy > 10) & (y0 < 117)
    assert inside.sum() >= 9
    assert visible[-1, inside].all()
    for t in range(6):
        ok = visible[t]
        err = np.abs(tracks[t, ok] - tracks[0, ok] - np.array([vx * t, vy * t]))
        assert err.max() < 0.5


# ------------------------------------------------------------------------------- from frames


def small_mf(**kw):
    return MF(MFConfig(frames=8, size=128, grid_size=6, **kw))


def test_same_motion_scores_close_to_one():
    src = translated_video(3, 0, seed=0)
    edit = translated_video(3, 0, seed=5)  # different content, same motion
    assert small_mf().compute(edit, src) > 0.95


def test_opposite_motion_scores_clearly_lower():
    src = translated_video(3, 0)
    edit = translated_video(-3, 0)
    same = small_mf().compute(translated_video(3, 0, seed=5), src)
    opposite = small_mf().compute(edit, src)
    assert opposite < 0.2 < same


def test_identical_static_videos_score_half():
    still = np.repeat(texture(128, 128)[None], 8, axis=0)
    assert small_mf().compute(still, still) == pytest.approx(0.5, abs=1e-6)


@pytest.mark.parametrize("n_src,n_edit,which", [(1, 8, "source"), (8, 1, "edited")])
def test_one_frame_video_is_a_recorded_failure(n_src, n_edit, which):
    # issue 10 item 1: MF needs a velocity, i.e. 2 frames of each video; one frame raises, never scores
    from vbench_ray.metrics.base import VideoTooShortError

    src, edit = translated_video(3, 0)[:n_src], translated_video(3, 0)[:n_edit]
    with pytest.raises(VideoTooShortError, match=f"MF needs at least 2 frames of the {which} video, got 1"):
        small_mf().compute(edit, src)


# --------------------------------------------------------------------------- config, CoTracker


def test_cotracker_without_weights_names_the_config_key(monkeypatch):
    monkeypatch.setitem(sys.modules, "cotracker", None)  # the weights check must come first
    with pytest.raises(MissingWeightsError, match="metrics.MF.cotracker_weights"):
        MF(MFConfig(tracker="cotracker")).setup()


def test_cotracker_needs_no_package_and_a_bad_file_names_the_config_key(monkeypatch, tmp_path):
    # our own CoTracker3 definition (tests/unit/test_cotracker3.py): no `cotracker` package; an unreadable file fails
    # naming the key
    weights = tmp_path / "scaled_offline.pth"
    weights.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "cotracker", None)
    monkeypatch.setitem(sys.modules, "cotracker.predictor", None)
    with pytest.raises(ValueError, match="metrics.MF.cotracker_weights=.*not a readable checkpoint"):
        MF(MFConfig(tracker="cotracker", cotracker_weights=str(weights))).setup()


def test_unknown_tracker_raises():
    with pytest.raises(ValueError, match="metrics.MF.tracker"):
        MF(MFConfig(tracker="pips"))


def test_defaults_and_registry():
    metric = build_metric("MF")
    assert isinstance(metric, MF) and metric.needs_source
    assert (metric.cfg.frames, metric.cfg.size, metric.cfg.grid_size, metric.cfg.alpha) == (16, 384, 10, 0.5)
    assert metric.sampling().n == 16
