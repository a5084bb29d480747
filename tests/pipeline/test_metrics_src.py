"""SRC (static-region consistency): tiny random Grounding DINO / SAM2 / DINOv2 loaded through the real code, the
score arithmetic on hand-made masks and embeddings, entities from annotations, weights checks, one CoVE run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from helpers.common import REPO, cove_overrides
from vbench_ray.metrics.base import METRICS, MissingWeightsError
from vbench_ray.metrics.device_images import IMAGENET_STD, device_preprocess, image_plan
from vbench_ray.metrics.src import SRC, SRCConfig, SRCUndefined, _pack
from vbench_ray.metrics.src_entities import entities_from_cache, entities_from_task, entity_from_question
from vbench_ray.metrics.src_random import save_random_src
from vbench_ray.metrics.src_scoring import cosine_to_unit, expanded_box, masked_crop, src_score


def build_tiny_src_models(out: Path) -> dict[str, str]:
    """Random-weight Grounding DINO, SAM2 and DINOv2 in transformers format (offline, ~3 s, ~1 M params)."""
    return save_random_src(out, "tiny", seed=0)


@pytest.fixture(scope="module")
def tiny_src(tmp_path_factory):
    return build_tiny_src_models(tmp_path_factory.mktemp("tiny_src"))


def _src_cfg(**kw) -> SRCConfig:
    return SRCConfig(**kw)


def _frames(t=4, h=48, w=64, seed=0):
    return np.random.default_rng(seed).integers(0, 255, size=(t, h, w, 3), dtype=np.uint8)


# ----------------------------------------------------------------------------- registration and weights


def test_registered_model_backed_with_gpu_share():
    assert METRICS["SRC"] is SRC and SRC.model_backed and SRC.higher_is_better and SRC.scale == "[0,1]"
    assert SRC(_src_cfg()).in_pool() and SRC(_src_cfg()).resources() == {}
    assert SRC(_src_cfg(device="cuda", gpu_fraction=0.25)).resources() == {"num_gpus": 0.25}
    from vbench_ray.benchmarks import cove

    assert "SRC" in cove.OBJECTIVE_METRICS and "SRC" not in cove.DEFAULT_ENABLED
    assert cove.DEFAULT_EXCLUSIONS["SRC"] == ["Camera", "Style"]


def test_missing_weights_name_each_key(tiny_src, tmp_path):
    problems = SRC.check_weights(_src_cfg())
    assert len(problems) == 3
    for key, msg in zip(("grounding_dino", "sam2", "dinov2"), problems):
        assert f"metrics.SRC.{key}" in msg
    partial = SRC.check_weights(_src_cfg(**{**tiny_src, "sam2": str(tmp_path / "nope")}))
    assert len(partial) == 1 and "metrics.SRC.sam2" in partial[0] and "does not exist" in partial[0]
    assert SRC.check_weights(_src_cfg(**tiny_src)) == []
    with pytest.raises(MissingWeightsError) as e:
        SRC(_src_cfg(**{**tiny_src, "dinov2": None})).setup()
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


def _broadcast_crop(frame, mask, box):
    """The former ``masked_crop``: numpy's uint8 x bool broadcast multiply."""
    x0, y0, x1, y1 = box
    return frame[y0:y1, x0:x1] * mask[y0:y1, x0:x1, None].astype(bool)


def test_masked_crop_equals_the_broadcast_multiply():
    rng = np.random.default_rng(3)
    frame = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    mask = rng.random((50, 70)) > 0.5
    frame.flags.writeable = False  # frames unpacked from a row are read-only views
    layouts = [
        (frame, mask),
        (frame[:, ::-1], mask),
        (frame[..., ::-1], mask),
        (frame[::2, ::3], mask[::2, ::3]),
        (np.asfortranarray(frame), mask),
        (frame, np.asfortranarray(mask)),
        (frame, mask.astype(np.uint8) * 255),
        (frame, mask.astype(np.float32)),
        (frame.astype(np.float32), mask),
    ]
    for f, m in layouts:
        for box in [(0, 0, f.shape[1], f.shape[0]), (3, 4, 20, 9), (5, 5, 6, 6), (10, 2, 11, 20)]:
            got, want = masked_crop(f, m, box), _broadcast_crop(f, m, box)
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), (box, m.dtype)
    big = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    big_mask = np.zeros((720, 1280), bool)
    big_mask[100:600, 200:1000] = rng.random((500, 800)) > 0.3
    assert np.array_equal(
        masked_crop(big, big_mask, (150, 50, 1050, 650)), _broadcast_crop(big, big_mask, (150, 50, 1050, 650))
    )


