"""Background LPIPS (``BG_LPIPS``), a model-backed conventional metric of NRVBench (paper, Table 3,
App. E.5). It loads **local** weights only (config keys below; no downloads) and can be built with random
weights for tests (``save_random_lpips``: plumbing, shapes and determinism, never accuracy).

**LPIPS** (Zhang et al. 2018), reported x 10^3 over the background. Our own torch module, built from a
layer spec (no torchvision): ``arch`` = ``vgg16`` | ``alex`` | ``tiny``. Images in [0, 1] go to [-1, 1],
then through LPIPS's fixed scaling layer ``(x - shift) / scale``, then the backbone; at each tapped layer
``l`` the features are unit-normalised over channels, their squared difference is weighted per channel by
the non-negative 1x1 ``lin_l`` and averaged over space; the layers' values are summed:

    LPIPS(x, y) = sum_l mean_{h,w} ( w_l . (f_l(x)/|f_l(x)| - f_l(y)/|f_l(y)|)^2 )

Background version: the spatial mean becomes a weighted mean whose weights are the background fraction of
each feature cell (the mask area-downsampled to the layer's size); with no mask it is exactly the formula
above. The backbone's ``features.<i>`` parameters use torchvision's ``vgg16().features`` /
``alexnet().features`` indices, so ``backbone_weights`` may be torchvision's ImageNet state dict file;
``lin_weights`` may be the LPIPS v0.1 linear-layer file (keys ``lin<k>.model.1.weight``); or ``weights``
one state dict of this module (``features.*`` and ``lins.*``, what ``save_random_lpips`` writes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np

from vbench_ray.metrics.base import FrameMetric, _torch, register_metric, require_weights, weights_problem
from vbench_ray.metrics.background import background_of

# VGG-style specs: an int is conv3x3(pad 1) + ReLU, "M" a 2x2 max-pool; taps are the ReLUs before each pool
# and the last one (LPIPS's relu1_2, relu2_2, relu3_3, relu4_3, relu5_3 for vgg16).
VGG_SPECS = {
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512],
    "tiny": [8, "M", 16, "M", 32],
}
# AlexNet (torchvision layout): (out, kernel, stride, padding) convs, "M" = maxpool(3, 2); taps: every ReLU.
ALEX_SPEC = [(64, 11, 4, 2), "M", (192, 5, 1, 2), "M", (384, 3, 1, 1), (256, 3, 1, 1), (256, 3, 1, 1)]
LPIPS_ARCHS = ("vgg16", "alex", "tiny")
# LPIPS's fixed input scaling (applied to images in [-1, 1]).
LPIPS_SHIFT = (-0.030, -0.088, -0.188)
LPIPS_SCALE = (0.458, 0.448, 0.450)


def build_backbone(arch: str):
    """``(features: nn.Sequential, taps: list[int], channels: list[int])`` for a named spec."""
    nn = _torch().nn
    layers, taps, channels = [], [], []
    if arch == "alex":
        c_in = 3
        for item in ALEX_SPEC:
            if item == "M":
                layers.append(nn.MaxPool2d(3, 2))
                continue
            out, k, s, p = item
            layers += [nn.Conv2d(c_in, out, k, s, p), nn.ReLU(inplace=False)]
            taps.append(len(layers) - 1)
            channels.append(out)
            c_in = out
        return nn.Sequential(*layers), taps, channels
    if arch not in VGG_SPECS:
        raise ValueError(f"LPIPS arch must be one of {LPIPS_ARCHS}, got {arch!r}")
    c_in = 3
    spec = VGG_SPECS[arch]
    for i, item in enumerate(spec):
        if item == "M":
            taps.append(len(layers) - 1)
            channels.append(c_in)
            layers.append(nn.MaxPool2d(2, 2))
            continue
        layers += [nn.Conv2d(c_in, item, 3, 1, 1), nn.ReLU(inplace=False)]
        c_in = item
    taps.append(len(layers) - 1)
    channels.append(c_in)
    return nn.Sequential(*layers), taps, channels


def _lpips_module(arch: str):
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class LPIPSNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features, self.taps, channels = build_backbone(arch)
            self.lins = nn.ModuleList(nn.Conv2d(c, 1, 1, bias=False) for c in channels)
            self.register_buffer("shift", torch.tensor(LPIPS_SHIFT).view(1, 3, 1, 1))
            self.register_buffer("scale", torch.tensor(LPIPS_SCALE).view(1, 3, 1, 1))

        def tapped(self, x):
            x = ((x * 2.0 - 1.0) - self.shift) / self.scale
            outs, last = [], max(self.taps)
            for i, layer in enumerate(self.features):
                x = layer(x)
                if i in self.taps:
                    outs.append(x)
                if i == last:
                    break
            return outs

        def forward(self, x, y, weight=None):
            """``x, y``: float ``(N, 3, H, W)`` in [0, 1]; ``weight``: ``(N, 1, H, W)`` background weights."""
            total = 0.0
            for lin, fx, fy in zip(self.lins, self.tapped(x), self.tapped(y)):
                nx = fx / (fx.pow(2).sum(dim=1, keepdim=True).sqrt() + 1e-10)
                ny = fy / (fy.pow(2).sum(dim=1, keepdim=True).sqrt() + 1e-10)
                d = lin((nx - ny) ** 2)  # (N, 1, h, w)
                if weight is None:
                    total = total + d.mean(dim=(1, 2, 3))
                else:
                    w = F.interpolate(weight, size=d.shape[-2:], mode="area")
                    total = total + (d * w).sum(dim=(1, 2, 3)) / w.sum(dim=(1, 2, 3))
            return total

    return LPIPSNet()


def load_lpips(
    arch: str,
    weights: str | None = None,
    backbone_weights: str | None = None,
    lin_weights: str | None = None,
    device: str = "cpu",
):
    """The LPIPS module with local weights (see the module docstring for the three file layouts)."""
    torch = _torch()
    net = _lpips_module(arch)
    if weights:
        state = torch.load(
            str(require_weights(weights, "metrics.BG_LPIPS.weights", "LPIPS weights")),
            map_location="cpu",
            weights_only=True,
        )
        state = {k: v for k, v in state.items() if not k.startswith(("shift", "scale"))}
        net.load_state_dict(state, strict=False)
        missing = [k for k in net.state_dict() if k not in state and k not in ("shift", "scale")]
        if missing:
            raise ValueError(f"metrics.BG_LPIPS.weights={weights}: missing parameters {missing[:4]} for arch {arch!r}")
    else:
        bb = require_weights(backbone_weights, "metrics.BG_LPIPS.backbone_weights", "LPIPS backbone weights")
        ln = require_weights(lin_weights, "metrics.BG_LPIPS.lin_weights", "LPIPS linear-layer weights")
        backbone = torch.load(str(bb), map_location="cpu", weights_only=True)
        features = {k[len("features.") :]: v for k, v in backbone.items() if k.startswith("features.")}
        net.features.load_state_dict(features, strict=False)
        expected = {k for k in net.features.state_dict() if int(k.split(".")[0]) <= max(net.taps)}
        lost = sorted(expected - set(features))
        if lost:
            raise ValueError(
                f"metrics.BG_LPIPS.backbone_weights={backbone_weights}: missing features.{lost[0]} ... "
                f"for arch {arch!r}"
            )
        lins = torch.load(str(ln), map_location="cpu", weights_only=True)
        for k, lin in enumerate(net.lins):
            key = next((n for n in (f"lin{k}.model.1.weight", f"lins.{k}.weight", f"lin{k}.weight") if n in lins), None)
            if key is None:
                raise ValueError(
                    f"metrics.BG_LPIPS.lin_weights={lin_weights}: no weight for layer {k} "
                    f"(expected lin{k}.model.1.weight)"
                )
            lin.weight.data.copy_(lins[key].reshape(lin.weight.shape))
    return net.to(device).eval()


def save_random_lpips(path: str | Path, arch: str = "tiny", seed: int = 0) -> Path:
    """A random-weight LPIPS state dict (tests only: its distances mean nothing)."""
    torch = _torch()
    torch.manual_seed(seed)
    net = _lpips_module(arch)
    for lin in net.lins:
        lin.weight.data.abs_()  # LPIPS's linear weights are non-negative
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({k: v for k, v in net.state_dict().items() if k not in ("shift", "scale")}, path)
    return path


@dataclass
class LPIPSConfig:
    arch: str = "vgg16"  # backbone spec: vgg16 | alex | tiny (tests)
    weights: Optional[str] = None  # one state dict of this module (features.* + lins.*), or:
    backbone_weights: Optional[str] = None  # torchvision vgg16/alexnet ImageNet state dict (features.*)
    lin_weights: Optional[str] = None  # LPIPS v0.1 linear layers (lin<k>.model.1.weight), e.g. vgg.pth
    device: str = "cpu"  # torch device (cuda takes one GPU per frame-stage worker)
    frames: Optional[int] = 16  # uniformly sampled frame pairs (null: every frame)
    batch_size: int = 8  # frame pairs per forward pass


@register_metric
class BackgroundLPIPS(FrameMetric):
    """LPIPS x 10^3 between source and edited frames over the background, averaged over frames (App. E.5)."""

    name = "BG_LPIPS"
    paper = "NRVBench App. E.5 (background LPIPS x 1e3)"
    weights_from = {  # where the official weights are published
        "weights": "none published in this layout: set backbone_weights and lin_weights instead",
        "backbone_weights": "torchvision's ImageNet weights (torchvision.models.VGG16_Weights.IMAGENET1K_V1, or "
        "AlexNet_Weights.IMAGENET1K_V1 for arch=alex)",
        "lin_weights": "lpips/weights/v0.1/vgg.pth (or alex.pth) of https://github.com/richzhang/PerceptualSimilarity",
    }
    config_class = LPIPSConfig
    choices = {"arch": LPIPS_ARCHS}
    higher_is_better = False
    scale = "LPIPS x 1e3"
    model_backed: ClassVar[bool] = True
    needs_mask: ClassVar[bool] = True

    def __init__(self, cfg: Any = None):
        super().__init__(cfg)
        self.net = None

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        """``weights`` (one state dict), else both ``backbone_weights`` and ``lin_weights`` (see load_lpips)."""
        if cfg.weights:
            return weights_problem(cfg.weights, "metrics.BG_LPIPS.weights", "LPIPS weights")
        if not cfg.backbone_weights and not cfg.lin_weights:
            return [
                "LPIPS weights: none set; set `metrics.BG_LPIPS.weights` (one state dict of the module) or both "
                "`metrics.BG_LPIPS.backbone_weights` and `metrics.BG_LPIPS.lin_weights` to local paths"
            ]
        return weights_problem(
            cfg.backbone_weights, "metrics.BG_LPIPS.backbone_weights", "LPIPS backbone weights"
        ) + weights_problem(cfg.lin_weights, "metrics.BG_LPIPS.lin_weights", "LPIPS linear-layer weights")

    def setup(self) -> None:
        self.net = load_lpips(
            self.cfg.arch, self.cfg.weights, self.cfg.backbone_weights, self.cfg.lin_weights, self.cfg.device
        )

    def distances(self, edited: np.ndarray, source: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Per-frame LPIPS (unscaled); ``nan`` for a frame without background."""
        torch = _torch()
        if self.net is None:
            self.setup()
        bg = background_of(mask, source.shape)
        out = []
        step = max(1, int(self.cfg.batch_size))
        with torch.inference_mode():
            for i in range(0, len(source), step):
                x = _to_tensor(source[i : i + step], self.cfg.device)
                y = _to_tensor(edited[i : i + step], self.cfg.device)
                w = (
                    torch.from_numpy(bg[i : i + step]).float().unsqueeze(1).to(self.cfg.device)
                    if mask is not None
                    else None
                )
                d = self.net(x, y, w).float().cpu().numpy()
                if mask is not None:
                    d = np.where(bg[i : i + step].sum(axis=(1, 2)) > 0, d, np.nan)
                out.append(d)
        return np.concatenate(out) if out else np.zeros(0)

    def compute(self, edited, source, mask=None) -> float:
        if source is None:
            raise ValueError("LPIPS compares against the source video, but no source frames were given")
        d = self.distances(edited, source, mask)
        d = d[~np.isnan(d)]
        return 1e3 * float(d.mean()) if d.size else float("nan")


def _to_tensor(frames: np.ndarray, device: str):
    torch = _torch()
    return torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float().div(255.0).to(device)
