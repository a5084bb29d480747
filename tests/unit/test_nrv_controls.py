"""Negative controls (NRVBench App. F.1), checked on their frames: shuffled keeps the multiset of frames,
unchanged equals the source, random-mask changes pixels only inside its mask, appearance changes colour
inside the mask only and keeps the motion, flow-corrupted keeps the order and warps inside the mask."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vbench_ray.config import ConfigError
from vbench_ray.sweeps import variants_from_axes

from helpers.common import moving_square_video
from vbench_ray import controls as C
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoReader


def _videos(t=8, h=48, w=64):
    source = moving_square_video(t=t, h=h, w=w, step=2, seed=0)
    edited = source.copy()
    masks = np.zeros((t, h, w), bool)
    for i in range(t):
        x = 4 + 2 * i
        masks[i, 8:28, x - 2 : x + 18] = True
        edited[i, 10:26, x : x + 16] = (40, 40, 250)  # the "edit": the square turned blue
    return source, edited, masks


def test_unchanged_equals_the_source():
    source, edited, masks = _videos()
    frames, info = C.make_control("unchanged", source, edited, masks, seed=1)
    assert np.array_equal(frames, source) and frames is not source and info["control"] == "unchanged"


def test_shuffled_keeps_the_multiset_of_frames_and_moves_every_frame():
    source, edited, masks = _videos(t=10)
    frames, info = C.make_control("shuffled", source, edited, masks, seed=3)
    key = lambda f: f.tobytes()  # noqa: E731
    assert sorted(map(key, frames)) == sorted(map(key, edited))
    perm = info["permutation"]
    assert sorted(perm) == list(range(10)) and all(p != i for i, p in enumerate(perm))
    assert all(np.array_equal(frames[i], edited[p]) for i, p in enumerate(perm))
    again, info2 = C.make_control("shuffled", source, edited, masks, seed=3)
    assert info2["permutation"] == perm and np.array_equal(again, frames)  # deterministic per seed
    assert C.make_control("shuffled", source, edited, masks, seed=4)[1]["permutation"] != perm


def test_random_mask_changes_pixels_only_inside_its_mask():
    source, edited, masks = _videos()
    rng = np.random.default_rng(0)
    frames, moved, (dx, dy) = C.random_mask_edit(source, edited, masks, rng)
    assert (dx, dy) != (0, 0)
    outside = ~moved[..., None].repeat(3, axis=-1)
    assert np.array_equal(frames[outside], source[outside])  # nothing changes outside the random mask
    assert np.any(frames[moved] != source[moved])  # and something inside it does
    assert np.array_equal(moved, C.shift_masks(masks, dx, dy))
    assert moved.sum() == masks.sum()  # same shape and area (it fits in the frame)
    assert (moved & masks).sum() < masks.sum() * 0.5  # mostly away from the real edit region
    # the pasted pixels are the real edit's, moved by the offset
    t, y, x = np.argwhere(masks)[0]
    assert np.array_equal(frames[t, y + dy, x + dx], edited[t, y, x])
    _, info = C.make_control("random_mask", source, edited, masks, seed=5)
    assert info["offset"] != [0, 0] and info["overlap"] < 0.5


def test_appearance_changes_colour_inside_the_mask_and_keeps_the_motion():
    source, edited, masks = _videos()
    frames, _ = C.make_control("appearance", source, edited, masks, seed=0)
    inside = masks[..., None].repeat(3, axis=-1)
    assert np.array_equal(frames[~inside], source[~inside])
    assert np.mean(frames[inside] != source[inside]) > 0.5
    # a per-pixel transform of the source: shifting the input shifts the output (motion untouched)
    shifted = np.roll(source, 3, axis=2)
    out_shifted = C.appearance_edit(shifted, np.roll(masks, 3, axis=2))
    assert np.array_equal(out_shifted, np.roll(C.appearance_edit(source, masks), 3, axis=2))


def test_flow_corrupted_keeps_order_and_warps_only_inside_the_mask():
    source, edited, masks = _videos(t=6, h=64, w=64)
    edited = np.clip(edited.astype(int) + 12 * np.arange(6)[:, None, None, None], 0, 255).astype(np.uint8)
    frames, info = C.make_control("flow_corrupted", source, edited, masks, seed=2)
    inside = masks[..., None].repeat(3, axis=-1)
    assert np.array_equal(frames[~inside], edited[~inside])
    assert all(np.any(frames[i][masks[i]] != edited[i][masks[i]]) for i in range(6))
    for i in range(6):  # order kept: each frame is still closest to the edited frame of its own index
        d = [np.abs(frames[i].astype(int) - e.astype(int)).mean() for e in edited]
        assert int(np.argmin(d)) == i
    assert info["amplitude"] == 6.0
    again, _ = C.make_control("flow_corrupted", source, edited, masks, seed=2)
    assert np.array_equal(again, frames)


def test_maskless_cases_use_a_central_region():
    source, edited, _ = _videos()
    frames, info = C.make_control("appearance", source, edited, None, seed=0)
    region = C.default_mask(*source.shape[:3])
    assert info["mask_fraction"] == pytest.approx(region.mean(), abs=0.01)
    assert np.array_equal(frames[~region], source[~region])


def test_variants_and_unknown_names():
    variants = variants_from_axes({"control": ["shuffled", "unchanged", "shuffled"]})
    assert [v.name for v in variants] == ["base", "control:shuffled", "control:unchanged"]
    assert variants[1].params == {"control": "shuffled"} and variants[1].perturbation is None
    assert C.control_of({"variant_params": json.dumps({"control": "appearance"})}) == "appearance"
    assert C.control_of({"variant_params": None}) is None
    with pytest.raises(ConfigError, match="unknown negative control 'blur'"):
        variants_from_axes({"control": ["blur"]})
    assert C.case_seed(0, "a", "shuffled") == C.case_seed(0, "a", "shuffled") != C.case_seed(1, "a", "shuffled")


def test_masks_read_and_errors(tmp_path):
    _, _, masks = _videos(t=3)
    C.write_masks(tmp_path / "m", masks)
    assert np.array_equal(C.read_masks(tmp_path / "m"), masks)
    import cv2

    cv2.imwrite(str(tmp_path / "m" / "00003.png"), np.zeros((10, 10), np.uint8))
    with pytest.raises(ValueError, match="00003.png is 10x10"):
        C.read_masks(tmp_path / "m")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no mask images"):
        C.read_masks(tmp_path / "empty")
    with pytest.raises(ValueError, match="not found"):
        C.read_masks(tmp_path / "nope")


def test_renderer_writes_once_skips_and_passes_through(tmp_path):
    source, edited, masks = _videos()
    write_video(tmp_path / "src.mp4", source, fps=8, crf=0, pix_fmt="yuv444p")
    write_video(tmp_path / "edit.mp4", edited, fps=8, crf=0, pix_fmt="yuv444p")
    C.write_masks(tmp_path / "mask", masks)
    row = {
        "case_id": "m:1",
        "variant": "control:shuffled",
        "source_path": str(tmp_path / "src.mp4"),
        "edited_path": str(tmp_path / "edit.mp4"),
        "mask_path": str(tmp_path / "mask"),
        "variant_params": json.dumps({"control": "shuffled"}),
        "control_eligible": True,
    }
    render = C.ControlRenderer(str(tmp_path / "controls"), seed=0)
    out = render(row)
    target = C.control_path(tmp_path / "controls", "shuffled", "m:1")  # one file per (control, case id)
    assert out["edited_path"] == str(target) and target.parent == tmp_path / "controls" / "shuffled"
    assert not out["control_skip"]
    perm = json.loads(out["control_info"])["permutation"]
    decoded = VideoReader(out["edited_path"]).read(range(8))
    original = VideoReader(row["edited_path"]).read(range(8))
    assert np.abs(decoded.astype(int) - original[perm].astype(int)).max() <= 2  # lossless up to rounding
    mtime = target.stat().st_mtime_ns
    assert render(row)["control_info"] == out["control_info"]  # reused, not rendered again
    assert target.stat().st_mtime_ns == mtime
    assert render({**row, "variant_params": json.dumps({"control": "unchanged"})})["edited_path"] == row["source_path"]
    skipped = render({**row, "control_eligible": False})
    assert skipped["control_skip"] and skipped["edited_path"] == row["edited_path"]
    base = render({**row, "variant": "base", "variant_params": None})
    assert base == {"edited_path": row["edited_path"], "control_info": None, "control_skip": None}
    bad = {**row, "case_id": "m:2", "mask_path": str(tmp_path / "mask2")}
    C.write_masks(tmp_path / "mask2", masks[:3])
    with pytest.raises(ValueError, match="has 3 frames"):
        render(bad)
