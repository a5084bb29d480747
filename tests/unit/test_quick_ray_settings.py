"""The command's quick read of Ray's start settings (``ray_start.quick_ray_settings``): what ``vbench-ray run``
starts Ray with before the config is loaded. The overrides win over the YAML's own ``ray`` section; anything not
quick to read gives None (no early start: the config's own load reports it)."""

from __future__ import annotations

from vbench_ray.ray_start import quick_ray_settings


def test_the_overrides_win_over_the_yaml_and_null_is_none(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("benchmark: cove\nray:\n  address: auto\n  num_cpus: 6\n")
    assert quick_ray_settings(str(cfg), []) == ("auto", 6)
    assert quick_ray_settings(str(cfg), ["ray.num_cpus=3", "ray.address=null"]) == (None, 3)
    assert quick_ray_settings(str(cfg), ["ray.address=ray://head:10001"]) == ("ray://head:10001", 6)
    assert quick_ray_settings("configs/cove.yaml", ["output.dir=x"]) == (None, None)  # no ray section: Ray's own


def test_nothing_quick_to_read_is_no_early_start(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("ray: [unclosed\n")
    included = tmp_path / "inc.yaml"
    included.write_text("ray:\n  include: ray_settings.yaml\n")
    assert quick_ray_settings(str(tmp_path / "missing.yaml"), []) is None
    assert quick_ray_settings(str(bad), []) is None
    assert quick_ray_settings(str(included), []) is None
    assert quick_ray_settings("configs/cove.yaml", ["ray.include=r.yaml"]) is None
    assert quick_ray_settings("configs/cove.yaml", ["ray.num_cpus=two"]) is None
    assert quick_ray_settings("configs/cove.yaml", ["ray.num_cpus=0"]) is None
    assert quick_ray_settings("configs/cove.yaml", ["ray.address=3"]) is None


def test_a_driver_under_ray_job_submit_starts_no_ray_early(monkeypatch):
    """``ray job submit`` gives its driver ``RAY_JOB_CONFIG_JSON_ENV_VAR`` (the job's runtime environment, set up by
    the driver's ``ray.init``): there the command does not begin Ray's start beside its own imports (they failed
    beside it on the local multi-node cluster: vbench_ray/jobs.py); elsewhere ``run`` begins it."""
    from vbench_ray import cli, ray_start

    begun = []
    monkeypatch.setattr(ray_start, "start_ray_early", lambda *settings: begun.append(settings) or True)
    monkeypatch.setattr(ray_start, "ray_imported", lambda: None)
    args = cli.build_parser().parse_args(["run", "configs/cove.yaml", "ray.num_cpus=3"])
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")
    assert cli._start_ray_early(args) is False and begun == []
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR")
    assert cli._start_ray_early(args) is True and begun == [(None, 3)]
