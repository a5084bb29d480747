"""End to end on local Ray: CoVEBench objective metrics over the synthetic set, bad input, resume, kill."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers.common import REPO, cove_overrides, moving_square_video, user_env
from helpers.configs import cove_cfg
from vbench_ray.runner import run
from vbench_ray.video.encode import write_video

pytestmark = [pytest.mark.ray, pytest.mark.slow]
COVE = REPO / "configs" / "cove.yaml"


def _headline(summary):
    return {k: summary[k] for k in ("metrics", "by_category", "exclusions", "failures", "n_rows")}


def _empty_mp4(path: Path) -> None:
    """An mp4 container holding a video stream with zero frames."""
    import av

    with av.open(str(path), mode="w") as c:
        s = c.add_stream("libx264", rate=8)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        c.start_encoding()  # header only, no frames


def _ssim_by_hand(source: Path, edited: Path, t: int = 10, size: int = 224) -> float:
    """CoVEBench App. F.3's Structural Fidelity written out: T = 10 frames at round(i (n-1) / (m-1)) of each video
    (m = min(n, T)), grayscale, 224x224 INTER_AREA, scikit-image SSIM (data_range 255), mean over the pairs."""
    import av
    import cv2
    from skimage.metrics import structural_similarity

    def frames(path):
        with av.open(str(path)) as c:
            all_frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
        m = min(len(all_frames), t)
        idx = [len(all_frames) // 2] if m == 1 else [round(i * (len(all_frames) - 1) / (m - 1)) for i in range(m)]
        return [
            cv2.resize(cv2.cvtColor(all_frames[i], cv2.COLOR_RGB2GRAY), (size, size), interpolation=cv2.INTER_AREA)
            for i in idx
        ]

    a, b = frames(source), frames(edited)
    k = min(len(a), len(b))
    return float(np.mean([structural_similarity(x, y, data_range=255) for x, y in zip(a[:k], b[:k])]))


def test_clean_run_writes_the_run_directory(cove_data, tmp_path, ray_local):
    out = tmp_path / "run"
    result = run(cove_cfg(cove_data, out, "wandb.mode=offline", "report.enabled=true"))
    assert result.n_computed == 8
    assert (out / "config.yaml").exists() and (out / "summary.json").exists() and (out / "report.html").exists()
    table = pq.read_table(out / "cases").to_pylist()
    assert sorted(r["case_id"] for r in table) == [str(i) for i in range(1, 9)]
    for r in table:
        assert r["variant"] == "base"
        for m in ("SSIM", "MSM", "MF"):
            if r[f"excluded_{m}"]:
                assert r[m] is None
            else:
                assert 0.0 <= r[m] <= 1.0, (m, r[m])
        # decode once: one open per video of the case, one read of the union of frame indices
        assert r["videos_opened"] == 2
        assert 0 < r["frames_decoded"] <= 2 * 16 + 2 * 10
    summary = json.loads((out / "summary.json").read_text())
    for m in ("SSIM", "MSM", "MF"):
        s = summary["metrics"][m]
        values = [r[m] for r in table if r[m] is not None]
        assert s["n"] == len(values) and s["value"] == pytest.approx(np.mean(values))
        assert s["ci95"][0] <= s["value"] <= s["ci95"][1]
        assert s["n"] + s["n_excluded"] + s["n_failed"] == 8
    # SSIM recomputed here from the mp4 files (PyAV, OpenCV, scikit-image), not from the run's own table
    by_hand = {
        r["case_id"]: _ssim_by_hand(Path(r["source_path"]), Path(r["edited_path"]))
        for r in table
        if not r["excluded_SSIM"]
    }
    assert {r["case_id"]: r["SSIM"] for r in table if not r["excluded_SSIM"]} == pytest.approx(by_hand, abs=1e-4)
    assert summary["metrics"]["SSIM"]["value"] == pytest.approx(np.mean(list(by_hand.values())), abs=1e-4)
    assert summary["exclusions"]["SSIM"] == {"category:Background": sum("Background" in r["categories"] for r in table)}
    assert summary["failures"]["count"] == 0
    assert set(summary["by_category"]) == {c for r in table for c in r["categories"]}
    # the wandb offline run sits inside the run directory
    runs = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0
    # identical edits (re-encoded source) give SSIM close to 1; the synthetic edits lower it
    assert summary["metrics"]["SSIM"]["value"] < 0.999


def test_bad_input_is_recorded_and_the_rest_completes(cove_copy, tmp_path, ray_local):
    tasks = json.loads(cove_copy["checklist"].read_text())
    ids = [str(t["id"]) for t in tasks]
    edited = cove_copy["edited_dir"]
    (edited / f"{ids[0]}.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2000))  # corrupt
    data = (edited / f"{ids[1]}.mp4").read_bytes()
    (edited / f"{ids[1]}.mp4").write_bytes(data[: len(data) // 2])  # truncated
    _empty_mp4(edited / f"{ids[2]}.mp4")  # zero frames
    write_video(edited / f"{ids[3]}.mp4", moving_square_video(t=10, h=48, w=64), fps=8)  # other length and size
    (edited / f"{ids[4]}.mp4").unlink()  # missing
    tasks[5]["videoA_path"] = "../../outside.mp4"  # escapes the root
    tasks[6]["evaluation_groups"][0]["questions"][0]["type"] = "Quad-TF"  # unknown type: skipped, not a load error
    cove_copy["checklist"].write_text(json.dumps(tasks))

    result = run(cove_cfg(cove_copy, tmp_path / "run"))
    rows = {r["case_id"]: r for r in pq.read_table(tmp_path / "run" / "cases").to_pylist()}
    assert len(rows) == 8
    for i in range(3):
        assert rows[ids[i]]["error_frames"] and f"{ids[i]}.mp4" in rows[ids[i]]["error_frames"], rows[ids[i]]
    assert "source has 24 frames at 128x96, edited has 10 frames at 64x48" in rows[ids[3]]["warning_pair"]
    assert rows[ids[3]]["MSM"] is not None and rows[ids[3]]["error_frames"] is None
    assert "not found" in rows[ids[4]]["error_edited"]  # the model's missing output (issue 24)
    assert "escapes the data root" in rows[ids[5]]["error_load"]
    assert rows[ids[6]]["error_load"] is None  # the official code skips a question type it does not know (issue 24)
    assert rows[ids[7]]["error_load"] is None and rows[ids[7]]["error_frames"] is None
    failures = result.summary["failures"]
    assert failures["count"] == 5 and failures["by_stage"] == {"edited": 1, "frames": 3, "load": 1}
    assert result.summary["metrics"]["MSM"]["n"] == 3 and result.summary["metrics"]["MSM"]["n_failed"] == 5


def test_pair_mismatch_fail_option(cove_copy, tmp_path, ray_local):
    tasks = json.loads(cove_copy["checklist"].read_text())
    first = str(tasks[0]["id"])
    write_video(cove_copy["edited_dir"] / f"{first}.mp4", moving_square_video(t=10, h=48, w=64), fps=8)
    result = run(cove_cfg(cove_copy, tmp_path / "run", "data.pair_mismatch=fail", "run.limit=2"))
    rows = {r["case_id"]: r for r in pq.read_table(tmp_path / "run" / "cases").to_pylist()}
    assert "data.pair_mismatch=fail" in rows[first]["error_frames"]
    assert result.summary["failures"]["count"] == 1


def test_rerun_skips_finished_rows_and_reproduces_the_summary(cove_data, tmp_path, ray_local):
    out = tmp_path / "run"
    first = run(cove_cfg(cove_data, out, "run.limit=5"))
    assert first.n_computed == 5
    again = run(cove_cfg(cove_data, out, "run.limit=5"))
    assert again.n_computed == 0
    assert _headline(again.summary) == _headline(first.summary)
    full = run(cove_cfg(cove_data, out))
    assert full.n_computed == 3  # only the cases the limited run did not cover
    assert len(pq.read_table(out / "cases")) == 8


def test_resume_refuses_changed_settings(cove_data, tmp_path, ray_local):
    from vbench_ray.config import ConfigError

    out = tmp_path / "run"
    run(cove_cfg(cove_data, out, "run.limit=1"))
    with pytest.raises(ConfigError, match="different `metrics`"):
        run(cove_cfg(cove_data, out, "run.limit=1", "metrics.MF.alpha=0.3"))
    with pytest.raises(ConfigError, match="output.resume=false"):
        run(cove_cfg(cove_data, out, "output.resume=false"))


def _bigger_set(cove_data, root: Path, copies: int) -> dict:
    """The synthetic set with every task repeated ``copies`` times under new ids (slower to score)."""
    src = Path(cove_data["source_dir"])
    shutil.copytree(src, root)
    tasks = json.loads(Path(cove_data["checklist"]).read_text())
    out = []
    for k in range(copies):
        for t in tasks:
            new_id = t["id"] + 100 * k
            out.append({**t, "id": new_id})
            if k:
                shutil.copy(root / "edited" / f"{t['id']}.mp4", root / "edited" / f"{new_id}.mp4")
    (root / "checklist.json").write_text(json.dumps(out))
    return {"checklist": root / "checklist.json", "source_dir": root, "edited_dir": root / "edited"}


def test_killed_run_restarts_without_recomputing(cove_data, tmp_path, ray_local):
    data = _bigger_set(cove_data, tmp_path / "data", copies=4)
    out = tmp_path / "run"
    args = cove_overrides(data, out, "ray.shard_rows=1", "ray.batch_size=1", "ray.workers=1", "ray.num_cpus=2")
    log = tmp_path / "killed_run.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vbench_ray.cli", "run", str(COVE), *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=user_env(),
        )
    try:
        deadline = time.time() + 300
        while time.time() < deadline and len(list((out / "cases").glob("part-*.parquet"))) < 3:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-4000:]
                pytest.fail(f"the run ended (exit {proc.returncode}) before it could be killed:\n{tail}")
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray runtime it started
        proc.wait()
    done = pq.read_table(out / "cases", columns=["case_id"]).column("case_id").to_pylist()
    assert 3 <= len(done) < 32, "the kill must land mid-run"
    before = {p.name: p.stat().st_mtime_ns for p in (out / "cases").glob("part-*.parquet")}

    result = run(cove_cfg(data, out))
    assert result.n_computed == 32 - len(done)
    rows = pq.read_table(out / "cases").to_pylist()
    assert len(rows) == 32 and len({r["case_id"] for r in rows}) == 32
    after = {p.name: p.stat().st_mtime_ns for p in (out / "cases").glob("part-*.parquet")}
    assert all(after[name] == mtime for name, mtime in before.items())  # finished shards untouched
