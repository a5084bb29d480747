"""CoVEBench loader: official layout, name patterns, validation, exclusions, bad input."""

import json
import os
from pathlib import Path

import pytest

from helpers.common import cove_overrides
from vbench_ray.benchmarks.base import DataError
from vbench_ray.benchmarks.cove import CoveBench
from vbench_ray.benchmarks.cove_data import (
    exclusion_reason,
    index_edited_videos,
    resolve_under,
    task_id_from_name,
    validate_task,
)
from vbench_ray.configure import load_config

COVE = Path(__file__).resolve().parents[2] / "configs" / "cove.yaml"


def _load(data, tmp_path, *extra):
    cfg = load_config(COVE, cove_overrides(data, tmp_path / "run", *extra))
    return {r["case_id"]: r for r in CoveBench(cfg).load_cases()}


@pytest.mark.parametrize(
    "name,expected",
    [
        ("17", "17"),
        ("task_17_output", "17"),
        ("model_output_id17_final", "17"),
        ("video_17", "17"),
        ("video-017", "17"),
        ("kiwi_run3_17", "17"),
        ("no_number", None),
    ],
)
def test_official_edited_name_patterns(name, expected):
    assert task_id_from_name(name) == expected


def test_exact_name_wins_and_clashes_are_ambiguous(tmp_path):
    for name in ("3.mp4", "video_3.mp4", "task_4_output.mp4", "video_4.mp4", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    index, ambiguous, _ = index_edited_videos(tmp_path)
    assert index["3"].name == "3.mp4"
    assert set(ambiguous) == {"4"}


def test_paths_may_not_escape_the_data_root(tmp_path):
    (tmp_path / "data").mkdir()
    assert resolve_under(tmp_path, "data/1.mp4", "videoA_path") == (tmp_path / "data/1.mp4").resolve()
    for bad in ("../outside.mp4", "/etc/passwd", "data/../../x.mp4"):
        with pytest.raises(DataError, match="escapes the data root"):
            resolve_under(tmp_path, bad, "videoA_path")


def test_validation_names_the_field():
    task = {
        "id": 5,
        "editing_instruction": "x",
        "videoA_path": "data/1.mp4",
        "evaluation_groups": [
            {
                "questions": [
                    {"id": "Q1", "type": "Multi-TF", "dimension": "Execution Accuracy", "expected_answer": "Yes"},
                    {"id": "Q1", "type": "AB-MCQ", "dimension": "Vibes", "expected_answer": "A"},
                ]
            }
        ],
    }
    errors = validate_task(task, "checklist.json: task[4]")
    # issue 24: an unknown type or dimension is no load error (skipped / routed as the official code does)
    assert errors == ["checklist.json: task[4].evaluation_groups[0].questions[1].id: duplicate question id 'Q1'"]
    assert validate_task({"id": {"x": 1}, "editing_instruction": "", "videoA_path": 3}, "t")[0].startswith("t.id")


def test_loads_the_synthetic_set(cove_data, tmp_path):
    rows = _load(cove_data, tmp_path)
    assert len(rows) == 8
    for r in rows.values():
        assert not r.get("error_load")
        assert Path(r["source_path"]).exists() and Path(r["edited_path"]).exists()
        assert Path(r["edited_path"]).stem == r["case_id"]
        assert r["categories"], r
        json.loads(r["annotations"])
    # source and edited names differ, as in the real data
    assert any(Path(r["source_path"]).stem != r["case_id"] for r in rows.values())


def test_exclusions_follow_categories(cove_data, tmp_path):
    rows = _load(cove_data, tmp_path)
    for r in rows.values():
        assert (r["excluded_SSIM"] == "category:Background") == ("Background" in r["categories"])
        mf_cats = {"Camera", "Style", "Motion"} & set(r["categories"])
        assert bool(r["excluded_MF"]) == bool(mf_cats)
        assert r["excluded_MSM"] is None
    assert any(r["excluded_SSIM"] for r in rows.values()) and any(r["excluded_MF"] for r in rows.values())


def test_explicit_id_lists_replace_the_category_rule(cove_data, tmp_path):
    ids_file = tmp_path / "exclude.txt"
    ids_file.write_text("1\n3\n")
    rows = _load(cove_data, tmp_path, f"metrics.exclude.SSIM.ids_file={ids_file}", "metrics.exclude.MSM.ids=[2]")
    assert {k for k, r in rows.items() if r["excluded_SSIM"]} == {"1", "3"}
    assert {k for k, r in rows.items() if r["excluded_MSM"]} == {"2"}
    assert exclusion_reason("7", ["Background"], [], (None, ["Background/Scene Change"])) is None
    assert (
        exclusion_reason("7", ["Background"], ["Background/Scene Change"], (None, ["Background/Scene Change"]))
        == "category:Background/Scene Change"
    )


def test_bad_cases_are_recorded_not_fatal(cove_copy, tmp_path):
    tasks = json.loads(cove_copy["checklist"].read_text())
    tasks[0]["videoA_path"] = "../../etc/passwd"
    tasks[1]["evaluation_groups"][0]["questions"][0]["type"] = "Multi-TF"
    os.remove(cove_copy["edited_dir"] / f"{tasks[2]['id']}.mp4")
    tasks[3]["videoA_path"] = "data/does_not_exist.mp4"
    cove_copy["checklist"].write_text(json.dumps(tasks))
    rows = _load(cove_copy, tmp_path)
    assert len(rows) == 8
    t = [str(x["id"]) for x in tasks]
    assert "escapes the data root" in rows[t[0]]["error_load"]
    assert not rows[t[1]].get("error_load")  # an unknown question type is skipped when scoring, not a load error
    # the model's missing output is an edited-video failure, scored under score.missing_output (issue 24)
    assert f"edited video for task {t[2]} not found" in rows[t[2]]["error_edited"]
    assert not rows[t[2]].get("error_load")
    assert "source video not found" in rows[t[3]]["error_load"] and not rows[t[3]].get("error_edited")
    assert sum(1 for r in rows.values() if r.get("error_load")) == 2


def test_unreadable_checklists_are_clear_errors(cove_copy, tmp_path):
    cove_copy["checklist"].write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        _load(cove_copy, tmp_path)
    cove_copy["checklist"].write_text('{"id": 1}')
    with pytest.raises(DataError, match="expected a JSON list"):
        _load(cove_copy, tmp_path)
    with pytest.raises(DataError, match="data.checklist not found"):
        _load({**cove_copy, "checklist": tmp_path / "nope.json"}, tmp_path)
