"""NRVBench end to end on local Ray: the synthetic set with two scripted (replay) judges and negative
controls, checked by hand, re-scored from its own judge log; and with the tiny random-weight hf judge."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers.common import REPO
from vbench_ray.benchmarks import nrv_scoring as S
from vbench_ray.benchmarks.nrv import NRVBench
from vbench_ray.configure import load_config
from vbench_ray.runner import run
from vbench_ray.sweeps import expand
from vbench_ray.synth.nrv import synth_nrv

NRV = REPO / "configs" / "nrv.yaml"
EPS = 1e-6


def _answer(row: dict, component: str, judge: str) -> str:
    """Judge a and b agree except on jitter's temporal rating, which b refuses."""
    control = row["variant"].split(":", 1)[1] if row["variant"] != "base" else None
    if component == "instr":
        return "Answer: A" if control == "unchanged" else "The hand... Answer: B"
    if component == "phy":
        return "Rating: 5" if row["method"] == "coherent" else "Looks off, 2 issues. Rating: 3"
    if control == "shuffled":
        return "Rating: 1"
    if row["method"] == "jitter":
        return "I cannot judge motion from this image." if judge == "b" else "Rating: 2"
    return "Rating: 5"


def _g(*s):
    return 100.0 * float(np.prod([(x + EPS) ** (1 / 3) for x in s]))


