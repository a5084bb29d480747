"""A tiny *random-weight* LLaVA judge, built offline in a few seconds, for the demo and the tests.

**Its answers mean nothing.** The weights are random (seeded), so every score computed from this judge
is noise: it exists to exercise the judge plumbing end to end (requests, media decoding, the chat
template, batched generation, parsing, retries, the judge log) on any machine, with no download. The
``vbench-ray demo`` judges the synthetic CoVEBench with it and says so in its output.

``build_tiny_judge(out_dir)`` writes a complete transformers checkpoint:

* ``LlavaForConditionalGeneration``: a CLIP vision tower (hidden 64, 2 layers, 56x56 input, patch 14, so
  16 image tokens per image after dropping CLS), a 2-layer MLP projector, and a Qwen2 text model (hidden
  128, 2 heads / 1 KV head, head_dim 64, 2 layers; tied embeddings). About 0.5 M parameters, ~1 MB in bf16.
* a byte-level BPE tokenizer trained on the fly with ``tokenizers`` on a fixed corpus (special tokens
  ``<|endoftext|>`` (pad), ``<|im_start|>``, ``<|im_end|>`` (eos) and ``<image>``);
* a ChatML chat template that renders ``text`` parts and one ``<image>`` per ``image`` / ``image_url`` part
  (videos reach it as frames, i.e. image parts: the ``hf`` backend decodes them);
* ``LlavaProcessor`` with ``CLIPImageProcessorPil`` (no torchvision needed), ``num_additional_image_tokens=1``.

``AutoProcessor.from_pretrained`` and ``AutoModelForImageTextToText.from_pretrained`` load it offline.
The build is deterministic (seeded weights, fixed corpus) and cached: a directory holding a complete
build of the same version is returned as is; a build is written to a temporary sibling directory and
renamed into place, so a half-written checkpoint is never returned.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

BUILD_VERSION = "1"
MARKER = ".vbench_tiny_judge"

PAD, BOS, EOS, IMAGE = "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"
SPECIAL_TOKENS = [PAD, BOS, EOS, IMAGE]
VOCAB_SIZE = 768
INIT_STD = 0.1  # weight init std (text and vision towers)

TEXT = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    max_position_embeddings=8192,
    rms_norm_eps=1e-6,
)
VISION = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    image_size=56,
    patch_size=14,
    projection_dim=64,
    hidden_act="quick_gelu",
)
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# ChatML layout. Content is a string or a list of parts; image parts become the processor's <image>
# placeholder, which LlavaProcessor expands to the vision tower's token count.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] in ('image', 'image_url') %}{{ '<image>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _corpus() -> list[str]:
    """A fixed corpus shaped like judge traffic: instructions, questions, JSON answers."""
    words = [
        "video",
        "edited",
        "source",
        "frame",
        "object",
        "color",
        "red",
        "blue",
        "green",
        "square",
        "circle",
        "background",
        "motion",
        "left",
        "right",
        "camera",
        "zoom",
        "style",
        "instruction",
        "question",
        "answer",
        "score",
        "option",
        "correct",
        "change",
        "remove",
        "add",
        "keep",
        "scene",
        "physical",
    ]
    lines = []
    for i, w in enumerate(words):
        v = words[(i * 7 + 3) % len(words)]
        lines.append(f"Does the {w} in the {v} follow the editing instruction? Answer Yes or No.")
        lines.append(
            json.dumps([{"id": f"Q{i + 1}", "answer": ["Yes", "No", "A", "B"][i % 4], "reason": f"the {w} is {v}"}])
        )
        lines.append(f"Rate the {w} from 1 to 10: {i % 10 + 1}. Video A (Original Source): Video B (Edited):")
    return lines


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus() * 3, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token=PAD,
        eos_token=EOS,
        bos_token=None,
        unk_token=None,
        extra_special_tokens={"image_token": IMAGE},
    )
    tok.model_max_length = TEXT["max_position_embeddings"]
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _write(tmp: Path, seed: int) -> None:
    import torch
    from transformers import (
        CLIPImageProcessorPil,
        CLIPVisionConfig,
        GenerationConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        Qwen2Config,
    )

    tok = _tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = Qwen2Config(
        vocab_size=len(tok),
        **TEXT,
        tie_word_embeddings=True,
        initializer_range=INIT_STD,
        bos_token_id=ids[BOS],
        eos_token_id=ids[EOS],
        pad_token_id=ids[PAD],
    )
    vision = CLIPVisionConfig(**VISION, initializer_range=INIT_STD)
    config = LlavaConfig(
        vision_config=vision.to_dict(),
        text_config=text.to_dict(),
        image_token_index=ids[IMAGE],
        image_seq_length=(VISION["image_size"] // VISION["patch_size"]) ** 2,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        tie_word_embeddings=True,
        dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).to(torch.bfloat16).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=ids[BOS], eos_token_id=ids[EOS], pad_token_id=ids[PAD], do_sample=False
    )
    model.save_pretrained(tmp)
    side = VISION["image_size"]
    images = CLIPImageProcessorPil(
        size={"shortest_edge": side},
        crop_size={"height": side, "width": side},
        image_mean=CLIP_MEAN,
        image_std=CLIP_STD,
    )
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=tok,
        patch_size=VISION["patch_size"],
        vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE,
        image_token=IMAGE,
        num_additional_image_tokens=1,
    )
    processor.save_pretrained(tmp)
    (tmp / "README.md").write_text(
        "A tiny RANDOM-WEIGHT LLaVA built by vbench_ray.judges.tiny for plumbing tests and "
        "the demo. Its answers and any score computed from them mean nothing.\n"
    )


def is_built(out_dir: str | Path) -> bool:
    marker = Path(out_dir) / MARKER
    return marker.is_file() and marker.read_text().strip() == BUILD_VERSION


def build_tiny_judge(out_dir: str | Path, seed: int = 0) -> Path:
    """Build (or reuse) the tiny random-weight LLaVA judge in ``out_dir``; returns ``out_dir``."""
    out_dir = Path(out_dir)
    if is_built(out_dir):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building.", dir=out_dir.parent))
    try:
        _write(tmp, seed)
        (tmp / MARKER).write_text(BUILD_VERSION + "\n")
        if out_dir.exists():
            if is_built(out_dir):  # another process finished first
                return out_dir
            shutil.rmtree(out_dir)  # an incomplete or outdated build
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
