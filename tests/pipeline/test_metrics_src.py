"""SRC (static-region consistency): tiny random Grounding DINO / SAM2 / DINOv2 loaded through the real code (weights
checks, device preprocessing, batched passes) and one CoVE run; the arithmetic without models is in
tests/unit/test_metrics_src_scoring.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers.common import REPO, cove_overrides
from helpers.tiny_metrics import build_tiny_src_models, random_frames, src_cfg
from vbench_ray.metrics.base import MissingWeightsError
from vbench_ray.metrics.device_images import IMAGENET_STD, device_preprocess
from vbench_ray.metrics.src import SRC, SRCUndefined
from vbench_ray.metrics.src_scoring import expanded_box, masked_crop, src_score


@pytest.fixture(scope="module")
def tiny_src(tmp_path_factory):
    return build_tiny_src_models(tmp_path_factory.mktemp("tiny_src"))


# ----------------------------------------------------------------------------- registration and weights


def test_missing_weights_name_each_key(tiny_src, tmp_path):
    problems = SRC.check_weights(src_cfg())
    assert len(problems) == 3
    for key, msg in zip(("grounding_dino", "sam2", "dinov2"), problems):
        assert f"metrics.SRC.{key}" in msg
    partial = SRC.check_weights(src_cfg(**{**tiny_src, "sam2": str(tmp_path / "nope")}))
    assert len(partial) == 1 and "metrics.SRC.sam2" in partial[0] and "does not exist" in partial[0]
    assert SRC.check_weights(src_cfg(**tiny_src)) == []
    with pytest.raises(MissingWeightsError) as e:
        SRC(src_cfg(**{**tiny_src, "dinov2": None})).setup()
    assert e.value.config_key == "metrics.SRC.dinov2"


# ----------------------------------------------------------------------------- the real loading code


def test_tiny_models_load_and_run_through_the_real_code(tiny_src):
    m = SRC(src_cfg(**tiny_src, box_threshold=0.0, text_threshold=0.0, min_score=0.0, max_box_area=1.0, batch_size=2))
    m.setup()
    src, edit = random_frames(5, 48, 64, 1), random_frames(5, 48, 64, 2)
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

    m = SRC(src_cfg(**tiny_src))
    m.setup()
    images = [Image.fromarray(f) for f in random_frames(3, 48, 64, 5)]
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
        m = SRC(src_cfg(**tiny_src, **ACCEPT_ALL, batch_size=4, gpu_preprocess=on_device))
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


def test_device_preprocessing_matches_the_processors(device_and_cpu):
    """Grounding DINO's and DINOv2's pixel values computed by ``device_preprocess`` from uint8 frames equal their
    processors' output: the same sizes, the same pixels where nothing is resized, and within two uint8 levels
    (a PIL processor) or one (a torchvision one) where they are; a wrong filter, no antialiasing or another size
    rule fails this."""
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
            # a PIL processor rounds each of its two passes (two levels at most); a torchvision one resizes uint8
            # images in fixed point on the CPU, one level off the float resize on up to ~22% of the pixels where a
            # tiny image is upsampled (7x90, 33x29 -> 224)
            assert float(diff.max()) <= (2 if plan["two_pass"] else 1) * level + 1e-4, (h, w)
            assert float((diff > 1e-4).float().mean()) < 0.25, (h, w)
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

    m = SRC(src_cfg(**tiny_src, **ACCEPT_ALL, batch_size=4, bf16_encoders=True))
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
    """Grounding DINO / SAM2 passes shared by several videos (``ground_many`` / ``segment_many`` without groups:
    frames of two sizes, prompts of different lengths, a pass of 4 images mixing cases) give each video what it gets
    alone, up to rounding; a pool call's cases score as alone; failures stay per case."""
    from dataclasses import asdict

    from vbench_ray.metrics.pool import MetricPool, pack, payload_column

    pool = MetricPool(
        "SRC",
        asdict(
            src_cfg(
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
        (random_frames(2, 48, 64, 2), random_frames(2, 48, 64, 1), {"entities": ["red square"]}),
        (
            random_frames(3, 40, 56, 4),
            random_frames(2, 40, 56, 3),
            {"entities": ["blue circle", "the small green cube"]},
        ),
        (random_frames(2, 48, 64, 6), random_frames(2, 48, 64, 5), {"entities": []}),
        (random_frames(2, 48, 64, 8), random_frames(2, 48, 64, 7), {"entities": ["triangle"]}),
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


def _record_passes(m) -> tuple[list, list]:
    """Each forward pass of Grounding DINO, SAM2's image encoder and DINOv2 as ``(model, digest of its inputs)``."""
    import hashlib

    import torch

    seen: list[tuple[str, str]] = []

    def hook(name):
        def record(module, args, kwargs):
            digest = hashlib.sha256()
            for x in [*args, *kwargs.values()]:
                if isinstance(x, torch.Tensor):
                    digest.update(str((x.dtype, tuple(x.shape))).encode() + x.detach().contiguous().numpy().tobytes())
            seen.append((name, digest.hexdigest()))

        return record

    models = (("grounding_dino", m.gd_model), ("sam2", m.sam.vision_encoder), ("dinov2", m.dino))
    return seen, [model.register_forward_pre_hook(hook(name), with_kwargs=True) for name, model in models]


def test_a_case_scores_the_same_whatever_shares_its_pool_call(tiny_src):
    """By default each Grounding DINO, SAM2 and DINOv2 pass holds one case's images only, so a case's SRC is the
    same to the last bit alone and at any place in a pool call (the official code scores one task at a time): every
    pass of the call is a pass the case has alone. Here passes of 4 images and 5-frame videos (10 crops a case) would
    mix cases if passes were shared, and their other shapes round differently in the CPU kernels."""
    m = SRC(src_cfg(**tiny_src, **ACCEPT_ALL, batch_size=4))
    m.setup()
    items = [
        (random_frames(5, 48, 64, 2), random_frames(5, 48, 64, 1), {"entities": ["red square"]}),
        (random_frames(5, 40, 56, 4), random_frames(5, 40, 56, 3), {"entities": ["blue circle", "the green cube"]}),
        (random_frames(5, 48, 64, 6), random_frames(5, 48, 64, 5), {"entities": ["the small green cube"]}),
        (random_frames(4, 48, 64, 8), random_frames(5, 48, 64, 7), {"entities": ["triangle", "dog"]}),
    ]
    seen, hooks = _record_passes(m)
    try:
        alone = [m.compute_many([item])[0] for item in items]
        own_passes = set(seen)
        seen.clear()
        together, turned = m.compute_many(items), m.compute_many(items[::-1])[::-1]
        assert all(isinstance(v, float) for v in alone)
        assert together == alone and turned == alone  # bit-identical
        assert {name for name, _ in own_passes} == {"grounding_dino", "sam2", "dinov2"}
        assert set(seen) <= own_passes
    finally:
        for h in hooks:
            h.remove()


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
