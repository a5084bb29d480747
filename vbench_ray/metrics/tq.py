"""Technical Quality (TQ), CoVEBench App. F (Video Quality): the technical score of DOVER++ (Wu et al., 2023).

DOVER's technical branch is FAST-VQA: a Video Swin-T that sees *fragments* (small native-resolution patches
spliced into one 224x224 mosaic) and a per-position regression head. This module is our own implementation
of that branch from the papers (Video Swin, FAST-VQA's gated relative position bias, DOVER's head and
sampling), checked against the behaviour of the official DOVER code; torchvision's ``swin3d_t`` is not used.

**Temporal sampling** (DOVER ``technical``: ``clip_len 32, num_clips 3, frame_interval 2``). The video's T
frames are cut into ``num_clips`` equal segments; in each, ``clip_len`` frames ``frame_interval`` apart start
at a random offset inside the segment (0 when the segment is too short), indices taken modulo T. The official
code draws the offsets from the global NumPy RNG (unseeded, so two runs differ); ours come from ``seed``.

**Spatial fragments** (``fragments 7, fsize 32, aligned 32``). Each frame is cut into a 7x7 grid; from each
cell one 32x32 patch at native resolution is taken at a random offset in the cell (the same offset for
``aligned`` consecutive frames, a new one for the next ``aligned``; torch generator seeded from ``seed``), and
the 49 patches are spliced into a 224x224 frame. A video smaller than 224 on a side is first upsampled
bilinearly so its short side reaches 224 (as the official code; like it, the grid positions are then computed
from the pre-upsampling size, which only matters for videos under 224 px). Pixels are normalised with
ImageNet mean/std (0-255 scale).

**Network** (``swin_tiny_grpb``). Patch embedding Conv3d (2,4,4) -> 96 channels + LayerNorm; 4 stages of
depths (2,2,6,2), heads (3,6,12,24), 3D windows (8,7,7) shifted by half a window in odd blocks, patch merging
between stages; in stages 1-3 a *gated* relative position bias: for two tokens in the same fragment the
``fragment_position_bias_table`` entry is used, for tokens of different fragments the
``relative_position_bias_table`` entry multiplied by the L1 distance of their fragment indices, minus the
fragment entry times that distance minus 1 (``rpb * g + fpb * (1 - g)``, g the L1 distance, exactly as the
official code computes it). Final LayerNorm; head ``fc_hid`` Conv3d 1x1x1 768->64, GELU, ``fc_last`` 64->1 at
every position (dropout off at inference).

**Score.** The head's outputs are averaged over positions and clips (the raw technical score r); DOVER's
``evaluate_a_set_of_videos.py`` (which CoVEBench's ``metrics/vq/dover/eval_dover.py`` runs and reads the
``technical score`` column of) reports ``100 * sigmoid((r - 0.1107) / 0.07355)``: ``raw_mean``/``raw_std``.
Scale [0, 100], higher is better (the paper's Table 3: 10.5-18.4).

**Weights.** ``metrics.TQ.weights``: the DOVER++ checkpoint (``DOVER_plus_plus.pth``; a ``{"state_dict": ...}``
file or the bare state dict). Keys ``technical_backbone.*`` map to ``backbone.*`` and ``technical_head.*`` to
``head.*`` (``module.`` prefixes dropped); the aesthetic branch and the ``relative_position_index`` buffers
(recomputed here) are ignored. The backbone's parameter names are the official ones (``patch_embed.proj``,
``patch_embed.norm``, ``layers.<i>.blocks.<j>.{norm1, attn.qkv, attn.proj, attn.relative_position_bias_table,
attn.fragment_position_bias_table, norm2, mlp.fc1, mlp.fc2}``, ``layers.<i>.downsample.{norm, reduction}``,
``norm``).

What was verified here: the architecture and key names against the official DOVER source (read, not copied),
loading of a random state dict with the official key names, and the sampling and score arithmetic by tests.
Not verified (no weights or GPU here): numerical agreement with the official implementation on real weights,
and which revision of DOVER's score rescaling T2AV-Compass's copy (used by CoVEBench) carries: earlier DOVER
revisions normalised the technical output with (r + 0.08285) / 0.03774 instead; set ``raw_mean: -0.08285,
raw_std: 0.03774`` for that.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np

from vbench_ray.metrics.base import (FrameMetric, Sampling, load_checked, read_state_dict, register_metric,
                                     require_weights, weights_problem)
from vbench_ray.video.io import VideoInfo

WEIGHTS_KEY = "metrics.TQ.weights"
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)
# swin_t: DOVER's technical backbone. tiny: the same architecture at toy width (tests only).
ARCHS = {
    "swin_t": dict(embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window=(8, 7, 7),
                   frag_bias=(True, True, True, False), head_hidden=64),
    "tiny": dict(embed_dim=8, depths=(2, 2, 2, 2), num_heads=(1, 1, 2, 2), window=(8, 7, 7),
                 frag_bias=(True, True, True, False), head_hidden=8),
}
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class TQConfig:
    weights: Optional[str] = None  # DOVER++ checkpoint, e.g. DOVER_plus_plus.pth (technical_* keys are used)
    device: str = "cpu"  # cpu | cuda | cuda:N
    dtype: str = "float32"  # DOVER was trained in float32 (as the official inference); bfloat16 | float16 optional
    arch: str = "swin_t"  # swin_t (DOVER) | tiny (tests)
    clip_len: int = 32  # frames per clip (DOVER technical: 32)
    num_clips: int = 3  # clips per video, one per temporal segment (DOVER technical: 3)
    frame_interval: int = 2  # stride between a clip's frames (DOVER technical: 2)
    fragments: int = 7  # fragment grid per side (DOVER: 7)
    fsize: int = 32  # fragment side in pixels (DOVER: 32); the mosaic is fragments * fsize square
    aligned: int = 32  # frames that share one fragment offset (DOVER: 32)
    seed: int = 0  # seeds the random temporal and spatial offsets (the official code does not seed them)
    batch_size: int = 3  # clips per forward pass, across the cases of a pool call (one video = num_clips clips)
    pool_batch: int = 4  # cases one pool call scores together (each: its fragment mosaics, cut in the decode stage)
    raw_mean: float = 0.1107  # TQ = 100 * sigmoid((raw - raw_mean) / raw_std) (DOVER evaluate_a_set_of_videos.py)
    raw_std: float = 0.07355
    gpu_fraction: float = 0.25  # the share of a GPU one TQ pool actor asks for when device is CUDA


# ----------------------------------------------------------------------------- sampling

def dover_frame_indices(num_frames: int, clip_len: int, num_clips: int, interval: int, seed: int) -> list[int]:
    """DOVER's technical-branch frame indices (``num_clips * clip_len``, in clip order, modulo T)."""
    if num_frames <= 0:
        return []
    rng = np.random.default_rng(seed)
    seg = num_frames // num_clips
    starts = np.array([seg * i for i in range(num_clips)], dtype=np.int64)
    span = clip_len * interval
    offsets = rng.integers(0, seg - span, size=num_clips) if seg > span else np.zeros(num_clips, np.int64)
    idx = (np.arange(clip_len)[None, :] * interval + offsets[:, None] + starts[:, None]).reshape(-1)
    return [int(i) for i in np.mod(idx, num_frames)]


