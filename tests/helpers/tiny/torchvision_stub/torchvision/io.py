"""TEST-ONLY stand-in for ``torchvision.io``: just enough for ``from torchvision.io import ...`` to succeed.

Image decoding goes through PIL; video decoding is deliberately absent (torchvision >= 0.26 removed it too).
"""

from __future__ import annotations

import enum
import io as _io

import numpy as np
import torch


class ImageReadMode(enum.Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = 4


def decode_image(input, mode: ImageReadMode = ImageReadMode.UNCHANGED, apply_exif_orientation: bool = False):
    """Decode encoded image bytes (a uint8 tensor or bytes) or a file path to a uint8 ``(C, H, W)`` tensor."""
    from PIL import Image, ImageOps

    if isinstance(input, str):
        img = Image.open(input)
    else:
        data = bytes(input.numpy().tobytes()) if isinstance(input, torch.Tensor) else bytes(input)
        img = Image.open(_io.BytesIO(data))
    if apply_exif_orientation:
        img = ImageOps.exif_transpose(img)
    pil_mode = {
        ImageReadMode.GRAY: "L",
        ImageReadMode.GRAY_ALPHA: "LA",
        ImageReadMode.RGB: "RGB",
        ImageReadMode.RGB_ALPHA: "RGBA",
    }.get(mode)
    if pil_mode is not None:
        img = img.convert(pil_mode)
    arr = np.asarray(img)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return torch.from_numpy(arr.copy()).permute(2, 0, 1).contiguous()


def read_video(*args, **kwargs):
    raise NotImplementedError("the test-only torchvision stand-in has no video decoding (use PyAV/decord)")
