"""Wan-VACE-architecture diffusers pipelines with random weights, built offline (TEST-ONLY).

``build_wan_vace_pipeline(sizes, device, dtype)`` assembles a ``diffusers.WanVACEPipeline`` in memory from a
``sizes`` dict: ``WanVACETransformer3DModel``, ``AutoencoderKLWan``, a UMT5 encoder (``UMT5EncoderModel``) and a
T5 tokenizer (a Unigram model trained with ``tokenizers`` on a fixed corpus, so nothing is downloaded), and a
flow-matching UniPC scheduler (Wan's). ``TINY`` is the tests' size (seconds per edit on a CPU core);
``tests/perf/editor_vace.py`` passes the real Wan2.1-VACE-14B sizes and builds it straight on a GPU.

``build_tiny_wan_vace(out_dir)`` saves the tiny pipeline with ``save_pretrained`` (``model_index.json`` and one
folder per component), cached like ``tiny.models``: a complete build is returned as is, and a build is written
to a sibling temporary folder and renamed into place.

The VAE's latent channels (``z_dim`` 16, whose ``latents_mean``/``latents_std`` defaults have 16 entries) and
its 8x spatial / 4x temporal strides are the real ones, so the pipeline's frame (4k+1) and size (multiples of
16 with patch 2) rules are exercised as they are at full size; ``vace_in_channels`` is 2*16 + 8*8 = 96 (the
inactive and reactive latents plus the 8x8 mask patches), as in the real model.
"""

from __future__ import annotations

import contextlib
import json
import string
from pathlib import Path

from .models import _build_atomically, _corpus

BUILD_KIND = "wan_vace"

TINY = {
    "transformer": dict(
        patch_size=[1, 2, 2],
        num_attention_heads=2,
        attention_head_dim=12,
        in_channels=16,
        out_channels=16,
        text_dim=32,
        freq_dim=16,
        ffn_dim=48,
        num_layers=2,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        eps=1e-6,
        rope_max_seq_len=64,
        vace_layers=[0],
        vace_in_channels=96,
    ),
    "vae": dict(
        base_dim=4,
        z_dim=16,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        attn_scales=[],
        temperal_downsample=[False, True, True],
        dropout=0.0,
    ),
    "text_encoder": dict(
        d_model=32,
        d_ff=64,
        d_kv=8,
        num_heads=4,
        num_layers=2,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.0,
        layer_norm_epsilon=1e-6,
        tie_word_embeddings=False,
    ),
    "scheduler": dict(
        num_train_timesteps=1000,
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=3.0,
        solver_order=2,
    ),
    "tokenizer_vocab": 300,
}


def train_tokenizer(vocab_size: int):
    """A T5 tokenizer (Unigram, ``<pad>``=0, ``</s>``=1, ``<unk>``=2 as T5's) trained on ``tiny.models``' corpus."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import T5Tokenizer

    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "</s>", "<unk>"],
        unk_token="<unk>",
        show_progress=False,
        initial_alphabet=list(string.ascii_letters + string.digits + string.punctuation),
    )
    unigram.train_from_iterator(_corpus() * 4, trainer=trainer)
    vocab = [tuple(v) for v in json.loads(unigram.to_str())["model"]["vocab"]]
    assert [v[0] for v in vocab[:3]] == ["<pad>", "</s>", "<unk>"], vocab[:3]
    return T5Tokenizer(vocab=vocab, extra_ids=0)


@contextlib.contextmanager
def _default_dtype(dtype):
    """Parameters created in ``dtype`` (a real-size model built in fp32 first would not fit the GPU)."""
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def build_wan_vace_pipeline(
    sizes: dict, device: str = "cpu", dtype=None, vae_dtype=None, seed: int = 0, vocab_size: int | None = None
):
    """A ``WanVACEPipeline`` of random weights with ``sizes`` (``TINY`` or the real ones), made on ``device``.

    The transformer and text encoder are created in ``dtype`` (default float32), the VAE in ``vae_dtype``
    (default: ``dtype``), directly on ``device``; the transformer's ``_keep_in_fp32_modules`` tensors are then
    cast to float32 as ``from_pretrained`` keeps them (random weights: the cast is for memory and speed, not
    for their values). ``vocab_size``: the text encoder's embedding rows (default: the
    tokenizer's; the real UMT5-XXL has 256,384, which only sizes the embedding table).
    """
    import torch
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanVACEPipeline, WanVACETransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    dtype = dtype or torch.float32
    vae_dtype = vae_dtype or dtype
    tokenizer = train_tokenizer(sizes.get("tokenizer_vocab", 300))
    torch.manual_seed(seed)
    with torch.device(device):
        with _default_dtype(dtype):
            transformer = WanVACETransformer3DModel(**sizes["transformer"])
            text_config = UMT5Config(
                vocab_size=vocab_size or len(tokenizer),
                pad_token_id=0,
                eos_token_id=1,
                decoder_start_token_id=0,
                is_encoder_decoder=True,
                **sizes["text_encoder"],
            )
            text_encoder = UMT5EncoderModel(text_config)
        with _default_dtype(vae_dtype):
            vae = AutoencoderKLWan(**sizes["vae"])
    keep = set(getattr(transformer, "_keep_in_fp32_modules", None) or ())
    for name, tensor in [*transformer.named_parameters(), *transformer.named_buffers()]:
        if tensor.is_floating_point() and keep.intersection(name.split(".")):
            tensor.data = tensor.data.float()
    scheduler = UniPCMultistepScheduler(**sizes["scheduler"])
    pipe = WanVACEPipeline(
        tokenizer=tokenizer,
        text_encoder=text_encoder.eval(),
        vae=vae.eval(),
        scheduler=scheduler,
        transformer=transformer.eval(),
    )
    return pipe


def build_tiny_wan_vace(out_dir: str | Path, seed: int = 0) -> Path:
    """The ``TINY`` pipeline in float32 saved to ``out_dir`` (``model_index.json`` + components; cached)."""

    def write(tmp: Path) -> None:
        build_wan_vace_pipeline(TINY, seed=seed).save_pretrained(tmp)

    return _build_atomically(Path(out_dir), BUILD_KIND, write)
