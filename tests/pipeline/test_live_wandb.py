"""Live W&B (issue 26 item 4): progress logged while the stream runs, the per-case table with frame strips,
sweep axes in config and line plots, and a resume that continues the same wandb run. The offline run files
are read back with tests/helpers/wandb_records.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import wandb_records
from helpers.common import REPO, cove_overrides
from vbench_ray.configure import load_config, load_sweep
from vbench_ray.runner import run


def _offline_runs(out: Path) -> list[Path]:
    return sorted((out / "wandb").glob("offline-run-*/run-*.wandb"))


def test_progress_while_streaming_case_strips_and_resume_keeps_the_id(cove_data, tmp_path, ray_local):
    out = tmp_path / "run"
    extra = ("wandb.mode=offline", "metrics.enabled=[SSIM]", "ray.shard_rows=1", "wandb.strips=2")
    run(load_config(REPO / "configs" / "cove.yaml", cove_overrides(cove_data, out, "run.limit=3", *extra)))
    [first] = _offline_runs(out)
    steps = [h for h in wandb_records.history(first) if "progress/cases_done" in h]
    assert steps, "no progress step was logged while the stream ran"
    done = [s["progress/cases_done"] for s in steps]
    assert done == sorted(done) and done[-1] == 3 and all(s["progress/cases_total"] == 3 for s in steps)
    last = steps[-1]
    ssim = [v for v in pq.read_table(out / "cases").column("SSIM").to_pylist() if v is not None]
    assert last["running/SSIM/n"] == len(ssim) and last["running/SSIM/mean"] == pytest.approx(np.mean(ssim))
    assert last["progress/failures"] == 0 and last["progress/fraction"] == 1.0
    assert any(k.startswith("progress/cases_per_s/") and v > 0 for k, v in last.items())
    assert not any(k.startswith("running/frames_decoded") for k in last)  # a decode counter is no metric
    # the summary and the table at the end went into the same run, after the progress steps
    hist = wandb_records.history(first)
    assert any("metrics/SSIM/value" in h for h in hist[hist.index(last) :])
    # the per-case table with images is a run_table artifact (staged on disk offline; `wandb sync` uploads it)
    [art] = [
        r.artifact
        for r in wandb_records.records(first)
        if r.WhichOneof("record_type") == "artifact" and r.artifact.type == "run_table"
    ]
    files = {e.path: Path(e.local_path) for e in art.manifest.contents}
    t = json.loads(files["cases.table.json"].read_text())
    assert len(t["data"]) == 3
    for col in ("source_frames", "edited_frames"):
        cells = [row[t["columns"].index(col)] for row in t["data"]]
        shown = [c for c in cells if isinstance(c, dict) and c.get("_type") == "image-file"]
        assert len(shown) == 2 and cells.count(None) == 1  # wandb.strips=2
        for c in shown:  # each image is a frame strip: 5 frames side by side, 96 px high
            from PIL import Image

            img = Image.open(files[c["path"]])
            assert img.height == 96 and img.width > 4 * 96
    run_id = wandb_records.run_record(first).run_id

    # resume with more cases: a second offline file of the same wandb run (same id), progress from the new rows
    run(load_config(REPO / "configs" / "cove.yaml", cove_overrides(cove_data, out, "run.limit=5", *extra)))
    runs = _offline_runs(out)
    assert len(runs) == 2
    second = next(p for p in runs if p != first)
    assert wandb_records.run_record(second).run_id == run_id and second.name == f"run-{run_id}.wandb"
    steps = [h for h in wandb_records.history(second) if "progress/cases_done" in h]
    assert steps[-1]["progress/cases_done"] == 2 and steps[-1]["progress/cases_total"] == 2


def test_progress_steps_hand_counted():
    """Counts, failures and running means per variant, over two shards (no wandb needed for the numbers)."""
    import pyarrow as pa

    from vbench_ray.live import Progress

    p = Progress(None, total=6, metrics={"SSIM"}, per_variant=True)
    only_base = pa.table({"case_id": ["4"], "variant": ["base"], "SSIM": [0.2], "error_load": [None]})
    assert p._step(only_base)["running/base/SSIM/n"] == 1  # a sweep's shard of base rows only: still per variant
    p = Progress(None, total=5, metrics={"SSIM"}, per_variant=True)
    first = pa.table(
        {
            "case_id": ["1", "2", "1"],
            "variant": ["base", "base", "fps:1"],
            "SSIM": [0.5, None, 0.9],
            "frames_decoded": [10, 10, 10],
            "error_load": [None, "bad file", None],
            "at_frames": [1.0, None, 2.0],
        }
    )
    step = p._step(first)
    assert step["progress/cases_done"] == 3 and step["progress/failures"] == 1
    assert step["running/base/SSIM/mean"] == 0.5 and step["running/base/SSIM/n"] == 1
    assert step["running/fps:1/SSIM/n"] == 1 and not any("frames_decoded" in k for k in step)
    step = p._step(
        pa.table(
            {
                "case_id": ["3", "2"],
                "variant": ["base", "fps:1"],
                "SSIM": [0.7, 0.3],
                "error_load": [None, None],
                "at_frames": [3.0, 4.0],
            }
        )
    )
    assert step["progress/cases_done"] == 5 and step["progress/fraction"] == 1.0 and step["progress/failures"] == 1
    assert step["running/base/SSIM/mean"] == pytest.approx((0.5 + 0.7) / 2) and step["running/base/SSIM/n"] == 2
    assert step["running/fps:1/SSIM/mean"] == pytest.approx((0.9 + 0.3) / 2)
    assert step["progress/cases_per_s/frames"] == pytest.approx(4 / step["progress/elapsed_s"])


def test_sweep_axes_in_config_and_line_plots(cove_data, tmp_path, ray_local):
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(f"base: {REPO}/configs/cove.yaml\nname: live_sweep\naxes:\n  fps: [2, 1]\n")
    out = tmp_path / "run"
    overrides = cove_overrides(
        cove_data, out, "run.limit=2", "wandb.mode=offline", "metrics.enabled=[SSIM]", "wandb.strips=0"
    )
    sweep = load_sweep(sweep_file, overrides)
    run(sweep.config, variants=sweep.variants)
    configs = {wandb_records.run_record(p).display_name: wandb_records.config(p) for p in _offline_runs(out)}
    assert set(configs) == {"run/base", "run/fps:1", "run/fps:2"}
    for name, cfg in configs.items():
        assert cfg["sweep/axes"] == {"fps": [2.0, 1.0]}
    assert configs["run/fps:1"]["sweep/axis"] == "fps" and configs["run/fps:1"]["sweep/fps"] == 1.0
    assert configs["run/base"]["sweep/axis"] == "base"
    plot = configs["run/base"]["_wandb/visualize/sweep/fps/SSIM"]["panel_config"]
    assert plot["panelDefId"] == "wandb/line/v0" and plot["fieldSettings"] == {"x": "fps", "y": "SSIM", "stroke": None}
    base_dir = next(p for p in _offline_runs(out) if wandb_records.run_record(p).display_name == "run/base").parent
    [table] = (base_dir / "files" / "media" / "table" / "sweep" / "fps").glob("SSIM_table_*.table.json")
    data = json.loads(table.read_text())
    assert [row[0] for row in data["data"]] == [1.0, 2.0]  # the curve's points in numeric order


def test_sweep_config_of_a_noise_variant():
    from vbench_ray.live import sweep_config

    info = {
        "variants": [
            {"name": "base", "axis": None, "value": None},
            {"name": "blur:9", "axis": "noise", "value": "blur:9"},
            {"name": "res:240", "axis": "resolution", "value": 240},
        ]
    }
    assert sweep_config(info, "blur:9") == {
        "sweep/axes": {"noise": ["blur:9"], "resolution": [240]},
        "variant": "blur:9",
        "sweep/axis": "noise",
        "sweep/value": "blur:9",
        "sweep/noise": "blur:9",
        "sweep/noise_kind": "blur",
        "sweep/noise_level": 9.0,
    }
    assert sweep_config(info, "base")["sweep/axis"] == "base" and sweep_config(None) == {}
