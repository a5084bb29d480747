"""Long videos are decoded in a streaming way where only samples are needed (issue 16).

A 3000-frame video (2 minutes at 25 fps; 64x64 keeps it quick to write, and its full decode is still 35 MB)
sampled at 10 frames: each installed backend returns exactly the frames a full decode has at those indices,
counts the same frames and keyframes, and its peak memory stays near the 10 frames, far below the full decode
(measured both as Python/NumPy allocations, tracemalloc, and as the process's peak RSS, which also sees the
decoders' native buffers).
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from vbench_ray.video import io
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoReader, uniform_indices

N_FRAMES, SIZE = 3000, 64
FULL_BYTES = N_FRAMES * SIZE * SIZE * 3  # what decoding the whole stream into memory holds (36.9 MB)


@pytest.fixture(scope="module")
def long_video(tmp_path_factory) -> Path:
    """Every frame differs (a moving ramp and a frame-numbered corner), so a wrong index shows."""
    x = np.arange(SIZE)
    frames = np.zeros((N_FRAMES, SIZE, SIZE, 3), np.uint8)
    for t in range(N_FRAMES):
        frames[t, :, :, 0] = (x[None, :] + t) % 256
        frames[t, :, :, 1] = (2 * x[:, None] + t // 3) % 256
        frames[t, :8, :8, 2] = (7 * t) % 256
    return write_video(tmp_path_factory.mktemp("long") / "long.mp4", frames, fps=25)


@pytest.fixture(scope="module")
def full_decode(long_video) -> tuple[np.ndarray, list[int]]:
    """The reference: every frame decoded in order (PyAV), and which were keyframes."""
    av = pytest.importorskip("av")
    with av.open(str(long_video)) as container:
        decoded = list(container.decode(container.streams.video[0]))
    return np.stack([f.to_ndarray(format="rgb24") for f in decoded]), [i for i, f in enumerate(decoded) if f.key_frame]


def _reader(path: Path, backend: str) -> VideoReader:
    pytest.importorskip("av" if backend == "pyav" else "decord")
    return VideoReader(path, backend)


@pytest.mark.parametrize("backend", ["pyav", "decord"])
def test_sampled_frames_are_the_full_decodes(long_video, full_decode, backend):
    frames, keyframes = full_decode
    reader = _reader(long_video, backend)
    assert reader.info.num_frames == N_FRAMES == len(frames)
    assert list(reader.info.keyframes) == keyframes and len(keyframes) > 5  # several GOPs: seeks are exercised
    idx = uniform_indices(N_FRAMES, 10)
    assert idx[-1] == N_FRAMES - 1
    assert np.array_equal(reader.read(idx), frames[idx])
    # any order, repeats, both sides of a keyframe, the last frame
    k = keyframes[3]
    odd = [N_FRAMES - 1, 0, k, k - 1, k + 1, k, 1500, 1499, keyframes[-1], 7]
    assert np.array_equal(reader.read(odd), frames[odd])


def test_pyav_without_timestamps_decodes_forward(long_video, full_decode, monkeypatch):
    """A stream whose packets carry no timestamps is counted by decoding (no frame kept) and read forward."""
    pytest.importorskip("av")
    frames, keyframes = full_decode
    monkeypatch.setattr(io, "_packet_timestamps", lambda container, stream: (None, []))
    reader = VideoReader(long_video, "pyav")
    assert reader.info.num_frames == N_FRAMES and list(reader.info.keyframes) == keyframes
    idx = [2999, 3, 1200, 3]
    assert np.array_equal(reader.read(idx), frames[idx])


def test_pyav_falls_back_when_decoded_timestamps_disagree(long_video, full_decode, monkeypatch):
    """If the decoder's frames are not where the packets put them, the read starts over from the first frame."""
    pytest.importorskip("av")
    frames, _ = full_decode
    reader = VideoReader(long_video, "pyav")
    reader._impl._pts = [p + 1 for p in reader._impl._pts]  # no decoded frame carries these
    assert np.array_equal(reader.read([10, 2500]), frames[[10, 2500]])


@pytest.mark.parametrize("backend", ["pyav", "decord"])
def test_frames_one_at_a_time_are_the_full_decodes(long_video, full_decode, backend):
    """``frames`` gives each distinct index once, in increasing order, the frames ``read`` gives (decord: frame 0
    kept from the open, the rest read one by one; PyAV: converted as decoded)."""
    frames, keyframes = full_decode
    k = keyframes[3]
    idx = [N_FRAMES - 1, 0, k, k - 1, k + 1, k, 1500, 1499, keyframes[-1], 7]
    got = list(_reader(long_video, backend).frames(idx))
    assert [i for i, _ in got] == sorted(set(idx))
    assert all(np.array_equal(f, frames[i]) for i, f in got)
    reader = _reader(long_video, backend)
    assert np.array_equal(reader.read([5, 3]), frames[[5, 3]])  # a read first: the decoder has moved on
    assert all(np.array_equal(f, frames[i]) for i, f in reader.frames([0, 2, 3]))


def test_pyav_frames_start_over_when_decoded_timestamps_disagree(long_video, full_decode):
    """``(None, None)`` tells the caller to forget the frames so far: the read starts over from the first frame."""
    pytest.importorskip("av")
    frames, _ = full_decode
    reader = VideoReader(long_video, "pyav")
    reader._impl._pts = [p + 1 for p in reader._impl._pts]  # no decoded frame carries these
    got = list(reader.frames([2500, 10]))
    restart = max(k for k, (_, f) in enumerate(got) if f is None)
    assert [i for i, _ in got[restart + 1 :]] == [10, 2500]
    assert all(np.array_equal(f, frames[i]) for i, f in got[restart + 1 :])


def _peak_rss_mb() -> float | None:
    """Peak RSS since the last reset (``VmHWM``), or None where it cannot be reset (not Linux, locked /proc)."""
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:  # "5": reset the peak RSS to the current RSS
            fh.write("5")
        return True
    except OSError:
        return False


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmRSS"))


@pytest.mark.parametrize("backend", ["pyav", "decord"])
def test_sampling_a_long_video_holds_about_the_samples(long_video, backend):
    idx = uniform_indices(N_FRAMES, 10)
    sampled_bytes = len(idx) * SIZE * SIZE * 3
    _reader(long_video, backend).read([0, N_FRAMES // 2])  # codec libraries loaded before measuring
    gc.collect()

    tracemalloc.start()
    try:
        reader = VideoReader(long_video, backend)
        frames = reader.read(idx)
        _, traced_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert frames.nbytes == sampled_bytes
    assert traced_peak < 8 * sampled_bytes + (1 << 20) < FULL_BYTES / 10, traced_peak

    del reader, frames
    gc.collect()
    if not _reset_peak_rss():
        pytest.skip("the peak RSS cannot be reset here (/proc/self/clear_refs)")
    before = _rss_mb()
    VideoReader(long_video, backend).read(idx)
    grown = _peak_rss_mb() - before
    assert grown < FULL_BYTES / 2**20 / 4, f"{backend}: peak RSS grew {grown:.1f} MB reading 10 of {N_FRAMES} frames"
