"""Tiny random-weight Qwen2 / Qwen2-VL checkpoints, built offline on the fly for tests (TEST-ONLY).

Both builders are deterministic (seeded weights, tokenizer trained on a fixed corpus) and cached: a directory
that already holds a complete build (marker file with the matching build version) is returned as is. A build is
written to a sibling temporary directory and renamed into place, so a half-written model is never returned.

* :func:`build_tiny_qwen2`: ``Qwen2ForCausalLM`` (hidden 256, 4 heads / 2 KV heads, head_dim 64, 2 layers) with a
  byte-level BPE tokenizer trained with ``tokenizers`` and wrapped in ``Qwen2TokenizerFast``, plus a Qwen-style
  ``<|im_start|>`` chat template.
* :func:`build_tiny_qwen2_vl`: ``Qwen2VLForConditionalGeneration`` (text as above with ``mrope_section [8,12,12]``;
  vision depth 2, embed_dim 128, 2 heads, patch 14, merge 2, temporal patch 2) with tokenizer, image/video
  processor configs (small pixel budgets) and a chat template that renders ``text`` / ``image`` / ``image_url`` /
  ``video`` / ``video_url`` content parts as well as plain-string content (what vLLM's "string" content format,
  used by Ray Data LLM, produces).

The processor configs are written as JSON, not through the processor classes, so that building a model needs no
torchvision; loading its processor (``AutoProcessor``: transformers' Qwen2-VL image/video processors) does, which
the CPU stack has as ``make setup`` installs it (docs/stack.md).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

BUILD_VERSION = "1"
_MARKER = ".tiny_model_complete"

# Qwen2 / Qwen2-VL special tokens, given the lowest ids of the tiny vocabulary.
TEXT_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VISION_SPECIAL_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
BPE_VOCAB_SIZE = 1024  # trained vocabulary, special tokens included; the model's vocab_size equals len(tokenizer)

# Text sizes shared by both models (docs/stack.md: head_dim 64; 16 is rejected by vLLM's CPU attention backend).
TEXT_SIZES = dict(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    max_position_embeddings=4096,
    rms_norm_eps=1e-6,
)
VISION_SIZES = dict(
    depth=2,
    embed_dim=128,
    num_heads=2,
    mlp_ratio=4,
    patch_size=14,
    spatial_merge_size=2,
    temporal_patch_size=2,
    in_channels=3,
    hidden_act="quick_gelu",
)
MROPE_SECTION = [8, 12, 12]  # sums to head_dim / 2

# Pixel budgets (per image / per video frame): 112x112 -> 8x8 patches -> 16 tokens per merged frame pair.
IMAGE_MIN_PIXELS, IMAGE_MAX_PIXELS = 56 * 56, 224 * 224
VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS = 56 * 56, 112 * 112
OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# A Qwen-style chat template (written for this test fixture). Content may be a string or a list of parts:
# {"type": "text", "text": ...}, {"type": "image" | "image_url", ...}, {"type": "video" | "video_url", ...}.
# Vision parts render to Qwen2-VL's placeholders, which the processor (or vLLM) expands to the right count.
# No whitespace control ({%- / -%}) on purpose: it would also eat the literal newlines of the layout.
CHAT_TEMPLATE_VL = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] in ('image', 'image_url') or 'image' in part or 'image_url' in part %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] in ('video', 'video_url') or 'video' in part or 'video_url' in part %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' or 'text' in part %}"
    "{{ part['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{% if not (loop.last and continue_final_message is defined and continue_final_message) %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# The text-only model's template: the same layout, content as a string or a list of text parts.
CHAT_TEMPLATE_TEXT = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{% if not (loop.last and continue_final_message is defined and continue_final_message) %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _corpus() -> list[str]:
    """A fixed, varied English corpus (generated deterministically) to train the tiny BPE on."""
    subjects = [
        "the video",
        "the edited clip",
        "a red square",
        "the camera",
        "this frame",
        "the person",
        "a dog",
        "the background",
        "the caption",
        "the judge",
        "the model",
        "each object",
    ]
    verbs = [
        "moves",
        "shows",
        "keeps",
        "changes",
        "follows",
        "matches",
        "contains",
        "loses",
        "adds",
        "removes",
        "describes",
        "answers",
    ]
    objects = [
        "the original scene",
        "smooth motion",
        "the requested edit",
        "a blue sky",
        "the left side",
        "two people",
        "a bright light",
        "the same color",
        "every detail",
        "the question",
        "a yes or no",
        "the instruction",
    ]
    tails = [
        "quickly.",
        "slowly.",
        "without artifacts.",
        "in every frame.",
        "as asked.",
        "from 0 to 9.",
        "at 16 fps.",
        "with a score of 1, 2, 3, 4 or 5.",
        "Yes.",
        "No.",
        "correctly?",
        "(maybe).",
    ]
    lines = []
    for i, s in enumerate(subjects):
        for j, v in enumerate(verbs):
            o, t = objects[(i + j) % len(objects)], tails[(i * 7 + j * 3) % len(tails)]
            lines.append(f"{s.capitalize()} {v} {o} {t}")
    lines += [
        "Score: 1 2 3 4 5 6 7 8 9 10",
        "Answer with yes or no.",
        "{\"score\": 4, \"reason\": \"ok\"}",
        "Is the edit faithful to the instruction? Rate the temporal consistency.",
        "User: describe the video. Assistant: The video shows a moving square.",
    ]
    return lines


def _train_tokenizer(special_tokens: list[str]):
    """Train a byte-level BPE (``tokenizers``) and wrap it in ``Qwen2TokenizerFast`` (with Qwen's pre-tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        min_frequency=1,
        show_progress=False,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(_corpus() * 4, trainer=trainer)
    state = json.loads(bpe.to_str())["model"]
    vocab, merges = state["vocab"], state["merges"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
    tok = Qwen2TokenizerFast(
        vocab=vocab, merges=merges, unk_token=None, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.add_special_tokens({"additional_special_tokens": [t for t in special_tokens if t != "<|endoftext|>"]})
    for t in special_tokens:  # the specials keep the ids the trainer gave them
        assert tok.convert_tokens_to_ids(t) == vocab[t], (t, tok.convert_tokens_to_ids(t), vocab[t])
    tok.model_max_length = TEXT_SIZES["max_position_embeddings"]
    return tok


def _is_built(out_dir: Path, kind: str) -> bool:
    marker = out_dir / _MARKER
    return marker.is_file() and marker.read_text().strip() == f"{kind} {BUILD_VERSION}"


def _build_atomically(out_dir: Path, kind: str, write) -> Path:
    out_dir = Path(out_dir)
    if _is_built(out_dir, kind):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        write(tmp)
        (tmp / _MARKER).write_text(f"{kind} {BUILD_VERSION}\n")
        if out_dir.exists():
            if _is_built(out_dir, kind):  # another process finished first
                return out_dir
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _seeded_init(seed: int):
    import torch

    torch.manual_seed(seed)
    return torch


def build_tiny_qwen2(out_dir: str | Path, seed: int = 0) -> Path:
    """A random-weight Qwen2 causal LM plus tokenizer and chat template in ``out_dir`` (cached, deterministic)."""

    def write(tmp: Path) -> None:
        from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

        tok = _train_tokenizer(TEXT_SPECIAL_TOKENS)
        tok.chat_template = CHAT_TEMPLATE_TEXT
        cfg = Qwen2Config(
            vocab_size=len(tok),
            **TEXT_SIZES,
            tie_word_embeddings=True,
            initializer_range=0.02,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
            eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
            pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
            dtype="bfloat16",
        )
        torch = _seeded_init(seed)
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16).eval()
        model.generation_config = GenerationConfig(
            bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id, do_sample=False
        )
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    return _build_atomically(Path(out_dir), "qwen2", write)


def build_tiny_qwen2_vl(out_dir: str | Path, seed: int = 0) -> Path:
    """A random-weight Qwen2-VL plus tokenizer, processor configs and chat template (cached, deterministic)."""

    def write(tmp: Path) -> None:
        from transformers import GenerationConfig, Qwen2VLConfig, Qwen2VLForConditionalGeneration

        tok = _train_tokenizer(TEXT_SPECIAL_TOKENS + VISION_SPECIAL_TOKENS)
        tok.chat_template = CHAT_TEMPLATE_VL
        ids = {t: tok.convert_tokens_to_ids(t) for t in TEXT_SPECIAL_TOKENS + VISION_SPECIAL_TOKENS}
        text_config = dict(
            vocab_size=len(tok),
            **TEXT_SIZES,
            initializer_range=0.02,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": MROPE_SECTION},
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
        )
        vision_config = dict(VISION_SIZES, hidden_size=TEXT_SIZES["hidden_size"], initializer_range=0.02)
        cfg = Qwen2VLConfig(
            text_config=text_config,
            vision_config=vision_config,
            image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"],
            tie_word_embeddings=True,
            dtype="bfloat16",
        )
        torch = _seeded_init(seed)
        model = Qwen2VLForConditionalGeneration(cfg).to(torch.bfloat16).eval()
        model.generation_config = GenerationConfig(
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
            do_sample=False,
        )
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

        common = dict(
            do_resize=True,
            resample=3,
            do_rescale=True,
            rescale_factor=1 / 255,
            do_normalize=True,
            image_mean=OPENAI_CLIP_MEAN,
            image_std=OPENAI_CLIP_STD,
            do_convert_rgb=True,
            patch_size=VISION_SIZES["patch_size"],
            temporal_patch_size=VISION_SIZES["temporal_patch_size"],
            merge_size=VISION_SIZES["spatial_merge_size"],
        )
        image_cfg = dict(
            common,
            image_processor_type="Qwen2VLImageProcessor",
            processor_class="Qwen2VLProcessor",
            size={"shortest_edge": IMAGE_MIN_PIXELS, "longest_edge": IMAGE_MAX_PIXELS},
        )
        video_cfg = dict(
            common,
            video_processor_type="Qwen2VLVideoProcessor",
            processor_class="Qwen2VLProcessor",
            size={"shortest_edge": VIDEO_MIN_PIXELS, "longest_edge": VIDEO_MAX_PIXELS},
            do_sample_frames=False,
            min_frames=2,
            max_frames=64,
            cap_pixels_per_frame=False,
        )
        (tmp / "preprocessor_config.json").write_text(json.dumps(image_cfg, indent=2) + "\n")
        (tmp / "video_preprocessor_config.json").write_text(json.dumps(video_cfg, indent=2) + "\n")
        (tmp / "processor_config.json").write_text(json.dumps({"processor_class": "Qwen2VLProcessor"}, indent=2) + "\n")

    return _build_atomically(Path(out_dir), "qwen2_vl", write)
