"""AES (Aesthetic Predictor v2.5) and TQ (DOVER++ technical branch): tiny random-initialised versions of the
real architectures, saved to disk and loaded through the metrics' own loading code. They prove plumbing,
shapes, sampling and the score arithmetic, never accuracy."""

from __future__ import annotations

import json
from dataclasses import asdict

import pyarrow.parquet as pq

import numpy as np
import pytest
import torch

from helpers.common import REPO, cove_overrides
from helpers.tiny_metrics import TINY_TQ
from vbench_ray.metrics.aes import AES, AESConfig, KeyframeSampling, build_head, save_tiny_aes
from vbench_ray.metrics.base import MissingWeightsError
from vbench_ray.metrics.tq import TQ, TQConfig, dover_frame_indices, spatial_fragments, technical_score
from vbench_ray.metrics.tq_net import build_dover_technical, save_tiny_dover
from vbench_ray.video.io import VideoInfo, VideoReader, uniform_indices


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory):
    d = tmp_path_factory.mktemp("model_metric_weights")
    return {"aes": save_tiny_aes(d / "aes"), "tq": str(save_tiny_dover(d / "dover" / "DOVER_plus_plus.pth"))}


def frames(n=16, h=48, w=64, seed=0):
    return np.random.default_rng(seed).integers(0, 255, (n, h, w, 3), dtype=np.uint8)


# ----------------------------------------------------------------------------- AES


def test_aes_head_has_the_published_keys_and_the_tiny_model_loads(tiny_weights):
    keys = list(build_head(1152).state_dict())
    assert keys == [f"scoring_head.{i}.{p}" for i in (0, 2, 4, 6, 8) for p in ("weight", "bias")]
    assert build_head(1152).scoring_head[0].in_features == 1152
    m = AES(AESConfig(**tiny_weights["aes"], batch_size=3))
    m.setup()
    assert m.image_size == 28 and m.dtype == torch.float32
    scores = m.frame_scores(frames(7))
    assert scores.shape == (7,) and np.isfinite(scores).all()
    # batching does not change the per-frame scores; the video score is their mean
    m.cfg.batch_size = 7
    assert np.allclose(m.frame_scores(frames(7)), scores, atol=1e-5)
    assert m.compute(frames(7)) == pytest.approx(float(scores.mean()), abs=1e-5)


def test_aes_dtype_auto_on_the_cpu_loads_and_is_recorded_as_float32(tiny_weights):
    """What compare records for ``dtype: auto`` (``AES.resolved_settings``) is what the model loads in."""
    cfg = AESConfig(**tiny_weights["aes"], dtype="auto", device="cpu")
    m = AES(cfg)
    m.setup()
    assert m.dtype == torch.float32 and next(m.encoder.parameters()).dtype == torch.float32
    assert AES.resolved_settings(asdict(cfg)) == {"dtype": "float32"}
    assert AES.resolved_settings({"dtype": "auto", "device": "cuda:0"}) == {"dtype": "bfloat16"}
    assert AES.resolved_settings({"dtype": "float16", "device": "cpu"}) == {"dtype": "float16"}


def test_aes_score_is_the_head_output_of_the_normalised_pooled_embedding(tiny_weights, monkeypatch):
    m = AES(AESConfig(**tiny_weights["aes"]))
    m.setup()
    pooled = torch.tensor([[3.0, 4.0] + [0.0] * 30, [0.0, 0.0, 2.0] + [0.0] * 29])

    class Out:
        pooler_output = pooled

    monkeypatch.setattr(m, "encoder", lambda pixel_values: Out())
    seen = []
    monkeypatch.setattr(m, "head", lambda x: seen.append(x.clone()) or torch.tensor([[2.0], [5.0]]))
    assert m.compute(frames(2)) == pytest.approx(3.5)  # mean of the two frame scores
    assert torch.allclose(seen[0].norm(dim=-1), torch.ones(2))  # L2-normalised before the head
    assert torch.allclose(seen[0][0, :2], torch.tensor([0.6, 0.8]))


