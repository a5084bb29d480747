"""Perturbations match OpenCV applied directly with ViDiC App. E.4's parameters."""

import cv2
import numpy as np
import pytest

from helpers.common import moving_square_video
from vbench_ray.video.perturb import Perturbation

FRAMES = moving_square_video(t=4, h=48, w=64)


def test_noise_is_seeded_gaussian_with_the_given_sigma():
    out = Perturbation.parse("noise:30").apply(FRAMES)
    again = Perturbation.parse("noise:30").apply(FRAMES)
    assert np.array_equal(out, again)  # seed 42: identical for every video of the variant
    rng = np.random.default_rng(42)
    expected0 = np.clip(
        np.rint(FRAMES[0].astype(np.float32) + rng.normal(0, 30, FRAMES[0].shape).astype(np.float32)), 0, 255
    )
    assert np.array_equal(out[0], expected0.astype(np.uint8))
    diff = out.astype(float) - FRAMES.astype(float)
    mid = (FRAMES > 60) & (FRAMES < 195)  # away from clipping
    assert diff[mid].std() == pytest.approx(30, rel=0.05)


@pytest.mark.parametrize("k", [5, 9, 15])
def test_blur_is_opencv_gaussian_with_derived_sigma(k):
    out = Perturbation.parse(f"blur:{k}").apply(FRAMES)
    sigma = 0.3 * ((k - 1) * 0.5 - 1) + 0.8  # OpenCV's rule for sigmaX=0
    for t in range(len(FRAMES)):
        assert np.array_equal(out[t], cv2.GaussianBlur(FRAMES[t], (k, k), 0))
        assert (
            np.abs(out[t].astype(int) - cv2.GaussianBlur(FRAMES[t], (k, k), sigma).astype(int)).mean() < 0.5
        )  # k<=7: OpenCV's fixed tables


@pytest.mark.parametrize("factor", [0.75, 0.5, 0.25])
def test_saturation_scales_the_hsv_s_channel(factor):
    out = Perturbation.parse(f"saturation:{factor}").apply(FRAMES)
    hsv_in = cv2.cvtColor(FRAMES[0], cv2.COLOR_RGB2HSV)
    hsv_out = cv2.cvtColor(out[0], cv2.COLOR_RGB2HSV)
    # the round trip through RGB moves S by a few levels at most; H and V stay
    assert np.abs(hsv_out[..., 1].astype(float) - hsv_in[..., 1] * factor).mean() < 2.0
    assert np.abs(hsv_out[..., 2].astype(int) - hsv_in[..., 2]).max() <= 2


def test_resize_short_side_keeps_aspect_and_even_sizes():
    out = Perturbation.parse("resize:24").apply(FRAMES)
    assert out.shape == (4, 24, 32, 3)
    assert Perturbation.parse("resize:37").apply(FRAMES).shape[1:3] == (38, 50)


def test_bad_specs_are_rejected():
    for bad in ("noise", "blur:4", "zoom:2", "noise:-1"):
        with pytest.raises(ValueError):
            Perturbation.parse(bad)
    assert Perturbation.parse("saturation:0.50").spec == "saturation:0.5"
