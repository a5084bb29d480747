"""MF with ``tracker=cotracker`` end to end on real (written, then decoded) videos with a random-weight checkpoint
of the real-size CoTracker3 offline network (vbench_ray.metrics.cotracker3). Random weights prove plumbing,
shapes, batching and determinism, never tracking accuracy."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from helpers.common import moving_square_video
from vbench_ray.metrics.base import VideoTooShortError
from vbench_ray.metrics.cotracker3 import save_random_cotracker3
from vbench_ray.metrics.motion import MF, MFConfig, grid_points
from vbench_ray.video.encode import write_video
from vbench_ray.video.flow import rgb_resize
from vbench_ray.video.io import VideoReader, uniform_indices


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random-weight checkpoint shaped like scaled_offline.pth (a bare state dict), written once."""
    return save_random_cotracker3(tmp_path_factory.mktemp("cotracker3") / "scaled_offline.pth")


def decoded(path, frames):
    reader = VideoReader(path)
    return reader.read(uniform_indices(reader.info.num_frames, frames))


def test_mf_with_cotracker_end_to_end_on_real_videos(checkpoint, tmp_path, monkeypatch):
    # the real-size network at a small model resolution (its cost is mostly the 64 virtual tracks)
    monkeypatch.setitem(sys.modules, "cotracker", None)  # no cotracker package is needed any more
    src = decoded(write_video(tmp_path / "src.mp4", moving_square_video(t=12, step=2, seed=0)), 3)
    edit = decoded(write_video(tmp_path / "edit.mp4", moving_square_video(t=12, step=-2, seed=1)), 3)
    assert src.shape == (3, 48, 64, 3)
    mf = MF(
        MFConfig(
            tracker="cotracker",
            cotracker_weights=str(checkpoint),
            frames=3,
            size=64,
            grid_size=2,
            cotracker_resolution=[32, 48],
        )
    )
    assert mf.in_pool() and mf.resources() == {}
    mf.setup()  # once per pool actor
    tracks, visible = mf.tracker.track(rgb_resize(src, 64))
    assert tracks.shape == (3, 4, 2) and visible.shape == (3, 4) and visible.dtype == bool
    assert visible[0].all()  # the query frame
    # frame 0: the grid of the 32x48 model frame, scaled back to the 64x64 frames
    expected = grid_points(2, 32, 48) * np.array([63 / 47, 63 / 31], np.float32)
    np.testing.assert_allclose(tracks[0], expected, rtol=1e-6)
    # a video's tracks do not depend on the videos batched with it (beyond float rounding)
    batched = mf.tracker.track_many([rgb_resize(edit, 64), rgb_resize(src, 64)])
    np.testing.assert_allclose(batched[1][0], tracks, atol=1e-3)
    # the score, twice the same; several cases at once score as each alone, and a bad case fails alone
    score = mf.compute(edit, src)
    many = mf.compute_many([(edit, src, {}), (edit[:1], src, {})])
    assert math.isfinite(score) and many[0] == score  # deterministic: the same forward pass
    assert isinstance(many[1], VideoTooShortError)
