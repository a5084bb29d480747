"""Aesthetics (AES), CoVEBench App. F (Video Quality): Aesthetic Predictor v2.5 (discus0434, 2024).

**Model.** A SigLIP vision tower (``google/siglip-so400m-patch14-384`` in the published predictor) whose
pooled output (the tower's attention-pooling head, ``pooler_output``) is L2-normalised and fed to an MLP:

    Linear(hidden, 1024) - Dropout - Linear(1024, 128) - Dropout - Linear(128, 64) - Dropout
    - Linear(64, 16) - Dropout - Linear(16, 1)

(no activations between the linears, as published). The head is our own module whose parameter names are the
published checkpoint's (``aesthetic_predictor_v2_5.pth``: ``scoring_head.{0,2,4,6,8}.{weight,bias}``); a state
dict saved from the full predictor (``layers.scoring_head.*``) loads too. The tower is transformers'
``SiglipVisionModel``, from a local directory (``config.json`` + weights; a full SigLIP checkpoint such as
``google/siglip-so400m-patch14-384`` works, its vision half is used). We do not use the
``aesthetic-predictor-v2-5`` PyPI package: it requires torchvision and downloads the tower by name.

**Frames.** Each frame is resized to the tower's ``image_size`` squared (bicubic, as SigLIP's image processor),
rounded back to 8 bits, scaled to [0, 1] and normalised with mean = std = 0.5. ``resize``: ``pil`` resizes with
PIL on the CPU (transformers' PIL-backed ``SiglipImageProcessor``); ``torch`` resizes on the model's device with
``interpolate(bicubic, antialias=True)`` (what transformers 5's default, torchvision-backed SigLIP processor does;
downscaling, the two differ by at most one grey level at some pixels; a frame smaller than the tower's input is
upscaled with slightly different bicubic kernels). With ``pil`` (the default) in a pool, the decode worker does the
resize (``pool_inputs``: every CPU of the cluster resizes, the pool's one CPU does not become the GPU's bottleneck,
and the row carries tower-size frames instead of native ones). The score of a frame is the head's output (about 1-10;
the paper's Table 3 reports 3.7-5.1 per model).

**Video score.** The paper (App. F): "we score both the keyframes and 10 uniformly sampled frames, then compute
AES as the average of all keyframe and sampled-frame aesthetic scores". Default (``keyframes: true``): the mean
over the 10 uniform frames (``round(i*(T-1)/9)``) followed by the video's keyframes, i.e. the container's
I-frames as the decoder reports them (decord ``get_key_indices``, PyAV ``key_frame``; ``max_keyframes`` caps
how many, evenly chosen), each frame counted once per list it is in (a keyframe that is also a uniform sample
counts twice, as "the average of all keyframe and sampled-frame scores" reads). The official code
(``metrics/vq/aes/eval_aes.py``) scores only the 10 uniform frames: ``keyframes: false`` reproduces it. When
the decoder cannot report keyframes, the uniform frames alone are scored. Higher is better.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional, Sequence

import numpy as np

from vbench_ray.metrics.base import (
    FrameMetric,
    Sampling,
    _torch,
    load_checked,
    read_state_dict,
    register_metric,
    require_weights,
    weights_problem,
)
from vbench_ray.video.io import VideoInfo, uniform_indices

log = logging.getLogger(__name__)

ENCODER_KEY = "metrics.AES.encoder"
HEAD_KEY = "metrics.AES.weights"
# the head's layer widths after the tower's hidden size, and the dropout after each linear but the last
HEAD_WIDTHS = (1024, 128, 64, 16, 1)
HEAD_DROPOUT = (0.5, 0.5, 0.5, 0.2)
DTYPES = ("auto", "float32", "bfloat16", "float16")
RESIZES = ("pil", "torch")


@dataclass
class AESConfig:
    encoder: Optional[str] = None  # local SigLIP directory (config.json + weights), e.g. siglip-so400m-patch14-384
    weights: Optional[str] = None  # the predictor's MLP head state dict, e.g. aesthetic_predictor_v2_5.pth
    device: str = "cpu"  # cpu | cuda | cuda:N
    dtype: str = "auto"  # auto: bfloat16 on CUDA (as the official code), float32 on CPU | float32 | bfloat16 | float16
    frames: int = 10  # uniformly sampled frames per video (paper and official code: 10)
    keyframes: bool = True  # also score the video's keyframes (paper); false = the official code (uniform only)
    max_keyframes: Optional[int] = None  # at most this many keyframes (evenly chosen); null = all of them
    resize: str = "pil"  # pil (PIL bicubic on a CPU: the decode worker in a pool) | torch (bicubic antialias, device)
    batch_size: int = 32  # frames per forward pass, across the cases of a pool call (official: 32 per video)
    pool_batch: int = 8  # cases one pool call scores together (their frames share forward passes)
    gpu_fraction: float = 0.1  # GPU share per pool actor, device cuda (pool_plan)


@dataclass(frozen=True)
class KeyframeSampling(Sampling):
    """``n`` uniform frames, then the video's keyframes (``VideoInfo.keyframes``; at most ``max_keyframes``)."""

    keyframes: bool = True
    max_keyframes: Optional[int] = None

    def indices(self, info: VideoInfo) -> list[int]:
        out = uniform_indices(info.num_frames, int(self.n or 10))
        if self.keyframes:
            out += keyframe_indices(info, self.max_keyframes)
        return out


