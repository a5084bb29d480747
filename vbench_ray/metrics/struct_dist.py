"""The DINO structure distance (``StructDist``), a model-backed conventional metric of NRVBench (paper,
Table 3, App. E.5). It loads **local** weights only (config keys below; no downloads) and can be built with
random weights for tests (``save_random_dino``: plumbing, shapes and determinism, never accuracy).

**StructDist** (x 10^3): the structure distance of Tumanyan et al. (Splicing ViT features) as used by
PIE-Bench-style evaluations: the mean squared difference between the self-similarity matrices (cosine, all
tokens including CLS) of the keys of DINO-ViT's last attention layer, for source and edited frame, averaged
over frames. Our own ViT with the parameter names of the official DINO checkpoints (``cls_token``,
``pos_embed``, ``patch_embed.proj``, ``blocks.<i>.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}``,
``norm``), so ``metrics.StructDist.weights`` may be e.g. ``dino_deitsmall8_pretrain.pth``; frames resized to
``image_size`` squared, ImageNet mean/std.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

import cv2
import numpy as np

from vbench_ray.metrics.base import FrameMetric, _torch, _unit, register_metric, require_weights, weights_problem

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
        raise ValueError(
            f"metrics.StructDist.weights={cfg.weights}: missing parameters {missing[:4]} "
            f"(check patch_size/dim/depth/heads)"
        )
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
    paper = "NRVBench Table 3, App. E.5 (structure distance x 1e3)"
    weights_from = {  # where the official weights are published
        "weights": "a DINO ViT checkpoint of https://github.com/facebookresearch/dino, e.g. "
        "https://dl.fbaipublicfiles.com/dino/dino_deitsmall8_pretrain/dino_deitsmall8_pretrain.pth",
    }
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
        x = (x.astype(np.float32) / 255.0 - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(
            IMAGENET_STD, np.float32
        )
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