def test_aes_resize_on_the_device_matches_pil_within_a_grey_level():
    import cv2

    from vbench_ray.metrics.aes import preprocess, preprocess_torch

    frame = cv2.GaussianBlur(frames(1, 120, 160, 4)[0], (0, 0), 2.0)  # downscaled to the tower's 28 px
    pil, dev = preprocess([frame], 28), preprocess_torch([frame], 28, "cpu").numpy()
    assert pil.shape == dev.shape == (1, 3, 28, 28)
    assert np.abs(pil - dev).max() * 255 / 2 <= 1.0 + 1e-4  # back on the 0-255 scale: at most one grey level
    assert AES(AESConfig(resize="torch")).cfg.resize == "torch" and "resize" in AES.choices


def test_aes_samples_uniform_frames_then_keyframes():
    info = VideoInfo("v.mp4", 50, 25.0, 8, 8, "test", keyframes=(0, 12, 24, 36, 48))
    assert KeyframeSampling(n=10).indices(info) == uniform_indices(50, 10) + [0, 12, 24, 36, 48]
    assert KeyframeSampling(n=10, max_keyframes=3).indices(info)[10:] == [0, 24, 48]
    assert KeyframeSampling(n=10, keyframes=False).indices(info) == uniform_indices(50, 10)  # official code
    unknown = VideoInfo("v.mp4", 50, 25.0, 8, 8, "test")
    assert KeyframeSampling(n=10).indices(unknown) == uniform_indices(50, 10)
    assert AES(AESConfig(frames=4, keyframes=False)).sampling().indices(info) == uniform_indices(50, 4)


def test_the_reader_reports_keyframes(cove_data):
    from pathlib import Path

    video = sorted(Path(cove_data["edited_dir"]).glob("*.mp4"))[0]
    for backend in ("decord", "pyav"):
        keys = VideoReader(video, backend).info.keyframes
        assert keys and keys[0] == 0 and all(0 <= k < VideoReader(video, backend).info.num_frames for k in keys)


def test_aes_weights_missing_or_wrong(tiny_weights, tmp_path):
    assert [p for p in AES.check_weights(AESConfig()) if "metrics.AES.encoder" in p]
    assert [p for p in AES.check_weights(AESConfig()) if "metrics.AES.weights" in p]
    assert AES.check_weights(AESConfig(**tiny_weights["aes"])) == []
    with pytest.raises(MissingWeightsError, match="metrics.AES.weights"):
        AES(AESConfig(encoder=tiny_weights["aes"]["encoder"], weights=str(tmp_path / "nope.pth"))).setup()
    wrong = tmp_path / "wrong.pth"
    torch.save({"fc.weight": torch.zeros(2, 2)}, wrong)
    with pytest.raises(ValueError, match=r"metrics.AES.weights=.*missing"):
        AES(AESConfig(encoder=tiny_weights["aes"]["encoder"], weights=str(wrong))).setup()
    other_width = tmp_path / "wide.pth"
    torch.save(build_head(64).state_dict(), other_width)  # a head for another tower width
    with pytest.raises(ValueError, match=r"metrics.AES.weights=.*shape"):
        AES(AESConfig(encoder=tiny_weights["aes"]["encoder"], weights=str(other_width))).setup()
    with pytest.raises(ValueError, match="metrics.AES.encoder"):
        AES(AESConfig(encoder=str(tmp_path), weights=tiny_weights["aes"]["weights"])).setup()


# ----------------------------------------------------------------------------- TQ


def test_tq_frame_sampling_follows_dover():
    # 3 segments of 100 frames; 32 frames 2 apart from a seeded offset in each segment
    idx = dover_frame_indices(300, 32, 3, 2, seed=0)
    assert len(idx) == 96
    for k in range(3):
        clip = idx[32 * k : 32 * (k + 1)]
        assert np.all(np.diff(clip) == 2) and 100 * k <= clip[0] < 100 * k + 100 - 64
    assert idx == dover_frame_indices(300, 32, 3, 2, seed=0) != dover_frame_indices(300, 32, 3, 2, seed=1)
    # a short video: offsets 0, indices wrap modulo T
    assert dover_frame_indices(20, 4, 2, 3, seed=0) == [0, 3, 6, 9, 10, 13, 16, 19]
    assert dover_frame_indices(5, 4, 2, 2, seed=0) == [0, 2, 4, 1, 2, 4, 1, 3]
    assert TQ(TQConfig()).sampling().indices(VideoInfo("v", 300, 25.0, 8, 8, "t")) == idx


