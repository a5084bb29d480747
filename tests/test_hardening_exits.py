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