@pytest.mark.ray
@pytest.mark.slow
def test_two_judges_controls_agreement_end_to_end_with_replay(tmp_path, ray_local):
    data = synth_nrv(tmp_path / "data", n=6, seed=0)
    out = tmp_path / "run"
    args = [
        f"data.annotations={data['annotations']}",
        f"data.edited_dir={data['edited_dir']}",
        f"output.dir={out}",
        "wandb.mode=disabled",
        "data.methods=[coherent,jitter]",
        "controls.names=[shuffled,unchanged]",
        "judge.max_invalid_fraction=1.0",  # judge b refuses 6 of 72 on purpose: scored, not "unavailable"
        "controls.methods=[coherent]",
        f"agreement.human_scores={data['human_scores']}",
        "stats.bootstrap_samples=200",
        "metrics.enabled=[NRVE_Acc,BG_PSNR,BG_MSE,FPS]",
    ]
    bench = NRVBench
    cfg0 = load_config(NRV, args)
    rows = expand(bench(cfg0).load_cases(), bench(cfg0).variants(), tmp_path)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"request_id": S.request_id(r["case_id"], r["variant"], c, j), "text": _answer(r, c, j)}) + "\n"
            for j in ("a", "b")
            for r in rows
            for c in S.COMPONENTS
        )
    )
    judges = (
        f"judges=[{{name: a, backend: replay, replay_path: {answers}}}, "
        f"{{name: b, backend: replay, replay_path: {answers}}}]"
    )
    cfg = load_config(NRV, args + [judges])
    summary = run(cfg, variants=bench(cfg).variants()).summary

    # -- NRVE-Acc by hand: per instance, averaged over the judges, then over instances
    coherent = _g(1, 1, 1)
    jitter = (_g(1, 0.5, 0.25) + _g(1, 0.5, 0.0)) / 2  # b's refusal (after one retry) is the lowest score
    m = summary["metrics"]
    assert m["NRVE_Acc"]["value"] == pytest.approx((coherent + jitter) / 2)
    assert m["NRVE_Acc"]["n"] == 12 and m["NRVE_Acc"]["n_failed"] == 0
    assert m["S_temp"]["value"] == pytest.approx((100 + 12.5) / 2) and m["S_temp"]["n_invalid"] == 6
    assert m["S_phy"]["value"] == pytest.approx(75.0) and m["S_instr"]["value"] == pytest.approx(100.0)
    assert m["FPS"]["value"] == pytest.approx(2.5)  # timing.json: 24 frames in 12 s and in 8 s
    assert m["BG_PSNR"]["value"] > 30 and m["BG_MSE"]["scale"] == "MSE x 1e4" and "BG_SSIM" not in m
    by_judge = summary["by_judge"]
    assert by_judge["a"]["NRVE_Acc"]["value"] == pytest.approx((coherent + _g(1, 0.5, 0.25)) / 2)
    assert by_judge["b"]["n_invalid"] == 6 and by_judge["a"]["n_invalid"] == 0
    cross = summary["cross_judge"]["NRVE_Acc"]
    pair = [by_judge["a"]["NRVE_Acc"]["value"], by_judge["b"]["NRVE_Acc"]["value"]]
    assert cross["mean"] == pytest.approx(np.mean(pair)) and cross["std"] == pytest.approx(np.std(pair))
    assert summary["cross_judge"]["by_method"]["coherent"]["NRVE_Acc"]["std"] == pytest.approx(0.0)
    assert set(summary["by_category"]) == set(S.CATEGORIES) and set(summary["by_difficulty"]) <= {"L1", "L2", "L3"}
    assert summary["by_category"]["LFS"]["NRVE_Acc"]["value"] == pytest.approx((coherent + jitter) / 2)
    assert set(summary["by_method"]) == {"coherent", "jitter"}

    # -- judges: separate phases, ids suffixed with the judge label, one retry of invalid answers
    assert summary["judge"]["a"]["n_requests"] == summary["judge"]["b"]["n_requests"] == 3 * (12 + 6 + 6)
    assert summary["judge"]["b"]["n_invalid"] == 6 and summary["judge"]["b"]["n_reasked"] == 6
    log = [json.loads(line) for line in (out / "judge_log.jsonl").read_text().splitlines()]
    assert all(r["request_id"].rsplit("/", 1)[1].split("@")[1] in ("a", "b") for r in log)
    refused = [r for r in log if r["request_id"] == "nrv/jitter:0001_cts00/base/nrve/temp@b"]
    assert [r["attempt"] for r in refused] == [0, 1] and all(r["parse_status"] == "invalid" for r in refused)

    # -- negative controls: each component next to the real edits, expected direction held
    sanity = summary["sanity"]
    shuffled, unchanged = sanity["controls"]["shuffled"], sanity["controls"]["unchanged"]
    assert shuffled["n"] == unchanged["n"] == 6 and sanity["all_held"] is True
    assert shuffled["primary"] == "S_temp" and shuffled["components"]["S_temp"]["control"] == 0.0
    assert shuffled["components"]["S_temp"]["reference"] == 100.0 and shuffled["held"]
    assert unchanged["components"]["S_instr"]["delta"] == pytest.approx(-100.0) and unchanged["held"]
    assert unchanged["conventional"]["BG_PSNR"]["control"] is None  # identical background: infinite PSNR
    from vbench_ray.sinks import CaseSink

    table = CaseSink(out, bench(cfg).schema()).read_all()  # the runner hook's view: every variant at once
    assert bench(cfg).summarize_variants(table, pq.read_table(out / "judgments.parquet"))["sanity"] == sanity
    assert set(summary["by_variant"]) == {"base", "control:shuffled", "control:unchanged"}
    assert summary["by_variant"]["control:unchanged"]["S_instr"]["value"] == 0.0
    controls_dir = out / "variants" / "controls" / "shuffled"
    assert len(list(controls_dir.glob("*.mp4"))) == 6 and not (out / "variants" / "controls" / "unchanged").exists()

    # -- agreement with the (synthetic) human scores, per dimension
    agreement = summary["agreement"]
    assert agreement["judges"]["a"]["NRVE_Acc"]["rho"] == pytest.approx(1.0)
    assert agreement["judges"]["a"]["NRVE_Acc"]["n"] == 2 and "by_category" in agreement["judges"]["b"]
    assert set(agreement["mean_judge"]) == set(S.NRVE_METRICS)
    titles = [t["title"] for t in summary["report_tables"]]
    assert any("Table 2" in t for t in titles) and any("App. F.1" in t for t in titles)
    assert (out / "report.html").is_file() and "NRVE_Acc" in (out / "report.html").read_text()
    judged = pq.read_table(out / "judgments.parquet").to_pylist()
    assert len(judged) == 2 * 3 * (12 + 6 + 6)

    # -- re-scoring in place with the other normalisation: nothing is computed or asked again
    n_log = len(log)
    again = run(load_config(NRV, args + [judges, "score.normalize=eq3"]), variants=bench(cfg).variants())
    assert again.n_computed == 0 and len((out / "judge_log.jsonl").read_text().splitlines()) == n_log
    assert again.summary["metrics"]["S_phy"]["value"] == pytest.approx((100 + 60) / 2)  # ratings 5 and 3 as r/5
    jitter_eq3 = (_g(1, 0.6, 0.4) + _g(1, 0.6, 0.2)) / 2  # b's invalid rating: the lowest, 1/5
    assert again.summary["metrics"]["NRVE_Acc"]["value"] == pytest.approx((_g(1, 1, 1) + jitter_eq3) / 2)


