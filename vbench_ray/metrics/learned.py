"""Model-backed conventional metrics of NRVBench (seeds/001, Table 3, App. E.5): LPIPS, CLIP-S, CLIP-E and
the DINO structure distance. Each loads **local** weights only (config keys below; no downloads) and each
can be built with random weights for tests (``save_random_lpips``, ``build_tiny_clip``,
``save_random_dino``: plumbing, shapes and determinism, never accuracy).

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

**CLIP-S** (x 100): the mean over frames of the cosine similarity between a frame's CLIP image embedding
and the target prompt's text embedding. **CLIP-E** (x 100): the mean over frame pairs of the cosine
similarity between the image edit direction ``phi_I(edit_t) - phi_I(src_t)`` and the text edit direction
``phi_T(target) - phi_T(source)``, embeddings L2-normalised first (App. E.5). An unchanged frame has no
image direction and scores 0. ``metrics.CLIP.model``: a local transformers CLIP checkpoint directory
(``config.json``, weights, tokenizer; ``preprocessor_config.json`` optional). Images: shortest side resized
to the model's size (bicubic), centre crop, CLIP mean/std.

**StructDist** (x 10^3): the structure distance of Tumanyan et al. (Splicing ViT features) as used by
PIE-Bench-style evaluations: the mean squared difference between the self-similarity matrices (cosine, all
tokens including CLS) of the keys of DINO-ViT's last attention layer, for source and edited frame, averaged
over frames. Our own ViT with the parameter names of the official DINO checkpoints (``cls_token``,
``pos_embed``, ``patch_embed.proj``, ``blocks.<i>.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}``,
``norm``), so ``metrics.StructDist.weights`` may be e.g. ``dino_deitsmall8_pretrain.pth``; frames resized to
``image_size`` squared, ImageNet mean/std.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

import cv2
import numpy as np

from vbench_ray.metrics.base import FrameMetric, register_metric, require_weights, weights_problem
from vbench_ray.metrics.preservation import background_of

# ----------------------------------------------------------------------------- LPIPS

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


def _torch():
    import torch

    return torch


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


def load_lpips(arch: str, weights: str | None = None, backbone_weights: str | None = None,
               lin_weights: str | None = None, device: str = "cpu"):
    """The LPIPS module with local weights (see the module docstring for the three file layouts)."""
    torch = _torch()
    net = _lpips_module(arch)
    if weights:
        state = torch.load(str(require_weights(weights, "metrics.BG_LPIPS.weights", "LPIPS weights")),
                           map_location="cpu", weights_only=True)
        state = {k: v for k, v in state.items() if not k.startswith(("shift", "scale"))}
        net.load_state_dict(state, strict=False)
        missing = [k for k in net.state_dict() if k not in state and k not in ("shift", "scale")]
        if missing:
            raise ValueError(f"metrics.BG_LPIPS.weights={weights}: missing parameters {missing[:4]} for arch {arch!r}")
    else:
        bb = require_weights(backbone_weights, "metrics.BG_LPIPS.backbone_weights", "LPIPS backbone weights")
        ln = require_weights(lin_weights, "metrics.BG_LPIPS.lin_weights", "LPIPS linear-layer weights")
        backbone = torch.load(str(bb), map_location="cpu", weights_only=True)
        features = {k[len("features."):]: v for k, v in backbone.items() if k.startswith("features.")}
        net.features.load_state_dict(features, strict=False)
        expected = {k for k in net.features.state_dict() if int(k.split(".")[0]) <= max(net.taps)}
        lost = sorted(expected - set(features))
        if lost:
            raise ValueError(f"metrics.BG_LPIPS.backbone_weights={backbone_weights}: missing features.{lost[0]} ... "
                             f"for arch {arch!r}")
        lins = torch.load(str(ln), map_location="cpu", weights_only=True)
        for k, lin in enumerate(net.lins):
            key = next((n for n in (f"lin{k}.model.1.weight", f"lins.{k}.weight", f"lin{k}.weight") if n in lins), None)
            if key is None:
                raise ValueError(f"metrics.BG_LPIPS.lin_weights={lin_weights}: no weight for layer {k} "
                                 f"(expected lin{k}.model.1.weight)")
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
            return ["LPIPS weights: none set; set `metrics.BG_LPIPS.weights` (one state dict of the module) or both "
                    "`metrics.BG_LPIPS.backbone_weights` and `metrics.BG_LPIPS.lin_weights` to local paths"]
        return (weights_problem(cfg.backbone_weights, "metrics.BG_LPIPS.backbone_weights", "LPIPS backbone weights")
                + weights_problem(cfg.lin_weights, "metrics.BG_LPIPS.lin_weights", "LPIPS linear-layer weights"))

    def setup(self) -> None:
        self.net = load_lpips(self.cfg.arch, self.cfg.weights, self.cfg.backbone_weights, self.cfg.lin_weights,
                              self.cfg.device)

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
                x = _to_tensor(source[i:i + step], self.cfg.device)
                y = _to_tensor(edited[i:i + step], self.cfg.device)
                w = torch.from_numpy(bg[i:i + step]).float().unsqueeze(1).to(self.cfg.device) if mask is not None else None
                d = self.net(x, y, w).float().cpu().numpy()
                if mask is not None:
                    d = np.where(bg[i:i + step].sum(axis=(1, 2)) > 0, d, np.nan)
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


# ----------------------------------------------------------------------------- CLIP

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
_CLIP_CACHE: dict[tuple[str, str], tuple] = {}  # (path, device) -> (model, tokenizer, size, mean, std)


def load_clip(path: str | None, device: str = "cpu", config_key: str = "metrics.CLIP_S.model") -> tuple:
    """``(model, tokenizer, size, mean, std)`` from a local checkpoint directory, once per process."""
    path = str(require_weights(path, config_key, "CLIP checkpoint directory"))
    key = (str(Path(path).resolve()), str(device))
    if key not in _CLIP_CACHE:
        from transformers import AutoTokenizer, CLIPModel

        model = CLIPModel.from_pretrained(path).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        size, mean, std = int(model.config.vision_config.image_size), CLIP_MEAN, CLIP_STD
        pre = Path(path) / "preprocessor_config.json"
        if pre.is_file():
            spec = json.loads(pre.read_text())
            crop = spec.get("crop_size")
            size = int(crop.get("height", size) if isinstance(crop, dict) else crop or size)
            mean, std = tuple(spec.get("image_mean", mean)), tuple(spec.get("image_std", std))
        _CLIP_CACHE[key] = (model, tokenizer, size, mean, std)
    return _CLIP_CACHE[key]


def clip_pixels(frames: np.ndarray, size: int, mean=CLIP_MEAN, std=CLIP_STD) -> np.ndarray:
    """uint8 RGB ``(T, H, W, 3)`` -> float32 ``(T, 3, size, size)``: shortest side to ``size`` (bicubic),
    centre crop, normalised."""
    out = []
    for f in frames:
        h, w = f.shape[:2]
        s = size / min(h, w)
        nh, nw = max(size, int(round(h * s))), max(size, int(round(w * s)))
        r = cv2.resize(np.ascontiguousarray(f), (nw, nh), interpolation=cv2.INTER_CUBIC)
        y0, x0 = (nh - size) // 2, (nw - size) // 2
        c = r[y0:y0 + size, x0:x0 + size].astype(np.float32) / 255.0
        out.append(((c - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)).transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def clip_embeddings(model_bundle, frames: np.ndarray | None = None, texts: list[str] | None = None,
                    device: str = "cpu"):
    """L2-normalised image embeddings ``(T, D)`` and/or text embeddings ``(len(texts), D)`` (torch, float32)."""
    torch = _torch()
    model, tokenizer, size, mean, std = model_bundle
    img = txt = None
    with torch.inference_mode():
        if frames is not None:
            pixels = torch.from_numpy(clip_pixels(frames, size, mean, std)).to(device)
            img = _unit(_features(model.get_image_features(pixel_values=pixels)).float())
        if texts is not None:
            limit = int(getattr(model.config.text_config, "max_position_embeddings", 77))
            tok = tokenizer(list(texts), padding=True, truncation=True, max_length=limit, return_tensors="pt")
            txt = _unit(_features(model.get_text_features(input_ids=tok["input_ids"].to(device),
                                                          attention_mask=tok["attention_mask"].to(device))).float())
    return img, txt


def _features(out):
    """``get_*_features`` returns a tensor in most transformers versions, a model output in some."""
    if hasattr(out, "pooler_output") and not hasattr(out, "shape"):
        return out.pooler_output
    return out


@dataclass
class CLIPConfig:
    model: Optional[str] = None  # local transformers CLIP checkpoint directory (e.g. openai/clip-vit-large-patch14)
    device: str = "cpu"
    frames: Optional[int] = 16  # uniformly sampled frames (null: every frame)


class _ClipMetric(FrameMetric):
    config_class = CLIPConfig
    scale = "cosine x 100"
    model_backed: ClassVar[bool] = True
    needs_text: ClassVar[bool] = True
    config_key: ClassVar[str] = ""

    def __init__(self, cfg: Any = None):
        super().__init__(cfg)
        self.bundle = None

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        return weights_problem(cfg.model, cls.config_key, "CLIP checkpoint directory")

    def setup(self) -> None:
        self.bundle = load_clip(self.cfg.model, self.cfg.device, self.config_key)


@register_metric
class CLIPScore(_ClipMetric):
    """CLIP-S x 100: edited frames vs the target prompt (App. E.5)."""

    name = "CLIP_S"
    needs_source = False
    config_key = "metrics.CLIP_S.model"

    def compute(self, edited, source=None, texts: dict | None = None) -> float:
        if not texts or not texts.get("target_prompt"):
            raise ValueError("CLIP-S needs the case's target prompt")
        if self.bundle is None:
            self.setup()
        img, txt = clip_embeddings(self.bundle, edited, [texts["target_prompt"]], self.cfg.device)
        return 100.0 * float((img @ txt[0]).mean())


@register_metric
class CLIPDirectional(_ClipMetric):
    """CLIP-E x 100: image edit direction vs text edit direction, per frame pair (App. E.5)."""

    name = "CLIP_E"
    needs_source = True
    config_key = "metrics.CLIP_E.model"

    def compute(self, edited, source, texts: dict | None = None) -> float:
        if source is None:
            raise ValueError("CLIP-E compares against the source video, but no source frames were given")
        if not texts or not texts.get("target_prompt") or not texts.get("source_prompt"):
            raise ValueError("CLIP-E needs the case's source and target prompts")
        if self.bundle is None:
            self.setup()
        torch = _torch()
        img_e, txt = clip_embeddings(self.bundle, edited, [texts["target_prompt"], texts["source_prompt"]],
                                     self.cfg.device)
        img_s, _ = clip_embeddings(self.bundle, source, None, self.cfg.device)
        d_img = img_e - img_s
        d_txt = txt[0] - txt[1]
        cos = (d_img @ d_txt) / (d_img.norm(dim=-1) * d_txt.norm()).clamp_min(1e-12)
        cos = torch.where(d_img.norm(dim=-1) > 1e-8, cos, torch.zeros_like(cos))
        return 100.0 * float(cos.mean())


def build_tiny_clip(out_dir: str | Path, seed: int = 0) -> Path:
    """A tiny random-weight CLIP checkpoint (model, tokenizer, preprocessor) for tests; scores mean nothing."""
    torch = _torch()
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers, decoders
    from transformers import CLIPConfig as HFCLIPConfig, CLIPModel, PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file() and (out_dir / "tokenizer.json").is_file():
        return out_dir
    bos, eos, pad = "<|startoftext|>", "<|endoftext|>", "<|pad|>"
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=[pad, bos], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["a sheet of cloth waving in the wind", "ripples on a water surface", "smoke rising from a fire",
              "a dog with fluffy fur", "a hand squeezing dough", "a cat raising its paw"] * 4
    bpe.train_from_iterator(corpus, trainer=trainer)
    bpe.add_special_tokens([eos])  # the highest id, as in CLIP's own vocabulary (text pooling finds it)
    bpe.post_processor = processors.TemplateProcessing(single=f"{bos} $A {eos}",
                                                       special_tokens=[(bos, bpe.token_to_id(bos)),
                                                                       (eos, bpe.token_to_id(eos))])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=bos, eos_token=eos, pad_token=pad)
    tok.model_max_length = 32
    config = HFCLIPConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=32, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=16)
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    (out_dir / "preprocessor_config.json").write_text(json.dumps(
        {"crop_size": {"height": 32, "width": 32}, "image_mean": list(CLIP_MEAN), "image_std": list(CLIP_STD)}))
    (out_dir / "README.md").write_text("A tiny RANDOM-WEIGHT CLIP for vbench-ray tests; its scores mean nothing.\n")
    return out_dir


# ----------------------------------------------------------------------------- DINO structure distance

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class StructDistConfig:
    weights: Optional[str] = None  # local DINO ViT state dict (e.g. dino_deitsmall8_pretrain.pth)
    patch_size: int = 8  # the checkpoint's architecture (defaults: DINO ViT-S/8; ViT-B/8: dim 768, heads 12)
    dim: int = 384
    depth: int = 12
    heads: int = 6
    mlp_ratio: float = 4.0
    image_size: int = 224  # frames resized to image_size x image_size
    layer: int = -1  # block whose attention keys are compared (-1: the last)
    device: str = "cpu"
    frames: Optional[int] = 16  # uniformly sampled frame pairs (null: every frame)


def _vit_module(cfg):
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional
    dim, heads, p = int(cfg.dim), int(cfg.heads), int(cfg.patch_size)
    grid = int(cfg.image_size) // p

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim, bias=True)
            self.proj = nn.Linear(dim, dim)

        def split(self, x):
            b, n, _ = x.shape
            return self.qkv(x).reshape(b, n, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)  # 3, B, H, N, d

        def forward(self, x):
            q, k, v = self.split(x)
            attn = (q @ k.transpose(-2, -1)) * (dim // heads) ** -0.5
            out = attn.softmax(dim=-1) @ v
            return self.proj(out.transpose(1, 2).reshape(x.shape))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            hidden = int(dim * float(cfg.mlp_ratio))
            self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn = nn.LayerNorm(dim, eps=1e-6), Attention()
            self.norm2, self.mlp = nn.LayerNorm(dim, eps=1e-6), Mlp()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv2d(3, dim, p, p)

        def forward(self, x):
            return self.proj(x).flatten(2).transpose(1, 2)

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = PatchEmbed()
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, grid * grid + 1, dim))
            self.blocks = nn.ModuleList(Block() for _ in range(int(cfg.depth)))
            self.norm = nn.LayerNorm(dim, eps=1e-6)

        def pos(self, n_patches: int):
            if n_patches + 1 == self.pos_embed.shape[1]:
                return self.pos_embed
            cls, grid_pos = self.pos_embed[:, :1], self.pos_embed[:, 1:]
            old, new = int(math.sqrt(grid_pos.shape[1])), int(math.sqrt(n_patches))
            grid_pos = grid_pos.reshape(1, old, old, dim).permute(0, 3, 1, 2)
            grid_pos = F.interpolate(grid_pos, size=(new, new), mode="bicubic", align_corners=False)
            return torch.cat([cls, grid_pos.permute(0, 2, 3, 1).reshape(1, new * new, dim)], dim=1)

        def keys(self, x, layer: int):
            """Attention keys of block ``layer``: ``(B, 1 + N, dim)`` (heads concatenated)."""
            x = self.patch_embed(x)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos(x.shape[1])
            layer = layer % len(self.blocks)
            for i, block in enumerate(self.blocks):
                if i == layer:
                    k = block.attn.split(block.norm1(x))[1]  # B, H, N, d
                    return k.transpose(1, 2).reshape(x.shape[0], x.shape[1], dim)
                x = block(x)
            raise IndexError(layer)

    return ViT()


def load_dino(cfg):
    """The ViT with local weights (``metrics.StructDist.weights``; DINO checkpoint layouts accepted)."""
    torch = _torch()
    net = _vit_module(cfg)
    path = require_weights(cfg.weights, "metrics.StructDist.weights", "DINO ViT weights")
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    state = state.get("teacher", state.get("state_dict", state)) if isinstance(state, dict) else state
    state = {k.replace("module.", "").replace("backbone.", ""): v for k, v in state.items()}
    if "pos_embed" in state and state["pos_embed"].shape != net.pos_embed.shape:
        net.pos_embed = torch.nn.Parameter(torch.zeros_like(state["pos_embed"]))
    missing, _ = net.load_state_dict(state, strict=False)
    if missing:
        raise ValueError(f"metrics.StructDist.weights={cfg.weights}: missing parameters {missing[:4]} "
                         f"(check patch_size/dim/depth/heads)")
    return net.to(cfg.device).eval()


def save_random_dino(path: str | Path, cfg, seed: int = 0) -> Path:
    """A random-weight ViT state dict matching ``cfg`` (tests only)."""
    torch = _torch()
    torch.manual_seed(seed)
    net = _vit_module(cfg)
    for p in (net.cls_token, net.pos_embed):
        torch.nn.init.normal_(p, std=0.02)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), path)
    return path


def self_similarity(keys):
    """Cosine self-similarity ``(B, N, N)`` of token keys ``(B, N, D)``."""
    k = _unit(keys)
    return k @ k.transpose(-2, -1)


@register_metric
class StructDist(FrameMetric):
    """Structure distance x 10^3 between source and edited frames (DINO key self-similarity; Table 3)."""

    name = "StructDist"
    config_class = StructDistConfig
    higher_is_better = False
    scale = "x 1e3"
    model_backed: ClassVar[bool] = True

    def __init__(self, cfg: Any = None):
        super().__init__(cfg)
        self.net = None

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        return weights_problem(cfg.weights, "metrics.StructDist.weights", "DINO ViT weights")

    def setup(self) -> None:
        self.net = load_dino(self.cfg)

    def _pixels(self, frames: np.ndarray):
        torch = _torch()
        size = int(self.cfg.image_size)
        x = np.stack([cv2.resize(np.ascontiguousarray(f), (size, size), interpolation=cv2.INTER_AREA) for f in frames])
        x = (x.astype(np.float32) / 255.0 - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD, np.float32)
        return torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).to(self.cfg.device)

    def distances(self, edited: np.ndarray, source: np.ndarray) -> np.ndarray:
        torch = _torch()
        if self.net is None:
            self.setup()
        with torch.inference_mode():
            ks = self.net.keys(self._pixels(source), int(self.cfg.layer))
            ke = self.net.keys(self._pixels(edited), int(self.cfg.layer))
            diff = (self_similarity(ks) - self_similarity(ke)) ** 2
        return diff.mean(dim=(1, 2)).float().cpu().numpy()

    def compute(self, edited, source) -> float:
        if source is None:
            raise ValueError("structure distance compares against the source video, but no source frames were given")
        return 1e3 * float(self.distances(edited, source).mean())
