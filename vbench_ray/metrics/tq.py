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
Not verified (it needs the official weights and a GPU): numerical agreement with the official implementation on
real weights, and which revision of DOVER's score rescaling T2AV-Compass's copy (used by CoVEBench) carries:
earlier DOVER revisions normalised the technical output with (r + 0.08285) / 0.03774 instead; set
``raw_mean: -0.08285, raw_std: 0.03774`` for that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import numpy as np

from vbench_ray.metrics.base import FrameMetric, Sampling, _torch, register_metric, require_weights, weights_problem
from vbench_ray.metrics.tq_net import ARCHS, WEIGHTS_KEY, load_dover_technical
from vbench_ray.video.io import VideoInfo

IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)
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
    gpu_fraction: float = 0.1  # GPU share per pool actor, device cuda (pool_plan)


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
    rnd_h = (
        torch.randint(hlen - fsize, shape, generator=generator)
        if hlen > fsize
        else torch.zeros(shape, dtype=torch.long)
    )
    rnd_w = (
        torch.randint(wlen - fsize, shape, generator=generator)
        if wlen > fsize
        else torch.zeros(shape, dtype=torch.long)
    )
    out = torch.zeros(video.shape[:-2] + (size, size), dtype=video.dtype)
    for i, hs in enumerate(hgrid):
        for j, ws in enumerate(wgrid):
            for k in range(t // aligned):
                h0, w0 = hs + int(rnd_h[i, j, k]), ws + int(rnd_w[i, j, k])
                out[:, k * aligned : (k + 1) * aligned, i * fsize : (i + 1) * fsize, j * fsize : (j + 1) * fsize] = (
                    video[:, k * aligned : (k + 1) * aligned, h0 : h0 + fsize, w0 : w0 + fsize]
                )
    return out


def technical_score(raw: float, mean: float, std: float) -> float:
    """DOVER's reported technical score: ``100 * sigmoid((raw - mean) / std)``."""
    return float(100.0 / (1.0 + np.exp(-(raw - mean) / std)))


@register_metric
class TQ(FrameMetric):
    """Technical Quality: DOVER++'s technical branch on spatial fragments, 0-100."""

    name = "TQ"
    paper = "CoVEBench App. F.2 (Technical Quality, DOVER++ technical branch)"
    weights_from = {  # where the official weights are published
        "weights": "DOVER_plus_plus.pth in t2av-compass/Objective/Video/DOVER/pretrained_weights/ of "
        "https://github.com/NJU-LINK/T2AV-Compass (commit b726966, as the official CoVEBench "
        "download_assets.py pins it)",
    }
    config_class = TQConfig
    choices = {"dtype": DTYPES, "arch": tuple(ARCHS)}
    needs_source = False
    higher_is_better = True
    scale = "[0,100]"
    model_backed: ClassVar[bool] = True
    gpu_cost = 100.0  # ms per case in its pool actor, five-metric stream, one H200 (tests/perf/gpu_stream.py)
    # a case's score does not depend on the cases scored with it (tests/pipeline/test_metrics_runtime_keys.py)
    runtime_keys = frozenset({"pool_batch"})

    def sampling(self) -> Sampling:
        c = self.cfg
        return DoverSampling(
            n=None,
            clip_len=int(c.clip_len),
            num_clips=int(c.num_clips),
            frame_interval=int(c.frame_interval),
            seed=int(c.seed),
        )

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
                x = (clips[start : start + bs].to(self.device).float() - mean) / std
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