def test_tq_spatial_fragments_splice_native_patches():
    video = torch.arange(2 * 64 * 64, dtype=torch.float32).reshape(1, 2, 64, 64).repeat(3, 1, 1, 1)
    out = spatial_fragments(video, fragments=4, fsize=8, aligned=2, generator=torch.Generator().manual_seed(0))
    assert out.shape == (3, 2, 32, 32)
    for i in range(4):
        for j in range(4):  # each 8x8 cell is a native-resolution patch from grid cell (i, j) of the frame
            patch = out[0, 0, 8 * i : 8 * i + 8, 8 * j : 8 * j + 8]
            top, left = divmod(int(patch[0, 0]), 64)
            assert 16 * i <= top <= 16 * i + 8 and 16 * j <= left <= 16 * j + 8
            assert torch.equal(patch, video[0, 0, top : top + 8, left : left + 8])
            assert torch.equal(
                out[0, 1, 8 * i : 8 * i + 8, 8 * j : 8 * j + 8], patch + 64 * 64
            )  # same offset over aligned frames
    small = spatial_fragments(torch.full((3, 2, 20, 30), 100.0), 4, 8, 2)  # upsampled to 32 on the short side
    # back to uint8 by truncation, as the official code: 100/255*255 may land on 99
    assert small.shape == (3, 2, 32, 32) and torch.all((small == 100) | (small == 99))


def test_tq_network_shapes_and_official_keys(tiny_weights):
    net = build_dover_technical("swin_t")
    keys = set(net.state_dict())
    for k in (
        "backbone.patch_embed.proj.weight",
        "backbone.patch_embed.norm.weight",
        "backbone.layers.0.blocks.1.attn.fragment_position_bias_table",
        "backbone.layers.2.blocks.5.attn.relative_position_bias_table",
        "backbone.layers.2.downsample.reduction.weight",
        "backbone.norm.weight",
        "head.fc_hid.weight",
        "head.fc_last.bias",
    ):
        assert k in keys, k
    assert "backbone.layers.3.blocks.0.attn.fragment_position_bias_table" not in keys  # stage 4: no fragment bias
    assert net.backbone.layers[2].blocks[5].attn.relative_position_bias_table.shape == (15 * 13 * 13, 12)
    assert net.head.fc_hid.weight.shape == (64, 768, 1, 1, 1)
    assert 27e6 < sum(p.numel() for p in net.parameters()) < 29e6  # Video Swin-T size
    tiny = build_dover_technical("tiny")
    out = tiny(torch.randn(2, 3, 8, 56, 56))
    assert out.shape == (2, 1, 4, 2, 2)  # (clips, 1, T/2, H/32, W/32)
    saved = torch.load(tiny_weights["tq"], weights_only=True)["state_dict"]
    assert "technical_backbone.layers.0.blocks.0.attn.qkv.weight" in saved and "technical_head.fc_hid.weight" in saved


def test_tq_score_is_dover_rescaling_of_the_mean_head_output(tiny_weights, monkeypatch):
    m = TQ(TQConfig(weights=tiny_weights["tq"], **TINY_TQ, batch_size=1))
    m.setup()
    clips = m.clips(frames(16))
    assert clips.shape == (2, 3, 8, 56, 56) and clips.dtype == torch.uint8  # mosaics on the 0-255 scale
    seen = []
    real_net = m.net
    monkeypatch.setattr(m, "net", lambda x: seen.append(x) or real_net(x))
    m.clip_outputs(clips)  # normalised with ImageNet mean/std (0-255 scale) before the network
    mean, std = torch.tensor([123.675, 116.28, 103.53]), torch.tensor([58.395, 57.12, 57.375])
    assert torch.allclose(seen[0][0, :, 0], (clips[0, :, 0].float() - mean[:, None, None]) / std[:, None, None])
    monkeypatch.setattr(m, "net", real_net)
    raw = m.raw_score(clips)
    m.cfg.batch_size = 2
    assert m.raw_score(clips) == pytest.approx(raw, abs=1e-5)  # batching does not change the score
    assert m.compute(frames(16)) == pytest.approx(100 / (1 + np.exp(-(raw - 0.1107) / 0.07355)), abs=1e-4)
    # hand-made network outputs: two clips of constant 0.1107 + 0.07355 and 0.1107 - 0.07355 -> mean 0.1107
    outs = iter([torch.full((1, 1, 4, 2, 2), 0.1107 + 0.07355), torch.full((1, 1, 4, 2, 2), 0.1107 - 0.07355)])
    monkeypatch.setattr(m, "net", lambda x: next(outs))
    m.cfg.batch_size = 1
    assert m.compute(frames(16)) == pytest.approx(50.0)
    assert technical_score(0.1107 + 0.07355, 0.1107, 0.07355) == pytest.approx(100 / (1 + np.exp(-1)))
    with pytest.raises(ValueError, match="needs 16 sampled frames"):
        m.compute(frames(10))


