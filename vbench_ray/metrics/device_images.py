"""Transformers image processors and image encoders, run on the model's device (CoVEBench SRC's Grounding DINO and
DINOv2 inputs; any metric whose processor ``image_plan`` can read).

A processor prepares each image on the CPU: for a GPU pool that is the pool's one CPU resizing 720p frames while the
GPU waits (docs/performance.md). ``device_preprocess`` does the same resize, centre crop and
normalisation on the device from uint8 frames, following the loaded processor (``image_plan``); ``encoder_class``
wraps an image encoder so that a batch with repeated images runs each distinct image once, optionally in bf16.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable

import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# PIL resampling filters (the processors' ``resample``) whose torch interpolation both of transformers' processor
# backends match: torchvision's (``antialias=True``, the default) and PIL's (which always antialiases when it shrinks)
_TORCH_MODES = {2: "bilinear", 3: "bicubic"}
_SIZE_KEYS = ("shortest_edge", "longest_edge", "height", "width", "max_height", "max_width")


def image_plan(processor: Any) -> dict | None:
    """What a transformers image processor (or a processor holding one) does to an RGB uint8 image, read from the
    processor object, for ``device_preprocess``: ``None`` when it does something that function does not reproduce
    (another resampling filter, padding to a fixed size), so that the processor itself runs instead."""
    try:  # the size rules ``resized_hw`` calls (transformers' own)
        from transformers.image_transforms import get_resize_output_image_size, get_size_with_aspect_ratio  # noqa
        from transformers.image_utils import get_image_size_for_max_height_width  # noqa: F401
    except ImportError:
        return None
    p = getattr(processor, "image_processor", processor)
    get = functools.partial(getattr, p)
    resample = get("resample", None)
    value = getattr(resample, "value", resample)  # a PILImageResampling / int, or torchvision's InterpolationMode
    mode = value if value in ("bilinear", "bicubic") else _TORCH_MODES.get(value) if isinstance(value, int) else None
    size = get("size", None) or {}
    size = {k: (size.get(k) if isinstance(size, dict) else getattr(size, k, None)) for k in _SIZE_KEYS}
    crop = get("crop_size", None) or {}
    crop = tuple((crop.get(k) if isinstance(crop, dict) else getattr(crop, k, None)) for k in ("height", "width"))
    backend = getattr(p, "backend", None) or ("torchvision" if type(p).__name__.endswith("Fast") else "pil")
    plan = {
        "resize": bool(get("do_resize", False)),
        "mode": mode,
        "size": size,
        "two_pass": backend == "pil",
        "crop": crop if get("do_center_crop", False) else None,
        "rescale": float(get("rescale_factor", 1 / 255)) if get("do_rescale", False) else None,
        "mean": tuple(get("image_mean", IMAGENET_MEAN)) if get("do_normalize", False) else None,
        "std": tuple(get("image_std", IMAGENET_STD)) if get("do_normalize", False) else None,
    }
    if plan["resize"] and (mode is None or not any(size.values())):
        return None
    if plan["crop"] is not None and None in plan["crop"]:
        return None
    if get("do_pad", False) and get("pad_size", None) is not None:  # padding to the batch's largest is a no-op here
        return None
    return plan


def fixed_plan(height: int, width: int, mode: str, mean: tuple, std: tuple) -> dict:
    """A ``device_preprocess`` plan for a processor that resizes every image to ``height`` x ``width`` (no crop),
    rescales by 1/255 and normalises with ``mean`` / ``std`` (e.g. SigLIP's: bicubic to its square, 0.5 / 0.5)."""
    size = {k: None for k in _SIZE_KEYS} | {"height": int(height), "width": int(width)}
    return {
        "resize": True,
        "mode": mode,
        "size": size,
        "two_pass": False,
        "crop": None,
        "rescale": 1 / 255,
        "mean": tuple(mean),
        "std": tuple(std),
    }


def resized_hw(plan: dict, h: int, w: int) -> tuple[int, int]:
    """The processor's output size for an ``h`` x ``w`` image (transformers' own size functions, as its resize)."""
    from transformers.image_transforms import get_resize_output_image_size, get_size_with_aspect_ratio
    from transformers.image_utils import get_image_size_for_max_height_width

    s = plan["size"]
    if s["shortest_edge"] and s["longest_edge"]:
        return tuple(get_size_with_aspect_ratio((h, w), s["shortest_edge"], s["longest_edge"]))
    if s["shortest_edge"]:
        return tuple(
            get_resize_output_image_size(
                np.broadcast_to(np.uint8(0), (3, h, w)),
                size=s["shortest_edge"],
                default_to_square=False,
                input_data_format="channels_first",
            )
        )
    if s["max_height"] and s["max_width"]:
        return tuple(get_image_size_for_max_height_width((h, w), s["max_height"], s["max_width"]))
    return int(s["height"]), int(s["width"])


def device_preprocess(images, plan: dict):
    """uint8 ``(N, H, W, 3)`` images (a torch tensor, on any device) -> the processor's float32 ``(N, 3, h, w)``
    pixel values, computed there: resize with the processor's size rule and filter (torch's antialiased bilinear /
    bicubic: what torchvision's resize runs, in float32, then rounded back to uint8 levels as it resizes uint8 images
    to uint8; for a PIL-backend processor, PIL's two passes, width then height, each rounded to uint8), centre crop
    (zero-padded if the image is smaller, as torchvision's), rescale and normalise (fused as torchvision's:
    ``(x - mean / rescale) / (std / rescale)``). Against a torchvision processor (where torchvision is installed,
    as on GPU machines) the pixels are equal up to float rounding; against a PIL one, within a uint8 level or two."""
    torch = __import__("torch")
    import torch.nn.functional as F

    x = images.permute(0, 3, 1, 2).float().contiguous()
    if plan["resize"]:
        h, w = x.shape[-2:]
        size = resized_hw(plan, h, w)
        # torchvision: one pass in float; PIL: the width, then the height, each pass rounded to uint8 levels
        for step in [(h, size[1]), size] if plan["two_pass"] else [size]:
            if tuple(step) != tuple(x.shape[-2:]):
                x = F.interpolate(x, size=tuple(step), mode=plan["mode"], align_corners=False, antialias=True)
                x = x.clamp_(0, 255).round_()
    if plan["crop"] is not None:
        ch, cw = plan["crop"]
        h, w = x.shape[-2:]
        if ch > h or cw > w:
            left, top = max(0, (cw - w) // 2), max(0, (ch - h) // 2)
            x = F.pad(x, (left, max(0, (cw - w + 1) // 2), top, max(0, (ch - h + 1) // 2)))
            h, w = x.shape[-2:]
        top, left = int((h - ch) / 2.0), int((w - cw) / 2.0)
        x = x[..., top : top + ch, left : left + cw]
    mean, std, scale = plan["mean"], plan["std"], plan["rescale"]
    if mean is not None:
        mean = torch.tensor(mean, device=x.device) * (1.0 / scale if scale else 1.0)
        std = torch.tensor(std, device=x.device) * (1.0 / scale if scale else 1.0)
        x = (x - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)
    elif scale is not None:
        x = x * scale
    return x.contiguous()


def map_tensors(obj: Any, fn: Callable) -> Any:
    """``fn`` applied to every tensor of a model output (ModelOutput, tuple, list), in place for ModelOutputs."""
    torch = __import__("torch")
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(v, fn) for v in obj)
    if isinstance(obj, dict):  # transformers' ModelOutput is an OrderedDict whose keys are its attributes
        for k in list(obj.keys()):
            obj[k] = map_tensors(obj[k], fn)
    return obj


@functools.lru_cache(maxsize=None)
def encoder_class():
    """The ``ImageEncoder`` module class (built on first use: torch is imported lazily in this module)."""
    import torch

    class ImageEncoder(torch.nn.Module):
        """Wraps an image encoder: Grounding DINO's Swin backbone (``model.model.backbone.conv_encoder.model``) or
        SAM2's vision encoder. ``bf16``: its weights in bf16, run outside autocast on a bf16 input, its floating
        outputs back to float32 (what the model's next layers get under autocast). Inside ``unique(first,
        inverse)``, a call runs the encoder on its batch rows ``first`` only (the distinct images) and hands each
        row ``i`` the features of row ``first[inverse[i]]`` (``feature_maps``, what Grounding DINO reads): the
        backbone runs once per distinct frame although each frame is prompted with several entities."""

        def __init__(self, inner: torch.nn.Module, bf16: bool = False):
            super().__init__()
            self.inner = inner.to(torch.bfloat16) if bf16 else inner
            self.bf16 = bf16
            self.plan = None
            self.train(inner.training)

        @contextlib.contextmanager
        def unique(self, first, inverse):
            self.plan = (first, inverse) if len(first) < len(inverse) else None
            try:
                yield self
            finally:
                self.plan = None

        def forward(self, pixel_values, *args, **kwargs):
            plan = self.plan
            x = pixel_values.index_select(0, plan[0]) if plan is not None else pixel_values
            if self.bf16:
                with torch.autocast(x.device.type, enabled=False):
                    out = self.inner(x.to(torch.bfloat16), *args, **kwargs)
                out = map_tensors(out, lambda t: t.float() if t.is_floating_point() else t)
            else:
                out = self.inner(x, *args, **kwargs)
            if plan is not None:
                out.feature_maps = tuple(f.index_select(0, plan[1]) for f in out.feature_maps)
            return out

    return ImageEncoder
