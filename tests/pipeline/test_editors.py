"""Editing models under test (issue 12): the ``command`` backend, Table 7's frame rules, resume, the edit CLI,
and edit -> evaluate rows streaming into the sink while other cases are still being edited."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.common import REPO, cove_overrides, moving_square_video
from vbench_ray.editors.command import build_argv
from vbench_ray.editors.frames import (
    conform,
    effective_rules,
    parse_constraint,
    plan,
    sample_indices,
    target_frames,
    target_size,
)
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoReader

COVE = REPO / "configs" / "cove.yaml"
EDITORS = REPO / "configs" / "editors"
TABLE7 = {
    name: yaml.safe_load((EDITORS / f"{name}.yaml").read_text())["frame_rules"]
    for name in ("omniweaving", "kiwi", "reco", "vace", "ditto", "icve", "lucy", "insv2v")
}

# A model's "official inference script": reads {source}, writes {frames} frames at {height}x{width} to {output},
# notes each call in CALLS, fails (exit 3, a message on stderr) for the case named in FAIL_ID, sleeps SLEEP s.
SCRIPT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from vbench_ray.video.encode import write_video
    from vbench_ray.video.io import VideoReader
    source, output, frames, height, width, seed, instruction = sys.argv[1:8]
    with open(os.environ["CALLS"], "a") as f:
        f.write(os.path.basename(output) + "\\n")
    if os.path.basename(output)[:-4] == os.environ.get("FAIL_ID"):
        print("CUDA out of memory (simulated)", file=sys.stderr)
        sys.exit(3)
    time.sleep(float(os.environ.get("SLEEP", "0")))
    src = VideoReader(source).read(range(int(frames)))
    assert src.shape[1:3] == (int(height), int(width)), (src.shape, height, width)
    rng = np.random.default_rng(int(seed))  # the seed decides the noise: same seed, same video
    noise = rng.integers(-3, 4, size=src.shape)
    write_video(output, np.clip(src.astype(int) + noise, 0, 255).astype(np.uint8), fps=8)
""")
COMMAND = (
    f"{sys.executable} {{script}} {{source}} {{output}} {{frames}} {{height}} {{width}} {{seed}} "
    f"--prompt={{instruction}}"
)


# ----------------------------------------------------------------------------- Table 7 / § G.1, by hand


def test_frame_counts_follow_table7_by_hand():
    vace, insv2v, reco = TABLE7["vace"], TABLE7["insv2v"], TABLE7["reco"]
    assert parse_constraint("4k+1") == (4, 1) and parse_constraint(None) == (1, 0)
    assert target_frames(50, vace) == 49  # 4k+1 at or below the source length: 49 = 4*12+1
    assert target_frames(81, vace) == 81 and target_frames(100, vace) == 81  # the max, itself 4*20+1
    assert target_frames(20, vace) == 33  # below min: the min (4*8+1), short source's frames repeated
    assert target_frames(34, vace) == 33 and target_frames(36, vace) == 33 and target_frames(37, vace) == 37
    assert target_frames(10, reco) == 17 and target_frames(300, reco) == 257
    assert target_frames(120, TABLE7["kiwi"]) == 117  # 120 -> 117 = 4*29+1
    assert target_frames(10, insv2v) == 64 and target_frames(300, insv2v) == 64  # fixed 64, whatever the length
    with pytest.raises(ValueError):  # no 4k+1 count in [34, 36]
        target_frames(35, {"min_frames": 34, "max_frames": 36, "frame_constraint": "4k+1"})
    assert sample_indices(10, 4) == [0, 3, 6, 9]
    assert sample_indices(100, 5) == [0, 25, 50, 74, 99]  # round(24.75)=25, round(49.5)=50 (banker's), 74.25
    assert sample_indices(3, 5) == [0, 0, 1, 2, 2]  # upsampled by repeats: round(0.5)=0, round(1.5)=2


def test_resolution_rules_by_hand():
    assert target_size(1080, 1920, TABLE7["kiwi"]) == (720, 1280)  # <= 720p, landscape
    assert target_size(1920, 1080, TABLE7["kiwi"]) == (1280, 720)  # portrait: the bound turns with it
    assert target_size(360, 640, TABLE7["kiwi"]) == (352, 640)  # never scaled up; 360 -> multiple of 16
    assert target_size(1080, 1920, TABLE7["reco"]) == (464, 832)  # 832/1920 * 1080 = 468 -> 464
    assert target_size(1080, 1920, TABLE7["omniweaving"]) == (480, 848)  # exact 848 x 480
    assert target_size(96, 128, TABLE7["insv2v"]) == (384, 384)
    assert target_size(97, 129, {}) == (96, 128)  # no rule: the source's size, made even
    table5 = effective_rules({"frame_rules": TABLE7["vace"], "profile": "table5"})
    p = plan(120, 1080, 1920, 24.0, table5)
    assert (p.frames, p.height, p.width) == (41, 480, 480) and p.fps == pytest.approx(24.0 * 41 / 120)
    assert effective_rules({"frame_rules": {}, "profile": None}) is None


