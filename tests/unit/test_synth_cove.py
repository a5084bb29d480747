"""Synthetic mini CoVEBench: layout, schema, determinism, and that each edit is really in the pixels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vbench_ray.synth import EDIT_CATEGORIES, EDIT_TYPES, synth_cove
from vbench_ray.synth.cove import task_edit_types
from vbench_ray.synth.scenes import apply_colormap, render_scene, scene_from_dict, shape_coverage
from vbench_ray.video.io import VideoReader

N, FRAMES, W, H = 8, 24, 128, 96
QTYPES = {"AB-MCQ", "Single-TF", "Dual-TF", "Score-MCQ"}
DIMS = {"Execution Accuracy", "Physical Logic", "Semantic Preservation"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("cove_seed0")
    result = synth_cove(out, n=N, seed=0, frames=FRAMES, size=(W, H), fps=8)
    manifest = json.loads((out / "synth_manifest.json").read_text())
    checklist = json.loads((out / "checklist.json").read_text())
    return out, result, manifest, checklist


def _frames(path) -> np.ndarray:
    vr = VideoReader(path)
    return vr.read(range(vr.info.num_frames)).astype(np.float32)


def _erode(mask: np.ndarray, k: int = 2) -> np.ndarray:
    m = mask.copy()
    for _ in range(k):
        p = np.pad(m, 1, constant_values=False)
        m = m & p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:]
    return m


def _dilate(mask: np.ndarray, k: int = 2) -> np.ndarray:
    return ~_erode(~mask, k)


def _tasks_with(manifest, edit_type, alone=True):
    out = [t for t in manifest["tasks"] if edit_type in t["edit_types"] and (not alone or len(t["edit_types"]) == 1)]
    assert out, f"no task with edit {edit_type}"
    return out


def _params(task, edit_type):
    return next(e for e in task["edits"] if e["type"] == edit_type)


def _pair(out: Path, task):
    return _frames(out / task["videoA_path"]), _frames(out / task["videoB_path"])


# ------------------------------------------------------------------------------------------ layout


def test_files_exist_and_decode(bench):
    out, result, manifest, checklist = bench
    assert result["n"] == N and len(checklist) == N
    assert Path(result["checklist"]) == out / "checklist.json"
    assert Path(result["edited_dir"]) == out / "edited"
    for task in checklist:
        src = out / task["videoA_path"]
        edited = out / "edited" / f"{task['id']}.mp4"
        for p in (src, edited):
            info = VideoReader(p).info
            assert (info.num_frames, info.height, info.width) == (FRAMES, H, W), p
            assert info.fps == pytest.approx(8, rel=0.01)
            assert VideoReader(p).read([0, FRAMES - 1]).shape == (2, H, W, 3)


def test_source_names_differ_from_task_ids(bench):
    out, _, _, checklist = bench
    paths = [t["videoA_path"] for t in checklist]
    assert len(set(paths)) == N
    for t in checklist:
        assert t["videoA_path"].startswith("data/") and t["videoA_path"] != f"data/{t['id']}.mp4"


def test_all_edit_types_covered_and_compositional(bench):
    _, result, manifest, _ = bench
    seen = {e for edits in result["edits"].values() for e in edits}
    assert seen == set(EDIT_TYPES)
    assert any(len(e) >= 2 for e in result["edits"].values())
    assert {t["id"]: t["edit_types"] for t in manifest["tasks"]} == result["edits"]
    for k in range(1, 7 + 1):  # any n >= 7 covers every type
        assert task_edit_types(k) == [EDIT_TYPES[k - 1]]


# ------------------------------------------------------------------------------------------ schema


def test_checklist_schema(bench):
    _, _, manifest, checklist = bench
    yes_no = []
    for task, mt in zip(checklist, manifest["tasks"]):
        assert list(task) == [
            "id",
            "summary_of_changes",
            "original_description",
            "editing_instruction",
            "target_video_description",
            "evaluation_groups",
            "videoA_path",
            "category",
        ]
        assert isinstance(task["id"], int) and task["id"] == mt["id"]
        for k in ("summary_of_changes", "original_description", "editing_instruction", "target_video_description"):
            assert isinstance(task[k], str) and task[k]
        groups = task["evaluation_groups"]
        assert len(groups) == len(mt["edit_types"]) + 1
        ids = []
        for gi, g in enumerate(groups):
            assert g["target_element"] and g["description"] and g["questions"]
            gids = set()
            for q in g["questions"]:
                for k in ("id", "type", "dimension", "question", "expected_answer"):
                    assert isinstance(q.get(k), str) and q[k], (task["id"], q)
                assert q["type"] in QTYPES and q["dimension"] in DIMS
                if q["type"] == "AB-MCQ":
                    assert set(q["options"]) == {"A", "B"} and q["expected_answer"] in {"A", "B", "A and B"}
                else:
                    assert "options" not in q
                if q["type"] in ("Single-TF", "Dual-TF"):
                    assert q["expected_answer"] in {"Yes", "No"}
                    yes_no.append(q["expected_answer"])
                if q["type"] == "Score-MCQ":
                    assert q["expected_answer"] == "5" and q["dimension"] == "Semantic Preservation"
                ids.append(q["id"])
                gids.add(q["id"])
            last = gi == len(groups) - 1
            if last:
                assert all(
                    q["type"] == "Score-MCQ" and q["dimension"] == "Semantic Preservation" for q in g["questions"]
                )
            else:
                assert not any(q["type"] == "Score-MCQ" for q in g["questions"])
                for c in g["category"]:
                    assert set(c) == {"Question IDs", "Level 1", "Level 2", "Level 3"}
                    assert c["Question IDs"] and set(c["Question IDs"]) <= gids
        assert ids == [f"Q{i}" for i in range(1, len(ids) + 1)]  # unique, Q1..Qn across the task
        expected_cats = []
        for e in mt["edit_types"]:
            l1, l2, l3 = EDIT_CATEGORIES[e]
            expected_cats.append({"Level 1": l1, "Level 2": l2, "Level 3": l3})
        assert task["category"] == expected_cats
        group_cats = [{k: c[k] for k in ("Level 1", "Level 2", "Level 3")} for g in groups[:-1] for c in g["category"]]
        assert group_cats == expected_cats
    assert "Yes" in yes_no and "No" in yes_no


def test_expected_answers_match_edits(bench):
    _, _, manifest, checklist = bench
    by_id = {t["id"]: t for t in checklist}
    ab_letters = set()
    for mt in manifest["tasks"]:
        task = by_id[mt["id"]]
        for gi, e in enumerate(mt["edits"]):
            group = task["evaluation_groups"][gi]
            ab = next(q for q in group["questions"] if q["type"] == "AB-MCQ")
            ab_letters.add(ab["expected_answer"])
            if ab["expected_answer"] in ("A", "B"):
                chosen = ab["options"][ab["expected_answer"]].lower()
                other = ab["options"]["B" if ab["expected_answer"] == "A" else "A"].lower()
            if e["type"] == "recolour":
                assert chosen == e["to"] and other == e["from"]
                assert e["from"] in mt["source_scene"]["shapes"][e["source_index"]]["color_name"]
                assert mt["edited_scene"]["shapes"][e["edited_index"]]["color_name"] == e["to"]
            elif e["type"] == "motion_reversal":
                assert chosen == f"from {e['to_direction']}" and e["to_direction"] != e["from_direction"]
            elif e["type"] == "background":
                assert e["to"] in chosen and e["from"] in other
            elif e["type"] == "remove":
                assert e["kind"] in other and e["edited_index"] is None
            elif e["type"] == "add":
                assert ab["expected_answer"] == "A and B" and e["source_index"] is None
    assert {"A", "B"} <= ab_letters


# ------------------------------------------------------------------------------------- determinism


def test_deterministic_same_seed_and_differs_across_seeds(bench, tmp_path):
    out, _, _, _ = bench
    again = tmp_path / "again"
    synth_cove(again, n=N, seed=0, frames=FRAMES, size=(W, H), fps=8)
    assert (again / "checklist.json").read_bytes() == (out / "checklist.json").read_bytes()
    assert (again / "synth_manifest.json").read_bytes() == (out / "synth_manifest.json").read_bytes()
    for p in sorted((out / "data").glob("*.mp4")) + sorted((out / "edited").glob("*.mp4")):
        q = again / p.relative_to(out)
        np.testing.assert_array_equal(_frames(p), _frames(q), err_msg=str(p))

    other = tmp_path / "other"
    synth_cove(other, n=N, seed=1, frames=FRAMES, size=(W, H), fps=8)
    assert (other / "checklist.json").read_bytes() != (out / "checklist.json").read_bytes()
    diffs = [np.abs(_frames(out / "edited/1.mp4") - _frames(other / "edited/1.mp4")).mean()]
    src0 = {t["id"]: t["videoA_path"] for t in json.loads((out / "checklist.json").read_text())}
    src1 = {t["id"]: t["videoA_path"] for t in json.loads((other / "checklist.json").read_text())}
    diffs.append(np.abs(_frames(out / src0[2]) - _frames(other / src1[2])).mean())
    assert min(diffs) > 5


def test_manifest_scenes_rerender_to_the_videos(bench):
    out, _, manifest, _ = bench
    for t in manifest["tasks"][:3]:
        for key, rel in (("source_scene", "videoA_path"), ("edited_scene", "videoB_path")):
            frames = render_scene(scene_from_dict(t[key])).astype(np.float32)
            assert np.abs(frames - _frames(out / t[rel])).mean() < 3, (t["id"], key)


# ------------------------------------------------------------------------------ the edits are real


def _mean_rgb(frames, masks):
    return np.concatenate([f[m] for f, m in zip(frames, masks)]).mean(axis=0)


def _interior(scene, idx, frames_idx, k=2):
    return [_erode(shape_coverage(scene, idx, f) > 0.99, k) for f in frames_idx]


def test_recolour_changes_the_shape_colour(bench):
    out, _, manifest, _ = bench
    for t in _tasks_with(manifest, "recolour", alone=False):
        e = _params(t, "recolour")
        src, edited = scene_from_dict(t["source_scene"]), scene_from_dict(t["edited_scene"])
        a, b = _pair(out, t)
        fi = [0, FRAMES // 2, FRAMES - 1]
        masks_a = _interior(src, e["source_index"], fi)
        masks_b = _interior(edited, e["edited_index"], fi)  # the same shape, moved if combined with motion/zoom
        assert all(m.sum() > 20 for m in masks_a)
        ca, cb = _mean_rgb(a[fi], masks_a), _mean_rgb(b[fi], masks_b)
        assert np.abs(ca - np.array(e["from_rgb"])).max() < 25
        assert np.abs(cb - np.array(e["to_rgb"])).max() < 25
        assert np.linalg.norm(ca - cb) > 60


def test_remove_erases_the_shape(bench):
    out, _, manifest, _ = bench
    t = _tasks_with(manifest, "remove")[0]
    e = _params(t, "remove")
    src = scene_from_dict(t["source_scene"])
    color = np.array(src.shapes[e["source_index"]].color, np.float32)
    a, b = _pair(out, t)
    fi = list(range(0, FRAMES, 4))
    masks = _interior(src, e["source_index"], fi)
    assert np.linalg.norm(_mean_rgb(a[fi], masks) - color) < 30
    assert np.linalg.norm(_mean_rgb(b[fi], masks) - color) > 80
    kept = _interior(src, 0, fi)  # the other shape is untouched
    assert np.abs(_mean_rgb(a[fi], kept) - _mean_rgb(b[fi], kept)).max() < 8


def test_add_inserts_a_shape(bench):
    out, _, manifest, _ = bench
    t = _tasks_with(manifest, "add")[0]
    e = _params(t, "add")
    edited = scene_from_dict(t["edited_scene"])
    color = np.array(edited.shapes[e["edited_index"]].color, np.float32)
    a, b = _pair(out, t)
    fi = list(range(0, FRAMES, 4))
    masks = _interior(edited, e["edited_index"], fi)
    assert np.linalg.norm(_mean_rgb(b[fi], masks) - color) < 30
    assert np.linalg.norm(_mean_rgb(a[fi], masks) - color) > 80


def test_background_change_keeps_the_shapes(bench):
    out, _, manifest, _ = bench
    t = _tasks_with(manifest, "background")[0]
    src, edited = scene_from_dict(t["source_scene"]), scene_from_dict(t["edited_scene"])
    a, b = _pair(out, t)
    bg_diff, fg_diff = [], []
    for f in range(0, FRAMES, 4):
        anyshape = np.zeros((H, W), bool)
        for s in (src, edited):
            for i in range(len(s.shapes)):
                anyshape |= shape_coverage(s, i, f, visible_only=False) > 0
        bg = ~_dilate(anyshape, 3)
        bg_diff.append(np.abs(a[f] - b[f])[bg].mean())
        fg = _erode(shape_coverage(src, 0, f) > 0.99, 2)
        fg_diff.append(np.abs(a[f] - b[f])[fg].mean())
    assert np.mean(bg_diff) > 20
    assert np.mean(fg_diff) < 10


def test_motion_reversal_runs_the_path_backwards(bench):
    out, _, manifest, _ = bench
    t = _tasks_with(manifest, "motion_reversal")[0]
    e = _params(t, "motion_reversal")
    src = scene_from_dict(t["source_scene"])
    i = e["source_index"]
    color = np.array(src.shapes[i].color, np.float32)
    a, b = _pair(out, t)
    last = FRAMES - 1
    end_mask = _interior(src, i, [last])
    start_mask = _interior(src, i, [0])
    # Video B starts where Video A ends, and ends where Video A starts.
    assert np.linalg.norm(_mean_rgb(b[[0]], end_mask) - color) < 30
    assert np.linalg.norm(_mean_rgb(b[[last]], start_mask) - color) < 30
    assert np.linalg.norm(_mean_rgb(a[[0]], end_mask) - color) > 80
    assert e["from_direction"] != e["to_direction"]


def test_style_is_a_global_colour_map(bench):
    out, _, manifest, _ = bench
    t = _tasks_with(manifest, "style")[0]
    e = _params(t, "style")
    src = scene_from_dict(t["source_scene"])
    a, b = _pair(out, t)
    expected = np.clip(np.rint(apply_colormap(render_scene(src), e["colormap"])), 0, 255)
    err = np.abs(b - expected).mean()  # h264 noise only (posterize's hard edges cost the most)
    assert err < 6
    assert np.abs(b - a).mean() > max(10.0, 3 * err)


def test_zoom_is_a_progressive_centre_crop(bench):
    cv2 = pytest.importorskip("cv2")
    out, _, manifest, _ = bench
    t = _tasks_with(manifest, "zoom")[0]
    z = _params(t, "zoom")["zoom_end"]
    a, b = _pair(out, t)
    last = FRAMES - 1
    assert np.abs(a[0] - b[0]).mean() < 3  # no zoom yet at the first frame
    cw, ch = W / z, H / z
    x0, y0 = (W - cw) / 2, (H - ch) / 2
    crop = a[last][int(round(y0)) : int(round(y0 + ch)), int(round(x0)) : int(round(x0 + cw))]
    crop = cv2.resize(crop, (W, H), interpolation=cv2.INTER_LINEAR)
    assert np.abs(b[last] - crop).mean() < 8
    assert np.abs(b[last] - a[last]).mean() > 2 * np.abs(b[last] - crop).mean()


def test_identity_edits_are_a_negative_control(tmp_path):
    r = synth_cove(tmp_path, n=3, seed=5, frames=12, size=(64, 48), fps=8, identity_edits=True)
    assert r["identity_edits"] is True
    checklist = json.loads((tmp_path / "checklist.json").read_text())
    for task in checklist:
        a = _frames(tmp_path / task["videoA_path"])
        b = _frames(tmp_path / "edited" / f"{task['id']}.mp4")
        assert a.shape == b.shape == (12, 48, 64, 3)
        assert np.abs(a - b).mean() < 3
    # the checklist still describes the intended edits
    assert [t["category"][0]["Level 1"] for t in checklist] == ["Subject", "Subject", "Subject"]


def test_small_n_and_bad_arguments(tmp_path):
    r = synth_cove(tmp_path / "one", n=1, seed=0, frames=6, size=(64, 48))
    cl = json.loads(Path(r["checklist"]).read_text())
    assert len(cl) == 1 and cl[0]["videoA_path"] != "data/1.mp4"
    assert (tmp_path / "one" / cl[0]["videoA_path"]).exists()
    for kwargs in ({"n": 0}, {"frames": 1}, {"size": (65, 48)}, {"fps": 0}):
        with pytest.raises(ValueError):
            synth_cove(tmp_path / "bad", **kwargs)