def test_pack_keeps_a_video_in_one_pass_when_it_fits():
    # prompts of 3 images each, keyed by their video; at most 7 images a pass
    assert _pack([0, 1, 2, 3], [3, 3, 3, 3], ["a", "a", "b", "c"], 7) == [[0, 1], [2, 3]]
    assert _pack([0, 1, 2, 3], [3, 3, 3, 3], ["a", "b", "b", "c"], 7) == [[0], [1, 2], [3]]  # b not split
    assert _pack([0, 1, 2, 3], [3, 3, 3, 3], ["a", "a", "a", "b"], 7) == [[0, 1], [2, 3]]  # a over the cap: split
    assert _pack([0, 1, 2], [9, 1, 1], ["a", "b", "b"], 4) == [[0], [1, 2]]  # an item over the cap: alone
    assert _pack([], [], [], 4) == []


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
    vecs = {
        2: (np.array([1.0, 0.0]), np.array([0.6, 0.8])),  # cos 0.6 -> 0.8
        3: (np.array([1.0, 0.0]), np.array([-1.0, 0.0])),
    }  # cos -1 -> 0
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
    m = SRC(_src_cfg())
    t, h, w = 3, 20, 30
    src, edit = _frames(t, h, w, 1), _frames(t, h, w, 2)
    calls = []

    def ground_many(jobs):
        calls.append(("ground", [list(entities) for _, entities in jobs]))
        return [
            [] if np.array_equal(frames, edit) and "gone" in entities else [[0, 0, 10, 10]] for frames, entities in jobs
        ]

    def segment_many(jobs):
        out = [np.zeros(frames.shape[:3], bool) for frames, _ in jobs]
        for o in out:
            o[:, 0:10, 0:10] = True
        return out

    monkeypatch.setattr(m, "ground_many", ground_many)
    monkeypatch.setattr(m, "segment_many", segment_many)
    monkeypatch.setattr(m, "embed", lambda crops: np.tile([[1.0, 0.0], [0.0, 1.0]], (len(crops) // 2, 1)))
    assert m.compute(edit, src, entities=["red square"]) == pytest.approx(0.5)  # cos 0 on every frame
    assert calls == [("ground", [["red square"]]), ("ground", [["red square"]])]  # the source, then the edit
    with pytest.raises(SRCUndefined, match="no concrete entity"):
        m.compute(edit, src, entities=[])
    with pytest.raises(SRCUndefined, match="edited video"):
        m.compute(edit, src, entities=["gone"])
    # several cases: one grounding call per side for all of them; the edit only of cases found in the source
    calls.clear()
    out = m.compute_many(
        [
            (edit, src, {"entities": ["red square"]}),
            (edit, src, {"entities": ["gone"]}),
            (edit, None, {"entities": ["red square"]}),
            (edit, src, {"entities": ["red square"]}),
        ]
    )
    assert out[0] == out[3] == pytest.approx(0.5)
    assert isinstance(out[1], SRCUndefined) and "edited video" in str(out[1])
    assert isinstance(out[2], ValueError) and "no source frames" in str(out[2])
    assert calls == [("ground", [["red square"], ["gone"], ["red square"]])] * 2
    # the wall time of each phase adds up on the metric (tests/perf reads it)
    assert set(m.phase_seconds) == {"ground", "segment", "pairs", "embed"} and m.phase_cases == 3 + 4
    assert all(v >= 0 for v in m.phase_seconds.values())
    monkeypatch.setattr(m, "ground_many", lambda jobs: [[] for _ in jobs])
    with pytest.raises(SRCUndefined, match="source"):
        m.compute(edit, src, entities=["red square"])


# ----------------------------------------------------------------------------- entities


def test_entities_from_annotations(tmp_path):
    task = {
        "evaluation_groups": [
            {"questions": [{"dimension": "Execution Accuracy", "question": "Is the cube red?"}]},
            {
                "questions": [
                    {
                        "dimension": "Semantic Preservation",
                        "question": "How well is the identity and appearance of the young woman preserved?",
                    },
                    {
                        "dimension": "Semantic Preservation",
                        "question": "Comparing Video A and Video B, how well are the colour and shape of the red "
                        "square preserved?",
                    },
                    {
                        "dimension": "Semantic Preservation",
                        "question": "Comparing Video A and Video B, how well is the static camera framing preserved?",
                    },
                    {
                        "dimension": "Semantic Preservation",
                        "question": "How well is the pattern of the background texture preserved?",
                    },
                    {
                        "dimension": "Semantic Preservation",
                        "question": "How accurately is the warm lighting preserved?",
                    },
                    {"dimension": "Semantic Preservation", "question": "Is the young woman preserved?"},
                ]
            },
        ]
    }
    assert entities_from_task(task) == ["young woman", "red square"]
    assert entity_from_question("Does it look nice?") is None
    assert entities_from_task({**task, "preserved_entities": [{"description": "Small Dog."}, "microphone"]}) == [
        "small dog",
        "microphone",
    ]
    m = SRC(_src_cfg())
    assert m.extra_inputs({"case_id": "3", "annotations": json.dumps(task)}) == {
        "entities": ["young woman", "red square"]
    }
    assert m.extra_inputs({"case_id": "3", "annotations": None}) == {"entities": []}
    # the official stage1 cache layout
    (tmp_path / "3").mkdir()
    (tmp_path / "3" / "metadata.json").write_text(
        json.dumps(
            {"id": 3, "status": "completed", "preserved_entities": [{"description": "asian woman on the right"}]}
        )
    )
    assert entities_from_cache(tmp_path, 3) == ["asian woman on the right"]
    assert entities_from_cache(tmp_path, 4) == []
    cached = SRC(_src_cfg(entities_dir=str(tmp_path)))
    assert cached.extra_inputs({"case_id": "3", "annotations": json.dumps(task)}) == {
        "entities": ["asian woman on the right"]
    }
    assert (
        SRC.check_weights(
            SimpleNamespace(grounding_dino="x", sam2="x", dinov2="x", entities_dir=str(tmp_path / "missing"))
        )[-1].count("entities_dir")
        == 1
    )


# ----------------------------------------------------------------------------- the real loading code


def test_tiny_models_load_and_run_through_the_real_code(tiny_src):
    m = SRC(_src_cfg(**tiny_src, box_threshold=0.0, text_threshold=0.0, min_score=0.0, max_box_area=1.0, batch_size=2))
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
    # the tiny seeded models mask 2199-2299 px of each 48x64 source frame (over the 64 px floor): SRC is defined,
    # 1 on identical videos (cosine 1 -> (1 + 1) / 2), lower on other frames
    same = m.compute(src, src, entities=["red square"])
    assert same == pytest.approx(1.0, abs=1e-5)
    value = m.compute(edit, src, entities=["red square"])
    assert 0.5 <= value < same - 1e-3


def test_top_detection_is_the_official_post_processing_choice(tiny_src):
    """The vectorised choice of the top box equals transformers' post-processing followed by the official argmax."""
    from PIL import Image

    from vbench_ray.metrics.src_scoring import top_detections

    m = SRC(_src_cfg(**tiny_src))
    m.setup()
    images = [Image.fromarray(f) for f in _frames(3, 48, 64, 5)]
    texts = ["red square.", "the small green cube.", "dog."]
    inputs = m.gd_processor(images=images, text=texts, padding="longest", return_tensors="pt")
    with m.torch.inference_mode():
        outputs = m.gd_model(**inputs)
    for threshold in (0.0, 0.3, 0.999):
        scores, boxes = top_detections(outputs.logits, outputs.pred_boxes, (48, 64), threshold)
        official = m.gd_processor.post_process_grounded_object_detection(
            outputs, inputs.input_ids, threshold=threshold, text_threshold=0.25, target_sizes=[(48, 64)] * 3
        )
        for score, box, r in zip(scores, boxes, official):
            if len(r["scores"]) == 0:
                assert score == 0.0
            else:
                i = int(r["scores"].argmax())
                assert score == pytest.approx(float(r["scores"][i]), abs=1e-6)
                assert np.allclose(box, r["boxes"][i].detach().numpy(), atol=1e-3)


ACCEPT_ALL = dict(box_threshold=0.0, text_threshold=0.0, min_score=0.0, max_box_area=1.0, min_mask_pixels=1)


@pytest.fixture(scope="module")
def device_and_cpu(tiny_src):
    """Two SRCs on the tiny models: preprocessing on the model's device (the default) and the processors on the CPU
    (``gpu_preprocess=False``, the former path)."""
    pair = []
    for on_device in (True, False):
        m = SRC(_src_cfg(**tiny_src, **ACCEPT_ALL, batch_size=4, gpu_preprocess=on_device))
        m.setup()
        pair.append(m)
    assert pair[0].gd_plan is not None and pair[0].dino_plan is not None
    assert pair[1].gd_plan is None and pair[1].dino_plan is None
    return pair


def _smooth(t, h, w, seed):
    """Frames like a video's (blurred noise): no pixel-level overshoot that would make two exact resamplers differ
    by more than rounding."""
    import cv2

    rng = np.random.default_rng(seed)
    return np.stack([cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (0, 0), 1.0) for _ in range(t)])


def test_image_plan_reads_the_processor_and_falls_back_for_what_it_cannot_do():
    base = dict(
        do_resize=True,
        resample=3,
        size={"shortest_edge": 8},
        do_center_crop=True,
        crop_size={"height": 8, "width": 8},
        do_rescale=True,
        rescale_factor=1 / 255,
        do_normalize=True,
        image_mean=[0.5] * 3,
        image_std=[0.25] * 3,
    )
    plan = image_plan(SimpleNamespace(**base))
    assert plan["mode"] == "bicubic" and plan["crop"] == (8, 8) and plan["std"] == (0.25,) * 3 and plan["two_pass"]
    assert image_plan(SimpleNamespace(**{**base, "resample": 1})) is None  # LANCZOS: the processor runs
    assert image_plan(SimpleNamespace(**{**base, "size": {}})) is None
    assert image_plan(SimpleNamespace(**{**base, "do_pad": True, "pad_size": {"height": 9, "width": 9}})) is None
    assert image_plan(SimpleNamespace(**{**base, "do_resize": False, "resample": 1}))["resize"] is False
    # torchvision-backed processors: one float pass, as torchvision's resize
    assert image_plan(SimpleNamespace(**base, backend="torchvision"))["two_pass"] is False


def test_device_preprocessing_matches_the_processors(device_and_cpu):
    """Grounding DINO's and DINOv2's pixel values computed by ``device_preprocess`` from uint8 frames equal their
    processors' output: the same sizes, the same pixels where nothing is resized, and within two uint8 levels
    (rarely one) where they are; a wrong filter, no antialiasing or another size rule fails this."""
    import torch
    from PIL import Image

    m = device_and_cpu[0]
    level = 1 / 255 / min(IMAGENET_STD)  # one uint8 level after normalisation
    cases = (
        (m.gd_processor, m.gd_plan, [(64, 96), (96, 64), (200, 300), (720, 1280), (48, 64), (301, 97)]),
        (m.dino_processor, m.dino_plan, [(28, 28), (200, 300), (20, 30), (600, 400), (33, 29), (7, 90)]),
    )
    for proc, plan, sizes in cases:
        for k, (h, w) in enumerate(sizes):
            frames = _smooth(2, h, w, k)
            if proc is m.gd_processor:
                want = proc(images=[Image.fromarray(f) for f in frames], text=["a."] * 2, return_tensors="pt")[
                    "pixel_values"
                ]
            else:
                want = proc(images=list(frames), return_tensors="pt")["pixel_values"]
            got = device_preprocess(torch.from_numpy(frames), plan)
            assert got.shape == want.shape and got.dtype == torch.float32, (h, w)
            diff = (got - want).abs()
            assert float(diff.max()) <= 2 * level + 1e-4, (h, w)
            assert float((diff > 1e-4).float().mean()) < 0.2, (h, w)
            if got.shape[-2:] == (h, w):  # nothing resized: the same pixels
                assert float(diff.max()) < 1e-5


def test_grounding_on_the_device_equals_the_processor_path(device_and_cpu, monkeypatch):
    """The device path (each probe frame preprocessed and sent once, the Swin backbone once per distinct frame)
    gives the detections of the processor path: frames at the processor's own size (nothing resized, so the same
    pixels) of two shapes, videos with one to three entities, passes that split a video."""
    import vbench_ray.metrics.src as S

    detections, rows = [], []
    real_top = S.detections

    def spy(logits, pred_boxes, hw, threshold):
        out = real_top(logits, pred_boxes, hw, threshold)
        detections.append(tuple(t.float().cpu().numpy() for t in out))
        return out

    monkeypatch.setattr(S, "detections", spy)
    jobs = [
        (_smooth(4, 64, 96, 1), ["red square", "blue circle"]),
        (_smooth(3, 64, 96, 2), ["dog"]),
        (_smooth(5, 96, 64, 3), ["the small green cube", "cup", "tree"]),
        (_smooth(2, 64, 96, 4), ["car", "man"]),
    ]
    found, passes = [], []
    for m in device_and_cpu:
        monkeypatch.setattr(m.cfg, "batch_size", 8)  # 8 images a pass: a video's 2 prompts x 3 probes share one
        hook = m.gd_backbone.inner.register_forward_pre_hook(lambda mod, args: rows.append(len(args[0])))
        try:
            detections.clear()
            rows.clear()
            found.append(m.ground_many(jobs))
            passes.append((list(detections), list(rows)))
        finally:
            hook.remove()
    (dev_det, dev_rows), (cpu_det, cpu_rows) = passes
    # the backbone saw each distinct probe frame once per pass (job 2: 9 images over the cap of 8, two passes)
    assert sum(dev_rows) == 3 + 3 + 2 + 3 + 3 and sum(cpu_rows) == 6 + 3 + 4 + 9
    assert len(dev_det) == len(cpu_det) == 4  # [job 0], [job 1, job 3]; job 2 in two
    for (s1, b1), (s2, b2) in zip(dev_det, cpu_det):
        assert np.allclose(s1, s2, atol=1e-5) and np.allclose(b1, b2, atol=1e-3)
    for a, b in zip(*found):
        assert len(a) == len(b) and np.allclose(a, b, atol=1e-3)


def test_dino_embeddings_on_the_device_equal_the_processor_path(device_and_cpu):
    gpu, cpu = device_and_cpu
    frames = _smooth(3, 120, 160, 9)
    mask = np.zeros((120, 160), bool)
    mask[20:90, 30:140] = True
    crops = [
        _smooth(1, 28, 28, 1)[0],
        frames[0][:20, :30],
        frames[1],
        frames[2][5:40, 3:60],
        _smooth(1, 33, 29, 2)[0],
        masked_crop(frames[2], mask, expanded_box(mask, 0.15)),
    ]
    got, want = gpu.embed(crops), cpu.embed(crops)  # batch_size 4: two passes
    assert got.shape == want.shape == (6, 32)
    assert np.allclose(got[0], want[0], atol=1e-5)  # 28 x 28: nothing resized, the same pixels
    assert np.allclose(got, want, atol=5e-3)


def test_segment_many_equals_one_frame_at_a_time(device_and_cpu):
    """The batched SAM2 path (frames of several videos per pass, one upload, masks back once a pass) gives each frame
    the mask SAM2 gives it alone, as the former per-video code computed it."""
    import torch
    import torch.nn.functional as F

    m = device_and_cpu[0]
    jobs = [
        (_smooth(3, 48, 64, 1), [[4.0, 4.0, 30.0, 30.0]]),
        (_smooth(2, 40, 56, 2), [[0.0, 0.0, 20.0, 12.0], [10.0, 10.0, 50.0, 38.0]]),
        (_smooth(2, 48, 64, 3), []),
        (_smooth(2, 48, 64, 4), [[8.0, 2.0, 60.0, 40.0]]),
    ]
    s = m.sam_size
    mean, std = torch.tensor(m.sam_mean).view(1, 3, 1, 1), torch.tensor(m.sam_std).view(1, 3, 1, 1)
    for (frames, boxes), masks in zip(jobs, m.segment_many(jobs)):
        assert masks.shape == frames.shape[:3] and masks.dtype == bool
        for t in range(len(frames)):
            if not boxes:
                assert not masks[t].any()
                continue
            h, w = frames.shape[1:3]
            prompt = torch.tensor(boxes) * torch.tensor([s / w, s / h, s / w, s / h])
            with torch.inference_mode():
                emb = m.sam.get_image_embeddings((m._sam_input(frames[t : t + 1], s) - mean) / std)
                pred = m.sam(image_embeddings=emb, input_boxes=prompt[None], multimask_output=False).pred_masks
                want = F.interpolate(pred[:, :, 0].float(), size=(h, w), mode="bilinear", align_corners=False) > 0
            assert (masks[t] == want.any(dim=1)[0].numpy()).all()


def test_bf16_encoders_option(tiny_src, device_and_cpu):
    """``bf16_encoders``: the Swin and Hiera encoders hold bf16 weights (the rest float32) and SRC still runs, close
    to the float32 encoders."""
    import torch

    m = SRC(_src_cfg(**tiny_src, **ACCEPT_ALL, batch_size=4, bf16_encoders=True))
    m.setup()
    assert {p.dtype for p in m.gd_backbone.inner.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in m.sam.vision_encoder.inner.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in m.sam.mask_decoder.parameters()} == {torch.float32}
    assert {p.dtype for p in m.gd_model.model.encoder.parameters()} == {torch.float32}
    src, edit = _smooth(3, 64, 96, 5), _smooth(3, 64, 96, 6)
    boxes = [[4.0, 4.0, 40.0, 40.0]]
    agree = (m.segment(src, boxes) == device_and_cpu[0].segment(src, boxes)).mean()
    assert agree > 0.9
    assert 0.0 <= m.compute(edit, src, entities=["red square"]) <= 1.0


def test_cases_batched_score_as_one_by_one_and_a_bad_case_fails_alone(tiny_src):
    """Shared Grounding DINO / SAM2 / DINOv2 passes over several cases (frames of two sizes, prompts of different
    lengths, a pass of 4 images mixing cases) give each case what it gets alone; failures stay per case."""
    from dataclasses import asdict

    from vbench_ray.metrics.pool import MetricPool, pack, payload_column

    pool = MetricPool(
        "SRC",
        asdict(
            _src_cfg(
                **tiny_src,
                box_threshold=0.0,
                text_threshold=0.0,
                min_score=0.0,
                max_box_area=1.0,
                min_mask_pixels=1,
                batch_size=4,
            )
        ),
    )
    m = pool.metric
    items = [
        (_frames(2, 48, 64, 2), _frames(2, 48, 64, 1), {"entities": ["red square"]}),
        (_frames(3, 40, 56, 4), _frames(2, 40, 56, 3), {"entities": ["blue circle", "the small green cube"]}),
        (_frames(2, 48, 64, 6), _frames(2, 48, 64, 5), {"entities": []}),
        (_frames(2, 48, 64, 8), _frames(2, 48, 64, 7), {"entities": ["triangle"]}),
    ]
    jobs = [(src, kw["entities"]) for _, src, kw in items]
    for together, alone in zip(m.ground_many(jobs), [m.ground(*job) for job in jobs]):
        assert len(together) == len(alone) and np.allclose(together, alone, atol=1e-3)  # pixels
    boxes = [[[4.0, 4.0, 30.0, 30.0]], [[0.0, 0.0, 20.0, 12.0], [10.0, 10.0, 50.0, 38.0]], [], [[8.0, 2.0, 60.0, 40.0]]]
    masks = m.segment_many([(src, b) for (_, src, _), b in zip(items, boxes)])
    for (_, src, _), b, mask in zip(items, boxes, masks):
        assert (mask == m.segment(src, b)).all() and mask.shape == src.shape[:3]
    rows = [{"case_id": str(k), payload_column("SRC"): pack(e, s, kw)} for k, (e, s, kw) in enumerate(items)]
    out = pool(rows)  # the pool's batched path: compute_many over the four cases
    for got, (edited, source, kw) in zip(out, items):
        try:
            alone = m.compute(edited, source, **kw)
        except SRCUndefined as exc:  # undefined alone: the same recorded failure in the batch, the others scored
            assert set(got) == {"error_SRC"} and str(exc) in got["error_SRC"]
        else:
            assert set(got) == {"SRC"} and got["SRC"] == pytest.approx(alone, abs=1e-5)
    assert "no concrete entity" in out[2]["error_SRC"] and sum("SRC" in o for o in out) == 3


# ----------------------------------------------------------------------------- end to end


@pytest.mark.ray
def test_cove_run_with_src(tiny_src, cove_data, tmp_path, ray_local):
    import pyarrow.parquet as pq

    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    out = tmp_path / "run"
    keys = [f"metrics.SRC.{k}={v}" for k, v in tiny_src.items()]
    cfg = load_config(
        REPO / "configs" / "cove.yaml",
        cove_overrides(
            cove_data,
            out,
            "metrics.enabled=[SSIM,SRC]",
            *keys,
            "metrics.SRC.box_threshold=0.0",
            "metrics.SRC.text_threshold=0.0",
            "metrics.SRC.min_score=0.0",
            "metrics.SRC.max_box_area=1.0",
            "metrics.SRC.min_mask_pixels=1",
            "metrics.SRC.max_frames=4",
        ),
    )
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