def test_tq_weights_missing_or_wrong(tiny_weights, tmp_path):
    assert "metrics.TQ.weights" in TQ.check_weights(TQConfig())[0]
    assert TQ.check_weights(TQConfig(weights=tiny_weights["tq"])) == []
    with pytest.raises(MissingWeightsError, match="metrics.TQ.weights"):
        TQ(TQConfig(weights=str(tmp_path / "DOVER_plus_plus.pth"))).setup()
    with pytest.raises(ValueError, match=r"metrics.TQ.weights=.*arch 'swin_t'.*shape|missing"):
        TQ(TQConfig(weights=tiny_weights["tq"])).setup()  # tiny weights, real arch
    bad = tmp_path / "bad.pth"
    bad.write_text("not a checkpoint")
    with pytest.raises(ValueError, match=r"metrics.TQ.weights=.*not a readable checkpoint"):
        TQ(TQConfig(weights=str(bad))).setup()


# ----------------------------------------------------------------------------- batching across cases


def payload_rows(items, metric):
    """Rows as the decode stage hands them to a pool: the metric's inputs pickled in ``frames_for_<metric>``."""
    from vbench_ray.metrics.pool import pack, payload_column

    return [{"case_id": str(k), payload_column(metric): pack(e, s, kw)} for k, (e, s, kw) in enumerate(items)]


def test_pool_payload_round_trip_keeps_frames_without_a_copy():
    import pickle

    from vbench_ray.metrics.pool import pack, unpack

    edited, mask = frames(4), np.zeros((2, 3), bool)
    source = frames(6)[:, ::2]  # not contiguous: travels inside the pickle
    blob = pack(edited, source, {"entities": ["red square"], "mask": mask})
    e, s, kw = unpack(blob)
    assert np.array_equal(e, edited) and np.array_equal(s, source) and kw["entities"] == ["red square"]
    assert np.array_equal(kw["mask"], mask) and kw["mask"].dtype == bool
    assert not e.flags.writeable and not e.flags.owndata  # a view on the row's bytes, not a copy
    assert unpack(pack(edited, None, {}))[1] is None
    old = pickle.dumps((edited, None, {}), protocol=5)  # a payload written as a plain pickle still reads
    assert np.array_equal(unpack(old)[0], edited)


def test_aes_cases_batched_score_as_one_by_one_and_a_bad_case_fails_alone(tiny_weights):
    from vbench_ray.metrics.pool import MetricPool

    pool = MetricPool(
        "AES", asdict(AESConfig(**tiny_weights["aes"], batch_size=4))
    )  # the real pool: config dict -> metric -> setup()
    # cases of different sizes and lengths share forward passes of 4 frames (a pass mixes cases)
    items = [(frames(7, 48, 64, 1), None, {}), (frames(3, 30, 40, 2), None, {}), (frames(5, 64, 48, 3), None, {})]
    alone = [pool.metric.compute(e) for e, _, _ in items]
    assert np.allclose(pool.metric.compute_many(items), alone, atol=1e-5)
    # a case without frames fails alone inside the batch; one that breaks the shared pass (float frames PIL cannot
    # resize) makes the pool score each case alone: either way the others keep their scores
    bad = [
        items[0],
        (np.zeros((0, 8, 8, 3), np.uint8), None, {}),
        items[1],
        (np.zeros((2, 8, 8, 3), np.float64), None, {}),
        items[2],
    ]
    out = pool(payload_rows(bad, "AES") + [{"case_id": "excluded"}])
    assert [sorted(o) for o in out] == [["AES"], ["error_AES"], ["AES"], ["error_AES"], ["AES"], []]
    assert np.allclose([out[0]["AES"], out[2]["AES"], out[4]["AES"]], alone, atol=1e-5)
    assert "at least one frame" in out[1]["error_AES"] and "TypeError" in out[3]["error_AES"]