@dataclass(frozen=True)
class DoverSampling(Sampling):
    clip_len: int = 32
    num_clips: int = 3
    frame_interval: int = 2
    seed: int = 0

    def indices(self, info: VideoInfo) -> list[int]:
        return dover_frame_indices(info.num_frames, self.clip_len, self.num_clips, self.frame_interval, self.seed)


def _torch():
    import torch

    return torch


def spatial_fragments(video, fragments: int, fsize: int, aligned: int, generator=None):
    """``video``: ``(C, T, H, W)`` on the 0-255 scale (uint8 or float) -> ``(C, T, fragments*fsize,
    fragments*fsize)`` of the same dtype (float when it had to be upsampled)."""
    torch = _torch()
    F = torch.nn.functional
    size = fragments * fsize
    t, res_h, res_w = video.shape[-3:]
    if t % aligned:
        raise ValueError(f"TQ: {t} sampled frames are not a multiple of aligned={aligned}")
    ratio = min(res_h / size, res_w / size)
    if ratio < 1:  # upsample so the short side reaches the mosaic size, back to uint8 values (truncated)
        video = (F.interpolate(video / 255.0, scale_factor=1 / ratio, mode="bilinear") * 255.0).to(torch.uint8).float()
    # as the official code, the grid comes from the size before any upsampling
    hgrid = [min(res_h // fragments * i, res_h - fsize) for i in range(fragments)]
    wgrid = [min(res_w // fragments * i, res_w - fsize) for i in range(fragments)]
    hlen, wlen = res_h // fragments, res_w // fragments
    shape = (fragments, fragments, t // aligned)
    rnd_h = (torch.randint(hlen - fsize, shape, generator=generator) if hlen > fsize
             else torch.zeros(shape, dtype=torch.long))
    rnd_w = (torch.randint(wlen - fsize, shape, generator=generator) if wlen > fsize
             else torch.zeros(shape, dtype=torch.long))
    out = torch.zeros(video.shape[:-2] + (size, size), dtype=video.dtype)
    for i, hs in enumerate(hgrid):
        for j, ws in enumerate(wgrid):
            for k in range(t // aligned):
                h0, w0 = hs + int(rnd_h[i, j, k]), ws + int(rnd_w[i, j, k])
                out[:, k * aligned:(k + 1) * aligned, i * fsize:(i + 1) * fsize, j * fsize:(j + 1) * fsize] = \
                    video[:, k * aligned:(k + 1) * aligned, h0:h0 + fsize, w0:w0 + fsize]
    return out


# ----------------------------------------------------------------------------- Video Swin-T (FAST-VQA variant)

def _windows(x, ws):
    """(B, D, H, W, C) -> (B * nW, ws_d * ws_h * ws_w, C)."""
    b, d, h, w, c = x.shape
    x = x.view(b, d // ws[0], ws[0], h // ws[1], ws[1], w // ws[2], ws[2], c)
    return x.permute(0, 1, 3, 5, 2, 4, 6, 7).reshape(-1, ws[0] * ws[1] * ws[2], c)


def _unwindows(win, ws, b, d, h, w):
    x = win.view(b, d // ws[0], h // ws[1], w // ws[2], ws[0], ws[1], ws[2], -1)
    return x.permute(0, 1, 4, 2, 5, 3, 6, 7).reshape(b, d, h, w, -1)


def effective_window(size, window, shift):
    """A window no larger than the feature map; no shift along a side the window covers whole."""
    ws, ss = list(window), list(shift)
    for i, n in enumerate(size):
        if n <= window[i]:
            ws[i], ss[i] = n, 0
    return tuple(ws), tuple(ss)


@lru_cache(maxsize=64)
def _shift_mask(dp, hp, wp, ws, ss, device):
    """(nW, N, N): 0 within a region of the cyclically shifted map, -100 across regions."""
    torch = _torch()
    label = torch.zeros((1, dp, hp, wp, 1), device=device)
    cnt = 0
    parts = [(slice(-ws[a]), slice(-ws[a], -ss[a]), slice(-ss[a], None)) for a in range(3)]
    for sd in parts[0]:
        for sh in parts[1]:
            for sw in parts[2]:
                label[:, sd, sh, sw, :] = cnt
                cnt += 1
    lw = _windows(label, ws).squeeze(-1)
    diff = lw.unsqueeze(1) - lw.unsqueeze(2)
    return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)


@lru_cache(maxsize=64)
def _fragment_gate(dp, hp, wp, ws, ss, device):
    """(nW, N, N): the L1 distance between the fragment indices of two tokens of a window (0: same fragment).
    Fragments: a (1, ws_h, ws_w) grid stretched (nearest) over the padded map, shifted with the windows."""
    torch = _torch()
    F = torch.nn.functional
    grid = torch.stack(torch.meshgrid(torch.arange(1), torch.arange(ws[1]), torch.arange(ws[2]), indexing="ij")).float()
    coords = F.interpolate(grid[None].to(device), size=(dp, hp, wp)).long().permute(0, 2, 3, 4, 1)
    coords = torch.roll(coords, shifts=(-ss[0], -ss[1], -ss[2]), dims=(1, 2, 3))
    wc = _windows(coords, ws)
    return (wc[:, None, :] - wc[:, :, None]).abs().sum(-1)


def _build_net(arch: str, fragments_hint: int = 7):
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional
    spec = ARCHS[arch]

    class WindowAttention(nn.Module):
        def __init__(self, dim, window, heads, frag_bias):
            super().__init__()
            self.window, self.heads = window, heads
            self.scale = (dim // heads) ** -0.5
            n_rel = (2 * window[0] - 1) * (2 * window[1] - 1) * (2 * window[2] - 1)
            self.relative_position_bias_table = nn.Parameter(torch.zeros(n_rel, heads))
            if frag_bias:
                self.fragment_position_bias_table = nn.Parameter(torch.zeros(n_rel, heads))
            self.qkv = nn.Linear(dim, dim * 3, bias=True)
            self.proj = nn.Linear(dim, dim)
            coords = torch.stack(torch.meshgrid(*[torch.arange(w) for w in window], indexing="ij")).flatten(1)
            rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)
            for a in range(3):
                rel[:, :, a] += window[a] - 1
            rel[:, :, 0] *= (2 * window[1] - 1) * (2 * window[2] - 1)
            rel[:, :, 1] *= 2 * window[2] - 1
            self.register_buffer("relative_position_index", rel.sum(-1), persistent=False)

        def forward(self, x, mask, gate):
            bn, n, c = x.shape
            qkv = self.qkv(x).reshape(bn, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
            attn = q @ k.transpose(-2, -1)
            # the index of the full window, cut to the (possibly smaller) window actually used
            rpi = self.relative_position_index[:n, :n].reshape(-1)
            bias = self.relative_position_bias_table[rpi].reshape(n, n, -1).permute(2, 0, 1).unsqueeze(0)
            if hasattr(self, "fragment_position_bias_table"):
                fbias = self.fragment_position_bias_table[rpi].reshape(n, n, -1).permute(2, 0, 1)
                g = gate.unsqueeze(1).to(attn.dtype)
                bias = bias * g + fbias * (1 - g)
            nw = gate.shape[0]
            attn = (attn.view(bn // nw, nw, self.heads, n, n) + bias.unsqueeze(0)).view(-1, self.heads, n, n)
            if mask is not None:
                attn = attn.view(bn // nw, nw, self.heads, n, n) + mask.to(attn.dtype).unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.heads, n, n)
            attn = attn.softmax(dim=-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(bn, n, c))

    class Mlp(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self, dim, heads, window, shift, frag_bias):
            super().__init__()
            self.window, self.shift = window, shift
            self.norm1 = nn.LayerNorm(dim)
            self.attn = WindowAttention(dim, window, heads, frag_bias)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = Mlp(dim)

        def forward(self, x, mask):
            b, d, h, w, c = x.shape
            ws, ss = effective_window((d, h, w), self.window, self.shift)
            y = self.norm1(x)
            pd, ph, pw = [(ws[a] - n % ws[a]) % ws[a] for a, n in enumerate((d, h, w))]
            y = F.pad(y, (0, 0, 0, pw, 0, ph, 0, pd))
            _, dp, hp, wp, _ = y.shape
            shifted = any(s > 0 for s in ss)
            if shifted:
                y = torch.roll(y, shifts=(-ss[0], -ss[1], -ss[2]), dims=(1, 2, 3))
            gate = _fragment_gate(dp, hp, wp, ws, ss, y.device)
            out = self.attn(_windows(y, ws), mask if shifted else None, gate)
            y = _unwindows(out.view(-1, *ws, c), ws, b, dp, hp, wp)
            if shifted:
                y = torch.roll(y, shifts=ss, dims=(1, 2, 3))
            x = x + y[:, :d, :h, :w, :]
            return x + self.mlp(self.norm2(x))

    class PatchMerging(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
            self.norm = nn.LayerNorm(4 * dim)

        def forward(self, x):
            h, w = x.shape[2], x.shape[3]
            if h % 2 or w % 2:
                x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
            x = torch.cat([x[:, :, 0::2, 0::2], x[:, :, 1::2, 0::2], x[:, :, 0::2, 1::2], x[:, :, 1::2, 1::2]], -1)
            return self.reduction(self.norm(x))

    class Stage(nn.Module):
        def __init__(self, dim, depth, heads, window, frag_bias, merge):
            super().__init__()
            self.window, self.shift = window, tuple(s // 2 for s in window)
            self.blocks = nn.ModuleList(
                Block(dim, heads, window, (0, 0, 0) if i % 2 == 0 else self.shift, frag_bias) for i in range(depth))
            self.downsample = PatchMerging(dim) if merge else None

        def forward(self, x):  # (B, C, D, H, W)
            b, c, d, h, w = x.shape
            ws, ss = effective_window((d, h, w), self.window, self.shift)
            x = x.permute(0, 2, 3, 4, 1)
            dims = [int(np.ceil(n / ws[a])) * ws[a] for a, n in enumerate((d, h, w))]
            mask = _shift_mask(*dims, ws, ss, x.device)
            for blk in self.blocks:
                x = blk(x, mask)
            if self.downsample is not None:
                x = self.downsample(x)
            return x.permute(0, 4, 1, 2, 3)

    class PatchEmbed(nn.Module):
        def __init__(self, dim, patch=(2, 4, 4)):
            super().__init__()
            self.patch = patch
            self.proj = nn.Conv3d(3, dim, kernel_size=patch, stride=patch)
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            d, h, w = x.shape[2:]
            p = self.patch
            x = F.pad(x, (0, (p[2] - w % p[2]) % p[2], 0, (p[1] - h % p[1]) % p[1], 0, (p[0] - d % p[0]) % p[0]))
            x = self.proj(x)
            return self.norm(x.permute(0, 2, 3, 4, 1)).permute(0, 4, 1, 2, 3)

    class SwinT3D(nn.Module):
        def __init__(self):
            super().__init__()
            e, depths = spec["embed_dim"], spec["depths"]
            self.patch_embed = PatchEmbed(e)
            self.layers = nn.ModuleList(
                Stage(e * 2 ** i, depths[i], spec["num_heads"][i], spec["window"], spec["frag_bias"][i],
                      merge=i < len(depths) - 1) for i in range(len(depths)))
            self.num_features = e * 2 ** (len(depths) - 1)
            self.norm = nn.LayerNorm(self.num_features)

        def forward(self, x):
            x = self.patch_embed(x)
            for layer in self.layers:
                x = layer(x)
            return self.norm(x.permute(0, 2, 3, 4, 1)).permute(0, 4, 1, 2, 3)

    class Head(nn.Module):
        def __init__(self, cin, hidden):
            super().__init__()
            self.fc_hid = nn.Conv3d(cin, hidden, 1)
            self.fc_last = nn.Conv3d(hidden, 1, 1)
            self.gelu = nn.GELU()

        def forward(self, x):
            return self.fc_last(self.gelu(self.fc_hid(x)))

    class DoverTechnical(nn.Module):
        """``forward(clips (N, 3, T, H, W))`` -> per-position technical scores ``(N, 1, T/2, H/32, W/32)``."""

        def __init__(self):
            super().__init__()
            self.backbone = SwinT3D()
            self.head = Head(self.backbone.num_features, spec["head_hidden"])

        def forward(self, x):
            return self.head(self.backbone(x))

    return DoverTechnical()


def build_dover_technical(arch: str = "swin_t"):
    if arch not in ARCHS:
        raise ValueError(f"metrics.TQ.arch must be one of {tuple(ARCHS)}, got {arch!r}")
    return _build_net(arch)


def official_state_dict(net) -> dict:
    """Our state dict under the official DOVER key names (``technical_backbone.*``, ``technical_head.*``)."""
    out = {}
    for k, v in net.state_dict().items():
        prefix, rest = k.split(".", 1)
        out[f"technical_{prefix}.{rest}"] = v
    return out


def load_dover_technical(path: str | Path, arch: str = "swin_t"):
    """The technical branch from a DOVER(++) checkpoint (see the module docstring for the key mapping)."""
    mapped = {}
    for k, v in read_state_dict(path, WEIGHTS_KEY).items():
        k = k[len("module."):] if k.startswith("module.") else k
        if k.endswith("relative_position_index"):
            continue
        for official, ours in (("technical_backbone.", "backbone."), ("technical_head.", "head.")):
            if k.startswith(official):
                mapped[ours + k[len(official):]] = v
    return load_checked(build_dover_technical(arch), mapped, WEIGHTS_KEY, path,
                        f"a DOVER technical branch of arch {arch!r}", shown_prefix="technical_")


def save_tiny_dover(path: str | Path, arch: str = "tiny", seed: int = 0) -> Path:
    """A random-initialised technical branch saved as a DOVER checkpoint (``{"state_dict": ...}`` with the
    official key names, plus an unused aesthetic entry). Tests and perf only: its scores mean nothing."""
    torch = _torch()
    torch.manual_seed(seed)
    net = build_dover_technical(arch)
    for name, p in net.named_parameters():
        if name.endswith("bias_table"):
            torch.nn.init.trunc_normal_(p, std=0.02)
    state = official_state_dict(net)
    state["aesthetic_head.fc_last.bias"] = torch.zeros(1)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": state}, path)
    return path


def technical_score(raw: float, mean: float, std: float) -> float:
    """DOVER's reported technical score: ``100 * sigmoid((raw - mean) / std)``."""
    return float(100.0 / (1.0 + np.exp(-(raw - mean) / std)))


@register_metric
class TQ(FrameMetric):
    """Technical Quality: DOVER++'s technical branch on spatial fragments, 0-100."""

    name = "TQ"
    config_class = TQConfig
    choices = {"dtype": DTYPES, "arch": tuple(ARCHS)}
    needs_source = False
    higher_is_better = True
    scale = "[0,100]"
    model_backed: ClassVar[bool] = True

    def sampling(self) -> Sampling:
        c = self.cfg
        return DoverSampling(n=None, clip_len=int(c.clip_len), num_clips=int(c.num_clips),
                             frame_interval=int(c.frame_interval), seed=int(c.seed))

    def resources(self) -> dict:
        return {"num_gpus": float(self.cfg.gpu_fraction)} if str(self.cfg.device).startswith("cuda") else {}

    @classmethod
    def check_weights(cls, cfg: Any) -> list[str]:
        return weights_problem(cfg.weights, WEIGHTS_KEY, "TQ DOVER++ checkpoint")

    def setup(self) -> None:
        torch = _torch()
        path = require_weights(self.cfg.weights, WEIGHTS_KEY, "TQ DOVER++ checkpoint")
        self.device = torch.device(self.cfg.device)
        self.dtype = getattr(torch, self.cfg.dtype)
        self.net = load_dover_technical(path, self.cfg.arch).to(self.device, self.dtype)

    def clips(self, frames: np.ndarray):
        """uint8 ``(num_clips * clip_len, H, W, 3)`` -> the fragment mosaics ``(num_clips, 3, clip_len, S, S)``, still
        on the 0-255 scale as uint8 (``clip_outputs`` normalises them on the model's device: a quarter of the bytes
        to move, and no float copy of the video on the CPU)."""
        torch = _torch()
        c = self.cfg
        need = int(c.clip_len) * int(c.num_clips)
        if len(frames) != need:
            raise ValueError(f"TQ needs {need} sampled frames (clip_len x num_clips), got {len(frames)}")
        # uint8 while splicing (the same values; a 96-frame 1080p video is 0.6 GB as uint8, 2.4 as float); an
        # upsampled video comes back as floats holding whole 0-255 values, so the cast to uint8 is exact
        video = torch.from_numpy(np.ascontiguousarray(frames)).permute(3, 0, 1, 2)
        gen = torch.Generator().manual_seed(int(c.seed))
        video = spatial_fragments(video, int(c.fragments), int(c.fsize), int(c.aligned), gen).to(torch.uint8)
        s = video.shape[-1]
        return video.reshape(3, int(c.num_clips), int(c.clip_len), s, s).permute(1, 0, 2, 3, 4)

    def clip_outputs(self, clips):
        """The head's outputs ``(N, positions)`` of each clip (``clips``: uint8 mosaics from ``clips``), normalised
        with ImageNet mean/std on the model's device, ``batch_size`` clips per forward pass."""
        torch = _torch()
        outs = []
        bs = max(1, int(self.cfg.batch_size))
        mean = torch.tensor(IMAGENET_MEAN, device=self.device).view(1, 3, 1, 1, 1)
        std = torch.tensor(IMAGENET_STD, device=self.device).view(1, 3, 1, 1, 1)
        with torch.inference_mode():
            for start in range(0, len(clips), bs):
                x = (clips[start:start + bs].to(self.device).float() - mean) / std
                outs.append(self.net(x.to(self.dtype)).float().flatten(1))  # stays on the device: no sync per pass
        return torch.cat(outs).cpu()

    def raw_score(self, clips) -> float:
        """The mean of the head's outputs over positions and clips."""
        # equal-size clips: the mean over all positions of all clips
        return float(self.clip_outputs(clips).mean())

    def pool_inputs(self, edited: np.ndarray, source: np.ndarray | None, kwargs: dict):
        """The decode worker cuts the fragment mosaics (uint8, 14 MB for 96 frames of 720p instead of 265 MB of
        frames) and the pool only runs the network on them."""
        return self.clips(edited).numpy(), None, {**kwargs, "mosaics": True}

    def _clips_of(self, edited: np.ndarray, mosaics: bool):
        return _torch().from_numpy(np.ascontiguousarray(edited)) if mosaics else self.clips(edited)

    def compute(self, edited: np.ndarray, source: np.ndarray | None = None, mosaics: bool = False) -> float:
        """``edited``: the sampled frames, or (``mosaics``) the mosaics ``pool_inputs`` cut from them."""
        raw = self.raw_score(self._clips_of(edited, mosaics))
        return technical_score(raw, float(self.cfg.raw_mean), float(self.cfg.raw_std))

    def compute_many(self, items) -> list[float | Exception]:
        """The clips of every case through the network together (``batch_size`` clips per pass, whatever case
        they belong to), then each case's mean over its own clips: clips are independent in the network, so
        this is ``compute`` per case. A case whose frames cannot make its clips is its own failure."""
        torch = _torch()
        results: list[float | Exception] = [0.0] * len(items)
        clips, owners = [], []
        for k, (edited, _source, kwargs) in enumerate(items):
            try:
                clips.append(self._clips_of(edited, bool((kwargs or {}).get("mosaics"))))
            except Exception as exc:
                results[k] = exc
                continue
            owners.append(k)
        if not clips:
            return results
        per_clip = self.clip_outputs(torch.cat(clips)).view(len(clips), -1)  # one row per case: its clips' outputs
        for k, raw in zip(owners, per_clip.mean(dim=1).tolist()):
            results[k] = technical_score(raw, float(self.cfg.raw_mean), float(self.cfg.raw_std))
        return results