def test_conform_writes_the_resampled_input(tmp_path):
    src = write_video(tmp_path / "src.mp4", moving_square_video(t=24, h=96, w=128), fps=16)
    rules = {
        "frame_constraint": "4k+1",
        "min_frames": 5,
        "max_frames": 17,
        "resolution": [64, 64],
        "resolution_mode": "max",
        "size_multiple": 16,
    }
    path, p = conform(src, tmp_path / "in" / "x.mp4", rules)
    info = VideoReader(path).info
    assert (info.num_frames, info.height, info.width) == (17, 48, 64) == (p.frames, p.height, p.width)
    assert info.fps == pytest.approx(16 * 17 / 24, rel=0.01)
    same, p2 = conform(src, tmp_path / "in" / "y.mp4", {})
    assert same == str(src) and p2.unchanged and not (tmp_path / "in" / "y.mp4").exists()


def test_the_command_template_is_never_a_shell():
    evil = 'make it "red"; rm -rf / $(touch pwned) `id` & echo'
    argv = build_argv(
        "python infer.py --prompt={instruction} --out '{output}' -n {frames}",
        {"instruction": evil, "output": "/o/a b.mp4", "frames": 17},
    )
    assert argv == ["python", "infer.py", f"--prompt={evil}", "--out", "/o/a b.mp4", "-n", "17"]
    with pytest.raises(ValueError, match="unknown placeholder"):
        build_argv("run {prompt}", {})


# ----------------------------------------------------------------------------- the command backend, in process


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "fake_model.py"
    path.write_text(SCRIPT)
    return path


def _editor_cfg(script, tmp_path, **extra):
    cfg = {
        "name": "command",
        "model": "fake",
        "command": COMMAND.replace("{script}", str(script)),
        "seed": 7,
        "env": {"CALLS": str(tmp_path / "calls.txt"), "PYTHONPATH": str(REPO)},
        "timeout_s": 60,
        "layout": "flat",
        "stderr_tail_chars": 500,
        "frame_rules": {
            "frame_constraint": "4k+1",
            "min_frames": 5,
            "max_frames": 17,
            "resolution": [64, 64],
            "resolution_mode": "max",
            "size_multiple": 16,
        },
    }
    cfg.update(extra)
    return cfg


def _calls(tmp_path) -> list[str]:
    p = tmp_path / "calls.txt"
    return p.read_text().split() if p.exists() else []


def test_command_pool_edits_records_failures_and_resumes(script, tmp_path):
    from vbench_ray.editors.base import EditorPool

    src = write_video(tmp_path / "src.mp4", moving_square_video(t=24, h=96, w=128), fps=16)
    cfg = _editor_cfg(
        script, tmp_path, env={"CALLS": str(tmp_path / "calls.txt"), "PYTHONPATH": str(REPO), "FAIL_ID": "bad"}
    )
    pool = EditorPool(cfg, str(tmp_path / "out"), str(tmp_path / "inputs"))
    rows = [
        {"case_id": c, "variant": "base", "source_path": str(src), "instruction": 'say "hi"; exit 0'}
        for c in ("a", "bad", "c")
    ]
    results = [pool(r) for r in rows]
    ok, bad = results[0], results[1]
    assert Path(ok["edited_path"]) == tmp_path / "out" / "a.mp4"  # official layout: {id}.mp4
    info = VideoReader(ok["edited_path"]).info
    assert (info.num_frames, info.height, info.width) == (17, 48, 64) == (ok["edit_frames"], 48, 64)
    assert ok["edit_exit_code"] == 0 and ok["edit_seconds_per_frame"] == pytest.approx(ok["edit_seconds"] / 17)
    assert (
        ok["edit_seed"] == 7
        and len(ok["editor_hash"]) == 12
        and ok["edit_input_path"].startswith(str(tmp_path / "inputs"))
    )
    assert bad["error_edit"].startswith("exit code 3") and "CUDA out of memory" in bad["edit_stderr"]
    assert bad["edit_exit_code"] == 3 and bad["edit_seconds"] > 0 and "edited_path" not in bad
    assert not (tmp_path / "out" / "bad.mp4").exists() and results[2]["edit_exit_code"] == 0  # the others go on
    assert sorted(_calls(tmp_path)) == ["a.mp4", "bad.mp4", "c.mp4"]
    again = [pool(r) for r in rows]  # resume: videos that exist are not edited again; the failed one is retried
    assert sorted(_calls(tmp_path)) == ["a.mp4", "bad.mp4", "bad.mp4", "c.mp4"]
    assert again[0] == {"edited_path": ok["edited_path"], "edit_seed": 7, "editor_hash": ok["editor_hash"]}
    # the same seed gives the same video (on the same machine); the seed decides it
    b = EditorPool({**cfg, "seed": 7}, str(tmp_path / "out2"), str(tmp_path / "inputs"))({**rows[0]})
    c = EditorPool({**cfg, "seed": 8}, str(tmp_path / "out3"), str(tmp_path / "inputs"))({**rows[0]})
    first, same, other = (
        VideoReader(p).read(range(17)) for p in (ok["edited_path"], b["edited_path"], c["edited_path"])
    )
    assert (first == same).all() and not (first == other).all() and c["editor_hash"] != ok["editor_hash"]


