"""CoTracker3 offline: our own PyTorch definition of the point tracker behind MF, loading ``scaled_offline.pth``.

CoTracker3 (Karaev et al., "CoTracker3: Simpler and Better Point Tracking by Pseudo-Labelling Real Videos",
arXiv 2410.11831, §3, the model) tracks query points ``(t, x, y)`` through a video jointly:

* **Feature maps** (§3): a residual CNN (RAFT's basic encoder) turns each frame, scaled to
  [-1, 1], into 128-channel features at 1/4 resolution (the outputs of its four stages resized to 1/4 and
  fused by two convolutions); features are L2-normalised per position and average-pooled into a 4-level
  pyramid (1/4 ... 1/32).
* **4D correlation features** (§3, after LocoTrack): around the query point, a
  7x7 patch of features (radius 3, every pyramid level) is compared with the 7x7 patch around the current
  estimate in every frame: all 49 x 49 dot products, flattened and projected by an MLP (2401 -> 384 -> 256)
  per level; the four levels give 1024 numbers per point and frame.
* **Iterative updates** (§3): a transformer takes, per point and frame, the visibility and confidence logits,
  the correlation features and a Fourier encoding of the displacement to the next and previous frame (plus a
  sinusoidal time embedding), and alternates attention over time (per track) with attention across tracks
  through 64 learned *virtual tracks* (from CoTracker, Karaev et al. 2024: points -> virtual tracks, virtual
  self-attention, virtual tracks -> points); it predicts increments of position, visibility and confidence
  logits. The offline model sees the whole video at once and runs ``iters`` updates (the official predictor:
  6) from every track starting at its query position.

The predictor (``track_points``) does what the official ``CoTrackerPredictor`` does for a grid: the video is
resized to the model resolution (384x512, bilinear, ``align_corners=True``), a ``grid_size`` x ``grid_size``
grid of queries is laid on the query frame of the *model-resolution* video (inset by 1/64 of its width, as
``motion.grid_points``), the tracks are scaled back by ``(W-1)/(512-1), (H-1)/(384-1)``, and at the query
frame each track is set to its query point and marked visible. Another model size can be asked for
(``metrics.MF.cotracker_resolution``: faster, but off the trained one); the motion encoding then keeps the
trained 384x512 scale. Visibility is ``sigmoid`` of the visibility logit; the official offline predictor
thresholds it at 0.9 and does not use the confidence (its online predictor thresholds ``visibility *
confidence`` at 0.6): both are returned here.

**Weights**: ``metrics.MF.cotracker_weights``, the official ``scaled_offline.pth`` (a bare state dict; a
``{"model": ...}`` or ``{"state_dict": ...}`` wrapper is unwrapped). Parameter names and shapes are the official
ones (``fnet.*``, ``corr_mlp.fc1/fc2``, ``updateformer.*`` including its ``virual_tracks`` spelling, and the
``time_emb`` buffer of the 60-frame offline window, ``(1, 60, 1110)``; ``scaled_online.pth`` has a 16-frame one
and is refused); a missing or reshaped key fails naming the config key (``base.load_checked``).

What was checked (against the official definition run side by side, random weights; not in the test suite,
which has no official package): the same 188 state-dict entries and shapes (25,385,700
parameters); float64 outputs equal to 1e-11 px; on an H100 in float32 at the official MF settings (16 frames,
384x512, 10x10 grid, 6 updates) tracks within 3e-5 px and the same visible points (speed: docs/performance.md).
Attention uses PyTorch's ``scaled_dot_product_attention``, equal to the explicit softmax up to float rounding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

WEIGHTS_KEY = "metrics.MF.cotracker_weights"
WHAT = "a CoTracker3 offline checkpoint (scaled_offline.pth)"
MODEL_RESOLUTION = (384, 512)  # (H, W): the official predictor's interp_shape, also the motion-encoding scale
STRIDE = 4  # feature maps at 1/4 of the input
LATENT_DIM = 128  # feature channels
CORR_RADIUS = 3  # 7x7 patches
CORR_LEVELS = 4  # pyramid levels
HIDDEN = 384  # transformer width
HEADS = 8
DEPTH = 3  # time blocks; each followed by one round of virtual-track attention
VIRTUAL_TRACKS = 64
WINDOW_LEN = 60  # the offline checkpoint's time embedding covers 60 frames
POSENC_FREQS = 10  # displacement encoding: sin/cos at 2^0 ... 2^9
INPUT_DIM = 2 + CORR_LEVELS * 256 + 4 * (1 + 2 * POSENC_FREQS)  # vis, conf, correlations, motion: 1110
ITERS = 6  # updates the official predictor runs
VISIBILITY_THRESHOLD = 0.9  # the official offline predictor's threshold on sigmoid(visibility)
ENCODER_CHUNK = 64  # frames per encoder call


# --------------------------------------------------------------------------------------- feature encoder


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with instance norm and ReLU, plus a (strided 1x1 conv) shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1)
        self.norm1, self.norm2 = nn.InstanceNorm2d(out_ch), nn.InstanceNorm2d(out_ch)
        self.downsample = (
            nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride), nn.InstanceNorm2d(out_ch))
            if stride != 1
            else None
        )

    def forward(self, x):
        y = F.relu(self.norm1(self.conv1(x)))
        y = F.relu(self.norm2(self.conv2(y)))
        return F.relu((x if self.downsample is None else self.downsample(x)) + y)


class FeatureEncoder(nn.Module):
    """Frames ``(n, 3, H, W)`` in [-1, 1] -> features ``(n, 128, H/4, W/4)`` (§3 "Feature maps")."""

    def __init__(self, dim: int = LATENT_DIM):
        super().__init__()
        widths = (dim // 2, dim // 4 * 3, dim, dim)  # 64, 96, 128, 128
        self.conv1 = nn.Conv2d(3, widths[0], 7, stride=2, padding=3)
        self.norm1 = nn.InstanceNorm2d(widths[0])
        prev = widths[0]
        for i, (w, s) in enumerate(zip(widths, (1, 2, 2, 2)), start=1):
            setattr(self, f"layer{i}", nn.Sequential(ResidualBlock(prev, w, s), ResidualBlock(w, w, 1)))
            prev = w
        self.conv2 = nn.Conv2d(sum(widths), dim * 2, 3, padding=1)
        self.norm2 = nn.InstanceNorm2d(dim * 2)
        self.conv3 = nn.Conv2d(dim * 2, dim, 1)

    def forward(self, x):
        size = (x.shape[-2] // STRIDE, x.shape[-1] // STRIDE)
        x = F.relu(self.norm1(self.conv1(x)))
        stages = []
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            x = layer(x)
            stages.append(F.interpolate(x, size, mode="bilinear", align_corners=True))
        return self.conv3(F.relu(self.norm2(self.conv2(torch.cat(stages, dim=1)))))


# ------------------------------------------------------------------------------------------- transformer


class Mlp(nn.Module):
    def __init__(self, in_dim: int, hidden: int, out_dim: int, approximate: str = "none"):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(in_dim, hidden), nn.Linear(hidden, out_dim)
        self.approximate = approximate

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


class Attention(nn.Module):
    """Multi-head attention with one projection for queries and one (split in halves) for keys and values."""

    def __init__(self, dim: int = HIDDEN, heads: int = HEADS):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(dim, 2 * dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, context):
        b, n, d = x.shape
        k, v = self.to_kv(context).chunk(2, dim=-1)

        def heads(t):
            return t.reshape(b, t.shape[1], self.heads, d // self.heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.to_q(x)), heads(k), heads(v))
        return self.to_out(out.transpose(1, 2).reshape(b, n, d))


class SelfBlock(nn.Module):
    """Pre-norm self-attention and MLP (LayerNorms without affine parameters, tanh GELU)."""

    def __init__(self, dim: int = HIDDEN):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim, dim, approximate="tanh")

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h)
        return x + self.mlp(self.norm2(x))


class CrossBlock(nn.Module):
    """Pre-norm cross-attention from ``x`` to ``context`` (the context's LayerNorm has affine parameters)."""

    def __init__(self, dim: int = HIDDEN):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm_context = nn.LayerNorm(dim)
        self.cross_attn = Attention(dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim, dim, approximate="tanh")

    def forward(self, x, context):
        x = x + self.cross_attn(self.norm1(x), self.norm_context(context))
        return x + self.mlp(self.norm2(x))


class UpdateTransformer(nn.Module):
    """Tokens ``(B, N, T, INPUT_DIM)`` -> increments ``(B, N, T, 4)``: dx, dy, visibility, confidence logits.

    Each of the ``DEPTH`` rounds: attention over time within each track (virtual tracks included), then, per
    frame, the virtual tracks read the points, attend among themselves, and the points read them back.
    """

    def __init__(self):
        super().__init__()
        self.input_transform = nn.Linear(INPUT_DIM, HIDDEN)
        self.flow_head = nn.Linear(HIDDEN, 2)
        self.vis_conf_head = nn.Linear(HIDDEN, 2)
        self.virual_tracks = nn.Parameter(torch.randn(1, VIRTUAL_TRACKS, 1, HIDDEN))  # sic: the official name
        self.time_blocks = nn.ModuleList(SelfBlock() for _ in range(DEPTH))
        self.space_virtual_blocks = nn.ModuleList(SelfBlock() for _ in range(DEPTH))
        self.space_point2virtual_blocks = nn.ModuleList(CrossBlock() for _ in range(DEPTH))
        self.space_virtual2point_blocks = nn.ModuleList(CrossBlock() for _ in range(DEPTH))

    def forward(self, x):
        tokens = self.input_transform(x)
        b, n, t, d = tokens.shape
        tokens = torch.cat([tokens, self.virual_tracks.expand(b, -1, t, -1)], dim=1)
        m = tokens.shape[1]
        for i in range(DEPTH):
            tokens = self.time_blocks[i](tokens.reshape(b * m, t, d)).reshape(b, m, t, d)
            per_frame = tokens.transpose(1, 2).reshape(b * t, m, d)
            points, virtual = per_frame[:, :n], per_frame[:, n:]
            virtual = self.space_virtual2point_blocks[i](virtual, points)
            virtual = self.space_virtual_blocks[i](virtual)
            points = self.space_point2virtual_blocks[i](points, virtual)
            tokens = torch.cat([points, virtual], dim=1).reshape(b, t, m, d).transpose(1, 2)
        tokens = tokens[:, :n]
        return torch.cat([self.flow_head(tokens), self.vis_conf_head(tokens)], dim=-1)


# ------------------------------------------------------------------------------------------ the tracker


def sincos_time_embedding(length: int, dim: int = INPUT_DIM) -> torch.Tensor:
    """``(1, length, dim)``: ``sin(t w_k)`` then ``cos(t w_k)``, ``w_k = 10000^(-k / (dim/2))``, t = 0..length-1."""
    omega = 1.0 / 10000 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim / 2.0))
    angles = torch.arange(length, dtype=torch.float64)[:, None] * omega[None]
    return torch.cat([angles.sin(), angles.cos()], dim=1)[None].float()


