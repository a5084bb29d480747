"""Repair verifier (App. H.1) on synthetic tasks: reference points, the window split, shot swap length
penalty, timeline range matching with its honesty and audio gates, and every hard gate on adversarial
submissions (copies of the broken input, wrong codec/container/sample rate/duration, malformed ranges)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from vbench_ray.agentic.bundle import load_task
from vbench_ray.agentic.media import read_media, write_media
from vbench_ray.agentic.synth import perfect_fix, synth_agentic
from vbench_ray.agentic.verifiers import repair
from vbench_ray.agentic.verify import verify_cli


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """The seven synthetic Repair tasks, by defect."""
    info = synth_agentic(tmp_path_factory.mktemp("agentic_repair"), seed=3, n_assembly=0, n_sequencing=0,
                         n_repair=7, n_repurpose=0)
    out = {}
    for task_id in info["tasks"]:
        task = load_task(Path(info["tasks_dir"]) / task_id)
        out[task.subtype] = task
    return out


def media(task):
    return read_media(task.input("broken.mp4")), read_media(task.truth_file("golden.mp4"))


def submit(path: Path, frames, audio, fps=12, sr=16000, name="fixed.mp4", **kw) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    write_media(path / name, frames, fps, audio, sr if audio is not None else None, **kw)
    return path


def verify(task, sub, **cfg):
    return repair.verify(task, sub, repair.RepairConfig(**cfg))


@pytest.mark.parametrize("defect", ["colour_shift", "blur", "repeated_frames", "shot_swap", "audio_noise",
                                    "audio_echo", "audio_clipping"])
def test_golden_scores_one_and_a_perfect_fix_about_one(tasks, tmp_path, defect):
    task = tasks[defect]
    sub = tmp_path / "golden"
    sub.mkdir()
    shutil.copyfile(task.truth_file("golden.mp4"), sub / "fixed.mp4")
    if task.truth["group"] == "timeline":
        (sub / "solution.json").write_text(json.dumps({"ranges": [task.truth["ranges"][0]["range"]]}))
    assert verify(task, sub).reward == pytest.approx(1.0)
    broken, golden = media(task)
    frames, audio = perfect_fix(broken, golden, task.truth)  # what a flawless agent renders
    sub2 = submit(tmp_path / "perfect", frames, audio)
    if task.truth["group"] == "timeline":
        shutil.copyfile(sub / "solution.json", sub2 / "solution.json")
    v = verify(task, sub2)
    assert v.status == "ok" and v.reward >= 0.97, v.details


@pytest.mark.parametrize("defect", ["colour_shift", "repeated_frames", "audio_noise"])
def test_copies_of_the_broken_input_are_gated(tasks, tmp_path, defect):
    task = tasks[defect]
    sub = tmp_path / "copy"
    sub.mkdir()
    shutil.copyfile(task.input("broken.mp4"), sub / "fixed.mp4")
    (sub / "solution.json").write_text(json.dumps({"ranges": []}))
    v = verify(task, sub)
    assert v.reward == 0.0 and v.status == "invalid" and "verbatim copy" in v.details["reason"]
    broken, _ = media(task)
    sub2 = submit(tmp_path / "reencoded", broken.frames, broken.audio)  # same content, new bytes
    shutil.copyfile(sub / "solution.json", sub2 / "solution.json")
    v = verify(task, sub2)
    assert v.reward == 0.0 and "near-verbatim copy" in v.details["reason"], v.details
    # without the gate the copy would earn the 0.1 * s_out of an untouched clean region
    if task.truth["group"] in ("visual", "audio"):
        v = verify(task, sub2, near_copy_psnr_db=1000.0)
        assert v.status == "ok" and v.details["s_in"] == pytest.approx(0.0, abs=0.02) and v.reward > 0.05


def test_format_gates(tasks, tmp_path):
    task = tasks["colour_shift"]
    broken, golden = media(task)
    frames, audio = perfect_fix(broken, golden, task.truth)
    cases = {
        "video codec": dict(video_codec="mpeg4"),
        "sample rate": dict(sr=22050, audio=np.interp(np.linspace(0, len(audio) - 1, int(len(audio) * 22050 / 16000)),
                                                     np.arange(len(audio)), audio).astype(np.float32)),
        "no audio stream": dict(audio=None),
        "duration": dict(frames=frames[:40]),
        "frame size": dict(frames=np.ascontiguousarray(frames[:, ::2, ::2])),
    }
    for reason, kw in cases.items():
        args = {"frames": frames, "audio": audio, **kw}
        sub = submit(tmp_path / reason.replace(" ", "_"), args.pop("frames"), args.pop("audio"), **args)
        v = verify(task, sub)
        assert v.reward == 0.0 and v.status == "invalid" and reason in v.details["reason"], (reason, v.details)
    # a Matroska file named fixed.mp4
    mkv = submit(tmp_path / "mkv", frames, audio, name="fixed.mkv")
    (mkv / "fixed.mkv").rename(mkv / "fixed.mp4")
    v = verify(task, mkv)
    assert v.reward == 0.0 and "container" in v.details["reason"]
    # missing and undecodable files
    (tmp_path / "empty").mkdir()
    v = verify(task, tmp_path / "empty")
    assert v.reward == 0.0 and v.status == "missing"
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "fixed.mp4").write_bytes(b"\x00not a video" * 100)
    v = verify(task, junk)
    assert v.reward == 0.0 and "cannot be decoded" in v.details["reason"]


def test_visual_window_split(tasks, tmp_path):
    task = tasks["colour_shift"]
    broken, golden = media(task)
    a, b = (int(round(x * 12)) for x in task.truth["window"])
    half = broken.frames.copy()
    half[a:(a + b) // 2] = golden.frames[a:(a + b) // 2]  # fix half the window
    v = verify(task, submit(tmp_path / "half", half, broken.audio))
    assert 0.25 < v.details["s_in"] < 0.75 and v.details["s_out"] > 0.95
    assert v.reward == pytest.approx(0.9 * v.details["s_in"] + 0.1 * v.details["s_out"])
    # the window fixed, the clean region damaged: only the 0.1 term is lost
    damaged, _ = perfect_fix(broken, golden, task.truth)
    damaged = damaged.copy()
    outside = np.ones(len(damaged), bool)
    outside[a:b] = False
    damaged[outside] = (damaged[outside] * 0.6).astype(np.uint8)
    v = verify(task, submit(tmp_path / "damaged", damaged, broken.audio))
    assert v.details["s_in"] > 0.95 and v.details["s_out"] < 0.5 and v.reward < 0.95


def test_audio_window_split(tasks, tmp_path):
    task = tasks["audio_noise"]
    broken, golden = media(task)
    sa, sb = (int(round(x * 16000)) for x in task.truth["window"])
    half = broken.audio.copy()
    half[sa:(sa + sb) // 2] = golden.audio[sa:(sa + sb) // 2]
    v = verify(task, submit(tmp_path / "half", broken.frames, half))
    assert 0.2 < v.details["s_in"] < 0.8 and v.details["s_out"] > 0.9
    assert set(v.details["measures"]) == {"si_sdr", "lsd", "env_corr"}


def test_shot_swap_length_penalty(tasks, tmp_path):
    task = tasks["shot_swap"]
    broken, golden = media(task)
    frames, audio = perfect_fix(broken, golden, task.truth)
    extra = int(round(0.15 * len(frames)))  # 15% longer: 5 points past the 10% tolerance -> factor 0.5
    longer = np.concatenate([frames, np.repeat(frames[-1:], extra, axis=0)])
    longer_audio = np.concatenate([audio, np.zeros(extra * 16000 // 12, np.float32)])
    v = verify(task, submit(tmp_path / "longer", longer, longer_audio))
    ratio = len(longer) / len(golden.frames)
    assert v.details["length_factor"] == pytest.approx(1 - (ratio - 1 - 0.1) / 0.1)
    assert v.reward == pytest.approx(v.details["s"] * v.details["length_factor"])
    assert 0.4 < v.reward < 0.65
    unfixed_order = np.concatenate([broken.frames[:4], broken.frames[4:]])  # broken order, new encode
    v = verify(task, submit(tmp_path / "unfixed", unfixed_order[::-1].copy(), broken.audio[::-1].copy()))
    assert v.reward < 0.2


def _timeline(task, tmp_path, name, ranges_reported, ranges_rendered, audio_override=None, **cfg):
    broken, _ = media(task)
    t = np.arange(len(broken.frames)) / 12
    ta = np.arange(len(broken.audio)) / 16000
    keep, keep_a = np.ones(len(t), bool), np.ones(len(ta), bool)
    for s, e in ranges_rendered:
        keep &= ~((t >= s - 1e-9) & (t < e - 1e-9))
        keep_a &= ~((ta >= s - 1e-9) & (ta < e - 1e-9))
    audio = broken.audio[keep_a] if audio_override is None else audio_override(broken.audio[keep_a])
    sub = submit(tmp_path / name, broken.frames[keep], audio)
    (sub / "solution.json").write_text(json.dumps({"ranges": ranges_reported}))
    return verify(task, sub, **cfg)


def test_timeline_range_match_honesty_and_audio_gates(tasks, tmp_path):
    task = tasks["repeated_frames"]
    (s, e) = task.truth["ranges"][0]["range"]
    (s2, e2) = task.truth["ranges"][0]["equivalent"][0]
    tol = task.truth["tolerance_s"]
    v = _timeline(task, tmp_path, "exact", [[s, e]], [[s, e]])
    assert v.reward == 1.0 and v.details["honesty"]["passed"] and v.details["audio_check"]["passed"]
    v = _timeline(task, tmp_path, "first_copy", [[s2, e2]], [[s2, e2]])  # the equivalent cut
    assert v.reward == 1.0
    near = [round((s + 0.6 * tol) * 12) / 12, round((e - 0.6 * tol) * 12) / 12]  # both ends 2 frames off
    assert _timeline(task, tmp_path, "within_tol", [near], [near]).reward == 1.0
    far = [s + 2 * tol, e + 2 * tol]
    v = _timeline(task, tmp_path, "wrong_range", [far], [far])  # honest, but the wrong place
    assert v.reward == 0.0 and v.details["honesty"]["passed"] and v.details["range_score"] == 0.0
    # the right ranges reported, a different cut rendered: the honesty check fails
    v = _timeline(task, tmp_path, "dishonest", [[s, e]], [far])
    assert v.reward == 0.0 and not v.details["honesty"]["passed"] and v.details["range_score"] == 1.0
    # right ranges, right picture, wrong sound (the audio check fails)
    v = _timeline(task, tmp_path, "bad_audio", [[s, e]], [[s, e]],
                  audio_override=lambda a: np.random.default_rng(0).normal(0, 0.1, len(a)).astype(np.float32))
    assert v.reward == 0.0 and v.details["honesty"]["passed"] and not v.details["audio_check"]["passed"]
    # an extra (honestly rendered) range: the paper's recall ignores it, the official F1 does not
    extra = [[s, e], [0.0, 0.25]]
    assert _timeline(task, tmp_path, "extra", extra, extra).reward == 1.0
    v = _timeline(task, tmp_path, "extra_f1", extra, extra, range_score="f1")
    assert v.reward == pytest.approx(2 * 0.5 * 1.0 / 1.5)


@pytest.mark.parametrize("solution", [None, "{ranges: oops", json.dumps({"ranges": [[3.0, 1.0]]})])
def test_timeline_malformed_ranges_gate(tasks, tmp_path, solution):
    task = tasks["repeated_frames"]
    (s, e) = task.truth["ranges"][0]["range"]
    broken, _ = media(task)
    keep = ~((np.arange(len(broken.frames)) / 12 >= s - 1e-9) & (np.arange(len(broken.frames)) / 12 < e - 1e-9))
    sub = submit(tmp_path / "sub", broken.frames[keep], broken.audio[: int(keep.sum() * 16000 / 12)])
    if solution is not None:
        (sub / "solution.json").write_text(solution)
    v = verify(task, sub)
    assert v.reward == 0.0 and v.status == "invalid" and "malformed ranges" in v.details["reason"]


def test_verify_cli_writes_reward_json(tasks, tmp_path):
    task = tasks["blur"]
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copyfile(task.input("broken.mp4"), sub / "fixed.mp4")
    out = verify_cli(task.root, sub)
    written = json.loads((sub / "reward.json").read_text())
    assert written == out and out["reward"] == 0.0
    assert out["details"]["status"] == "invalid" and out["details"]["family"] == "repair"
    assert out["details"]["subtype"] == "blur" and "verbatim" in out["details"]["reason"]