def test_tq_cases_batched_score_as_one_by_one_and_a_bad_case_fails_alone(tiny_weights):
    from vbench_ray.metrics.pool import MetricPool

    pool = MetricPool(
        "TQ", asdict(TQConfig(weights=tiny_weights["tq"], **TINY_TQ, batch_size=3))
    )  # 3 clips: passes mix cases
    items = [(frames(16, 48, 64, k), None, {}) for k in range(3)] + [(frames(16, 20, 30, 9), None, {})]  # one upsampled
    alone = [pool.metric.compute(e) for e, _, _ in items]
    assert np.allclose(pool.metric.compute_many(items), alone, atol=1e-4)
    out = pool(payload_rows([items[0], (frames(10), None, {}), items[1]], "TQ"))
    assert np.allclose([out[0]["TQ"], out[2]["TQ"]], alone[:2], atol=1e-4)
    assert set(out[1]) == {"error_TQ"} and "needs 16 sampled frames" in out[1]["error_TQ"]


def test_pool_stages_are_batched_by_the_metric_pool_batch(tiny_weights, cove_data, tmp_path):
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.configure import load_config

    overrides = cove_overrides(
        cove_data, tmp_path / "run", "metrics.enabled=[SSIM,AES,TQ]", "metrics.TQ.pool_batch=2", "ray.batch_size=3"
    )
    stages = {s.name: s for s in CoveBench(load_config(REPO / "configs" / "cove.yaml", overrides)).stages()}
    assert stages["AES"].batched and stages["AES"].batch_size == AESConfig().pool_batch == 8
    assert stages["TQ"].batched and stages["TQ"].batch_size == 2
    assert stages["frames"].batch_size == 3 and not stages["frames"].batched
    with pytest.raises(ValueError, match="metrics.TQ.pool_batch"):
        CoveBench(load_config(REPO / "configs" / "cove.yaml", overrides + ["metrics.TQ.pool_batch=0"])).stages()


# ----------------------------------------------------------------------------- end to end


def test_cove_run_with_aes_and_tq(cove_data, ray_local, tiny_weights, tmp_path):
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    aes = tiny_weights["aes"]
    tq = ",".join(f"metrics.TQ.{k}={v}" for k, v in TINY_TQ.items()).split(",")
    overrides = cove_overrides(
        cove_data,
        tmp_path / "run",
        "metrics.enabled=[SSIM,AES,TQ]",
        f"metrics.AES.encoder={aes['encoder']}",
        f"metrics.AES.weights={aes['weights']}",
        "metrics.AES.batch_size=4",
        f"metrics.TQ.weights={tiny_weights['tq']}",
        *tq,
    )
    cfg = load_config(REPO / "configs" / "cove.yaml", overrides)
    result = run(cfg)
    out = tmp_path / "run"
    rows = pq.read_table(out / "cases").to_pylist()
    assert result.n_computed == 8 and len(rows) == 8
    for r in rows:
        assert r["error_AES"] is None and r["error_TQ"] is None, r
        assert np.isfinite(r["AES"]) and 0.0 <= r["TQ"] <= 100.0, r
    summary = json.loads((out / "summary.json").read_text())
    for m in ("SSIM", "AES", "TQ"):
        s = summary["metrics"][m]
        values = [r[m] for r in rows if r[m] is not None]
        assert s["value"] == pytest.approx(np.mean(values)) and s["ci95"][0] <= s["value"] <= s["ci95"][1]
    assert summary["metrics"]["AES"]["n"] == summary["metrics"]["TQ"]["n"] == 8
    assert summary["failures"]["count"] == 0


