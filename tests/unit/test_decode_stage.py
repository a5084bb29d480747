"""The decode stage: one video open at a time (a live decord reader keeps decoding ahead on its own thread), and
the per-frame views it makes for SSIM, MSM and MF, which must give exactly ``compute``'s scores on raw frames."""

import dataclasses
import gc
import weakref

import numpy as np
import pytest
from omegaconf import OmegaConf

from helpers.common import moving_square_video
from vbench_ray.metrics.base import METRICS, build_metric
from vbench_ray.metrics.pool import payload_column, unpack
from vbench_ray.metrics import stage as frames_mod
from vbench_ray.video.encode import write_video
from vbench_ray.video.flow import AreaResize, FrameView, Gray
from vbench_ray.video.io import VideoReader, uniform_indices


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


# ------------------------------------------------------------- per-frame views (SSIM, MSM, MF with LK)


def full_config(name: str, **overrides) -> dict:
    """``metrics.<name>`` as the pipeline hands it to the stage: the class's defaults with ``overrides``."""
    build_metric(name)  # registers the metric modules
    return {**dataclasses.asdict(METRICS[name].config_class()), **overrides}


def metric_of(name: str, cfg: dict):
    """The metric as the stage builds it from its config, set up."""
    metric = build_metric(name, OmegaConf.create(cfg))
    metric.setup()
    return metric


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A source of 24 frames and an edit of 17 (data.pair_mismatch=resample: each video sampled over its own
    length), 160x96, so the views downscale as on real videos; moving squares, so MSM and MF see motion."""
    root = tmp_path_factory.mktemp("pair")
    src = write_video(root / "src.mp4", moving_square_video(t=24, h=96, w=160, step=3, seed=1), fps=8.0)
    edited = moving_square_video(t=17, h=96, w=160, step=4, seed=2)
    edt = write_video(root / "edt.mp4", np.clip(edited.astype(int) + 15, 0, 255).astype(np.uint8), fps=8.0)
    return {"case_id": "0", "source_path": str(src), "edited_path": str(edt)}


def raw_frames(path: str, metric, backend: str) -> np.ndarray:
    reader = VideoReader(path, backend)
    return reader.read(metric.sampling().indices(reader.info))


CONFIGS = {
    "defaults": {"SSIM": {}, "MSM": {}, "MF": {}},  # 224 / 224 / 384: upscaled here
    "downscaled": {
        "SSIM": {"size": 64, "frames": 7},
        "MSM": {"size": 64, "formula": "paper_text"},
        "MF": {"size": 80, "frames": 9, "grid_size": 5},
    },
}


@pytest.mark.parametrize("backend", ["decord", "pyav"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_stage_scores_are_compute_on_raw_frames_to_the_bit(pair, backend, config):
    """The stage's views are made frame by frame as the frames are decoded, yet every score is exactly
    ``compute`` on the raw sampled frames (the official way: the metric resizes them itself)."""
    pytest.importorskip("av" if backend == "pyav" else "decord")
    specs = {name: full_config(name, **over) for name, over in CONFIGS[config].items()}
    out = frames_mod.FrameMetricsStage(specs, backend)(pair)
    for name, cfg in specs.items():
        metric = metric_of(name, cfg)
        source = raw_frames(pair["source_path"], metric, backend) if metric.needs_source else None
        expected = metric.compute(raw_frames(pair["edited_path"], metric, backend), source)
        assert not out.get(f"error_{name}"), out.get(f"error_{name}")
        assert out[name] == expected, (name, out[name], expected)
    assert out["videos_opened"] == 2 and out["warning_pair"]  # 24 vs 17 frames: resampled, each its own length


class CountingView(FrameView):
    """A ``FrameView`` counting the frames it is applied to, by view (class-level, reset per test)."""

    calls: dict = {}

    def __call__(self, frame):
        CountingView.calls[self] = CountingView.calls.get(self, 0) + 1
        return super().__call__(frame)


def test_a_view_shared_by_two_metrics_is_made_once_per_frame(pair, monkeypatch):
    """SSIM's edited frames and MSM's frames are the same 10 uniform frames with the same grayscale+INTER_AREA
    view: the stage makes it once per frame (10 for the edited video, 10 more for SSIM's source frames), and
    keeps no full-resolution frame when no consumer reads raw frames."""
    from vbench_ray.metrics import fidelity, smoothness

    monkeypatch.setattr(fidelity, "FrameView", CountingView)
    monkeypatch.setattr(smoothness, "FrameView", CountingView)
    CountingView.calls = {}
    decoded = []

    class KeptDecoded(frames_mod.Decoded):
        def __init__(self, *args):
            super().__init__(*args)
            decoded.append(self)

    monkeypatch.setattr(frames_mod, "Decoded", KeptDecoded)
    specs = {"SSIM": full_config("SSIM", size=32), "MSM": full_config("MSM", size=32)}
    out = frames_mod.FrameMetricsStage(specs)(pair)
    assert not out.get("error_SSIM") and not out.get("error_MSM")
    view = CountingView((Gray(), AreaResize(32)))
    assert CountingView.calls == {view: 20}  # one view, made for 10 edited + 10 source frames
    assert out["frames_decoded"] == 20
    decoded = [d for d in decoded if d.plans]  # the edited and the source video
    assert [len(d.made) for d in decoded] == [10, 10]
    assert all(v == view for d in decoded for _, v in d.made)  # views only: no raw frame kept
    # and the scores are still compute's on raw frames
    for name in specs:
        metric = metric_of(name, specs[name])
        source = raw_frames(pair["source_path"], metric, "auto") if metric.needs_source else None
        assert out[name] == metric.compute(raw_frames(pair["edited_path"], metric, "auto"), source)


class RecordingSink:
    """A ``FrameSink`` (as VQR's JPEG writer) keeping what it is handed."""

    name, column = "REC", "rec_frames"

    def __init__(self):
        self.got = None

    def indices(self, info):
        return uniform_indices(info.num_frames, 10)

    def write(self, row, indices, frames):
        self.got = (list(indices), frames)
        return "ok"


def test_pool_metrics_and_sinks_still_get_raw_frames(pair):
    """A pool metric (MF with CoTracker, MSM with RAFT: models in their own pools) and a sink read the same
    frames as SSIM, which gets its views: they get the full-resolution frames, exactly as decoded."""
    sink = RecordingSink()
    specs = {
        "SSIM": full_config("SSIM", size=32),
        "MSM": full_config("MSM", flow="raft"),
        "MF": full_config("MF", tracker="cotracker"),
    }
    stage = frames_mod.FrameMetricsStage(specs, sinks=[sink])
    assert stage.views == {"SSIM": FrameView((Gray(), AreaResize(32))), "MSM": None, "MF": None}
    out = stage(pair)
    assert out["rec_frames"] == "ok" and not out.get("error_SSIM")
    edited, source = VideoReader(pair["edited_path"]), VideoReader(pair["source_path"])
    indices, frames = sink.got
    assert frames.shape == (10, 96, 160, 3) and np.array_equal(frames, edited.read(indices))
    for name in ("MSM", "MF"):
        metric = stage.metrics[[m.name for m in stage.metrics].index(name)]
        e, s, _ = unpack(out[payload_column(name)])
        assert np.array_equal(e, edited.read(metric.sampling().indices(edited.info)))
        if metric.needs_source:
            assert np.array_equal(s, source.read(metric.sampling().indices(source.info)))
    ssim = metric_of("SSIM", specs["SSIM"])
    assert out["SSIM"] == ssim.compute(edited.read(indices), source.read(ssim.sampling().indices(source.info)))


def test_a_view_that_fails_fails_its_metrics_only(pair, monkeypatch):
    """A view raising on a frame is the failure of the metrics declaring it (``error_<metric>``), not the case's."""
    from vbench_ray.metrics import smoothness

    class Broken:
        def __call__(self, frame):
            raise ValueError("no such view")

    monkeypatch.setattr(smoothness.MSM, "frame_view", lambda self: FrameView((Broken(),)))
    out = frames_mod.FrameMetricsStage({"SSIM": full_config("SSIM", size=32), "MSM": full_config("MSM")})(pair)
    assert "no such view" in out["error_MSM"] and "MSM" not in out
    assert out["SSIM"] > 0 and not out.get("error_SSIM")


def test_views_are_the_official_cv2_calls_in_their_order():
    """What each metric declares is the official preprocessing, step for step: SSIM and MSM (Farneback) take the
    grayscale then INTER_AREA; MF (LK) resizes the RGB frame with INTER_AREA, and LK takes its grayscale."""
    import cv2

    frame = moving_square_video(t=1, h=96, w=160)[0]

    def area(f, size):
        return cv2.resize(f, (size, size), interpolation=cv2.INTER_AREA)

    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    assert np.array_equal(build_metric("SSIM").frame_view()(frame), area(gray, 224))
    assert np.array_equal(build_metric("MSM").frame_view()(frame), area(gray, 224))
    assert np.array_equal(build_metric("MF").frame_view()(frame), cv2.cvtColor(area(frame, 384), cv2.COLOR_RGB2GRAY))
    assert not np.array_equal(area(gray, 64), cv2.cvtColor(area(frame, 64), cv2.COLOR_RGB2GRAY))  # order matters


def test_video_package_imports_nothing_of_the_metrics_package():
    """``vbench_ray.video`` reads and writes videos; the decode stage that feeds metrics lives in ``metrics.stage``,
    so the two packages do not import each other (``metrics`` imports ``video``, never the other way)."""
    import ast
    from pathlib import Path

    import vbench_ray.video

    found = []
    for path in sorted(Path(vbench_ray.video.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.name}: {n}" for n in names if n.startswith("vbench_ray.metrics")]
    assert found == []


def test_decode_stages_wires_the_decode_stage_and_one_pool_per_pool_metric():
    """``decode_stages``: the ``frames`` stage over the named metrics (SSIM computed there, AES's frames handed on)
    with the caller's extra inputs, outputs and init arguments, then AES's model pool reading those frames."""
    from types import SimpleNamespace

    cfg = OmegaConf.create(
        {
            "metrics": {"SSIM": full_config("SSIM", size=32), "AES": full_config("AES")},
            "video": {"backend": "pyav"},
            "data": {"pair_mismatch": "fail"},
            "ray": {"workers": 3, "batch_size": 2, "pools": {}},
        }
    )
    sink = SimpleNamespace(name="thumbs", column="thumbs_dir")
    stages = frames_mod.decode_stages(
        cfg,
        ["SSIM", "AES"],
        sinks=[sink],
        inputs=("mask_path",),
        init_kwargs={"extra": 1},
        outputs={"warning_mask": "str"},
    )
    decode, pool = stages
    assert [s.name for s in stages] == ["frames", "AES"]
    assert decode.fn is frames_mod.FrameMetricsStage and decode.kind == "cpu" and pool.kind == "pool"
    assert decode.inputs == ("source_path", "edited_path", "mask_path")
    assert set(decode.init_kwargs) == {"metrics", "video_backend", "pair_mismatch", "sinks", "extra"}
    assert decode.init_kwargs["video_backend"] == "pyav" and decode.init_kwargs["pair_mismatch"] == "fail"
    assert decode.init_kwargs["sinks"] == [sink] and decode.init_kwargs["metrics"]["SSIM"]["size"] == 32
    assert isinstance(decode.init_kwargs["metrics"]["AES"], dict)  # plain: pickles cheaply to the workers
    assert decode.outputs == {
        "SSIM": "float",
        "error_SSIM": "str",
        payload_column("AES"): "bytes",
        "error_AES": "str",
        "thumbs_dir": "str",
        "error_thumbs": "str",
        "frames_decoded": "int",
        "videos_opened": "int",
        "warning_pair": "str",
        "warning_mask": "str",
    }
    assert (decode.workers, decode.batch_size) == (3, 2)
    assert pool.inputs == (payload_column("AES"),) and pool.outputs == {"AES": "float"}
    # without sinks the decode stage is built without them (NRVBench's stage takes none)
    assert "sinks" not in frames_mod.decode_stages(cfg, ["SSIM"])[0].init_kwargs