def test_a_timeout_is_that_cases_failure(script, tmp_path):
    from vbench_ray.editors.base import EditorPool

    src = write_video(tmp_path / "src.mp4", moving_square_video(t=8, h=48, w=64), fps=16)
    cfg = _editor_cfg(
        script,
        tmp_path,
        timeout_s=0.5,
        frame_rules={},
        env={"CALLS": str(tmp_path / "calls.txt"), "PYTHONPATH": str(REPO), "SLEEP": "30"},
    )
    out = EditorPool(cfg, str(tmp_path / "out"))({"case_id": "slow", "variant": "base", "source_path": str(src)})
    assert out["error_edit"].startswith("timed out after 0.5 s") and out["edit_seconds"] < 10
    assert not list((tmp_path / "out").glob("*.mp4"))


# ----------------------------------------------------------------------------- CLI and the stream (Ray)


def _editor_yaml(script, tmp_path, **extra) -> Path:
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(_editor_cfg(script, tmp_path, **extra)))
    return path


@pytest.mark.ray
def test_the_edit_cli_writes_the_official_layout_resumably_with_table5_cost(ray_local, cove_data, script, tmp_path):
    from vbench_ray.cli import main

    rows_in = json.loads(Path(cove_data["checklist"]).read_text())
    fail_id = str(rows_in[2]["id"])  # this case's script run fails (exit 3)
    env = {"CALLS": str(tmp_path / "calls.txt"), "PYTHONPATH": str(REPO), "FAIL_ID": fail_id or "none"}
    editor = _editor_yaml(script, tmp_path, env=env, replicas=2)
    out = tmp_path / "edited"
    args = [
        "edit",
        str(editor),
        f"data.checklist={cove_data['checklist']}",
        f"data.source_dir={cove_data['source_dir']}",
        f"output.dir={out}",
        "wandb.mode=disabled",
    ]
    assert main(args) == (1 if fail_id else 0)
    rows = {r["case_id"]: r for r in pq.read_table(out / "cases").to_pylist()}
    assert len(rows) == 8 and len(_calls(tmp_path)) == 8
    saved = yaml.safe_load((out / "config.yaml").read_text())["editor"]
    for case_id, r in rows.items():
        assert r["edit_seed"] == 7 and r["editor_hash"] == saved["config_hash"]  # seed and hash: row and config
        if case_id == fail_id:
            assert r["error_edit"].startswith("exit code 3") and not (out / f"{case_id}.mp4").exists()
        else:
            assert Path(r["edited_path"]) == out / f"{case_id}.mp4" and r["error_edit"] is None
            assert VideoReader(r["edited_path"]).info.num_frames == 17  # 24 source frames -> 4k+1 <= 17
    summary = json.loads((out / "summary.json").read_text())["edit"]
    assert summary["n_edited"] == 8 - bool(fail_id) and summary["n_failed"] == int(bool(fail_id))
    assert summary["mean_seconds_per_frame"] > 0 and summary["peak_mb"] is None  # no CUDA here
    assert "Editing cost (CoVEBench Table 5)" in (out / "report.html").read_text()
    # resumed: nothing edited again but the failed case (output.retry_failed)
    assert main(args[:-1] + ["wandb.mode=disabled"]) in (0, 1)
    assert len(_calls(tmp_path)) == 8 + bool(fail_id)
    # table5 profile: 480x480, 41 frames (into a new directory)
    assert (
        main(
            [
                "edit",
                str(editor),
                f"data.checklist={cove_data['checklist']}",
                f"data.source_dir={cove_data['source_dir']}",
                f"output.dir={tmp_path / 't5'}",
                "wandb.mode=disabled",
                "editor.profile=table5",
                "run.limit=1",
                "editor.frame_rules.max_frames=81",
                "editor.env.FAIL_ID=none",
            ]
        )
        == 0
    )
    (t5,) = pq.read_table(tmp_path / "t5" / "cases").to_pylist()
    info = VideoReader(t5["edited_path"]).info
    assert (info.num_frames, info.height, info.width) == (41, 480, 480)