def test_weights_check_command_names_missing_and_unloadable_weights(cove_data, tiny_weights, tmp_path, capsys):
    """`vbench-ray weights check`: a missing path names its key; a file that does not load is named; good weights
    load and the command says so (issue 11: the same check as the start of `run`, plus an actual load)."""
    from helpers.common import cove_overrides
    from vbench_ray.cli import main

    base = [
        "weights",
        "check",
        "configs/cove.yaml",
        *cove_overrides(cove_data, tmp_path / "run", "metrics.enabled=[SSIM,TQ]", "metrics.TQ.arch=tiny"),
    ]
    assert main(base + [f"metrics.TQ.weights={tmp_path / 'nope.pth'}"]) == 2
    assert "metrics.TQ.weights" in capsys.readouterr().err
    broken = tmp_path / "broken.pth"
    broken.write_bytes(b"not a checkpoint")
    assert main(base + [f"metrics.TQ.weights={broken}"]) == 2
    assert "TQ" in capsys.readouterr().err
    assert main(base + [f"metrics.TQ.weights={tiny_weights['tq']}"]) == 0
    assert "TQ: loaded" in capsys.readouterr().out


def test_tq_decode_worker_hands_its_pool_mosaics_not_frames(tiny_weights):
    """The decode stage's payload for TQ is the fragment mosaics (cut on the CPU), a fraction of the frames' bytes,
    and the pool scores them as it scores the frames."""
    from vbench_ray.metrics.pool import MetricPool, payload_column
    from vbench_ray.metrics.stage import emit

    pool = MetricPool("TQ", asdict(TQConfig(weights=tiny_weights["tq"], **TINY_TQ, batch_size=3)))
    video = frames(16, 240, 320, 3)
    out: dict = {}
    emit(pool.metric, out, video, None, {})
    blob = out[payload_column("TQ")]
    assert len(blob) < video.nbytes / 20  # 2 clips x 8 frames of 56x56 mosaics (7 fragments of 8 px) vs 240x320
    scored = pool([{"case_id": "0", payload_column("TQ"): blob}])
    assert scored[0]["TQ"] == pytest.approx(pool.metric.compute(video), abs=1e-4)


def test_aes_decode_worker_resizes_to_the_tower_and_the_pool_scores_the_same(tiny_weights):
    """resize=pil: the decode stage hands the pool tower-size uint8 frames (PIL bicubic, as SigLIP's PIL processor);
    the pool's score equals resizing in the actor."""
    from vbench_ray.metrics.pool import MetricPool, pack, payload_column, unpack
    from vbench_ray.metrics.stage import emit

    pool = MetricPool("AES", asdict(AESConfig(**tiny_weights["aes"], batch_size=3)))
    video = frames(4, 120, 160, 5)
    out: dict = {}
    emit(pool.metric, out, video, None, {})
    edited, source, kwargs = unpack(out[payload_column("AES")])
    assert edited.shape == (4, 28, 28, 3) and edited.dtype == np.uint8 and kwargs == {"resized": True}
    scored = pool(
        [
            {"case_id": "0", payload_column("AES"): out[payload_column("AES")]},
            {"case_id": "1", payload_column("AES"): pack(video, None, {})},
        ]
    )  # one resized, one native
    assert scored[0]["AES"] == pytest.approx(pool.metric.compute(video), abs=1e-5)
    assert scored[1]["AES"] == pytest.approx(pool.metric.compute(video), abs=1e-5)
    torch_pool = MetricPool("AES", asdict(AESConfig(**tiny_weights["aes"], resize="torch")))
    out = {}
    emit(torch_pool.metric, out, video, None, {})
    assert unpack(out[payload_column("AES")])[0].shape == video.shape  # resize=torch: native frames to the device


def test_a_pool_actor_says_what_it_loads_and_how_long_it_took(tiny_weights, caplog):
    """The log line a pool's actor writes before and after its model load (Ray forwards it to the driver)."""
    import logging
    import os
    import re

    from vbench_ray.metrics.pool import MetricPool

    caplog.set_level(logging.INFO, logger="vbench_ray.metrics.pool")
    MetricPool("TQ", asdict(TQConfig(weights=tiny_weights["tq"], **TINY_TQ)))
    lines = [r.getMessage() for r in caplog.records if r.name == "vbench_ray.metrics.pool"]
    assert lines[0] == f"pool TQ (pid {os.getpid()}, device cpu): loading weights={tiny_weights['tq']}"
    assert re.fullmatch(rf"pool TQ \(pid {os.getpid()}\): loaded in \d+\.\d s", lines[1])
