"""CLIP-S and CLIP-E (``CLIP_S``, ``CLIP_E``), model-backed conventional metrics of NRVBench (paper,
Table 3, App. E.5), on one shared base class and model loader. They load **local** weights only (config keys
below; no downloads) and can run on a random-weight model for tests (``build_tiny_clip``: plumbing, shapes
and determinism, never accuracy).

**CLIP-S** (x 100): the mean over frames of the cosine similarity between a frame's CLIP image embedding
and the target prompt's text embedding. **CLIP-E** (x 100): the mean over frame pairs of the cosine
similarity between the image edit direction ``phi_I(edit_t) - phi_I(src_t)`` and the text edit direction
``phi_T(target) - phi_T(source)``, embeddings L2-normalised first (App. E.5). An unchanged frame has no
image direction and scores 0. ``metrics.CLIP.model``: a local transformers CLIP checkpoint directory
(``config.json``, weights, tokenizer; ``preprocessor_config.json`` optional). Images: shortest side resized
to the model's size (bicubic), centre crop, CLIP mean/std.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

import cv2
import numpy as np

from vbench_ray.metrics.base import FrameMetric, _torch, _unit, register_metric, require_weights, weights_problem

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
        c = r[y0 : y0 + size, x0 : x0 + size].astype(np.float32) / 255.0
        out.append(((c - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)).transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


def clip_embeddings(
    model_bundle, frames: np.ndarray | None = None, texts: list[str] | None = None, device: str = "cpu"
):
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
            txt = _unit(
                _features(
                    model.get_text_features(
                        input_ids=tok["input_ids"].to(device), attention_mask=tok["attention_mask"].to(device)
                    )
                ).float()
            )
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
    paper = "NRVBench App. E.5 (CLIP-S)"
    weights_from = {  # where the official weights are published
        "model": "a transformers CLIP checkpoint, e.g. openai/clip-vit-large-patch14 (Hugging Face; "
        "NRVBench does not name its CLIP)",
    }
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
    paper = "NRVBench App. E.5 (CLIP-E, directional)"
    weights_from = {  # where the official weights are published
        "model": "a transformers CLIP checkpoint, e.g. openai/clip-vit-large-patch14 (Hugging Face; "
        "NRVBench does not name its CLIP)",
    }
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
        img_e, txt = clip_embeddings(
            self.bundle, edited, [texts["target_prompt"], texts["source_prompt"]], self.cfg.device
        )
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
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=[pad, bos],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [
        "a sheet of cloth waving in the wind",
        "ripples on a water surface",
        "smoke rising from a fire",
        "a dog with fluffy fur",
        "a hand squeezing dough",
        "a cat raising its paw",
    ] * 4
    bpe.train_from_iterator(corpus, trainer=trainer)
    bpe.add_special_tokens([eos])  # the highest id, as in CLIP's own vocabulary (text pooling finds it)
    bpe.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", special_tokens=[(bos, bpe.token_to_id(bos)), (eos, bpe.token_to_id(eos))]
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=bos, eos_token=eos, pad_token=pad)
    tok.model_max_length = 32
    config = HFCLIPConfig(
        text_config=dict(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=32,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ),
        projection_dim=16,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    (out_dir / "preprocessor_config.json").write_text(
        json.dumps(
            {"crop_size": {"height": 32, "width": 32}, "image_mean": list(CLIP_MEAN), "image_std": list(CLIP_STD)}
        )
    )
    (out_dir / "README.md").write_text("A tiny RANDOM-WEIGHT CLIP for vbench-ray tests; its scores mean nothing.\n")
    return out_dir
