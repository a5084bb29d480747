"""Random-weight models for SRC (CoVEBench App. F, Table 2, "SAM2 + DINOv2, mask-based feature comparison for
unchanged areas"), for tests and perf: Grounding DINO, SAM2 and DINOv2 in transformers format with their
processors, built offline at the published models' sizes or at toy ones (``save_random_src``). Their outputs mean
nothing.
"""

from __future__ import annotations

from pathlib import Path

from vbench_ray.metrics.device_images import IMAGENET_MEAN, IMAGENET_STD

_WORDS = [
    ".",
    "red",
    "blue",
    "green",
    "square",
    "circle",
    "cube",
    "triangle",
    "the",
    "of",
    "a",
    "small",
    "large",
    "person",
    "woman",
    "man",
    "dog",
    "car",
    "tree",
    "cup",
    "on",
    "left",
    "right",
]
# the published models' sizes, and toy ones (tests: ~1 M parameters, a few seconds to build)
RANDOM_SIZES = {
    "real": dict(  # grounding-dino-base, sam2-hiera-large, dinov2-small
        bert=dict(
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            max_position_embeddings=512,
            vocab_size=30522,
        ),
        swin=dict(
            image_size=384, patch_size=4, embed_dim=128, depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32], window_size=12
        ),
        gdino=dict(
            d_model=256,
            encoder_layers=6,
            decoder_layers=6,
            encoder_ffn_dim=2048,
            decoder_ffn_dim=2048,
            encoder_attention_heads=8,
            decoder_attention_heads=8,
            num_queries=900,
            num_feature_levels=4,
            encoder_n_points=4,
            decoder_n_points=4,
            max_text_len=256,
        ),
        gdino_size={"shortest_edge": 800, "longest_edge": 1333},
        hiera=dict(
            hidden_size=144,
            num_attention_heads=2,
            blocks_per_stage=[2, 6, 36, 4],
            embed_dim_per_stage=[144, 288, 576, 1152],
            num_attention_heads_per_stage=[2, 4, 8, 16],
            global_attention_blocks=[23, 33, 43],
            window_size_per_stage=[8, 4, 16, 8],
            window_positional_embedding_background_size=[7, 7],
            image_size=[1024, 1024],
        ),
        sam_vision=dict(
            backbone_channel_list=[1152, 576, 288, 144],
            backbone_feature_sizes=[[256, 256], [128, 128], [64, 64]],
            fpn_hidden_size=256,
        ),
        sam_prompt=dict(hidden_size=256, image_size=1024, patch_size=16),
        sam_decoder=dict(hidden_size=256, mlp_dim=2048, num_attention_heads=8, iou_head_hidden_dim=256),
        dino=dict(
            hidden_size=384,
            num_hidden_layers=12,
            num_attention_heads=6,
            intermediate_size=1536,
            image_size=518,
            patch_size=14,
        ),
        dino_size=({"shortest_edge": 256}, {"height": 224, "width": 224}),
    ),
    "tiny": dict(
        bert=dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            vocab_size=None,
        ),
        swin=dict(
            image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=4
        ),
        gdino=dict(
            d_model=32,
            encoder_layers=1,
            decoder_layers=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            num_queries=10,
            num_feature_levels=4,
            encoder_n_points=2,
            decoder_n_points=2,
            max_text_len=32,
        ),
        gdino_size={"shortest_edge": 64, "longest_edge": 96},
        hiera=dict(
            hidden_size=16,
            num_attention_heads=1,
            blocks_per_stage=[1, 1, 2, 1],
            embed_dim_per_stage=[16, 32, 64, 128],
            num_attention_heads_per_stage=[1, 1, 1, 1],
            global_attention_blocks=[3],
            window_size_per_stage=[4, 4, 4, 4],
            window_positional_embedding_background_size=[4, 4],
            image_size=[64, 64],
        ),
        sam_vision=dict(
            backbone_channel_list=[128, 64, 32, 16],
            backbone_feature_sizes=[[16, 16], [8, 8], [4, 4]],
            fpn_hidden_size=32,
        ),
        sam_prompt=dict(hidden_size=32, image_size=64, patch_size=16),
        sam_decoder=dict(hidden_size=32, mlp_dim=64, num_attention_heads=2, iou_head_hidden_dim=32),
        dino=dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=28,
            patch_size=14,
        ),
        dino_size=({"shortest_edge": 28}, {"height": 28, "width": 28}),
    ),
}


def save_random_src(out: str | Path, size: str = "tiny", seed: int = 0) -> dict[str, str]:
    """Random-initialised Grounding DINO, SAM2 and DINOv2 in transformers format, with their processors, built
    offline (``size``: ``tiny`` for tests, ``real`` for the published sizes in tests/perf). Their outputs mean
    nothing. Returns the ``metrics.SRC`` weight keys -> directories."""
    import torch
    import transformers as t

    spec = RANDOM_SIZES[size]
    torch.manual_seed(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # a WordPiece vocabulary laid out like BERT's (the special tokens at their usual ids when it is full size)
    n_vocab = spec["bert"]["vocab_size"] or (len(_WORDS) + 5)
    if n_vocab > 104:
        vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS
    else:
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS
    vocab += [f"w{i}" for i in range(n_vocab - len(vocab))]
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = t.BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True)
    text = t.BertConfig(**{**spec["bert"], "vocab_size": len(vocab)})
    swin = t.SwinConfig(**spec["swin"], out_features=["stage2", "stage3", "stage4"])
    t.GroundingDinoForObjectDetection(
        t.GroundingDinoConfig(backbone_config=swin, text_config=text, **spec["gdino"])
    ).save_pretrained(out / "gdino")
    gd_images = getattr(t, "GroundingDinoImageProcessorPil", None) or t.GroundingDinoImageProcessor
    t.GroundingDinoProcessor(image_processor=gd_images(size=spec["gdino_size"]), tokenizer=tok).save_pretrained(
        out / "gdino"
    )
    sam = t.Sam2Model(
        t.Sam2Config(
            vision_config=t.Sam2VisionConfig(
                backbone_config=t.Sam2HieraDetConfig(**spec["hiera"]), **spec["sam_vision"]
            ),
            prompt_encoder_config=t.Sam2PromptEncoderConfig(**spec["sam_prompt"]),
            mask_decoder_config=t.Sam2MaskDecoderConfig(**spec["sam_decoder"]),
        )
    )
    sam.save_pretrained(out / "sam2")
    t.Dinov2Model(t.Dinov2Config(**spec["dino"])).save_pretrained(out / "dinov2")
    resize, crop = spec["dino_size"]
    bit = getattr(t, "BitImageProcessorPil", None) or t.BitImageProcessor
    bit(
        size=resize, crop_size=crop, do_center_crop=True, image_mean=list(IMAGENET_MEAN), image_std=list(IMAGENET_STD)
    ).save_pretrained(out / "dinov2")
    return {"grounding_dino": str(out / "gdino"), "sam2": str(out / "sam2"), "dinov2": str(out / "dinov2")}
