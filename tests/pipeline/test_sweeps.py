"""Sweeps: variant expansion, perturbed videos made once and reused, by-variant summaries."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers.common import REPO, cove_overrides
from vbench_ray.config import ConfigError
from vbench_ray.runner import run
from vbench_ray.configure import load_sweep
from vbench_ray.sweeps import BASE, expand, make_variant, variants_from_axes
from vbench_ray.video.io import VideoReader
from vbench_ray.video.perturb import Perturbation


def test_variants_from_axes():
    vs = variants_from_axes(
        {"fps": [0.5, 2], "resolution": [240], "noise": ["noise:15", "blur:9"], "order": ["forward", "reverse"]}
    )
    assert [v.name for v in vs] == ["base", "fps:0.5", "fps:2", "res:240", "noise:15", "blur:9", "order:reverse"]
    assert vs[1].params == {"fps": 0.5} and vs[3].params == {"perturb": "resize:240"}
    assert make_variant("order", "forward") is BASE
    for axis, value in (("fps", 0), ("noise", "zoom:2"), ("order", "sideways"), ("speed", 2)):
        with pytest.raises(ConfigError):
            make_variant(axis, value)


def test_expand_points_perturbed_variants_at_one_file_per_video(tmp_path):
    cases = [
        {"case_id": "1", "variant": "base", "source_path": "/d/a.mp4", "edited_path": "/d/b.mp4"},
        {"case_id": "2", "variant": "base", "source_path": "/d/a.mp4", "edited_path": "/d/c.mp4"},
    ]
    rows = expand(cases, variants_from_axes({"noise": ["noise:15"], "fps": [1]}), tmp_path)
    assert [(r["case_id"], r["variant"]) for r in rows] == [
        ("1", "base"),
        ("2", "base"),
        ("1", "noise:15"),
        ("2", "noise:15"),
        ("1", "fps:1"),
        ("2", "fps:1"),
    ]
    noisy = [r for r in rows if r["variant"] == "noise:15"]
    assert noisy[0]["source_path"] == noisy[1]["source_path"] != "/d/a.mp4"  # shared source: one file
    assert json.loads(rows[4]["variant_params"]) == {"fps": 1.0} and rows[4]["source_path"] == "/d/a.mp4"


def test_sweep_file_errors(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text("base: ../nope.yaml\naxes: {}\n")
    with pytest.raises(ConfigError, match="config file not found"):
        load_sweep(bad)
    bad.write_text(f"base: {REPO}/configs/cove.yaml\naxes: {{}}\nextra: 1\n")
    with pytest.raises(ConfigError, match="unknown sweep keys"):
        load_sweep(bad)


@pytest.mark.ray
@pytest.mark.slow
def test_sweep_over_cove_renders_each_video_once_and_reuses_it(cove_data, tmp_path, ray_local, capsys):
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(
        f"base: {REPO}/configs/cove.yaml\nname: tiny_sweep\n"
        "axes:\n  resolution: [48]\n  noise: [noise:30, blur:9]\n  fps: [1]\n"
    )
    out = tmp_path / "run"
    sweep = load_sweep(sweep_file, cove_overrides(cove_data, out, "run.limit=4"))
    assert sweep.config.wandb.group == "tiny_sweep"
    result = run(sweep.config, variants=sweep.variants)
    s = result.summary
    # 4 cases, each with its own source and edited video: 8 videos x 3 perturbing variants, decoded once each
    assert s["sweep"]["rendered"] == 24 and s["sweep"]["videos_decoded"] == 24
    assert set(s["by_variant"]) == {"base", "res:48", "noise:30", "blur:9", "fps:1"}
    rows = pq.read_table(out / "cases").to_pylist()
    assert len(rows) == 4 * 5
    # the headline is the base variant's
    assert s["metrics"]["MSM"]["value"] == pytest.approx(s["by_variant"]["base"]["MSM"]["value"])
    # perturbed pixels move the pixel metrics; the fps variant changes only how models are shown videos
    assert s["by_variant"]["noise:30"]["MSM"]["value"] != pytest.approx(s["by_variant"]["base"]["MSM"]["value"])
    assert s["by_variant"]["fps:1"]["SSIM"]["value"] == pytest.approx(s["by_variant"]["base"]["SSIM"]["value"])
    # a rendered file is the perturbation of the decoded source, at the variant's resolution
    small = next(r for r in rows if r["variant"] == "res:48" and r["case_id"] == "1")
    assert VideoReader(small["source_path"]).info.height == 48
    noisy = next(r for r in rows if r["variant"] == "noise:30" and r["case_id"] == "1")
    base = next(r for r in rows if r["variant"] == "base" and r["case_id"] == "1")
    a = VideoReader(base["source_path"]).read([0])
    b = VideoReader(noisy["source_path"]).read([0])
    expected = Perturbation.parse("noise:30").apply(a)  # rendered losslessly: the noise survives encoding
    assert np.abs(b.astype(int) - expected.astype(int)).mean() < 2.0

    again = run(load_sweep(sweep_file, cove_overrides(cove_data, out, "run.limit=4")).config, variants=sweep.variants)
    assert again.n_computed == 0 and again.summary["sweep"]["rendered"] == 0  # files and rows reused
    assert again.summary["by_variant"] == s["by_variant"]
    assert s["sweep"]["rows_by_variant"] == {v: 4 for v in s["by_variant"]}  # 20 rows: add up to the table's

    # the terminal (issue 26 item 2): counts that add up, every metric per variant with its CI and n
    from vbench_ray.cli_run import _print_result, _print_variants

    _print_result(result)
    _print_variants(s)
    printed = capsys.readouterr().out
    assert "computed 20 rows" in printed and "20 rows in the run (5 variants: base 4, res:48 4," in printed
    lines = printed.splitlines()
    header = next(line for line in lines if line.strip().startswith("variant"))
    assert header.split() == ["variant", "SSIM", "MSM", "MF"]
    for v in s["by_variant"]:
        line = next(line for line in lines if line.split()[:1] == [v])
        for m in ("SSIM", "MSM", "MF"):
            e = s["by_variant"][v][m]
            assert f"{e['value']:.4g} [{e['ci95'][0]:.4g}, {e['ci95'][1]:.4g}] n={e['n']}" in line
