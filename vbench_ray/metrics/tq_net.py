"""The network of TQ (CoVEBench App. F, Video Quality): the technical branch of DOVER++ (Wu et al., 2023), a
Video Swin-T in FAST-VQA's variant (gated fragment position bias) with DOVER's per-position head; our own
implementation, with its builder, the DOVER(++) checkpoint loader and a random-weight checkpoint for tests and
perf. The architecture and the checkpoint key mapping are described in ``vbench_ray/metrics/tq.py``'s module
docstring (**Network**, **Weights**), next to the metric (sampling, fragments, score) that runs it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from vbench_ray.metrics.base import _torch, load_checked, read_state_dict

WEIGHTS_KEY = "metrics.TQ.weights"
# swin_t: DOVER's technical backbone. tiny: the same architecture at toy width (tests only).
ARCHS = {
    "swin_t": dict(
        embed_dim=96,
        depths=(2, 2, 6, 2),
        num_heads=(3, 6, 12, 24),
        window=(8, 7, 7),
        frag_bias=(True, True, True, False),
        head_hidden=64,
    ),
    "tiny": dict(
        embed_dim=8,
        depths=(2, 2, 2, 2),
        num_heads=(1, 1, 2, 2),
        window=(8, 7, 7),
        frag_bias=(True, True, True, False),
        head_hidden=8,
    ),
}


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
                Block(dim, heads, window, (0, 0, 0) if i % 2 == 0 else self.shift, frag_bias) for i in range(depth)
            )
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
                Stage(
                    e * 2**i,
                    depths[i],
                    spec["num_heads"][i],
                    spec["window"],
                    spec["frag_bias"][i],
                    merge=i < len(depths) - 1,
                )
                for i in range(len(depths))
            )
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
    """The technical branch from a DOVER(++) checkpoint (see ``vbench_ray.metrics.tq``'s module docstring,
    **Weights**, for the key mapping)."""
    mapped = {}
    for k, v in read_state_dict(path, WEIGHTS_KEY).items():
        k = k[len("module.") :] if k.startswith("module.") else k
        if k.endswith("relative_position_index"):
            continue
        for official, ours in (("technical_backbone.", "backbone."), ("technical_head.", "head.")):
            if k.startswith(official):
                mapped[ours + k[len(official) :]] = v
    return load_checked(
        build_dover_technical(arch),
        mapped,
        WEIGHTS_KEY,
        path,
        f"a DOVER technical branch of arch {arch!r}",
        shown_prefix="technical_",
    )


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
