"""TEST-ONLY stand-in for ``torchvision.transforms.functional`` (see the package docstring).

Only tensors laid out ``(..., C, H, W)`` are handled (that is all transformers' torchvision backends pass), plus
PIL/numpy conversion helpers. Plain torch; no custom operators, so it works beside the CPU build of torch.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


# torch.nn.functional.interpolate has no box/hamming/lanczos kernels: use the closest it has.
_TORCH_MODE = {
    InterpolationMode.NEAREST: "nearest",
    InterpolationMode.NEAREST_EXACT: "nearest-exact",
    InterpolationMode.BILINEAR: "bilinear",
    InterpolationMode.BICUBIC: "bicubic",
    InterpolationMode.BOX: "area",
    InterpolationMode.HAMMING: "bilinear",
    InterpolationMode.LANCZOS: "bicubic",
}
# PIL.Image.Resampling integer codes, accepted by torchvision as well.
_PIL_CODES = {
    0: InterpolationMode.NEAREST,
    1: InterpolationMode.LANCZOS,
    2: InterpolationMode.BILINEAR,
    3: InterpolationMode.BICUBIC,
    4: InterpolationMode.BOX,
    5: InterpolationMode.HAMMING,
}


def _mode(interpolation) -> InterpolationMode:
    if isinstance(interpolation, InterpolationMode):
        return interpolation
    if isinstance(interpolation, str):
        return InterpolationMode(interpolation)
    return _PIL_CODES[int(interpolation)]


def _check_tensor(img) -> torch.Tensor:
    if not isinstance(img, torch.Tensor):
        raise TypeError(f"torchvision test stand-in: expected a torch.Tensor (..., C, H, W), got {type(img)}")
    if img.ndim < 2:
        raise ValueError(f"expected at least 2 dims (H, W), got shape {tuple(img.shape)}")
    return img


def _as_4d(img: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Flatten leading dims to (N, C, H, W); return the tensor and the shape to restore (without H, W)."""
    lead = tuple(img.shape[:-2])
    if img.ndim == 2:
        return img[None, None], lead
    return img.reshape(-1, img.shape[-3], img.shape[-2], img.shape[-1]), lead


def _output_size(h: int, w: int, size, max_size: int | None) -> tuple[int, int]:
    if isinstance(size, int) or (isinstance(size, Sequence) and len(size) == 1):
        s = size if isinstance(size, int) else size[0]
        short, long = (h, w) if h <= w else (w, h)
        new_short, new_long = s, int(s * long / short)
        if max_size is not None and new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_short, new_long) if h <= w else (new_long, new_short)
    oh, ow = size
    return int(oh), int(ow)


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    """Resize the last two dims with ``torch.nn.functional.interpolate``; uint8 in, uint8 out (rounded)."""
    img = _check_tensor(img)
    h, w = img.shape[-2:]
    oh, ow = _output_size(h, w, size, max_size)
    if (oh, ow) == (h, w):
        return img
    mode = _TORCH_MODE[_mode(interpolation)]
    x, lead = _as_4d(img)
    orig_dtype = x.dtype
    if not x.is_floating_point():
        x = x.to(torch.float32)
    kwargs = {}
    if mode in ("bilinear", "bicubic"):
        kwargs = {"align_corners": False, "antialias": bool(antialias)}
    y = F.interpolate(x, size=(oh, ow), mode=mode, **kwargs)
    if not orig_dtype.is_floating_point:
        info = torch.iinfo(orig_dtype)
        y = y.round_().clamp_(info.min, info.max).to(orig_dtype)
    elif y.dtype != orig_dtype:
        y = y.to(orig_dtype)
    return y.reshape(*lead, oh, ow)


def normalize(tensor, mean, std, inplace: bool = False):
    """``(tensor - mean) / std`` per channel, on a float tensor ``(..., C, H, W)``."""
    tensor = _check_tensor(tensor)
    if not tensor.is_floating_point():
        raise TypeError(f"normalize expects a float tensor, got {tensor.dtype}")
    mean = torch.as_tensor(mean, dtype=tensor.dtype, device=tensor.device).reshape(-1, 1, 1)
    std = torch.as_tensor(std, dtype=tensor.dtype, device=tensor.device).reshape(-1, 1, 1)
    if (std == 0).any():
        raise ValueError("std evaluated to zero, leading to division by zero")
    if inplace:
        return tensor.sub_(mean).div_(std)
    return (tensor - mean) / std


def _ltrb(padding) -> tuple[int, int, int, int]:
    if isinstance(padding, int):
        return padding, padding, padding, padding
    padding = [int(p) for p in padding]
    if len(padding) == 1:
        return padding[0], padding[0], padding[0], padding[0]
    if len(padding) == 2:  # left/right, top/bottom
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding[0], padding[1], padding[2], padding[3]
    raise ValueError(f"padding must be an int or a sequence of 1, 2 or 4 ints, got {padding}")


