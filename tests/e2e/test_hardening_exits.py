"""Issue 23 (hardening, round 3), items 7-10: honest exit codes, Ctrl-C, value ranges, messages instead of
tracebacks. Each test fails on the code before its fix."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers.common import REPO, cove_overrides
from vbench_ray.config import ConfigError
from vbench_ray.configure import load_config

COVE = REPO / "configs" / "cove.yaml"


# ----------------------------------------------------------------------------- item 9: value ranges


@pytest.mark.parametrize(
    "override, message",
    [
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
        ("editor.frame_rules.size_multiple=0", "`editor.frame_rules.size_multiple` = 0: expected an integer >= 1"),
    ],
)
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
    cfg = load_config(
        REPO / "configs" / "nrv.yaml",
        [
            "data.annotations=a.jsonl",
            "data.edited_dir=e",
            f"output.dir={tmp_path / 'n'}",
            "judge.backend=replay",
            f"judge.replay_path={answers}",
            "judges=[{name: a}, {name: b, temperature: -2}]",
            "media.roi_frames=0",
            "controls.amplitude=-1",
        ],
    )
    with pytest.raises(ConfigError) as info:
        check(cfg)
    assert "`judges[1].temperature` = -2.0: expected a number >= 0" in str(info.value)
    assert "`media.roi_frames` = 0: expected an integer >= 1" in str(info.value)
    assert "`controls.amplitude` = -1.0: expected a number > 0" in str(info.value)


def test_item9_agentic_ranges_use_the_same_walk():
    from omegaconf import OmegaConf

    from vbench_ray.benchmarks.agentic import AgenticConfig
    from vbench_ray.config import check_bounds

    cfg = OmegaConf.merge(
        OmegaConf.structured(AgenticConfig), {"data": {"reps": 0}, "agent": {"max_turns": 0, "top_p": 1.5}}
    )
    assert check_bounds(cfg) == [
        "`data.reps` = 0: expected an integer >= 1",
        "`agent.max_turns` = 0: expected an integer >= 1",
        "`agent.top_p` = 1.5: expected a number > 0 and <= 1",
    ]


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

    from vbench_ray.cli import main
    from vbench_ray.cli_run import EXIT_ALL_FAILED

    edited = tmp_path / "edited"
    edited.mkdir()
    for video in Path(cove_data["edited_dir"]).glob("*.mp4"):
        shutil.copy(video, edited / f"{video.stem}_v2.mp4")
    out = tmp_path / "run"
    code = main(
        ["run", str(COVE), *cove_overrides({**cove_data, "edited_dir": str(edited)}, out, "metrics.enabled=[SSIM]")]
    )
    err = capsys.readouterr().err
    assert code == EXIT_ALL_FAILED == 5
    assert "error: every case failed (8 of 8" in err and "not found in data.edited_dir" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failures"]["count"] == 8 and summary["metrics"]["SSIM"]["n"] == 0


@pytest.mark.ray
def test_item7_edit_whose_every_case_failed_at_load_exits_non_zero(ray_local, cove_copy, tmp_path, capsys):
    """`edit` with no source video to edit: was "0 edited, 0 reused, 0 failed" and exit 0."""
    from vbench_ray.cli import main
    from vbench_ray.cli_run import EXIT_ALL_FAILED

    for video in Path(cove_copy["source_dir"]).rglob("*.mp4"):
        video.unlink()
    editor = tmp_path / "identity.yaml"
    editor.write_text("name: identity\n")
    out = tmp_path / "edited"
    code = main(
        [
            "edit",
            str(editor),
            f"data.checklist={cove_copy['checklist']}",
            f"data.source_dir={cove_copy['source_dir']}",
            f"output.dir={out}",
            "wandb.mode=disabled",
            "report.enabled=false",
        ]
    )
    captured = capsys.readouterr()
    assert "0 edited, 0 reused, 0 failed" in captured.out
    assert code == EXIT_ALL_FAILED and "error: every case failed (8 of 8; load: 8)" in captured.err


# ----------------------------------------------------------------------------- item 10: messages, not tracebacks


def test_item10_a_flow_override_that_is_not_yaml_names_the_override(capsys):
    """`metrics.enabled=[SSIM,${...}]` was a yaml ParserError traceback."""
    from vbench_ray.cli import main

    with pytest.raises(ConfigError) as info:
        load_config(COVE, ["metrics.enabled=[SSIM,${oc.env:HOME}]"])
    msg = str(info.value)
    assert msg.startswith("override 'metrics.enabled=[SSIM,${oc.env:HOME}]': the value is not valid YAML")
    assert "must be quoted" in msg and "refused anyway" in msg
    assert main(["run", str(COVE), "output.dir=x", "metrics.enabled=[SSIM"]) == 2
    assert "error: override 'metrics.enabled=[SSIM': the value is not valid YAML" in capsys.readouterr().err
    # quoted, it parses, and the resolver check refuses it by its key
    with pytest.raises(ConfigError, match=r"`metrics.enabled\[1\]`.*interpolation, which is not allowed"):
        load_config(COVE, ['metrics.enabled=[SSIM,"${oc.env:HOME}"]'])


def test_item10_a_model_index_whose_class_name_is_a_list(tmp_path):
    """diffusers' `_class_name` as a list was a TypeError (unhashable list) out of the preflight."""
    from vbench_ray.editors.diffusers_editor import DiffusersEditor

    (tmp_path / "model_index.json").write_text(json.dumps({"_class_name": ["diffusers", "WanVACEPipeline"]}))
    problems = DiffusersEditor.check_weights({"weights": str(tmp_path)})
    assert any(
        "`_class_name` = ['diffusers', 'WanVACEPipeline']: expected the pipeline class's name" in p for p in problems
    ), problems