@pytest.mark.ray
@pytest.mark.slow
def test_tiny_random_judge_end_to_end(tmp_path, ray_local, tiny_judge_dir):
    """The hf backend with the tiny random-weight judge: its answers mean nothing (mostly invalid, scored
    lowest); this checks the images and the video reach a real model and every request is accounted for.
    The learned metrics run with random weights in the same frame stage (masks and prompts reach them)."""
    from vbench_ray.controls import read_masks
    from vbench_ray.metrics import niqe as NQ
    from vbench_ray.metrics.clip import build_tiny_clip
    from vbench_ray.metrics.lpips import save_random_lpips
    from vbench_ray.metrics.struct_dist import StructDistConfig, save_random_dino
    from vbench_ray.video.io import VideoReader

    data = synth_nrv(tmp_path / "data", n=2, seed=1)
    judge = tiny_judge_dir
    lpips = save_random_lpips(tmp_path / "lpips.pth", "tiny")
    clip = build_tiny_clip(tmp_path / "clip")
    dino_cfg = StructDistConfig(patch_size=8, dim=32, depth=2, heads=2, image_size=32)
    dino = save_random_dino(tmp_path / "dino.pth", dino_cfg)
    src = VideoReader(Path(data["root"]) / "videos" / f"{data['ids'][0]}.mp4")
    niqe = NQ.save_niqe_model(tmp_path / "niqe.npz", *NQ.fit_niqe_model(src.read([0, 12]), patch=32, sharpness=0.0), 32)
    out = tmp_path / "run"
    cfg = load_config(
        NRV,
        [
            f"data.annotations={data['annotations']}",
            f"data.edited_dir={data['edited_dir']}",
            f"output.dir={out}",
            "wandb.mode=disabled",
            "report.enabled=false",
            "data.methods=[coherent]",
            "judge.backend=hf",
            f"judge.model={judge}",
            "judge.name=tiny",
            "judge.max_tokens=16",
            "media.roi_frames=2",
            "judge.video.max_frames=2",
            "judge.max_invalid_fraction=1.0",  # random weights: mostly invalid, still scored
            "stats.bootstrap_samples=100",
            "ray.workers=1",
            "ray.batch_size=2",
            "metrics.enabled=[NRVE_Acc,BG_PSNR,BG_LPIPS,CLIP_S,CLIP_E,StructDist,NIQE]",
            "metrics.BG_LPIPS.arch=tiny",
            f"metrics.BG_LPIPS.weights={lpips}",
            f"metrics.CLIP_S.model={clip}",
            f"metrics.CLIP_E.model={clip}",
            f"metrics.StructDist.weights={dino}",
            "metrics.StructDist.dim=32",
            "metrics.StructDist.depth=2",
            "metrics.StructDist.heads=2",
            "metrics.StructDist.image_size=32",
            f"metrics.NIQE.model={niqe}",
            "metrics.NIQE.patch_size=32",
            "metrics.NIQE.frames=2",
        ],
    )
    summary = run(cfg).summary
    cases = pq.read_table(out / "cases").to_pylist()
    for name in ("BG_LPIPS", "CLIP_S", "CLIP_E", "StructDist", "NIQE"):
        assert all(np.isfinite(c[name]) and not c[f"error_{name}"] for c in cases), name
        assert summary["metrics"][name]["n"] == 2
    assert all(c["CLIP_E"] != 0.0 and c["StructDist"] > 0 for c in cases)
    assert read_masks(cases[0]["mask_path"]).shape[0] == 24
    assert summary["judge"]["n_requests"] == 6 and summary["judge"]["n_error"] == 0
    assert summary["judge"]["n_ok"] + summary["judge"]["n_invalid"] == 6
    m = summary["metrics"]
    assert m["NRVE_Acc"]["n"] == 2 and 0.0 <= m["NRVE_Acc"]["value"] <= 100.0
    invalid = sum(m[k]["n_invalid"] for k in ("S_instr", "S_phy", "S_temp"))
    assert invalid == summary["judge"]["n_invalid"] == m["NRVE_Acc"]["n_invalid"]
    log = [json.loads(line) for line in (out / "judge_log.jsonl").read_text().splitlines()]
    first = {r["request_id"].rsplit("/", 1)[1]: r for r in log if r["attempt"] == 0 and "0000" in r["request_id"]}
    assert first["phy"]["prompt_tokens"] > 2 * 16 and first["temp"]["prompt_tokens"] > 16  # image tokens counted
    assert first["instr"]["prompt_tokens"] > 2 * 16  # two video frames
    assert Path(json.loads(cases[0]["nrve_roi"])[0]).is_file()


