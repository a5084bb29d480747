"""SRC (static-region consistency) without its models: registration, the score arithmetic on hand-made masks and
embeddings, pass packing, entities from annotations, the image plan read from a processor's settings."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from helpers.tiny_metrics import random_frames, src_cfg
from vbench_ray.metrics.base import METRICS
from vbench_ray.metrics.device_images import image_plan
from vbench_ray.metrics.src import SRC, SRCUndefined
from vbench_ray.metrics.src_entities import entities_from_cache, entities_from_task, entity_from_question
from vbench_ray.metrics.src_passes import pack_runs
from vbench_ray.metrics.src_scoring import cosine_to_unit, expanded_box, masked_crop, src_score


# ----------------------------------------------------------------------------- registration


def test_registered_model_backed_with_gpu_share():
    assert METRICS["SRC"] is SRC and SRC.model_backed and SRC.higher_is_better and SRC.scale == "[0,1]"
    assert SRC(src_cfg()).in_pool() and SRC(src_cfg()).resources() == {}
    assert SRC(src_cfg(device="cuda", gpu_fraction=0.25)).resources() == {"num_gpus": 0.25}
    from vbench_ray.benchmarks import cove

    assert "SRC" in cove.OBJECTIVE_METRICS and "SRC" not in cove.DEFAULT_ENABLED
    assert cove.DEFAULT_EXCLUSIONS["SRC"] == ["Camera", "Style"]


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
    assert pack_runs([0, 1, 2, 3], [3, 3, 3, 3], ["a", "a", "b", "c"], 7) == [[0, 1], [2, 3]]
    assert pack_runs([0, 1, 2, 3], [3, 3, 3, 3], ["a", "b", "b", "c"], 7) == [[0], [1, 2], [3]]  # b not split
    assert pack_runs([0, 1, 2, 3], [3, 3, 3, 3], ["a", "a", "a", "b"], 7) == [[0, 1], [2, 3]]  # a over the cap: split
    assert pack_runs([0, 1, 2], [9, 1, 1], ["a", "b", "b"], 4) == [[0], [1, 2]]  # an item over the cap: alone
    assert pack_runs([], [], [], 4) == []


def test_cosine_mapping_by_hand():
    assert cosine_to_unit(1.0) == 1.0 and cosine_to_unit(-1.0) == 0.0 and cosine_to_unit(0.0) == 0.5
    assert cosine_to_unit(0.6) == pytest.approx(0.8)
    assert cosine_to_unit(1.2) == 1.0  # clipped


def test_src_score_on_hand_made_masks_and_embeddings():
    t, h, w = 4, 20, 30
    src, edit = random_frames(t, h, w, 1), random_frames(t, h, w, 2)
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
    m = SRC(src_cfg())
    t, h, w = 3, 20, 30
    src, edit = random_frames(t, h, w, 1), random_frames(t, h, w, 2)
    calls, groups = [], []  # groups: each pass layout's case of each job / crop (a pass holds one case's)

    def ground_many(jobs, of=None):
        calls.append(("ground", [list(entities) for _, entities in jobs]))
        groups.append(("ground", of))
        return [
            [] if np.array_equal(frames, edit) and "gone" in entities else [[0, 0, 10, 10]] for frames, entities in jobs
        ]

    def segment_many(jobs, of=None):
        groups.append(("segment", of))
        out = [np.zeros(frames.shape[:3], bool) for frames, _ in jobs]
        for o in out:
            o[:, 0:10, 0:10] = True
        return out

    monkeypatch.setattr(m, "ground_many", ground_many)
    monkeypatch.setattr(m, "segment_many", segment_many)
    monkeypatch.setattr(
        m,
        "embed",
        lambda crops, of=None: groups.append(("embed", of)) or np.tile([[1.0, 0.0], [0.0, 1.0]], (len(crops) // 2, 1)),
    )
    assert m.compute(edit, src, entities=["red square"]) == pytest.approx(0.5)  # cos 0 on every frame
    assert calls == [("ground", [["red square"]]), ("ground", [["red square"]])]  # the source, then the edit
    with pytest.raises(SRCUndefined, match="no concrete entity"):
        m.compute(edit, src, entities=[])
    with pytest.raises(SRCUndefined, match="edited video"):
        m.compute(edit, src, entities=["gone"])
    # several cases: one grounding call per side for all of them; the edit only of cases found in the source
    calls.clear()
    groups.clear()
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
    assert groups == [("ground", [0, 1, 3])] * 2 + [("segment", [0, 0, 3, 3]), ("embed", [0] * 2 * t + [3] * 2 * t)]
    # the wall time of each phase adds up on the metric (tests/perf reads it)
    assert set(m.phase_seconds) == {"ground", "segment", "pairs", "embed"} and m.phase_cases == 3 + 4
    assert all(v >= 0 for v in m.phase_seconds.values())
    monkeypatch.setattr(m, "ground_many", lambda jobs, of=None: [[] for _ in jobs])
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
    m = SRC(src_cfg())
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
    cached = SRC(src_cfg(entities_dir=str(tmp_path)))
    assert cached.extra_inputs({"case_id": "3", "annotations": json.dumps(task)}) == {
        "entities": ["asian woman on the right"]
    }
    assert (
        SRC.check_weights(
            SimpleNamespace(grounding_dino="x", sam2="x", dinov2="x", entities_dir=str(tmp_path / "missing"))
        )[-1].count("entities_dir")
        == 1
    )


# ----------------------------------------------------------------------------- device preprocessing plan


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
