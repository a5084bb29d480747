"""The ``diffusers`` editor backend (issue 12) through a tiny random Wan-VACE pipeline saved with ``save_pretrained``
(tests/helpers/tiny/wan_vace.py): Table 7's frame rules on the model's input and output, same seed -> same video, a
missing/wrong model folder refused before any compute with the key named, and on local Ray the edit CLI (resumable)
and one edit -> evaluate run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.common import REPO, cove_overrides, moving_square_video
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoReader

pytest.importorskip("diffusers")

COVE = REPO / "configs" / "cove.yaml"
VACE = REPO / "configs" / "editors" / "vace.yaml"
# Table 7's VACE rules scaled down for a CPU: 4k+1 frames in [5, 9] at 64x32 (the real ones: [33, 81] at 1280x720)
RULES = {
    "frame_constraint": "4k+1",
    "min_frames": 5,
    "max_frames": 9,
    "resolution": [64, 32],
    "resolution_mode": "exact",
    "size_multiple": 16,
}
# (16 text tokens instead of Wan's 512: the tiny encoder's time, not a rule under test)
SMALL = [
    "editor.dtype=fp32",
    "editor.vae_dtype=fp32",
    "editor.steps=2",
    "editor.frame_rules.resolution=[64,32]",
    "editor.frame_rules.min_frames=5",
    "editor.frame_rules.max_frames=9",
    "editor.replicas=1",
    "editor.call_kwargs.max_sequence_length=16",
]


@pytest.fixture(scope="session")
def tiny_vace(tmp_path_factory) -> Path:
    from helpers.tiny.wan_vace import build_tiny_wan_vace

    return build_tiny_wan_vace(tmp_path_factory.mktemp("tiny_models") / "wan_vace")


def _editor_cfg(weights, **extra) -> dict:
    cfg = {
        "name": "diffusers",
        "model": "tiny-vace",
        "weights": str(weights),
        "pipeline": "WanVACEPipeline",
        "dtype": "fp32",
        "steps": 2,
        "guidance": 5.0,
        "seed": 3,
        "layout": "flat",
        "frame_rules": dict(RULES),
        "call_kwargs": {"max_sequence_length": 16},
    }
    cfg.update(extra)
    return cfg


def _frames(path) -> np.ndarray:
    info = VideoReader(path).info
    return VideoReader(path).read(range(info.num_frames))


def test_the_pipeline_gets_the_resampled_source_and_writes_what_the_rules_say(tiny_vace, tmp_path):
    from vbench_ray.editors.base import EditorPool

    pool = EditorPool(_editor_cfg(tiny_vace), str(tmp_path / "out"), str(tmp_path / "inputs"))
    assert type(pool.editor.pipe).__name__ == "WanVACEPipeline" and pool.editor.device == "cpu"
    # what one case's call holds: the instruction as prompt, the source frames as VACE's video, an all-white mask
    frames = moving_square_video(t=9, h=32, w=64)
    args = pool.editor.call_arguments(frames, "make the square blue", 32, 64, seed=3)
    assert args["prompt"] == "make the square blue" and args["num_frames"] == 9 and args["num_inference_steps"] == 2
    assert len(args["video"]) == len(args["mask"]) == 9 and args["video"][0].size == (64, 32)
    assert np.array_equal(np.asarray(args["video"][4]), frames[4]) and np.asarray(args["mask"][0]).min() == 255
    # 14 source frames -> 9 (the max, 4*2+1); 8 -> 5 (4k+1 at or below); 3 -> 5 (the min: frames repeated)
    for t, expected in ((14, 9), (8, 5), (3, 5)):
        src = write_video(tmp_path / f"src{t}.mp4", moving_square_video(t=t, h=48, w=80), fps=16)
        row = pool({"case_id": f"c{t}", "variant": "base", "source_path": str(src), "instruction": "make it red"})
        assert row.get("error_edit") is None, row
        info = VideoReader(row["edited_path"]).info
        assert (info.num_frames, info.height, info.width) == (expected, 32, 64) == (row["edit_frames"], 32, 64)
        assert info.fps == pytest.approx(16 * expected / t, rel=0.01)  # the input's fps: the clip keeps its length
        assert row["edit_seconds_per_frame"] == pytest.approx(row["edit_seconds"] / expected)
        assert row["edit_peak_mb"] is None and row["edit_peak_from"] is None  # no CUDA here
    # the same seed gives the same video; another seed another one (the initial noise is the only randomness)
    row = {"case_id": "c8", "variant": "base", "source_path": str(tmp_path / "src8.mp4"), "instruction": "make it red"}
    again = EditorPool(_editor_cfg(tiny_vace), str(tmp_path / "again"), str(tmp_path / "inputs"))
    other = EditorPool(_editor_cfg(tiny_vace, seed=4), str(tmp_path / "other"), str(tmp_path / "inputs"))
    first = _frames(tmp_path / "out" / "c8.mp4")
    same, changed = _frames(again(dict(row))["edited_path"]), _frames(other(dict(row))["edited_path"])
    assert np.array_equal(first, same) and not np.array_equal(first, changed)


def test_a_timed_out_edit_is_that_cases_failure(tiny_vace, tmp_path):
    from vbench_ray.editors.base import EditorPool

    pool = EditorPool(_editor_cfg(tiny_vace, timeout_s=1e-6), str(tmp_path / "out"), str(tmp_path / "inputs"))
    src = write_video(tmp_path / "src.mp4", moving_square_video(t=9, h=32, w=64), fps=16)
    row = pool({"case_id": "slow", "variant": "base", "source_path": str(src), "instruction": "x"})
    assert row["error_edit"].startswith("timed out after 1e-06 s (editor.timeout_s), at denoising step 1")
    assert not list((tmp_path / "out").glob("*.mp4"))


def test_a_missing_or_wrong_model_folder_is_refused_before_compute(tiny_vace, cove_data, tmp_path, capsys):
    from vbench_ray import preflight
    from vbench_ray.cli import main
    from vbench_ray.config import ConfigError
    from vbench_ray.configure import load_config

    base = cove_overrides(cove_data, tmp_path / "run", "metrics.enabled=[SSIM]", "editor=vace")

    def problems(*extra) -> str:
        with pytest.raises(ConfigError) as err:
            preflight.check(load_config(COVE, base + list(extra)))
        return str(err.value)

    assert "`editor.weights` is not set" in problems()  # vace.yaml leaves it for the user to set
    assert f"`editor.weights` = '{tmp_path / 'none'}' is not a folder" in problems(
        f"editor.weights={tmp_path / 'none'}"
    )
    (tmp_path / "empty").mkdir()
    assert "has no model_index.json" in problems(f"editor.weights={tmp_path / 'empty'}")
    bad = problems(f"editor.weights={tiny_vace}", "editor.pipeline=WanNoSuchPipeline", "editor.dtype=fp8")
    assert "`editor.pipeline` = 'WanNoSuchPipeline' is not a diffusers class" in bad
    assert "`editor.dtype` = 'fp8': expected one of ['bf16', 'fp16', 'fp32']" in bad
    preflight.check(load_config(COVE, base + [f"editor.weights={tiny_vace}"]))  # the tiny folder passes
    # through the CLI: exit 2, the key named, nothing run (no run directory)
    out = tmp_path / "edited"
    assert (
        main(
            [
                "edit",
                str(VACE),
                f"data.checklist={cove_data['checklist']}",
                f"output.dir={out}",
                f"data.source_dir={cove_data['source_dir']}",
                f"editor.weights={tmp_path / 'none'}",
            ]
        )
        == 2
    )
    assert "editor.weights" in capsys.readouterr().err and not (out / "cases").exists()
    assert main(["weights", "check", str(COVE), *base, f"editor.weights={tmp_path / 'empty'}"]) == 2
    assert "`editor.weights`" in capsys.readouterr().err


@pytest.mark.ray
def test_edit_cli_through_the_diffusers_editor_is_resumable(ray_local, tiny_vace, cove_data, tmp_path):
    from vbench_ray.cli import main

    out = tmp_path / "edited"
    args = [
        "edit",
        str(VACE),
        f"data.checklist={cove_data['checklist']}",
        f"data.source_dir={cove_data['source_dir']}",
        f"output.dir={out}",
        "wandb.mode=disabled",
        "run.limit=2",
        f"editor.weights={tiny_vace}",
        *SMALL,
    ]
    assert main(args) == 0
    rows = pq.read_table(out / "cases").to_pylist()
    assert len(rows) == 2
    for r in rows:  # 24 synthetic source frames at 96x128 -> 9 frames at 32x64, in the official layout
        assert r["error_edit"] is None and Path(r["edited_path"]) == out / f"{r['case_id']}.mp4"
        info = VideoReader(r["edited_path"]).info
        assert (info.num_frames, info.height, info.width) == (9, 32, 64)
    summary = json.loads((out / "summary.json").read_text())["edit"]
    assert (summary["editor"], summary["model"], summary["n_edited"]) == ("diffusers", "VACE", 2)
    saved = yaml.safe_load((out / "config.yaml").read_text())["editor"]
    assert saved["weights"] == str(tiny_vace) and saved["steps"] == 2 and rows[0]["editor_hash"] == saved["config_hash"]
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.glob("*.mp4")}
    assert main(args) == 0  # resumed: nothing edited again
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.mp4")} == mtimes


@pytest.mark.ray
def test_edit_then_evaluate_in_one_run(ray_local, tiny_vace, cove_data, tmp_path):
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    out = tmp_path / "run"
    args = [
        a
        for a in cove_overrides(
            cove_data,
            out,
            "metrics.enabled=[SSIM]",
            "metrics.exclude.SSIM.categories=[]",
            "editor=vace",
            f"editor.weights={tiny_vace}",
            "run.limit=2",
            *SMALL,
        )
        if not a.startswith("data.edited_dir")
    ]
    summary = run(load_config(COVE, args)).summary
    rows = pq.read_table(out / "cases").to_pylist()
    assert len(rows) == 2
    for r in rows:  # each edited video was made in the run and evaluated against its source
        assert r["error_edit"] is None and Path(r["edited_path"]).parent == out / "edited" / r["variant"]
        assert r["SSIM"] is not None and 0 <= r["SSIM"] <= 1 and r["at_edit"] <= r["at_frames"]
    assert summary["edit"]["n_edited"] == 2 and summary["metrics"]["SSIM"]["n"] == 2