@pytest.mark.ray
@pytest.mark.slow
def test_each_judge_is_held_to_the_max_invalid_fraction_of_its_included_file(tmp_path, ray_local):
    """Issue 23 item 13: judge a answers every request, judge b (a `judges` entry including a file that sets
    `max_invalid_fraction: 1.0`) none; nrv.yaml's own judge says 0.05. Half of all answers are unusable: held
    to 0.05 (the top-level judge's value, as before) every NRVE metric was unavailable; held to each judge's
    own limit, a passes (0 %) and b passes (100 % <= 100 %). The same run re-summarized with b's file at 0.5
    makes b's scores, and the cross-judge ones, unavailable, naming b."""
    data = synth_nrv(tmp_path / "data", n=2, seed=0)
    out = tmp_path / "run"
    args = [
        f"data.annotations={data['annotations']}",
        f"data.edited_dir={data['edited_dir']}",
        f"output.dir={out}",
        "wandb.mode=disabled",
        "report.enabled=false",
        "data.methods=[coherent]",
        "stats.bootstrap_samples=50",
        "metrics.enabled=[NRVE_Acc]",
    ]
    bench = NRVBench
    rows = bench(load_config(NRV, args)).load_cases()
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps(
                {
                    "request_id": S.request_id(r["case_id"], r["variant"], c, j),
                    "text": {"instr": "Answer: A", "phy": "Rating: 4", "temp": "Rating: 3"}[c]
                    if j == "a"
                    else "I cannot judge this.",
                }
            )
            + "\n"
            for j in ("a", "b")
            for r in rows
            for c in S.COMPONENTS
        )
    )
    for name, limit in (("lenient", 1.0), ("strict", 0.5)):
        (tmp_path / f"{name}.yaml").write_text(
            f"include: judges/default.yaml\nbackend: replay\nreplay_path: {answers}\nmax_invalid_fraction: {limit}\n"
        )

    def judges(b_file: str) -> str:
        return (
            f"judges=[{{name: a, backend: replay, replay_path: {answers}}}, {{include: {tmp_path / b_file}, name: b}}]"
        )

    cfg = load_config(NRV, args + [judges("lenient.yaml")])
    assert cfg.judge.max_invalid_fraction == 0.05
    summary = run(cfg).summary
    n = len(rows)
    assert summary["by_judge"]["b"]["n_invalid"] == 3 * n and summary["by_judge"]["a"]["n_invalid"] == 0
    for m in ("NRVE_Acc", "S_instr", "S_phy", "S_temp"):
        stats = summary["metrics"][m]
        assert "unavailable" not in stats and stats["value"] is not None, (m, stats)
        assert stats["invalid_fraction"] == pytest.approx(0.5)
        assert (
            summary["by_judge"]["b"][m]["invalid_fraction"] == 1.0 and "unavailable" not in summary["by_judge"]["b"][m]
        )
        assert summary["by_judge"]["a"][m]["invalid_fraction"] == 0.0

    from vbench_ray.sinks import CaseSink

    strict = load_config(NRV, args + [judges("strict.yaml")])
    again = bench(strict).summarize(
        CaseSink(out, bench(strict).schema()).read_all(), pq.read_table(out / "judgments.parquet")
    )
    for m in ("NRVE_Acc", "S_instr", "S_phy", "S_temp"):
        assert again["by_judge"]["b"][m]["value"] is None and "judge 'b'" in again["by_judge"]["b"][m]["unavailable"]
        assert "unavailable" not in again["by_judge"]["a"][m] and again["by_judge"]["a"][m]["value"] is not None
        assert again["metrics"][m]["value"] is None and "judge 'b'" in again["metrics"][m]["unavailable"]
