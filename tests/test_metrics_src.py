"""SRC (static-region consistency): tiny random Grounding DINO / SAM2 / DINOv2 loaded through the real code, the
score arithmetic on hand-made masks and embeddings, entities from annotations, weights checks, one CoVE run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import REPO, cove_overrides
from vbench_ray.metrics.base import METRICS, MissingWeightsError
from vbench_ray.metrics.src import (SRC, SRCConfig, SRCUndefined, cosine_to_unit, entities_from_cache,
                                    entities_from_task, entity_from_question, expanded_box, masked_crop, src_score)

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "red", "blue", "green", "square", "circle", "cube",
         "triangle", "the", "of", "a", "small", "large"]


def build_tiny_src_models(out: Path) -> dict[str, str]:
    """Random-weight Grounding DINO, SAM2 and DINOv2 in transformers format (offline, ~3 s, ~1 M params)."""
    import torch
    import transformers as t

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    vocab = out / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    tok = t.BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    text = t.BertConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    swin = t.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2],
                        window_size=4, out_features=["stage2", "stage3", "stage4"])
    gd = t.GroundingDinoForObjectDetection(t.GroundingDinoConfig(
        backbone_config=swin, text_config=text, d_model=32, encoder_layers=1, decoder_layers=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, encoder_attention_heads=2, decoder_attention_heads=2, num_queries=10,
        num_feature_levels=4, encoder_n_points=2, decoder_n_points=2, max_text_len=32))
    gd.save_pretrained(out / "gdino")
    t.GroundingDinoProcessor(image_processor=t.GroundingDinoImageProcessorPil(
        size={"shortest_edge": 64, "longest_edge": 96}), tokenizer=tok).save_pretrained(out / "gdino")
    hiera = t.Sam2HieraDetConfig(hidden_size=16, num_attention_heads=1, blocks_per_stage=[1, 1, 2, 1],
                                 embed_dim_per_stage=[16, 32, 64, 128], num_attention_heads_per_stage=[1, 1, 1, 1],
                                 global_attention_blocks=[3], window_size_per_stage=[4, 4, 4, 4],
                                 window_positional_embedding_background_size=[4, 4], image_size=[64, 64])
    sam = t.Sam2Model(t.Sam2Config(
        vision_config=t.Sam2VisionConfig(backbone_config=hiera, backbone_channel_list=[128, 64, 32, 16],
                                         backbone_feature_sizes=[[16, 16], [8, 8], [4, 4]], fpn_hidden_size=32),
        prompt_encoder_config=t.Sam2PromptEncoderConfig(hidden_size=32, image_size=64, patch_size=16),
        mask_decoder_config=t.Sam2MaskDecoderConfig(hidden_size=32, mlp_dim=64, num_attention_heads=2,
                                                    iou_head_hidden_dim=32)))
    sam.save_pretrained(out / "sam2")
    dino = t.Dinov2Model(t.Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=64, image_size=28, patch_size=14))
    dino.save_pretrained(out / "dinov2")
    t.BitImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}, do_center_crop=True,
                           image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]
                           ).save_pretrained(out / "dinov2")
    return {"grounding_dino": str(out / "gdino"), "sam2": str(out / "sam2"), "dinov2": str(out / "dinov2")}


@pytest.fixture(scope="module")
def tiny_src(tmp_path_factory):
    return build_tiny_src_models(tmp_path_factory.mktemp("tiny_src"))


def _cfg(**kw) -> SRCConfig:
    return SRCConfig(**kw)


def _frames(t=4, h=48, w=64, seed=0):
    return np.random.default_rng(seed).integers(0, 255, size=(t, h, w, 3), dtype=np.uint8)


# ----------------------------------------------------------------------------- registration and weights

def test_registered_model_backed_with_gpu_share():
    assert METRICS["SRC"] is SRC and SRC.model_backed and SRC.higher_is_better and SRC.scale == "[0,1]"
    assert SRC(_cfg()).in_pool() and SRC(_cfg()).resources() == {}
    assert SRC(_cfg(device="cuda", gpu_fraction=0.25)).resources() == {"num_gpus": 0.25}
    from vbench_ray.benchmarks import cove

    assert "SRC" in cove.OBJECTIVE_METRICS and "SRC" not in cove.DEFAULT_ENABLED
    assert cove.DEFAULT_EXCLUSIONS["SRC"] == ["Camera", "Style"]


def test_missing_weights_name_each_key(tiny_src, tmp_path):
    problems = SRC.check_weights(_cfg())
    assert len(problems) == 3
    for key, msg in zip(("grounding_dino", "sam2", "dinov2"), problems):
        assert f"metrics.SRC.{key}" in msg
    partial = SRC.check_weights(_cfg(**{**tiny_src, "sam2": str(tmp_path / "nope")}))
    assert len(partial) == 1 and "metrics.SRC.sam2" in partial[0] and "does not exist" in partial[0]
    assert SRC.check_weights(_cfg(**tiny_src)) == []
    with pytest.raises(MissingWeightsError) as e:
        SRC(_cfg(**{**tiny_src, "dinov2": None})).setup()
    assert e.value.config_key == "metrics.SRC.dinov2"


# ----------------------------------------------------------------------------- score arithmetic

def test_crop_box_and_mask():
    mask = np.zeros((20, 30), bool)
    mask[5:15, 10:20] = True  # 10 x 10 box; 15 % -> 2 px (round(1.5)) on each side
    assert expanded_box(mask, 0.15) == (8, 3, 22, 17)
    assert expanded_box(mask, 5.0) == (0, 0, 30, 20)  # clipped to the frame
    assert expanded_box(np.zeros((4, 4), bool), 0.15) is None
    frame = np.full((20, 30, 3), 7, np.uint8)
    crop = masked_crop(frame, mask, (8, 3, 22, 17))
    assert crop.shape == (14, 14, 3)
    assert (crop[2:12, 2:12] == 7).all() and crop[0, 0].sum() == 0 and crop[13, 13].sum() == 0


def test_cosine_mapping_by_hand():
    assert cosine_to_unit(1.0) == 1.0 and cosine_to_unit(-1.0) == 0.0 and cosine_to_unit(0.0) == 0.5
    assert cosine_to_unit(0.6) == pytest.approx(0.8)
    assert cosine_to_unit(1.2) == 1.0  # clipped


def test_src_score_on_hand_made_masks_and_embeddings():
    t, h, w = 4, 20, 30
    src, edit = _frames(t, h, w, 1), _frames(t, h, w, 2)
    sm, em = np.zeros((t, h, w), bool), np.zeros((t, h, w), bool)
    # frame 0: no source mask -> skipped; frame 1: entity gone in the edit -> 0
    sm[1, 0:10, 0:10] = True
    sm[2, 0:10, 0:10] = em[2, 5:15, 5:15] = True
    sm[3, 0:10, 0:10] = em[3, 0:10, 0:10] = True
    vecs = {2: (np.array([1.0, 0.0]), np.array([0.6, 0.8])),  # cos 0.6 -> 0.8
            3: (np.array([1.0, 0.0]), np.array([-1.0, 0.0]))}  # cos -1 -> 0
    seen = []

    def embed(crops):
        seen.extend(c.shape for c in crops)
        return np.stack([v for k in (2, 3) for v in vecs[k]])

    score, d = src_score(src, edit, sm, em, embed, min_pixels=64, expand=0.15)
    assert d["per_frame"] == [None, 0.0, pytest.approx(0.8), pytest.approx(0.0)]
    assert d["used_frames"] == 3 and d["missing_in_edited"] == 1
    assert score == pytest.approx((0.0 + 0.8 + 0.0) / 3)
    # crops: the 10x10 boxes grown by round(1.5) = 2 px per side, clipped at the frame's edge
    assert seen == [(12, 12, 3), (14, 14, 3), (12, 12, 3), (12, 12, 3)]
    # a mask under min_pixels counts as empty
    score, d = src_score(src, edit, sm, em, embed, min_pixels=101)
    assert np.isnan(score) and d["used_frames"] == 0


def test_compute_uses_grounding_masks_and_embeddings(monkeypatch):
    m = SRC(_cfg())
    t, h, w = 3, 20, 30
    src, edit = _frames(t, h, w, 1), _frames(t, h, w, 2)
    calls = []

    def ground(frames, entities):
        calls.append(("ground", list(entities)))
        is_edit = np.array_equal(frames, edit)
        return [] if is_edit and "gone" in entities else [[0, 0, 10, 10]]

    def segment(frames, boxes):
        out = np.zeros(frames.shape[:3], bool)
        out[:, 0:10, 0:10] = True
        return out

    monkeypatch.setattr(m, "ground", ground)
    monkeypatch.setattr(m, "segment", segment)
    monkeypatch.setattr(m, "embed", lambda crops: np.tile([[1.0, 0.0], [0.0, 1.0]], (len(crops) // 2, 1)))
    assert m.compute(edit, src, entities=["red square"]) == pytest.approx(0.5)  # cos 0 on every frame
    assert calls == [("ground", ["red square"]), ("ground", ["red square"])]
    with pytest.raises(SRCUndefined, match="no concrete entity"):
        m.compute(edit, src, entities=[])
    with pytest.raises(SRCUndefined, match="edited video"):
        m.compute(edit, src, entities=["gone"])
    monkeypatch.setattr(m, "ground", lambda frames, entities: [])
    with pytest.raises(SRCUndefined, match="source"):
        m.compute(edit, src, entities=["red square"])


# ----------------------------------------------------------------------------- entities

def test_entities_from_annotations(tmp_path):
    task = {"evaluation_groups": [
        {"questions": [{"dimension": "Execution Accuracy", "question": "Is the cube red?"}]},
        {"questions": [
            {"dimension": "Semantic Preservation",
             "question": "How well is the identity and appearance of the young woman preserved?"},
            {"dimension": "Semantic Preservation",
             "question": "Comparing Video A and Video B, how well are the colour and shape of the red square preserved?"},
            {"dimension": "Semantic Preservation",
             "question": "Comparing Video A and Video B, how well is the static camera framing preserved?"},
            {"dimension": "Semantic Preservation",
             "question": "How well is the pattern of the background texture preserved?"},
            {"dimension": "Semantic Preservation", "question": "How accurately is the warm lighting preserved?"},
            {"dimension": "Semantic Preservation", "question": "Is the young woman preserved?"}]}]}
    assert entities_from_task(task) == ["young woman", "red square"]
    assert entity_from_question("Does it look nice?") is None
    assert entities_from_task({**task, "preserved_entities": [{"description": "Small Dog."}, "microphone"]}) == \
        ["small dog", "microphone"]
    m = SRC(_cfg())
    assert m.extra_inputs({"case_id": "3", "annotations": json.dumps(task)}) == {"entities": ["young woman", "red square"]}
    assert m.extra_inputs({"case_id": "3", "annotations": None}) == {"entities": []}
    # the official stage1 cache layout
    (tmp_path / "3").mkdir()
    (tmp_path / "3" / "metadata.json").write_text(json.dumps(
        {"id": 3, "status": "completed", "preserved_entities": [{"description": "asian woman on the right"}]}))
    assert entities_from_cache(tmp_path, 3) == ["asian woman on the right"]
    assert entities_from_cache(tmp_path, 4) == []
    cached = SRC(_cfg(entities_dir=str(tmp_path)))
    assert cached.extra_inputs({"case_id": "3", "annotations": json.dumps(task)}) == \
        {"entities": ["asian woman on the right"]}
    assert SRC.check_weights(SimpleNamespace(grounding_dino="x", sam2="x", dinov2="x",
                                             entities_dir=str(tmp_path / "missing")))[-1].count("entities_dir") == 1


# ----------------------------------------------------------------------------- the real loading code

def test_tiny_models_load_and_run_through_the_real_code(tiny_src):
    m = SRC(_cfg(**tiny_src, box_threshold=0.0, text_threshold=0.0, min_score=0.0, max_box_area=1.0, batch_size=2))
    m.setup()
    src, edit = _frames(5, 48, 64, 1), _frames(5, 48, 64, 2)
    boxes = m.ground(src, ["red square", "blue circle"])
    assert 1 <= len(boxes) <= 2 and all(len(b) == 4 for b in boxes)
    masks = m.segment(src, boxes)  # batched over frames (batch_size 2: 3 batches)
    assert masks.shape == (5, 48, 64) and masks.dtype == bool
    assert (m.segment(src[:2], boxes) == masks[:2]).all()  # a frame's mask does not depend on its batch
    feats = m.embed([src[0], edit[0][:10, :20], src[1]])
    assert feats.shape == (3, 32) and np.allclose(np.linalg.norm(feats, axis=1), 1.0, atol=1e-4)
    full = np.ones((5, 48, 64), bool)
    score, _ = src_score(src, src, full, full, m.embed)
    assert score == pytest.approx(1.0, abs=1e-5)  # identical crops: cosine 1
    try:
        value = m.compute(edit, src, entities=["red square"])
        assert 0.0 <= value <= 1.0
    except SRCUndefined:  # random weights may give an empty mask: a recorded failure, not a crash
        pass


# ----------------------------------------------------------------------------- end to end

@pytest.mark.ray
def test_cove_run_with_src(tiny_src, cove_data, tmp_path, ray_local):
    import pyarrow.parquet as pq

    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    out = tmp_path / "run"
    keys = [f"metrics.SRC.{k}={v}" for k, v in tiny_src.items()]
    cfg = load_config(REPO / "configs" / "cove.yaml", cove_overrides(
        cove_data, out, "metrics.enabled=[SSIM,SRC]", *keys, "metrics.SRC.box_threshold=0.0",
        "metrics.SRC.text_threshold=0.0", "metrics.SRC.min_score=0.0", "metrics.SRC.max_box_area=1.0",
        "metrics.SRC.min_mask_pixels=1", "metrics.SRC.max_frames=4"))
    result = run(cfg)
    assert result.n_computed == 8
    rows = pq.read_table(out / "cases").to_pylist()
    scored = 0
    for r in rows:
        excluded = bool({"Camera", "Style"} & set(r["categories"]))
        assert bool(r["excluded_SRC"]) == excluded
        if excluded:
            assert r["SRC"] is None and not r.get("error_SRC")
        elif r["SRC"] is not None:
            assert 0.0 <= r["SRC"] <= 1.0
            scored += 1
        else:  # undefined for this case: said why
            assert "SRC" in (r.get("error_SRC") or "")
        assert "frames_for_SRC" not in r
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["SRC"]["n"] == scored and summary["metrics"]["SRC"]["scale"] == "[0,1]"
    assert scored >= 1
