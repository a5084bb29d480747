"""SSIM (CoVEBench App. F.3, Structural Fidelity): hand-computed cases and the metric class."""

import warnings

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from vbench_ray.metrics import build_metric
from vbench_ray.metrics.fidelity import SSIM, SSIMConfig, ssim_frames, ssim_video
from vbench_ray.video.flow import gray_resize

C1 = (0.01 * 255) ** 2  # skimage's K1 = 0.01 with data_range = 255


def constant_ssim(a: float, b: float) -> float:
    """SSIM of two constant images: variances and covariance vanish, leaving the luminance term."""
    return (2 * a * b + C1) / (a * a + b * b + C1)


def rgb_constant(values, h=32, w=40):
    """A video whose frame t is the constant gray value values[t] (RGB with equal channels)."""
    return np.stack([np.full((h, w, 3), v, np.uint8) for v in values])


def textured(seed, t=3, h=64, w=64):
    return np.random.default_rng(seed).integers(0, 256, size=(t, h, w, 3), dtype=np.uint8)


def test_identical_videos_score_one():
    video = textured(0, t=10, h=80, w=96)
    assert SSIM().compute(video, video) == pytest.approx(1.0)


def test_constant_offset_images_match_the_formula():
    a = np.full((1, 32, 32), 100, np.uint8)
    b = np.full((1, 32, 32), 120, np.uint8)
    # (2*100*120 + 6.5025) / (100^2 + 120^2 + 6.5025) = 24006.5025 / 24406.5025 = 0.983611
    assert ssim_video(a, b) == pytest.approx(constant_ssim(100, 120), abs=1e-9)
    assert ssim_video(a, b) == pytest.approx(0.983611, abs=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_data_range_is_255_for_float_frames_too(dtype):
    # levels 0..255 held as floats score as their uint8 copies: the range is fixed at 255 (App. F.3, the
    # official call), not inferred from the dtype (skimage cannot infer one for floats and raises)
    a = np.full((2, 16, 16), 100, dtype)
    b = np.stack([np.full((16, 16), 120, dtype), np.full((16, 16), 100, dtype)])
    # frame 0: 24006.5025 / 24406.5025 = 0.983611; frame 1: identical, 1
    assert ssim_frames(a, b).tolist() == pytest.approx([0.983611, 1.0], abs=1e-6)
    assert ssim_frames(a, b).dtype == np.float64
    assert ssim_video(a, b) == pytest.approx((0.983611 + 1.0) / 2, abs=1e-6)


def test_no_frame_pairs_give_nan_without_a_warning():
    empty = np.zeros((0, 16, 16), np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "Mean of empty slice" is not what a caller should see
        assert np.isnan(ssim_video(empty, empty))


def test_one_frame_pair_equals_skimage():
    src, edit = gray_resize(textured(1, t=1), 64), gray_resize(textured(2, t=1), 64)
    expected = structural_similarity(src[0], edit[0], data_range=255)
    assert ssim_frames(src, edit)[0] == pytest.approx(expected, abs=1e-12)


def test_video_score_is_the_mean_of_per_frame_values():
    src = rgb_constant([100, 50, 200])
    edit = rgb_constant([120, 50, 100])
    per_frame = [constant_ssim(100, 120), 1.0, constant_ssim(200, 100)]  # 0.983611, 1, 0.800026
    assert per_frame[2] == pytest.approx(40006.5025 / 50006.5025, abs=1e-12)  # 0.800026
    metric = SSIM(SSIMConfig(frames=3, size=16))
    assert metric.compute(edit, src) == pytest.approx(np.mean(per_frame), abs=1e-9)
    assert metric.compute(edit, src) == pytest.approx((0.983611 + 1.0 + 0.800026) / 3, abs=1e-6)


def test_native_resolutions_may_differ():
    # both videos are resized to size x size, so different native sizes still compare
    src = rgb_constant([90, 90], h=48, w=64)
    edit = rgb_constant([90, 90], h=30, w=30)
    assert SSIM(SSIMConfig(frames=2, size=16)).compute(edit, src) == pytest.approx(1.0)


def test_shorter_video_pairs_the_first_samples():
    # an edited video of 3 frames gives 3 samples, the source 4: frames 0..2 of each are paired (official)
    src = np.concatenate([textured(0, t=3), rgb_constant([0], h=64, w=64)])
    edit = textured(0, t=3)
    assert SSIM().compute(edit, src) == pytest.approx(1.0)


def test_missing_source_raises():
    with pytest.raises(ValueError, match="source"):
        SSIM().compute(textured(0), None)


def test_config_defaults_and_registry():
    metric = build_metric("SSIM")
    assert isinstance(metric, SSIM)
    assert metric.needs_source and metric.cfg.size == 224
    assert metric.sampling().n == 10
    assert SSIM(SSIMConfig(frames=4)).sampling().n == 4
