"""What the terminal shows after a run (issue 26 item 2): NRVBench's metrics per method."""

from pathlib import Path

from vbench_ray.cli import _print_result
from vbench_ray.runner import RunResult


def test_nrv_run_prints_every_metric_per_method(capsys, tmp_path: Path):
    block = {"NRVE_Acc": {"value": 0.5, "ci95": [0.25, 0.75], "n": 8}, "FPS": {"value": 12.0, "ci95": None, "n": 8}}
    summary = {
        "benchmark": "nrv",
        "n_rows": 16,
        "metrics": block,
        "by_method": {
            "m1": {
                "NRVE_Acc": {"value": 0.75, "ci95": [0.5, 1.0], "n": 4},
                "FPS": {"value": 10.0, "ci95": None, "n": 4},
            },
            "m2": {"NRVE_Acc": {"value": 0.25, "ci95": [0.0, 0.5], "n": 4}},
        },
    }
    _print_result(RunResult(run_dir=tmp_path, summary=summary, n_computed=16, seconds=1.0))
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("per method:")
    assert lines[at + 1].split() == ["method", "NRVE_Acc", "FPS"]
    assert lines[at + 3].split() == ["m1", "0.75", "[0.5,", "1]", "n=4", "10", "n=4"]
    assert lines[at + 4].split() == ["m2", "0.25", "[0,", "0.5]", "n=4", "n/a", "n=0"]


class _Model:
    def __call__(self, row):
        return {}


def test_pool_stage_log_line_says_pool_once(caplog, ray_local):
    """Issue 26 item 6: the log said "stage m: pool pool of 1-4 actor(s)"."""
    import logging

    import ray

    from vbench_ray.pipeline import Stage, apply_stage
    from vbench_ray.pool_plan import StagePlan

    with caplog.at_level(logging.INFO, logger="vbench_ray.pipeline"):
        apply_stage(ray.data.range(1), Stage(name="m", fn=_Model, outputs={}, kind="pool"), StagePlan(1.0, 1, 4))
    assert "stage m (pool): pool of 1-4 actor(s), 1.00 CPU and 0.00 GPU each" in caplog.text
    assert "pool pool" not in caplog.text
