"""NRVBench conventional metrics (Table 3, App. E.5 scales) against scikit-image and hand computation on
constructed pairs; learned metrics (LPIPS, CLIP, DINO) with random weights: formula, plumbing, loading."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skimage.metrics import mean_squared_error, peak_signal_noise_ratio, structural_similarity

from helpers.common import moving_square_video
from vbench_ray.metrics.base import MissingWeightsError
from vbench_ray.metrics import background as BG
from vbench_ray.metrics import niqe as NQ
from vbench_ray.metrics import motion_score as MS
from vbench_ray.metrics.clip import (
    CLIPConfig,
    CLIPDirectional,
    CLIPScore,
    _features,
    build_tiny_clip,
    clip_embeddings,
    clip_pixels,
    load_clip,
)
from vbench_ray.metrics.lpips import (
    BackgroundLPIPS,
    LPIPSConfig,
    _to_tensor,
    build_backbone,
    load_lpips,
    save_random_lpips,
)
from vbench_ray.metrics.struct_dist import StructDist, StructDistConfig, save_random_dino


def _pair(seed=0, t=3, h=32, w=40):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, (t, h, w, 3), dtype=np.uint8)
    edit = np.clip(src.astype(int) + rng.integers(-40, 41, src.shape), 0, 255).astype(np.uint8)
    return src, edit


def _bg_cfg(**kw):
    return BG.BackgroundConfig(**kw)


# ----------------------------------------------------------------------------- background preservation


def test_unmasked_metrics_equal_scikit_image():
    src, edit = _pair()
    s, e = src / 255.0, edit / 255.0
    mse = np.mean([mean_squared_error(a, b) for a, b in zip(s, e)])
    psnr = np.mean([peak_signal_noise_ratio(a, b, data_range=1.0) for a, b in zip(s, e)])
    ssim = np.mean([structural_similarity(a, b, channel_axis=-1, data_range=1.0) for a, b in zip(s, e)])
    assert BG.BackgroundMSE(_bg_cfg()).compute(edit, src) == pytest.approx(1e4 * mse, rel=1e-10)
    assert BG.BackgroundPSNR(_bg_cfg()).compute(edit, src) == pytest.approx(psnr, rel=1e-10)
    assert BG.BackgroundSSIM(_bg_cfg()).compute(edit, src) == pytest.approx(100 * ssim, rel=1e-10)
    empty = np.zeros(src.shape[:3], bool)  # an empty mask: the whole frame is background
    assert BG.BackgroundSSIM(_bg_cfg()).compute(edit, src, empty) == pytest.approx(100 * ssim, rel=1e-10)
    assert BG.BackgroundPSNR(_bg_cfg()).compute(edit, src, empty) == pytest.approx(psnr, rel=1e-10)


def test_masked_mse_and_psnr_by_hand():
    src = np.zeros((2, 10, 10, 3), np.uint8)
    edit = src.copy()
    edit[:, :, :5] = 51  # left half: 0.2 on every channel (the edited region)
    edit[:, :, 5:] = 255 // 10 * 1  # right half: 25/255 on every channel (background change)
    mask = np.zeros((2, 10, 10), bool)
    mask[:, :, :5] = True
    bg = (25 / 255) ** 2  # MSE over background pixels only
    assert BG.BackgroundMSE(_bg_cfg()).compute(edit, src, mask) == pytest.approx(1e4 * bg)
    assert BG.BackgroundPSNR(_bg_cfg()).compute(edit, src, mask) == pytest.approx(10 * math.log10(1 / bg))
    # zero mode (PIE-Bench style): the masked half counts as identical, diluting the error
    assert BG.BackgroundMSE(_bg_cfg(background="zero")).compute(edit, src, mask) == pytest.approx(1e4 * bg / 2)
    # no mask: the edited half counts too
    assert BG.BackgroundMSE(_bg_cfg()).compute(edit, src) == pytest.approx(1e4 * (0.2**2 + bg) / 2)


def test_changes_inside_the_mask_do_not_count():
    src, _ = _pair(t=2, h=40, w=40)
    edit = src.copy()
    edit[:, 15:25, 15:25] = 255 - edit[:, 15:25, 15:25]
    mask = np.zeros(src.shape[:3], bool)
    mask[:, 12:28, 12:28] = True  # 3 px beyond the change: no SSIM window centred outside sees it
    assert BG.BackgroundMSE(_bg_cfg()).compute(edit, src, mask) == 0.0
    assert BG.BackgroundPSNR(_bg_cfg()).compute(edit, src, mask) == math.inf  # the paper's "Reference source" row
    assert BG.BackgroundSSIM(_bg_cfg()).compute(edit, src, mask) == pytest.approx(100.0)
    assert BG.BackgroundSSIM(_bg_cfg()).compute(edit, src) < 95.0
    # the masked SSIM is scikit-image's SSIM map averaged over background pixels of its own interior
    _, smap = structural_similarity(src[0] / 255, edit[0] / 255, channel_axis=-1, data_range=1.0, full=True)
    keep = ~mask[0][3:-3, 3:-3]
    assert BG.masked_ssim_frames(src[:1], edit[:1], mask[:1])[0] == pytest.approx(
        smap.mean(-1)[3:-3, 3:-3][keep].mean()
    )


def test_zero_mode_matches_scikit_image_on_zeroed_frames():
    src, edit = _pair(t=1, h=24, w=24)
    mask = np.zeros(src.shape[:3], bool)
    mask[:, 5:15, 5:15] = True
    keep = (~mask[0])[..., None]
    expected = structural_similarity(src[0] / 255 * keep, edit[0] / 255 * keep, channel_axis=-1, data_range=1.0)
    assert BG.BackgroundSSIM(_bg_cfg(background="zero")).compute(edit, src, mask) == pytest.approx(100 * expected)


def test_frames_without_background_are_left_out_and_all_masked_is_nan():
    src, edit = _pair(t=2, h=16, w=16)
    mask = np.zeros(src.shape[:3], bool)
    mask[0] = True  # frame 0 entirely edit region
    expected = 1e4 * mean_squared_error(src[1] / 255, edit[1] / 255)
    assert BG.BackgroundMSE(_bg_cfg()).compute(edit, src, mask) == pytest.approx(expected)
    assert math.isnan(BG.BackgroundMSE(_bg_cfg()).compute(edit, src, np.ones(src.shape[:3], bool)))
    with pytest.raises(ValueError, match="does not match"):
        BG.BackgroundMSE(_bg_cfg()).compute(edit, src, np.zeros((2, 8, 8), bool))


def test_sampling_defaults_every_frame():
    from vbench_ray.video.io import VideoInfo

    info = VideoInfo("x", 7, 10.0, 8, 8, "pyav")
    assert BG.BackgroundPSNR(_bg_cfg()).sampling().indices(info) == list(range(7))
    assert BG.BackgroundPSNR(_bg_cfg(frames=3)).sampling().indices(info) == [0, 3, 6]


# ----------------------------------------------------------------------------- NIQE and motion


def test_ggd_and_aggd_fits_recover_known_shapes():
    rng = np.random.default_rng(0)
    alpha, var = NQ.ggd_fit(rng.normal(0, 2.0, 200_000))
    assert alpha == pytest.approx(2.0, abs=0.05) and var == pytest.approx(4.0, rel=0.02)
    assert NQ.ggd_fit(rng.laplace(0, 1.0, 200_000))[0] == pytest.approx(1.0, abs=0.05)
    a, eta, left, right = NQ.aggd_fit(rng.normal(0, 1.0, 200_000))
    assert a == pytest.approx(2.0, abs=0.1) and abs(eta) < 0.02 and left == pytest.approx(right, rel=0.02)


def test_niqe_model_fit_score_and_metric(tmp_path):
    rng = np.random.default_rng(1)
    import cv2

    natural = [cv2.GaussianBlur(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8), (0, 0), 1.5) for _ in range(4)]
    mu, cov = NQ.fit_niqe_model(natural, patch=32, sharpness=0.0)
    assert mu.shape == (36,) and cov.shape == (36, 36)
    path = NQ.save_niqe_model(tmp_path / "niqe.npz", mu, cov, 32)
    metric = NQ.NIQE(NQ.NIQEConfig(model=str(path), patch_size=32, frames=2))
    metric.setup()
    clean = np.stack(natural[:2])
    noisy = np.clip(clean.astype(int) + rng.normal(0, 40, clean.shape), 0, 255).astype(np.uint8)
    q_clean, q_noisy = metric.compute(clean), metric.compute(noisy)
    assert np.isfinite(q_clean) and q_noisy > q_clean  # noise moves the statistics away from the model
    assert metric.compute(clean) == q_clean  # deterministic
    with pytest.raises(MissingWeightsError, match="metrics.NIQE.model"):
        NQ.NIQE(NQ.NIQEConfig()).setup()
    with pytest.raises(ValueError, match="at least 96x96"):
        NQ.niqe_features(np.zeros((50, 50)), 96)


def test_motion_score():
    moving = moving_square_video(t=6, h=64, w=64, step=2)
    static = np.repeat(moving[:1], 6, axis=0)
    m = MS.MotionScore(MS.MotionScoreConfig(size=64))
    assert m.compute(static) == pytest.approx(0.0, abs=0.01)  # Farneback's numerical floor
    assert m.compute(moving) > 10 * m.compute(static) and m.compute(moving) > 0.05
    assert math.isnan(m.compute(moving[:1]))


# ----------------------------------------------------------------------------- LPIPS


def test_lpips_backbones_follow_the_torchvision_layouts():
    feats, taps, channels = build_backbone("vgg16")
    assert taps == [3, 8, 15, 22, 29] and channels == [64, 128, 256, 512, 512] and len(feats) == 30
    feats, taps, channels = build_backbone("alex")
    assert taps == [1, 4, 7, 9, 11] and channels == [64, 192, 384, 256, 256]
    assert feats[0].kernel_size == (11, 11) and feats[0].stride == (4, 4)


@pytest.fixture(scope="module")
def lpips_file(tmp_path_factory):
    return save_random_lpips(tmp_path_factory.mktemp("lpips") / "tiny.pth", "tiny", seed=0)


def test_lpips_formula_by_hand(lpips_file):
    import torch

    net = load_lpips("tiny", weights=str(lpips_file))
    src, edit = _pair(t=2, h=32, w=32)
    x, y = _to_tensor(src, "cpu"), _to_tensor(edit, "cpu")
    with torch.no_grad():
        fx, fy = net.tapped(x), net.tapped(y)
        expected = 0.0
        for k, (a, b) in enumerate(zip(fx, fy)):
            a, b = a.numpy(), b.numpy()
            na = a / (np.sqrt((a**2).sum(1, keepdims=True)) + 1e-10)
            nb = b / (np.sqrt((b**2).sum(1, keepdims=True)) + 1e-10)
            w = net.lins[k].weight.numpy().reshape(1, -1, 1, 1)
            expected = expected + ((na - nb) ** 2 * w).sum(1).mean(axis=(1, 2))
        got = net(x, y).numpy()
        assert got == pytest.approx(expected, rel=1e-5)
        assert net(x, x).numpy() == pytest.approx([0.0, 0.0], abs=1e-7)
        assert net(y, x).numpy() == pytest.approx(got, rel=1e-6)
        ones = torch.ones(2, 1, 32, 32)
        assert net(x, y, ones).numpy() == pytest.approx(got, rel=1e-5)  # all background = the plain formula
    metric = BackgroundLPIPS(LPIPSConfig(arch="tiny", weights=str(lpips_file), frames=None))
    assert metric.compute(edit, src) == pytest.approx(1e3 * got.mean(), rel=1e-5)
    mask = np.zeros(src.shape[:3], bool)
    mask[:, :16] = True
    assert metric.compute(edit, src, mask) != pytest.approx(metric.compute(edit, src))
    assert math.isnan(metric.compute(edit, src, np.ones(src.shape[:3], bool)))


def test_lpips_loads_published_file_layouts(lpips_file, tmp_path):
    """torchvision-style ``features.*`` backbone + LPIPS-style ``lin<k>.model.1.weight`` give the same net."""
    import torch

    state = torch.load(lpips_file, weights_only=True)
    torch.save(
        {k: v for k, v in state.items() if k.startswith("features.")} | {"classifier.0.weight": torch.zeros(1)},
        tmp_path / "backbone.pth",
    )
    torch.save(
        {f"lin{k[len('lins.') :].split('.')[0]}.model.1.weight": v for k, v in state.items() if k.startswith("lins.")},
        tmp_path / "lin.pth",
    )
    a = load_lpips("tiny", weights=str(lpips_file))
    b = load_lpips("tiny", backbone_weights=str(tmp_path / "backbone.pth"), lin_weights=str(tmp_path / "lin.pth"))
    src, edit = _pair(t=1, h=32, w=32)
    with torch.no_grad():
        assert b(_to_tensor(src, "cpu"), _to_tensor(edit, "cpu")).item() == pytest.approx(
            a(_to_tensor(src, "cpu"), _to_tensor(edit, "cpu")).item()
        )
    with pytest.raises(MissingWeightsError, match="metrics.BG_LPIPS.backbone_weights"):
        load_lpips("vgg16")


# ----------------------------------------------------------------------------- CLIP


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip", seed=0)


def test_clip_scores_by_hand(tiny_clip):
    import torch

    src, edit = _pair(t=2, h=40, w=48)
    texts = {"source_prompt": "a flag hangs", "target_prompt": "a flag flaps in the wind"}
    clip_s = CLIPScore(CLIPConfig(model=str(tiny_clip)))
    value = clip_s.compute(edit, None, texts=texts)
    model, tok, size, mean, std = load_clip(str(tiny_clip))
    with torch.no_grad():
        pix = torch.from_numpy(clip_pixels(edit, size, mean, std))
        img = _features(model.get_image_features(pixel_values=pix))
        t = tok([texts["target_prompt"]], return_tensors="pt", padding=True)
        txt = _features(model.get_text_features(**t))
        cos = torch.nn.functional.cosine_similarity(img, txt, dim=-1)
    assert value == pytest.approx(100 * cos.mean().item(), rel=1e-5) and -100 <= value <= 100
    clip_e = CLIPDirectional(CLIPConfig(model=str(tiny_clip)))
    assert clip_e.compute(src, src, texts=texts) == 0.0  # no image edit direction
    d = clip_e.compute(edit, src, texts=texts)
    img_e, txts = clip_embeddings(load_clip(str(tiny_clip)), edit, [texts["target_prompt"], texts["source_prompt"]])
    img_s, _ = clip_embeddings(load_clip(str(tiny_clip)), src)
    di, dt = (img_e - img_s).numpy(), (txts[0] - txts[1]).numpy()
    by_hand = np.mean([(v @ dt) / (np.linalg.norm(v) * np.linalg.norm(dt)) for v in di])
    assert d == pytest.approx(100 * by_hand, rel=1e-4, abs=1e-4)
    assert load_clip(str(tiny_clip)) is load_clip(str(tiny_clip))  # one model per worker process
    with pytest.raises(ValueError, match="target prompt"):
        clip_s.compute(edit, None, texts={})


# ----------------------------------------------------------------------------- DINO structure distance


def test_struct_dist_by_hand(tmp_path):
    import torch

    cfg = StructDistConfig(patch_size=8, dim=32, depth=2, heads=2, image_size=32, frames=None)
    cfg.weights = str(save_random_dino(tmp_path / "vit.pth", cfg, seed=0))
    metric = StructDist(cfg)
    src, edit = _pair(t=2, h=40, w=40)
    assert metric.compute(src, src) == pytest.approx(0.0, abs=1e-9)
    value = metric.compute(edit, src)
    with torch.no_grad():
        ks = metric.net.keys(metric._pixels(src), -1)
        ke = metric.net.keys(metric._pixels(edit), -1)
    assert ks.shape == (2, 1 + 16, 32)  # CLS + 4x4 patches, heads concatenated
    ssm = lambda k: np.stack(
        [
            (a / np.linalg.norm(a, axis=1, keepdims=True)) @ (a / np.linalg.norm(a, axis=1, keepdims=True)).T  # noqa: E731
            for a in k.numpy()
        ]
    )
    assert np.allclose(np.diagonal(ssm(ks), axis1=1, axis2=2), 1.0, atol=1e-5)
    assert value == pytest.approx(1e3 * ((ssm(ks) - ssm(ke)) ** 2).mean(axis=(1, 2)).mean(), rel=1e-4)
    assert value > 0
    # a checkpoint for another grid size: positional embeddings are interpolated
    big = StructDistConfig(patch_size=8, dim=32, depth=2, heads=2, image_size=48, weights=cfg.weights)
    assert np.isfinite(StructDist(big).compute(edit, src))
    with pytest.raises(MissingWeightsError, match="metrics.StructDist.weights"):
        StructDist(StructDistConfig()).setup()
