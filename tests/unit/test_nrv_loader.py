"""NRVBench config, data format, loader errors, the synthetic set, and the frame stage without Ray
(conventional metrics and the judge's images on real synthetic videos; mask/video mismatches fail the case)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from helpers.common import REPO, assert_yaml_documents
from helpers.configs import nrv_cfg
from vbench_ray.benchmarks import DataError
from vbench_ray.benchmarks.nrv import NRVBench, NRVConfig
from vbench_ray.benchmarks.nrv_media import flow_evidence, roi_box
from vbench_ray.config import ConfigError, read_yaml
from vbench_ray.controls import read_masks, write_masks
from vbench_ray.pipeline import run_local
from vbench_ray.case_table import case_chunks
from vbench_ray.synth.nrv import synth_nrv

NRV = REPO / "configs" / "nrv.yaml"


@pytest.fixture(scope="module")
def nrv_data(tmp_path_factory) -> dict:
    return synth_nrv(tmp_path_factory.mktemp("nrv"), n=6, seed=0)


@pytest.fixture
def nrv_copy(nrv_data, tmp_path) -> dict:
    dst = tmp_path / "nrv"
    shutil.copytree(nrv_data["root"], dst)
    return {"annotations": dst / "annotations.jsonl", "root": dst, "edited_dir": dst / "edited"}


def _rewrite(path: Path, fn) -> None:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in fn(records)))


# ----------------------------------------------------------------------------- config


def test_nrv_yaml_documents_the_defaults():
    documented = read_yaml(NRV)  # with its `include`s resolved (judge: configs/judges/)
    schema = OmegaConf.structured(NRVConfig)
    for section in ("data", "metrics", "media", "judge", "judges", "score", "controls", "agreement"):
        assert_yaml_documents(documented, schema, section)  # a metric's block may be absent (its class's defaults)
    raw = OmegaConf.load(NRV)
    assert raw.benchmark == "nrv" and raw.extends == "base.yaml"
    assert set(raw) - {"extends"} == set(schema) - {"output", "run", "ray", "video", "stats", "wandb", "report"}


def test_config_defaults_choices_and_judges(nrv_data, tmp_path):
    cfg = nrv_cfg(nrv_data, tmp_path / "o")
    assert cfg.judge.max_retries == 1 and cfg.judge.temperature == 0.0 and cfg.score.normalize == "e5"
    assert abs(cfg.score.w_instr + cfg.score.w_phy + cfg.score.w_temp - 1) < 1e-12 and cfg.score.epsilon == 1e-6
    for bad in ("score.normalize=r5", "media.format=gif", "metrics.BG_SSIM.background=inside", "judge.backend=gpt"):
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            nrv_cfg(nrv_data, tmp_path / "o", bad)
    bench = NRVBench
    specs = bench(
        nrv_cfg(
            nrv_data,
            tmp_path / "o",
            "judge.backend=replay",
            "judges=[{name: qwen7b, model: /m/7b}, {model: /m/Qwen2.5-VL-32B, max_tokens: 64}]",
        )
    ).judge_specs()
    assert [label for label, _ in specs] == ["qwen7b", "Qwen2.5-VL-32B"]
    assert specs[1][1].max_tokens == 64 and specs[1][1].backend == "replay" and specs[1][1].max_retries == 1
    with pytest.raises(ConfigError, match="used twice"):
        bench(nrv_cfg(nrv_data, tmp_path / "o", "judges=[{name: a}, {name: a}]")).judge_specs()
    with pytest.raises(ConfigError, match=r"judges\[0\].*bogus"):
        bench(nrv_cfg(nrv_data, tmp_path / "o", "judges=[{bogus: 1}]")).judge_specs()
    with pytest.raises(ConfigError, match="metrics.BG_LPIPS.weights"):
        bench(nrv_cfg(nrv_data, tmp_path / "o", "metrics.enabled=[BG_LPIPS]")).load_cases()
    with pytest.raises(ConfigError, match="controls.names"):
        bench(nrv_cfg(nrv_data, tmp_path / "o", "controls.names=[blur]")).variants()
    with pytest.raises(DataError, match="unknown metric"):
        bench(nrv_cfg(nrv_data, tmp_path / "o", "metrics.enabled=[PSNR]")).load_cases()


# ----------------------------------------------------------------------------- synthetic set and loader


def test_synth_layout_and_determinism(nrv_data, tmp_path):
    root = Path(nrv_data["root"])
    records = [json.loads(line) for line in Path(nrv_data["annotations"]).read_text().splitlines()]
    assert [r["category"] for r in records] == ["ASB", "CTS", "DSO", "GSF", "HFF", "LFS"]
    assert all(r["difficulty"] == "L2" for r in records if r["category"] == "ASB")
    for r in records:
        masks = read_masks(root / r["mask"])
        assert masks.shape == (24, 96, 128) and 0.02 < masks.mean() < 0.6
        for method in nrv_data["methods"]:
            assert (root / "edited" / method / f"{r['id']}.mp4").is_file()
    again = synth_nrv(tmp_path / "again", n=6, seed=0)
    assert Path(again["annotations"]).read_text() == Path(nrv_data["annotations"]).read_text()
    assert np.array_equal(read_masks(Path(again["root"]) / records[3]["mask"]), read_masks(root / records[3]["mask"]))


def test_loader_rows(nrv_data, tmp_path):
    bench = NRVBench
    rows = bench(nrv_cfg(nrv_data, tmp_path / "o")).load_cases()
    assert len(rows) == 18 and not any(r["error_load"] for r in rows)
    row = next(r for r in rows if r["case_id"] == "jitter:0001_cts00")
    assert (row["method"], row["instance_id"], row["category"], row["categories"]) == (
        "jitter",
        "0001_cts00",
        "CTS",
        ["CTS"],
    )
    assert row["FPS"] == pytest.approx(3.0) and row["mask_path"].endswith("masks/0001_cts00")
    assert json.loads(row["annotations"])["mcq"]["answer"] == "B"
    limited = bench(
        nrv_cfg(nrv_data, tmp_path / "o", "run.limit=2", "data.methods=[frozen]", "controls.per_category=0")
    ).load_cases()
    assert [r["case_id"] for r in limited] == ["frozen:0000_asb00", "frozen:0001_cts00"]
    assert not any(r["control_eligible"] for r in limited)
    flat = {"annotations": nrv_data["annotations"], "edited_dir": Path(nrv_data["edited_dir"]) / "coherent"}
    flat_rows = bench(nrv_cfg(flat, tmp_path / "o")).load_cases()
    assert [r["case_id"] for r in flat_rows][:2] == ["0000_asb00", "0001_cts00"] and flat_rows[0][
        "method"
    ] == "coherent"
    with pytest.raises(DataError, match=r"data.methods.*\['nope'\]"):
        bench(nrv_cfg(nrv_data, tmp_path / "o", "data.methods=[nope]")).load_cases()
    with pytest.raises(DataError, match="data.annotations not found"):
        bench(nrv_cfg({**nrv_data, "annotations": tmp_path / "none.jsonl"}, tmp_path / "o")).load_cases()


def test_per_case_problems_name_file_line_and_field(nrv_copy, tmp_path):
    def breakage(records):
        records[0]["category"] = "FLUID"
        del records[1]["mcq"]["answer"]
        records[2]["mask"] = "masks/missing"
        records[3]["video"] = "../../outside.mp4"
        return records + ["{not json"]

    _rewrite(Path(nrv_copy["annotations"]), breakage)
    (Path(nrv_copy["edited_dir"]) / "jitter" / "0005_lfs00.mp4").unlink()
    rows = {r["case_id"]: r for r in NRVBench(nrv_cfg(nrv_copy, tmp_path / "o")).load_cases()}
    err = lambda cid: rows[cid]["error_load"] or ""  # noqa: E731
    assert "annotations.jsonl:1.category: expected one of" in err("coherent:0000_asb00")
    assert "annotations.jsonl:2.mcq.answer" in err("coherent:0001_cts00")
    assert "annotations.jsonl:3.mask: mask folder not found" in err("coherent:0002_dso00")
    assert "annotations.jsonl:4.video" in err("coherent:0003_gsf00") and "escapes" in err("coherent:0003_gsf00")
    assert "annotations.jsonl:7: not valid JSON" in err("coherent:line7")
    # (a duplicate id stops the load: test_hardening, item 8)
    # line 5 loads for coherent, and fails only for the method whose edited video is missing
    assert not err("coherent:0005_lfs00")
    assert "edited video for 0005_lfs00 of method 'jitter' not found" in err("jitter:0005_lfs00")


# ----------------------------------------------------------------------------- the frame stage, without Ray


def _stage_rows(cfg, rows):
    bench = NRVBench(cfg)
    return run_local(rows, bench.stages(), case_chunks(rows, bench.schema())[0].schema).to_pylist()


def test_frame_stage_metrics_and_judge_images(nrv_data, tmp_path):
    cfg = nrv_cfg(nrv_data, tmp_path / "run", "run.limit=2", "media.show_frames=true")
    rows = [r for r in NRVBench(cfg).load_cases()]
    out = {r["case_id"]: r for r in _stage_rows(cfg, rows)}
    good, frozen = out["coherent:0001_cts00"], out["frozen:0001_cts00"]
    assert not good["error_frames"] and good["BG_PSNR"] > 40 and good["BG_SSIM"] > 95
    assert frozen["BG_PSNR"] < good["BG_PSNR"] and frozen["BG_MSE"] > good["BG_MSE"]  # blurred background
    assert frozen["MotionScore"] < good["MotionScore"]  # a frozen edit has no motion
    roi = json.loads(good["nrve_roi"])
    assert len(roi) == 8 and all(Path(p).is_file() for p in roi) and Path(good["nrve_flow"]).is_file()
    assert len(json.loads(good["nrve_frames"])) == 3
    import cv2

    flow = cv2.imread(good["nrve_flow"])
    assert flow.shape == (96, 256, 3)  # two 128x96 flow fields side by side
    x0, y0, x1, y1 = json.loads(good["roi_box"])
    assert cv2.imread(roi[0]).shape[:2] == (y1 - y0, x1 - x0)


def test_mask_video_mismatch_fails_only_that_case(nrv_copy, tmp_path):
    root = Path(nrv_copy["root"])
    masks = read_masks(root / "masks" / "0000_asb00")
    shutil.rmtree(root / "masks" / "0000_asb00")
    write_masks(root / "masks" / "0000_asb00", masks[:-2])  # 22 of 24 frames
    small = read_masks(root / "masks" / "0001_cts00")[:, :48, :64]
    shutil.rmtree(root / "masks" / "0001_cts00")
    write_masks(root / "masks" / "0001_cts00", small)
    cfg = nrv_cfg(nrv_copy, tmp_path / "run", "run.limit=3", "data.methods=[coherent]")
    out = {r["case_id"]: r for r in _stage_rows(cfg, NRVBench(cfg).load_cases())}
    assert "mask/video mismatch" in out["coherent:0000_asb00"]["error_frames"]
    assert "22 frames" in out["coherent:0000_asb00"]["error_frames"]
    assert "64x48" in out["coherent:0001_cts00"]["error_frames"]
    assert not out["coherent:0002_dso00"]["error_frames"] and out["coherent:0002_dso00"]["nrve_flow"]


def test_roi_box_and_flow_evidence_by_hand():
    masks = np.zeros((3, 20, 30), bool)
    masks[0, 5:10, 10:20] = True
    masks[2, 8:12, 4:6] = True
    assert roi_box(masks, 0.0) == (4, 5, 20, 12)
    assert roi_box(masks, 0.5) == (0, 1, 28, 16)
    assert roi_box(np.zeros((2, 4, 4), bool), 0.1) is None
    still = np.full((32, 32, 3), 128, np.uint8)
    assert flow_evidence(still, still, still).max() == 0  # no motion: black
    moving = [
        np.roll(np.pad(np.full((8, 8, 3), 250, np.uint8), ((12, 12), (12, 12), (0, 0))), k, axis=1) for k in (0, 2, 4)
    ]
    image = flow_evidence(*moving)
    assert image.shape == (32, 64, 3) and image.max() > 0


def test_job_entrypoint_reports_config_errors(nrv_data, capsys):
    import runpy

    runpy.run_path(str(REPO / "jobs" / "nrv.py"))  # importable without side effects (a __main__ guard)
    from vbench_ray.jobs import job_main

    assert job_main("nrv", [f"data.annotations={nrv_data['annotations']}", "controls.names=[shuffled]"]) == 2
    assert "output.dir" in capsys.readouterr().err


def test_a_failed_metric_does_not_stop_judging_but_a_failed_case_does():
    from vbench_ray.benchmarks.nrv import judgeable

    assert judgeable({"error_NIQE": "MissingWeightsError", "nrve_flow": "/f.png"})
    assert not judgeable({"error_frames": "mask/video mismatch", "nrve_flow": None})
    assert not judgeable({"error_load": "x", "nrve_flow": "/f.png"})
    assert not judgeable({"control_skip": "not in the negative-control subset", "nrve_flow": "/f.png"})
