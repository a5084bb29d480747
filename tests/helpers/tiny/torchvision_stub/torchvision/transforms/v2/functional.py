"""TEST-ONLY stand-in for ``torchvision.transforms.v2.functional``: the same plain-torch functions as v1."""

from ..functional import (  # noqa: F401
    InterpolationMode,
    center_crop,
    crop,
    grayscale_to_rgb,
    normalize,
    pad,
    pil_to_tensor,
    resize,
    rgb_to_grayscale,
    to_dtype,
    to_image,
    to_pil_image,
    to_tensor,
)