def fourier_encode(x: torch.Tensor, freqs: int = POSENC_FREQS) -> torch.Tensor:
    """``[x, sin(2^k x) for k, then cos(2^k x) for k]`` along the last axis (frequency-major, then component)."""
    scaled = x[..., None, :] * (2.0 ** torch.arange(freqs, device=x.device, dtype=x.dtype))[:, None]
    scaled = scaled.flatten(-2)
    return torch.cat([x, torch.sin(scaled), torch.cos(scaled)], dim=-1)


def patch_offsets(radius: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """The ``(2r+1)^2`` offsets ``(dx, dy)`` of a patch, x-offset major: index ``a (2r+1) + b`` is
    ``(a - r, b - r)``. The learned correlation MLP depends on this order."""
    d = torch.arange(-radius, radius + 1, device=device, dtype=dtype)
    dx, dy = torch.meshgrid(d, d, indexing="ij")
    return torch.stack([dx, dy], dim=-1).reshape(-1, 2)


def sample_points(fmap: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
    """Bilinear features of ``fmap (n, C, H, W)`` at pixel positions ``xy (n, P, 2)`` -> ``(n, P, C)``.

    Pixel centres at integers (``align_corners=True``); positions outside clamp to the border."""
    h, w = fmap.shape[-2:]
    scale = xy.new_tensor([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)])
    grid = (xy * scale - 1.0)[:, :, None]
    return F.grid_sample(fmap, grid, mode="bilinear", padding_mode="border", align_corners=True)[..., 0].transpose(1, 2)


def query_patches(fmap: torch.Tensor, queries: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Features of the patch around each query on its query frame: ``fmap`` (B, T, C, H, W), ``queries``
    (B, N, 3) = (frame, x, y) in this level's pixels -> ``(B, N, len(offsets), C)``."""
    frames = queries[..., 0].long()
    xy = queries[..., None, 1:] + offsets  # (B, N, 49, 2)
    b, n, k, _ = xy.shape
    out = xy.new_zeros(b, n, k, fmap.shape[2])
    for f in frames.unique().tolist():  # a grid uses one query frame: one sampling pass
        feats = sample_points(fmap[:, f], xy.reshape(b, n * k, 2)).reshape(b, n, k, -1)
        out = torch.where((frames == f)[..., None, None], feats, out)
    return out


class CoTracker3Offline(nn.Module):
    """The offline CoTracker3 network (official class ``CoTrackerThreeOffline``, ``stride=4, corr_radius=3``)."""

    def __init__(self, window_len: int = WINDOW_LEN):
        super().__init__()
        self.fnet = FeatureEncoder()
        self.corr_mlp = Mlp((2 * CORR_RADIUS + 1) ** 4, HIDDEN, 256)
        self.updateformer = UpdateTransformer()
        self.register_buffer("time_emb", sincos_time_embedding(window_len))

    def time_embedding(self, t: int) -> torch.Tensor:
        if t == self.time_emb.shape[1]:
            return self.time_emb
        # a video of another length: the table linearly resampled to t frames
        return F.interpolate(self.time_emb.transpose(1, 2), size=t, mode="linear").transpose(1, 2)

    def pyramid(self, video: torch.Tensor) -> list[torch.Tensor]:
        """``(B, T, 3, H, W)`` in 0..255 -> ``CORR_LEVELS`` maps ``(B, T, C, H/4/2^l, W/4/2^l)``."""
        b, t = video.shape[:2]
        frames = (video.flatten(0, 1) / 255.0) * 2.0 - 1.0
        # frames are encoded independently: chunks bound the encoder's activation memory for long batches
        feats = torch.cat([self.fnet(chunk) for chunk in frames.split(ENCODER_CHUNK)])
        feats = feats / feats.square().sum(dim=1, keepdim=True).clamp_min(1e-12).sqrt()
        levels = [feats]
        for _ in range(CORR_LEVELS - 1):
            levels.append(F.avg_pool2d(levels[-1], 2, stride=2))
        return [f.reshape(b, t, *f.shape[1:]) for f in levels]

    def correlation_features(self, levels, patches, coords, offsets) -> torch.Tensor:
        """4D correlations of each query patch with the patch at the current estimate, MLP-projected per
        level: ``(B, T, N, 4 * 256)``. ``coords`` (B, T, N, 2) in 1/4-resolution pixels."""
        b, t, n, _ = coords.shape
        out = []
        for lvl, (fmap, patch) in enumerate(zip(levels, patches)):
            xy = (coords / 2**lvl)[..., None, :] + offsets  # (B, T, N, 49, 2)
            k = xy.shape[-2]
            target = sample_points(fmap.flatten(0, 1), xy.reshape(b * t, n * k, 2)).reshape(b, t, n, k, -1)
            corr = torch.einsum("btnkc,bnlc->btnkl", target, patch)  # target offset major, query offset minor
            out.append(self.corr_mlp(corr.reshape(b, t, n, k * k)))
        return torch.cat(out, dim=-1)

    def motion_encoding(self, coords: torch.Tensor) -> torch.Tensor:
        """Fourier features of the displacement to the next frame and from the previous one (0 at the ends),
        in units of the 1/4-resolution model frame: ``(B, T, N, 84)``."""
        fwd = F.pad(coords[:, :-1] - coords[:, 1:], (0, 0, 0, 0, 0, 1))
        bwd = F.pad(coords[:, 1:] - coords[:, :-1], (0, 0, 0, 0, 1, 0))
        scale = coords.new_tensor([MODEL_RESOLUTION[1] / STRIDE, MODEL_RESOLUTION[0] / STRIDE])
        return fourier_encode(torch.cat([fwd / scale, bwd / scale], dim=-1))

    def forward(self, video: torch.Tensor, queries: torch.Tensor, iters: int = ITERS):
        """``video`` (B, T, 3, H, W) float RGB in 0..255 (H, W multiples of 4 and at least 32x32 for four
        levels), ``queries`` (B, N, 3) = (frame, x, y) in pixels -> tracks (B, T, N, 2) in pixels,
        visibility and confidence (B, T, N) in [0, 1]."""
        b, t, _, h, w = video.shape
        if h % STRIDE or w % STRIDE:
            raise ValueError(f"CoTracker3 needs a frame size divisible by {STRIDE}, got {h}x{w}")
        levels = self.pyramid(video)
        offsets = patch_offsets(CORR_RADIUS, video.device, video.dtype)
        q = torch.cat([queries[..., :1], queries[..., 1:] / STRIDE], dim=-1).to(video.dtype)
        patches = []
        for lvl, fmap in enumerate(levels):
            patches.append(query_patches(fmap, torch.cat([q[..., :1], q[..., 1:] / 2**lvl], -1), offsets))
        n = q.shape[1]
        coords = q[:, None, :, 1:].expand(b, t, n, 2).contiguous()
        vis = coords.new_zeros(b, t, n)
        conf = coords.new_zeros(b, t, n)
        time_emb = self.time_embedding(t).to(coords.dtype)
        for _ in range(iters):
            x = torch.cat(
                [
                    vis[..., None],
                    conf[..., None],
                    self.correlation_features(levels, patches, coords, offsets),
                    self.motion_encoding(coords),
                ],
                dim=-1,
            )
            x = x.transpose(1, 2) + time_emb[:, None]  # (B, N, T, D)
            delta = self.updateformer(x).transpose(1, 2)  # (B, T, N, 4)
            coords = coords + delta[..., :2]
            vis, conf = vis + delta[..., 2], conf + delta[..., 3]
        return coords * STRIDE, torch.sigmoid(vis), torch.sigmoid(conf)


# ------------------------------------------------------------------------------------- loading, predictor


def load_cotracker3(path: str | Path, device: str | torch.device = "cpu") -> CoTracker3Offline:
    """The offline model from ``scaled_offline.pth`` (keys and shapes checked; errors name ``WEIGHTS_KEY``)."""
    from vbench_ray.metrics.base import load_checked, read_state_dict

    state = read_state_dict(path, WEIGHTS_KEY)
    if isinstance(state.get("model"), dict):  # the training script's checkpoint layout
        state = state["model"]
    return load_checked(CoTracker3Offline(), state, WEIGHTS_KEY, path, WHAT).to(device)


def grid_queries(grid_size: int, resolution: Sequence[int], frame: int = 0) -> torch.Tensor:
    """``(1, grid_size^2, 3)`` queries ``(frame, x, y)`` on a ``resolution = (H, W)`` frame, row-major, inset by
    W/64 (the official predictor's grid, the same as ``motion.grid_points``)."""
    from vbench_ray.metrics.tracking_grid import grid_points

    xy = torch.from_numpy(grid_points(int(grid_size), int(resolution[0]), int(resolution[1]))).float()
    return torch.cat([torch.full((len(xy), 1), float(frame)), xy], dim=1)[None]


def track_points(
    model: nn.Module,
    video: torch.Tensor,
    grid_size: int,
    query_frame: int = 0,
    resolution: Sequence[int] = MODEL_RESOLUTION,
    iters: int = ITERS,
):
    """Grid tracking as the official offline predictor does (module docstring).

    ``video`` (B, T, 3, H, W) float RGB 0..255 -> tracks (B, T, N, 2) in the video's pixels, visibility and
    confidence (B, T, N) in [0, 1] (at the query frame: the query point, visibility 1)."""
    b, t, c, h, w = video.shape
    rh, rw = int(resolution[0]), int(resolution[1])
    small = F.interpolate(video.flatten(0, 1), (rh, rw), mode="bilinear", align_corners=True).reshape(b, t, c, rh, rw)
    queries = grid_queries(grid_size, (rh, rw), query_frame).to(video.device).expand(b, -1, -1)
    tracks, vis, conf = model(small, queries, iters=iters)
    tracks, vis = tracks.clone(), vis.clone()
    tracks[:, query_frame] = queries[..., 1:]
    vis[:, query_frame] = 1.0
    scale = tracks.new_tensor([(w - 1) / max(rw - 1, 1), (h - 1) / max(rh - 1, 1)])
    return tracks * scale, vis, conf


def save_random_cotracker3(path: str | Path, seed: int = 0) -> Path:
    """A random-initialised model saved like the official checkpoint (a bare state dict, official key names).
    Tests and perf only: its tracks mean nothing."""
    torch.manual_seed(seed)
    model = CoTracker3Offline()
    # small output heads, as trained models have: random increments then stay a few pixels
    for head in (model.updateformer.flow_head, model.updateformer.vis_conf_head):
        nn.init.normal_(head.weight, std=1e-3)
        nn.init.zeros_(head.bias)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return path