def keyframe_indices(info: VideoInfo, cap: Optional[int] = None) -> list[int]:
    keys = [int(k) for k in (info.keyframes or ()) if 0 <= int(k) < info.num_frames]
    if info.keyframes is None:
        log.debug("AES: %s reports no keyframes; scoring the uniform frames only", info.path)
    if cap is not None and len(keys) > cap:
        keys = [keys[i] for i in uniform_indices(len(keys), int(cap))]
    return keys


def build_head(hidden_size: int):
    """The predictor's MLP head, with the published checkpoint's parameter names (``scoring_head.<i>``)."""
    nn = _torch().nn

    class AestheticHead(nn.Module):
        def __init__(self):
            super().__init__()
            layers, width = [], hidden_size
            for k, out in enumerate(HEAD_WIDTHS):
                layers.append(nn.Linear(width, out))
                if k < len(HEAD_DROPOUT):
                    layers.append(nn.Dropout(HEAD_DROPOUT[k]))
                width = out
            self.scoring_head = nn.Sequential(*layers)

        def forward(self, embeds):
            return self.scoring_head(embeds)

    return AestheticHead()


def load_head(path: str | Path, hidden_size: int):
    """The head from a state dict file; a wrong file fails naming ``metrics.AES.weights``."""
    state = read_state_dict(path, HEAD_KEY)
    state = {
        k[len("layers.") :] if k.startswith("layers.") else k: v
        for k, v in state.items()
        if not k.startswith(("vision_model.",))
    }
    return load_checked(
        build_head(hidden_size),
        state,
        HEAD_KEY,
        path,
        f"an Aesthetic Predictor v2.5 head (keys scoring_head.{{0,2,4,6,8}}.{{weight,bias}}) for the "
        f"encoder's hidden size {hidden_size} ({ENCODER_KEY})",
    )


def load_encoder(path: str | Path):
    """transformers' ``SiglipVisionModel`` from a local directory (never a download)."""
    from transformers import SiglipVisionModel

    try:
        return SiglipVisionModel.from_pretrained(str(path), local_files_only=True).eval()
    except Exception as exc:  # noqa: BLE001
        raise ValueError(
            f"{ENCODER_KEY}={path}: cannot load a SigLIP vision model from it ({type(exc).__name__}: {exc})"
        ) from exc


def tower_image_size(path: str | Path) -> int:
    """The SigLIP tower's input size from its ``config.json`` (a vision model's, or a full SigLIP's ``vision_config``),
    read without loading the model: what the decode worker needs to resize for the pool."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
        return int(config.get("vision_config", config)["image_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{ENCODER_KEY}={path}: no image_size in its config.json ({type(exc).__name__}: {exc})"
        ) from exc


def dtype_name(name: str, device: str, bf16: bool = True) -> str:
    """What ``metrics.AES.dtype`` resolves to on ``device``: ``auto`` is bfloat16 on CUDA, as the official code
    runs the predictor (float16 on a GPU without bfloat16: ``bf16=False``), and float32 on the CPU; any other
    value is itself."""
    if name != "auto":
        return name
    if str(device).startswith("cuda"):
        return "bfloat16" if bf16 else "float16"
    return "float32"


def resolve_dtype(name: str, device: str):
    """``dtype_name`` as a torch dtype, asking this process's GPU whether it runs bfloat16."""
    torch = _torch()
    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported() if str(device).startswith("cuda") else True
    return getattr(torch, dtype_name(name, device, bf16))