def test_item10_verify_on_a_bundle_with_a_bad_task_id(tmp_path, capsys):
    """`verify agentic` on a bundle whose task_id is '../..': exit 2 and the message, no BundleError traceback."""
    import shutil

    from vbench_ray.agentic import synth_agentic
    from vbench_ray.cli import main

    one = dict(n_assembly=1, n_sequencing=0, n_repair=0, n_repurpose=0)  # one task is all this needs
    tasks = Path(synth_agentic(tmp_path / "ag", seed=0, **one)["tasks_dir"])
    task = tmp_path / "bad"
    shutil.copytree(sorted(p for p in tasks.iterdir() if p.is_dir())[0], task)
    spec = json.loads((task / "task.json").read_text())
    spec["task_id"] = "../.."
    (task / "task.json").write_text(json.dumps(spec))
    (tmp_path / "sub").mkdir()
    assert main(["verify", "agentic", "--task", str(task), "--submission", str(tmp_path / "sub")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: the task bundle {task} cannot be used: ") and "'../..' cannot be used" in err


def test_item10_a_2x2_video_is_too_small_not_an_opencv_error(tmp_path):
    """A 2x2 px edited video: the case fails saying the video is too small (decoded for real, both decoders)."""
    import numpy as np

    from vbench_ray.video.encode import write_video
    from vbench_ray.metrics.stage import FrameMetricsStage
    from vbench_ray.video.io import VideoError, VideoReader

    tiny = write_video(tmp_path / "tiny.mp4", np.full((6, 2, 2, 3), 128, np.uint8), fps=8)
    for backend in ("auto", "decord", "pyav"):
        with pytest.raises(VideoError, match=r"video is too small \(2x2 px; at least 16 px a side is needed\)"):
            VideoReader(tiny, backend)
    stage = FrameMetricsStage({"SSIM": {"frames": 4}})
    with pytest.raises(VideoError, match="too small"):
        stage({"case_id": "1", "edited_path": str(tiny), "source_path": str(tiny)})
    ok = write_video(tmp_path / "ok.mp4", np.full((6, 16, 32, 3), 128, np.uint8), fps=8)
    assert VideoReader(ok, "pyav").info.height == 16  # 16 px is enough


@pytest.fixture(scope="module")
def tiny_vace(tmp_path_factory) -> Path:
    """A tiny random Wan-VACE diffusers folder (tests/helpers/tiny/wan_vace.py)."""
    pytest.importorskip("diffusers")
    from helpers.tiny.wan_vace import build_tiny_wan_vace

    return build_tiny_wan_vace(tmp_path_factory.mktemp("tiny_models") / "wan_vace")


def test_item10_weights_check_loads_the_editor_as_edit_will(tiny_vace, cove_data, tmp_path, capsys):
    """A diffusers folder whose files pass every check but whose transformer weights are gone: `weights check`
    said "weights ok" and `edit` then failed in every actor; now `weights check` loads it with the editor's own
    loader and exits 2 naming the error. The intact folder loads."""
    import shutil

    from vbench_ray import preflight
    from vbench_ray.cli import main

    broken = tmp_path / "broken"
    shutil.copytree(tiny_vace, broken)
    gone = [f for f in (broken / "transformer").iterdir() if f.name != "config.json"]
    assert gone
    for f in gone:
        f.unlink()
    base = cove_overrides(
        cove_data,
        tmp_path / "run",
        "metrics.enabled=[SSIM]",
        "editor=vace",
        "editor.dtype=fp32",
        "editor.vae_dtype=fp32",
    )
    preflight.check(load_config(COVE, base + [f"editor.weights={broken}"]))  # the file checks pass
    assert main(["weights", "check", str(COVE), *base, f"editor.weights={broken}"]) == 2
    err = capsys.readouterr().err
    assert f"error: editor (diffusers, editor.weights={broken}): the model does not load: " in err
    assert main(["weights", "check", str(COVE), *base, f"editor.weights={tiny_vace}"]) == 0
    out = capsys.readouterr().out
    assert "editor (diffusers): loaded in" in out and "weights ok: editor (diffusers)" in out


def test_item10_duplicate_ids_and_a_missing_checklist_stop_the_run_before_ray_starts(cove_copy, tmp_path, monkeypatch):
    """Both were found by the loader, which runs while Ray starts: the error came after Ray's 7-15 s start.
    `start_ray` is replaced by a tripwire: the run must stop before it is called, within a second or so."""
    from vbench_ray import runner
    from vbench_ray.benchmarks.base import DataError
    from vbench_ray.benchmarks.nrv import NRVBench
    from vbench_ray.benchmarks.vidic import VidicBench

    def tripwire(cfg):
        raise AssertionError("Ray was started before the data was checked")

    monkeypatch.setattr(runner, "start_ray", tripwire)
    checklist = Path(cove_copy["checklist"])
    tasks = json.loads(checklist.read_text())
    tasks[3]["id"] = tasks[0]["id"]
    checklist.write_text(json.dumps(tasks))
    for data, match in (
        (cove_copy, rf"duplicate task ids: '{tasks[0]['id']}' \(2x\)"),
        ({**cove_copy, "checklist": str(tmp_path / "none.json")}, "data.checklist not found"),
    ):
        out = tmp_path / "never"
        start = time.perf_counter()
        with pytest.raises(DataError, match=match):
            runner.run(load_config(COVE, cove_overrides(data, out, "metrics.enabled=[SSIM]")))
        assert time.perf_counter() - start < 5 and not out.exists()

    # ViDiC and NRVBench check the same before Ray (ids only: no video is looked at)
    vidic = tmp_path / "vidic.json"
    vidic.write_text(json.dumps([{"index": 1}, {"index": 2}, {"index": "1"}]))
    cfg = load_config(
        REPO / "configs" / "vidic.yaml",
        [
            f"data.checklist={vidic}",
            f"output.dir={tmp_path / 'v'}",
            "data.video_root=.",
            "model.backend=replay",
            f"model.replay_path={vidic}",
            "judge.backend=replay",
            f"judge.replay_path={vidic}",
        ],
    )
    with pytest.raises(DataError, match=r"duplicate indexes: '1' \(2x\)"):
        VidicBench(cfg).check_data()
    annotations = tmp_path / "nrv.jsonl"
    annotations.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "a"}\n')
    cfg = load_config(
        REPO / "configs" / "nrv.yaml",
        [f"data.annotations={annotations}", "data.edited_dir=e", f"output.dir={tmp_path / 'n'}"],
    )
    with pytest.raises(DataError, match=r"duplicate instance ids: 'a' \(2x\)"):
        NRVBench(cfg).check_data()


# ----------------------------------------------------------------------------- item 8: Ctrl-C


def _cli(args: list[str], ray_dir: str, log: Path):
    """`vbench-ray ARGS` in a subprocess of its own (its own local Ray, under ``ray_dir``), output to ``log``."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RAY_TMPDIR": ray_dir, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "vbench_ray.cli", *args],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
        cwd=str(REPO),
    )


def _wait_for(predicate, proc, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the run ended (status {proc.returncode}) before the moment to interrupt it"
        assert time.monotonic() < deadline, "the moment to interrupt never came"
        time.sleep(0.05)


def _ray_processes_of(ray_dir: str) -> list[str]:
    """Command lines of live processes started under ``ray_dir`` (the run's Ray: GCS, raylet, workers, agents)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and ray_dir in cmd:
            out.append(cmd[:120])
    return out


def test_item8_rows_received_before_ctrl_c_are_written(tmp_path):
    """Blocks held for the next shard (ray.shard_rows / shard_seconds not reached) are written when the stream is
    interrupted: were lost with the process."""
    from types import SimpleNamespace

    import pyarrow as pa
    import pyarrow.parquet as pq

    from vbench_ray.runner import drain_to_sink
    from vbench_ray.sinks import CaseSink

    schema = pa.schema([("case_id", pa.string()), ("variant", pa.string()), ("SSIM", pa.float64())])
    sink = CaseSink(tmp_path, schema)

    def blocks():
        for i in range(3):
            yield pa.table({"case_id": [str(i)], "variant": ["base"], "SSIM": [0.5]}, schema=schema)
        raise KeyboardInterrupt  # Ctrl-C while waiting for the fourth

    with pytest.raises(KeyboardInterrupt):
        drain_to_sink(blocks(), sink, SimpleNamespace(shard_rows=100, shard_seconds=3600.0))
    table = pq.read_table(tmp_path / "cases")
    assert sorted(table.column("case_id").to_pylist()) == ["0", "1", "2"]


@pytest.mark.ray
def test_item8_ctrl_c_stops_a_run_within_seconds_keeping_its_rows(cove_data, tmp_path):
    """A real run, interrupted once mid-stream: it ends within seconds with status 130 and the message, every row
    it had received is on disk (the shards parse: nothing half-written), and its Ray is gone."""
    import signal
    import tempfile

    import pyarrow.parquet as pq

    out = tmp_path / "run"
    ray_dir = tempfile.mkdtemp(prefix="vbr", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    log = tmp_path / "run.log"
    proc = _cli(
        [
            "run",
            str(COVE),
            *cove_overrides(
                cove_data, out, "ray.workers=1", "ray.num_cpus=2", "ray.shard_rows=1", "ray.shard_seconds=0"
            ),
        ],
        ray_dir,
        log,
    )
    try:
        _wait_for(lambda: any((out / "cases").glob("part-*.parquet")), proc)
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        code = proc.wait(timeout=60)
        seconds = time.monotonic() - start
    finally:
        proc.kill()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert seconds < 10, seconds
    assert "interrupted: the rows finished so far are kept" in text and "Traceback" not in text
    # no Ray started (or attached to) again by Ray Data's threads after the interrupt
    assert "Ray is not initialized" not in text and "Connecting to existing Ray cluster" not in text
    rows = pq.read_table(out / "cases").num_rows
    assert 1 <= rows <= 8
    deadline = time.monotonic() + 10
    while _ray_processes_of(ray_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _ray_processes_of(ray_dir)


@pytest.mark.ray
def test_item8_a_second_ctrl_c_exits_at_once(cove_data, tmp_path):
    """Interrupted while its Ray is still starting (the clean-up waits for that start), then again: the second
    Ctrl-C ends the process at once."""
    import signal
    import tempfile

    out = tmp_path / "run"
    ray_dir = tempfile.mkdtemp(prefix="vbr", dir="/tmp")
    log = tmp_path / "run.log"
    proc = _cli(["run", str(COVE), *cove_overrides(cove_data, out, "ray.num_cpus=2")], ray_dir, log)
    try:
        # Ray is starting (its session folder is made first; GCS and raylet take seconds more): the first Ctrl-C's
        # clean-up waits for that start to end (a run never leaves ray.init half done)
        _wait_for(lambda: any(Path(ray_dir).glob("*/session_*")), proc)
        assert "Started a local Ray instance" not in log.read_text()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        code = proc.wait(timeout=60)
        seconds = time.monotonic() - start
    finally:
        proc.kill()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert seconds < 2, seconds
    assert "interrupted again: exiting now" in text
    deadline = time.monotonic() + 10  # Ray's processes die with the process that started them
    while _ray_processes_of(ray_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _ray_processes_of(ray_dir)
