"""Decoding, sampling and bad video files."""

import numpy as np
import pytest

from helpers.common import moving_square_video
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoError, VideoReader, fps_indices, probe, uniform_indices


def test_uniform_indices_match_the_official_formula():
    # round(i * (T-1) / (n-1)): T=24, n=10 -> i*23/9 = 0, 2.56, 5.11, 7.67, 10.22, 12.78, 15.33, 17.89, 20.44, 23
    assert uniform_indices(24, 10) == [0, 3, 5, 8, 10, 13, 15, 18, 20, 23]
    assert uniform_indices(5, 3) == [0, 2, 4]
    # fewer frames than asked: min(T, n) distinct frames, never repeats (official sampler, issue 10 item 1)
    assert uniform_indices(1, 4) == [0]
    assert uniform_indices(3, 10) == [0, 1, 2]
    assert uniform_indices(6, 10) == [0, 1, 2, 3, 4, 5]
    assert uniform_indices(10, 10) == list(range(10))
    # one frame: T // 2 (not (T - 1) // 2): 8 frames -> 4, 7 frames -> 3
    assert uniform_indices(8, 1) == [4]
    assert uniform_indices(7, 1) == [3]
    assert uniform_indices(2, 1) == [1]
    assert uniform_indices(0, 10) == []


def test_fps_indices_one_frame_per_interval_and_cap():
    # 48 frames at 16 fps = 3 s; 2 fps -> t = 0, .5, 1, ... 2.5 -> frames 0, 8, 16, 24, 32, 40
    assert fps_indices(48, 16.0, 2.0) == [0, 8, 16, 24, 32, 40]
    # capped at 3: uniform pick among those six -> positions 0, 2 (2.5 rounds to 2), 5
    assert fps_indices(48, 16.0, 2.0, max_frames=3) == [0, 16, 40]
    with pytest.raises(ValueError):
        fps_indices(48, 16.0, 0.0)


@pytest.fixture(scope="module")
def square_mp4(tmp_path_factory):
    frames = moving_square_video(t=12)
    path = write_video(tmp_path_factory.mktemp("v") / "square.mp4", frames, fps=8)
    return path, frames


def test_decord_and_pyav_decode_the_same_frames(square_mp4):
    path, original = square_mp4
    a = VideoReader(path, "decord")
    b = VideoReader(path, "pyav")
    assert a.info.num_frames == b.info.num_frames == 12
    assert (a.info.height, a.info.width) == (48, 64)
    assert a.info.fps == pytest.approx(8.0)
    idx = [11, 0, 5, 5]
    fa, fb = a.read(idx), b.read(idx)
    assert fa.shape == (4, 48, 64, 3)
    assert np.abs(fa.astype(int) - fb.astype(int)).mean() < 1.0
    # h264 at crf 18 stays close to what was written, and the order asked for is kept
    assert np.abs(fa[0].astype(int) - original[11].astype(int)).mean() < 12
    assert np.abs(fa[1].astype(int) - original[0].astype(int)).mean() < 12


def test_missing_empty_and_corrupt_files_name_the_file(tmp_path, square_mp4):
    with pytest.raises(VideoError, match="not found: .*nope.mp4"):
        VideoReader(tmp_path / "nope.mp4")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(VideoError, match="empty file: .*empty.mp4"):
        VideoReader(empty)
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"this is not a video" * 100)
    with pytest.raises(VideoError, match="cannot decode video .*garbage.mp4"):
        VideoReader(garbage)


def test_truncated_file_is_an_error_or_has_fewer_frames(tmp_path, square_mp4):
    path, _ = square_mp4
    data = path.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 3])
    # A truncated mp4 (moov atom at the end is lost) must fail with a message naming the file.
    with pytest.raises(VideoError, match="cut.mp4"):
        VideoReader(cut).read(list(range(12)))


def test_out_of_range_indices_are_rejected(square_mp4):
    path, _ = square_mp4
    with pytest.raises(VideoError, match="out of range"):
        VideoReader(path).read([0, 12])


def test_probe_reports_backend(square_mp4):
    path, _ = square_mp4
    assert probe(path).backend == "decord"
    assert probe(path, "pyav").backend == "pyav"


def test_auto_reads_with_pyav_what_decord_misreads(tmp_path):
    """decord 0.6 decodes a 24 or 48 px wide h264 frame as (H, W, 4) (padded rows) and its batch read fails:
    ``decord`` says so when opening the file, ``auto`` reads it with PyAV (the frames as written, in ``read``
    and ``frames``)."""
    for w in (24, 48):
        frames = moving_square_video(t=8, h=24, w=w, step=1, seed=0)
        video = write_video(tmp_path / f"w{w}.mp4", frames, fps=8)
        with pytest.raises(VideoError, match=f"cannot decode video .*w{w}.mp4: decord: .*not \\(height, width, 3\\)"):
            VideoReader(video, "decord")
        expected = VideoReader(video, "pyav").read([0, 3, 7])
        reader = VideoReader(video, "auto")
        assert reader.backend == "pyav" and (reader.info.height, reader.info.width) == (24, w)
        assert np.array_equal(reader.read([0, 3, 7]), expected)
        assert np.abs(expected.astype(int) - frames[[0, 3, 7]].astype(int)).mean() < 12  # close to what was written
        streamed = [(i, f) for i, f in VideoReader(video, "auto").frames([7, 0, 3]) if i is not None]
        assert [i for i, _ in streamed] == [0, 3, 7] and np.array_equal(np.stack([f for _, f in streamed]), expected)