def resize_pil(frames: np.ndarray | Sequence[np.ndarray], size: int) -> np.ndarray:
    """uint8 RGB frames -> uint8 ``(N, size, size, 3)``, PIL bicubic (SigLIP's PIL image processor)."""
    from PIL import Image

    return np.stack([np.asarray(Image.fromarray(f).resize((size, size), Image.BICUBIC)) for f in frames])


def normalise(resized: np.ndarray) -> np.ndarray:
    """uint8 ``(N, S, S, 3)`` -> float32 ``(N, 3, S, S)`` in [0,1], mean = std = 0.5."""
    return ((resized.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(0, 3, 1, 2)


def preprocess(frames: np.ndarray | Sequence[np.ndarray], size: int) -> np.ndarray:
    """uint8 RGB ``(N, H, W, 3)`` -> float32 ``(N, 3, size, size)``: PIL bicubic resize, [0,1], mean = std = 0.5."""
    return normalise(resize_pil(frames, size))


def preprocess_torch(frames: np.ndarray | Sequence[np.ndarray], size: int, device):
    """``preprocess`` on ``device`` with torch (``device_images.device_preprocess``): bicubic with antialiasing (as
    torchvision's resize), rounded to 8 bits like the PIL path, then [0,1] and mean = std = 0.5. Frames may differ in
    size (several cases): each run of same-size frames is resized in one call."""
    torch = _torch()
    from vbench_ray.metrics.device_images import device_preprocess, fixed_plan

    plan = fixed_plan(size, size, "bicubic", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    out, start = [], 0
    while start < len(frames):
        end = start + 1
        while end < len(frames) and frames[end].shape == frames[start].shape:
            end += 1
        x = torch.stack([torch.from_numpy(np.ascontiguousarray(f)) for f in frames[start:end]]).to(device)
        out.append(device_preprocess(x, plan))
        start = end
    return torch.cat(out)


def save_tiny_aes(directory: str | Path, seed: int = 0, hidden_size: int = 32, image_size: int = 28) -> dict:
    """A random-initialised SigLIP tower + head of the real architecture at toy size (tests and perf only:
    the scores mean nothing). Returns ``{"encoder": dir, "weights": file}``. ``hidden_size=1152,
    image_size=384`` with the so400m depth gives the real size (see tests/perf/model_metrics.py)."""
    torch = _torch()
    from transformers import SiglipVisionConfig, SiglipVisionModel

    torch.manual_seed(seed)
    directory = Path(directory)
    cfg = SiglipVisionConfig(
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=14,
    )
    SiglipVisionModel(cfg).save_pretrained(directory / "siglip")
    head = build_head(hidden_size)
    torch.save(head.state_dict(), directory / "aesthetic_predictor_v2_5.pth")
    return {"encoder": str(directory / "siglip"), "weights": str(directory / "aesthetic_predictor_v2_5.pth")}


@register_metric
class AES(FrameMetric):
    """Aesthetics: Aesthetic Predictor v2.5 (SigLIP + MLP head), mean over uniform frames and keyframes."""

    name = "AES"
    paper = "CoVEBench App. F.2 (Aesthetics)"
    weights_from = {  # where the official weights are published
        "encoder": "google/siglip-so400m-patch14-384 (Hugging Face), the Aesthetic Predictor v2.5 backbone",
        "weights": "models/aesthetic_predictor_v2_5.pth of "
        "https://github.com/discus0434/aesthetic-predictor-v2-5 (commit c0e1556, as the official "
        "CoVEBench download_assets.py pins it)",
    }
    config_class = AESConfig
    choices = {"dtype": DTYPES, "resize": RESIZES}
    needs_source = False
    higher_is_better = True
    scale = "~[1,10]"
    model_backed: ClassVar[bool] = True
    gpu_cost = 120.0  # ms per case in its pool actor, five-metric stream, one H200 (tests/perf/gpu_stream.py)
    # a case's score does not depend on the cases scored with it (tests/pipeline/test_metrics_runtime_keys.py)
    runtime_keys = frozenset({"pool_batch"})

    @classmethod
    def resolved_settings(cls, cfg: dict) -> dict:
        """``dtype`` as it resolves on the recorded ``device`` (``dtype_name``: ``auto`` is float32 on the CPU,
        bfloat16 on CUDA): the weights' precision changes the scores, and ``device`` is no scoring option."""
        defaults = AESConfig()
        return {"dtype": dtype_name(str(cfg.get("dtype", defaults.dtype)), str(cfg.get("device", defaults.device)))}

    def sampling(self) -> Sampling:
        return KeyframeSampling(
            n=int(self.cfg.frames), keyframes=bool(self.cfg.keyframes), max_keyframes=self.cfg.max_keyframes
        )

    def resources(self) -> dict:
        return {"num_gpus": float(self.cfg.gpu_fraction)} if str(self.cfg.device).startswith("cuda") else {}

    @classmethod
    def check_weights(cls, cfg: Any) -> list[str]:
        return weights_problem(cfg.encoder, ENCODER_KEY, "AES SigLIP vision tower") + weights_problem(
            cfg.weights, HEAD_KEY, "AES Aesthetic Predictor v2.5 head"
        )

    def setup(self) -> None:
        torch = _torch()
        enc_path = require_weights(self.cfg.encoder, ENCODER_KEY, "AES SigLIP vision tower")
        head_path = require_weights(self.cfg.weights, HEAD_KEY, "AES Aesthetic Predictor v2.5 head")
        encoder = load_encoder(enc_path)
        head = load_head(head_path, int(encoder.config.hidden_size))
        self.device = torch.device(self.cfg.device)
        self.dtype = resolve_dtype(self.cfg.dtype, self.cfg.device)
        self.encoder = encoder.to(self.device, self.dtype)
        self.head = head.to(self.device, self.dtype)
        self.image_size = int(encoder.config.image_size)
        self.resize = str(self.cfg.resize)

    def pool_inputs(self, edited: np.ndarray, source: np.ndarray | None, kwargs: dict):
        """With ``resize: pil``, the decode worker resizes the frames to the tower's size (uint8, as PIL leaves
        them), so the pool only normalises them."""
        if str(self.cfg.resize) != "pil":
            return edited, source, kwargs
        _check_frames(edited)
        size = tower_image_size(require_weights(self.cfg.encoder, ENCODER_KEY, "AES SigLIP vision tower"))
        return resize_pil(edited, size), None, {**kwargs, "resized": True}

    def frame_scores(self, frames: np.ndarray | Sequence[np.ndarray], resized: bool = False) -> np.ndarray:
        """One aesthetic score per frame (uint8 RGB ``(N, H, W, 3)``, or a list of ``(H, W, 3)`` frames of any
        sizes; ``resized``: already at the tower's size, from ``pool_inputs``), ``batch_size`` frames per pass."""
        torch = _torch()
        scores = []
        bs = max(1, int(self.cfg.batch_size))
        with torch.inference_mode():
            for start in range(0, len(frames), bs):
                chunk = frames[start : start + bs]
                if resized:
                    x = torch.from_numpy(normalise(np.stack(chunk)))
                elif self.resize == "torch":
                    x = preprocess_torch(chunk, self.image_size, self.device)
                else:
                    x = torch.from_numpy(preprocess(chunk, self.image_size))
                pooled = self.encoder(pixel_values=x.to(self.device, self.dtype)).pooler_output
                pooled = pooled / pooled.norm(dim=-1, keepdim=True)
                scores.append(self.head(pooled).reshape(-1).float())  # stays on the device: no sync per pass
        return torch.cat(scores).cpu().numpy() if scores else np.zeros(0)

    def compute(self, edited: np.ndarray, source: np.ndarray | None = None, resized: bool = False) -> float:
        _check_frames(edited)
        return float(np.mean(self.frame_scores(edited, resized)))

    def compute_many(self, items) -> list[float | Exception]:
        """The frames of every case through the model together (``batch_size`` frames per pass, whatever case
        they belong to), then each case's mean: the same per-frame scores as ``compute``, as a frame's score
        depends on that frame only. A case without usable frames is its own failure."""
        results: list[float | Exception] = [0.0] * len(items)
        for resized in (False, True):  # frames from pool_inputs (tower size) and native ones go through apart
            frames, owners = [], []
            for k, (edited, _source, kwargs) in enumerate(items):
                if bool((kwargs or {}).get("resized")) != resized:
                    continue
                try:
                    _check_frames(edited)
                except Exception as exc:
                    results[k] = exc
                    continue
                frames.extend(edited)
                owners.extend([k] * len(edited))
            scores = self.frame_scores(frames, resized) if frames else np.zeros(0)
            owners = np.asarray(owners)
            for k in set(owners.tolist()):
                results[k] = float(np.mean(scores[owners == k]))
        return results


def _check_frames(edited) -> None:
    if edited is None or len(edited) == 0:
        raise ValueError("AES needs at least one frame of the edited video")
    shape = np.shape(edited)
    if len(shape) != 4 or shape[-1] != 3:
        raise ValueError(f"AES needs uint8 RGB frames (T, H, W, 3), got an array of shape {shape}")