@pytest.mark.ray
def test_edited_rows_reach_the_sink_while_other_cases_are_still_edited(ray_local, cove_data, script, tmp_path):
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    editor = _editor_yaml(
        script,
        tmp_path,
        replicas=1,
        env={"CALLS": str(tmp_path / "calls.txt"), "PYTHONPATH": str(REPO), "SLEEP": "0.4"},
    )
    out = tmp_path / "run"
    args = [
        a
        for a in cove_overrides(
            cove_data,
            out,
            "metrics.enabled=[SSIM]",
            "metrics.exclude.SSIM.categories=[]",
            f"editor.include={editor}",
            "ray.shard_rows=1",
            "ray.shard_seconds=0",
        )
        if not a.startswith("data.edited_dir")
    ]
    summary = run(load_config(COVE, args)).summary
    rows = pq.read_table(out / "cases").to_pylist()
    assert len(rows) == 8 and all(r["error_edit"] is None and r["SSIM"] is not None for r in rows)
    last_edited = max(r["at_edit"] for r in rows)
    assert min(r["at_frames"] for r in rows) < last_edited  # a case was evaluated before the last was edited
    assert min(p.stat().st_mtime for p in (out / "cases").glob("part-*.parquet")) < last_edited
    # the edited video (17 frames at 48x64) was aligned with the 24-frame 96x128 source, as the official evaluator
    assert all("pair_mismatch=resample" in (r["warning_pair"] or "") for r in rows)
    assert summary["edit"]["n_edited"] == 8 and summary["metrics"]["SSIM"]["n"] == 8


# ----------------------------------------------------------------------------- `editor=<model>`


def test_editor_shorthand_picks_the_models_yaml_and_lists_the_known_ones(cove_data, tmp_path):
    from vbench_ray.config import ConfigError
    from vbench_ray.configure import load_config

    base = cove_overrides(cove_data, tmp_path / "run")
    vace = load_config(COVE, base + ["editor=vace", "editor.steps=4"]).editor  # a later key still overrides
    assert (vace.name, vace.model, vace.steps, vace.frame_rules.max_frames) == ("diffusers", "VACE", 4, 81)
    assert vace == load_config(COVE, base + [f"editor.include={EDITORS / 'vace.yaml'}", "editor.steps=4"]).editor
    ditto = load_config(COVE, base + ["editor=ditto"]).editor
    assert (ditto.name, ditto.model, ditto.frame_rules.min_frames) == ("command", "Ditto", 33)
    assert load_config(COVE, base + ["editor=identity"]).editor.name == "identity"
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"name": "identity", "model": "mine", "seed": 5}))
    assert load_config(COVE, base + [f"editor={mine}"]).editor.seed == 5
    with pytest.raises(ConfigError) as err:
        load_config(COVE, base + ["editor=vace2"])
    message = str(err.value)
    assert "unknown editor 'vace2'" in message
    assert all(name in message for name in ("precomputed", "identity", *TABLE7))


# ----------------------------------------------------------------------------- a command's GPU memory (nvidia-smi)