def pad(img, padding, fill=0, padding_mode: str = "constant"):
    """Pad the last two dims; ``padding`` follows torchvision (int, [lr, tb] or [left, top, right, bottom])."""
    img = _check_tensor(img)
    left, top, right, bottom = _ltrb(padding)
    torch_pad = (left, right, top, bottom)
    if padding_mode == "constant":
        fill = 0 if fill is None else fill
        if isinstance(fill, (list, tuple)):
            if len(set(fill)) != 1:
                raise NotImplementedError("torchvision test stand-in: per-channel fill is not supported")
            fill = fill[0]
        return F.pad(img, torch_pad, mode="constant", value=fill)
    mode = {"edge": "replicate", "reflect": "reflect", "circular": "circular"}.get(padding_mode)
    if mode is None:
        raise NotImplementedError(f"torchvision test stand-in: padding_mode={padding_mode!r} is not supported")
    x, lead = _as_4d(img)
    orig_dtype = x.dtype
    y = F.pad(x.to(torch.float32) if not x.is_floating_point() else x, torch_pad, mode=mode).to(orig_dtype)
    return y.reshape(*lead, y.shape[-2], y.shape[-1])


def crop(img, top: int, left: int, height: int, width: int):
    """Crop ``[top:top+height, left:left+width]``; regions outside the image are zero-padded (as torchvision)."""
    img = _check_tensor(img)
    h, w = img.shape[-2:]
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        pads = (max(-left, 0), max(-top, 0), max(right - w, 0), max(bottom - h, 0))
        img = pad(img, list(pads), fill=0)
        top, left = max(top, 0), max(left, 0)
    return img[..., top : top + height, left : left + width]


def center_crop(img, output_size):
    img = _check_tensor(img)
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    elif len(output_size) == 1:
        output_size = (output_size[0], output_size[0])
    ch, cw = int(output_size[0]), int(output_size[1])
    h, w = img.shape[-2:]
    return crop(img, int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0)), ch, cw)


def grayscale_to_rgb(img):
    """Repeat a single channel three times; images with other channel counts come back unchanged."""
    img = _check_tensor(img)
    if img.ndim >= 3 and img.shape[-3] == 1:
        return img.expand(*img.shape[:-3], 3, *img.shape[-2:]).clone()
    return img


def rgb_to_grayscale(img, num_output_channels: int = 1):
    img = _check_tensor(img)
    orig_dtype = img.dtype
    r, g, b = img.to(torch.float32).unbind(dim=-3)
    gray = (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(-3)
    if not orig_dtype.is_floating_point:
        gray = gray.round_()
    gray = gray.to(orig_dtype)
    return gray.expand(*gray.shape[:-3], num_output_channels, *gray.shape[-2:]).clone()


def _max_value(dtype: torch.dtype) -> float:
    if dtype == torch.bool:
        return 1
    if dtype.is_floating_point:
        return 1.0
    return torch.iinfo(dtype).max


def to_dtype(inpt, dtype: torch.dtype = torch.float32, scale: bool = False):
    """Convert dtype; with ``scale`` map value ranges (ints: 0..max, floats: 0..1) as torchvision does."""
    inpt = _check_tensor(inpt)
    if inpt.dtype == dtype:
        return inpt
    if not scale:
        return inpt.to(dtype)
    src_float, dst_float = inpt.dtype.is_floating_point, dtype.is_floating_point
    if src_float and dst_float:
        return inpt.to(dtype)
    if src_float:  # float [0, 1] -> int [0, max]
        return inpt.mul(_max_value(dtype)).round_().clamp_(0, _max_value(dtype)).to(dtype)
    if dst_float:  # int [0, max] -> float [0, 1]
        return inpt.to(dtype).div_(_max_value(inpt.dtype))
    # int -> int: rescale by the ratio of maxima
    return (inpt.to(torch.float64) * (_max_value(dtype) / _max_value(inpt.dtype))).round_().to(dtype)


def pil_to_tensor(pic):
    """PIL image -> uint8 tensor ``(C, H, W)`` without scaling."""
    arr = np.array(pic, copy=True)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return torch.from_numpy(arr).permute(2, 0, 1).contiguous()


def to_image(inpt):
    """PIL image or numpy ``(H, W, C)`` array -> tensor ``(C, H, W)`` (dtype kept); tensors pass through."""
    if isinstance(inpt, torch.Tensor):
        return inpt
    if isinstance(inpt, np.ndarray):
        arr = inpt[:, :, None] if inpt.ndim == 2 else inpt
        return torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).contiguous()
    return pil_to_tensor(inpt)


def to_tensor(pic):
    """PIL image or numpy ``(H, W, C)`` array -> float tensor ``(C, H, W)``; uint8 scaled to [0, 1]."""
    t = to_image(pic)
    if t.dtype == torch.uint8:
        return t.to(torch.float32).div_(255)
    return t.to(torch.float32) if not t.is_floating_point() else t


def to_pil_image(pic, mode=None):
    from PIL import Image

    if isinstance(pic, torch.Tensor):
        t = pic.detach().cpu()
        if t.is_floating_point():
            t = t.mul(255).round_().clamp_(0, 255).to(torch.uint8)
        arr = t.permute(1, 2, 0).numpy() if t.ndim == 3 else t.numpy()
    else:
        arr = np.asarray(pic)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    return Image.fromarray(arr, mode=mode) if mode else Image.fromarray(arr)
