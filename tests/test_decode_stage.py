"""The decode stage holds one video open at a time (a live decord reader keeps decoding ahead on its own thread)."""

import gc
import weakref

import numpy as np

from tests.conftest import moving_square_video
from vbench_ray.video import frames as frames_mod
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoReader


class TrackedReader:
    """``VideoReader`` recording, at each open, how many earlier readers are still alive."""

    live: list = []
    alive_at_open: list[int] = []

    def __new__(cls, path, backend="auto"):
        gc.collect()
        cls.alive_at_open.append(sum(r() is not None for r in cls.live))
        reader = VideoReader(path, backend)
        cls.live.append(weakref.ref(reader))
        return reader


def test_source_is_opened_after_the_edited_reader_is_released(tmp_path, monkeypatch):
    src, edt = tmp_path / "src.mp4", tmp_path / "edt.mp4"
    video = moving_square_video(t=12)
    write_video(src, video, fps=8.0)
    write_video(edt, np.clip(video.astype(int) + 20, 0, 255).astype(np.uint8), fps=8.0)
    monkeypatch.setattr(frames_mod, "VideoReader", TrackedReader)
    TrackedReader.live, TrackedReader.alive_at_open = [], []
    stage = frames_mod.FrameMetricsStage({"SSIM": {"frames": 4, "size": 32}})
    out = stage({"case_id": "0", "source_path": str(src), "edited_path": str(edt)})
    assert out["videos_opened"] == 2 and out["SSIM"] > 0 and not out.get("error_SSIM")
    assert TrackedReader.alive_at_open == [0, 0]  # the edited reader was gone when the source opened
    gc.collect()
    assert all(r() is None for r in TrackedReader.live)  # and none outlives the case
