"""Issue 23 (hardening, round 3), items 7-10: honest exit codes, Ctrl-C, value ranges, messages instead of
tracebacks. Each test fails on the code before its fix."""

from __future__ import annotations

import json
import time

import pytest

from conftest import REPO, cove_overrides
from vbench_ray.config import ConfigError
from vbench_ray.configure import load_config

COVE = REPO / "configs" / "cove.yaml"


# ----------------------------------------------------------------------------- item 9: value ranges

@pytest.mark.parametrize("override, message", [
    ("judge.temperature=-1", "`judge.temperature` = -1.0: expected a number >= 0"),
    ("judge.max_tokens=0", "`judge.max_tokens` = 0: expected an integer >= 1"),
    ("judge.video.fps=0", "`judge.video.fps` = 0.0: expected a number > 0"),
    ("judge.video.max_frames=-1", "`judge.video.max_frames` = -1: expected an integer >= 1"),
    ("judge.video.max_frames=0", "`judge.video.max_frames` = 0: expected an integer >= 1"),
    ("judge.http.retry_wait_s=-1", "`judge.http.retry_wait_s` = -1.0: expected a number >= 0"),
    ("ray.shard_seconds=-1", "`ray.shard_seconds` = -1.0: expected a number >= 0"),
    ("judge.top_p=nan", "`judge.top_p` = nan: expected a number > 0 and <= 1"),
    ("vqr.max_tokens=-5", "`vqr.max_tokens` = -5: expected an integer >= 1"),
    ("editor.num_gpus=-0.5", "`editor.num_gpus` = -0.5: expected a number >= 0"),
])
def test_item9_out_of_range_values_are_refused_before_compute(cove_data, tmp_path, override, message):
    """Each value is refused by run() naming its key, before the run directory exists (nothing computed)."""
    from vbench_ray.runner import run

    out = tmp_path / "never"
    cfg = load_config(COVE, cove_overrides(cove_data, out, "metrics.enabled=[SSIM]", override))
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        run(cfg)
    assert message in str(info.value)
    assert time.perf_counter() - start < 5 and not out.exists()


def test_item9_nrv_judges_entries_are_range_checked(tmp_path):
    """A `judges` entry is merged over `judge`: its values are checked where it sits."""
    from vbench_ray.preflight import check

    answers = tmp_path / "a.jsonl"
    answers.write_text("")
    cfg = load_config(REPO / "configs" / "nrv.yaml", [
        "data.annotations=a.jsonl", "data.edited_dir=e", f"output.dir={tmp_path / 'n'}", "judge.backend=replay",
        f"judge.replay_path={answers}", "judges=[{name: a}, {name: b, temperature: -2}]"])
    with pytest.raises(ConfigError, match=r"`judges\[1\]\.temperature` = -2\.0: expected a number >= 0"):
        check(cfg)


# ----------------------------------------------------------------------------- item 7: honest exit codes

def test_item7_nothing_to_compute_is_refused_before_compute(cove_data, tmp_path, capsys):
    """`metrics.enabled=[]` with no editor: exit 2 naming the key, nothing written."""
    from vbench_ray.cli import main

    out = tmp_path / "never"
    assert main(["run", str(COVE), *cove_overrides(cove_data, out, "metrics.enabled=[]")]) == 2
    assert "`metrics.enabled` is empty: the run would compute and score nothing" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.ray
def test_item7_a_run_whose_every_case_failed_exits_non_zero(ray_local, cove_data, tmp_path, capsys):
    """Edited videos named `{id}_v2.mp4`: no case loads. summary.json is written, the command exits 5 with the
    reason and the first failure."""
    import shutil
    from pathlib import Path

    from vbench_ray.cli import EXIT_ALL_FAILED, main

    edited = tmp_path / "edited"
    edited.mkdir()
    for video in Path(cove_data["edited_dir"]).glob("*.mp4"):
        shutil.copy(video, edited / f"{video.stem}_v2.mp4")
    out = tmp_path / "run"
    code = main(["run", str(COVE), *cove_overrides({**cove_data, "edited_dir": str(edited)}, out,
                                                   "metrics.enabled=[SSIM]")])
    err = capsys.readouterr().err
    assert code == EXIT_ALL_FAILED == 5
    assert "error: every case failed (8 of 8" in err and "not found in data.edited_dir" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failures"]["count"] == 8 and summary["metrics"]["SSIM"]["n"] == 0


@pytest.mark.ray
def test_item7_edit_whose_every_case_failed_at_load_exits_non_zero(ray_local, cove_copy, tmp_path, capsys):
    """`edit` with no source video to edit: was "0 edited, 0 reused, 0 failed" and exit 0."""
    from pathlib import Path

    from vbench_ray.cli import EXIT_ALL_FAILED, main

    for video in Path(cove_copy["source_dir"]).rglob("*.mp4"):
        video.unlink()
    editor = tmp_path / "identity.yaml"
    editor.write_text("name: identity\n")
    out = tmp_path / "edited"
    code = main(["edit", str(editor), f"data.checklist={cove_copy['checklist']}",
                 f"data.source_dir={cove_copy['source_dir']}", f"output.dir={out}", "wandb.mode=disabled",
                 "report.enabled=false"])
    captured = capsys.readouterr()
    assert "0 edited, 0 reused, 0 failed" in captured.out
    assert code == EXIT_ALL_FAILED and "error: every case failed (8 of 8; load: 8)" in captured.err