# A stand-in nvidia-smi: prints the compute-apps table the test's model script leaves in $SMI_TABLE.
# Each read is also appended to $SMI_TABLE.seen, so the script knows when a table has been seen (its "phase N" line,
# which the parser skips as it skips any line that is not "pid, MiB").
FAKE_SMI = textwrap.dedent("""\
    #!/bin/sh
    [ "$1" = "--query-compute-apps=pid,used_memory" ] || exit 9
    table=$(cat "$SMI_TABLE" 2>/dev/null)
    printf '%s\\n' "$table" >> "$SMI_TABLE.seen"
    printf '%s\\n' "$table"
""")
# The model's script: itself and a child (one process group) hold 1200 MiB, then 3000 + 600 (one pid on two GPUs:
# 3000 = 2000 + 1000) beside an unrelated process (pid 1, never counted), then exits. It moves on from a table only
# once the poller has read it (an order of events; on a busy machine a fixed sleep let the poller miss a table).
GPU_SCRIPT = textwrap.dedent("""
    import os, shutil, subprocess, sys, time
    table, output = os.environ["SMI_TABLE"], sys.argv[1]
    polled = shutil.which("nvidia-smi") is not None  # without one, nothing reads the tables: no waiting
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    def show(phase, text):
        with open(table + ".tmp", "w") as f:
            f.write(f"phase {phase}\\n{text}")
        os.replace(table + ".tmp", table)
        deadline = time.monotonic() + 60
        while polled and time.monotonic() < deadline:
            try:
                if f"phase {phase}" in open(table + ".seen").read():
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.01)
    me = os.getpid()
    show(1, f"{me}, 1200\\n1, 50000\\n")
    show(2, f"{me}, 2000\\n{me}, 1000\\n{child.pid}, 600\\n1, 50000\\n[N/A], [N/A]\\n")
    show(3, f"{child.pid}, 10\\n")
    child.kill()
    open(output, "wb").write(open(os.environ["SOURCE"], "rb").read())
""")


def test_parse_compute_apps_sums_a_process_group_by_hand():
    from vbench_ray.editors.gpumem import group_mb, parse_compute_apps

    apps = parse_compute_apps("11, 2000\n11, 1000\n12, 600\n13, 50\n[N/A], [N/A]\nnot a line\n14, [N/A]\n")
    assert apps == {11: 3000.0, 12: 600.0, 13: 50.0}  # a pid on two GPUs: its two rows summed
    groups = {11: 11, 12: 11, 13: 99}
    assert group_mb(apps, 11, groups.__getitem__) == 3600.0  # 13 is another group's
    assert group_mb(apps, 7, groups.__getitem__) is None  # no process of group 7: not 0, unknown


def test_a_commands_peak_gpu_memory_comes_from_nvidia_smi(tmp_path, monkeypatch):
    from vbench_ray.editors.base import EditorPool
    from vbench_ray.editors.gpumem import NO_SMI, PEAK_SMI

    src = write_video(tmp_path / "src.mp4", moving_square_video(t=8, h=48, w=64), fps=16)
    (tmp_path / "model.py").write_text(GPU_SCRIPT)
    cfg = {
        "name": "command",
        "command": f"{sys.executable} {tmp_path / 'model.py'} {{output}}",
        "gpu_poll_s": 0.05,
        "seed": 0,
        "env": {"SMI_TABLE": str(tmp_path / "table.csv"), "SOURCE": str(src)},
        "layout": "flat",
    }
    row = {"case_id": "a", "variant": "base", "source_path": str(src)}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SMI_TABLE", str(tmp_path / "table.csv"))  # for the stand-in, which the actor runs
    out = EditorPool(cfg, str(tmp_path / "out"))(dict(row))
    assert out.get("error_edit") is None, out
    assert out["edit_peak_mb"] == 3600.0 and out["edit_peak_from"] == PEAK_SMI  # 2000 + 1000 + 600, never pid 1's
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: null, and the row says why
    cfg["command"] = cfg["command"].replace(sys.executable, os.path.realpath(sys.executable))
    out = EditorPool(cfg, str(tmp_path / "out2"))(dict(row))
    assert out["edit_peak_mb"] is None and out["edit_peak_from"] == NO_SMI and out.get("error_edit") is None


def test_an_editor_actor_whose_model_runs_elsewhere_never_imports_torch(tmp_path):
    """The peak-memory probe of an edit reads torch's CUDA statistics only where torch is loaded: an editor actor
    that never imported it (a ``command`` editor's, whose model is a subprocess; ``identity``) is not made to, which
    cost seconds of CPU per actor. Run in a fresh interpreter, as an actor's process starts."""
    import subprocess

    src = write_video(tmp_path / "src.mp4", moving_square_video(t=4, h=32, w=32), fps=8)
    script = textwrap.dedent(
        f"""
        import sys
        from vbench_ray.editors.base import EditorPool
        out = EditorPool({{"name": "identity", "seed": 0}}, {str(tmp_path / "out")!r})(
            {{"case_id": "a", "variant": "base", "source_path": {str(src)!r}}}
        )
        assert out.get("error_edit") is None and out["edit_peak_mb"] is None, out
        print("torch loaded:", "torch" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "torch loaded: False"
