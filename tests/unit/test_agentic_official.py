"""Side by side with the official AgenticVBench judges (issue 28, items 1-10).

Each submission is generated here from the project's synthetic bundles, scored by the project and by
the official rules transcribed in ``tests/helpers/agentic_oracles.py`` (cited there by commit and file), and
the two must agree to 1e-6: assembly by default (the task judge), repair with ``repair.scheme=official``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import agentic_oracles as O
from vbench_ray.agentic.baselines import assembly_oracle
from vbench_ray.agentic.bundle import TaskBundle, load_task
from vbench_ray.agentic.media import read_media, write_media
from vbench_ray.agentic.synth import perfect_fix, synth_agentic
from vbench_ray.agentic.verifiers import assembly, repair


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    info = synth_agentic(
        tmp_path_factory.mktemp("agentic_official"), seed=5, n_assembly=1, n_sequencing=0, n_repair=5, n_repurpose=0
    )
    tasks = [load_task(Path(info["tasks_dir"]) / t) for t in info["tasks"]]
    return {t.subtype if t.family == "repair" else "assembly": t for t in tasks}


# ----------------------------------------------------------------------------- assembly (items 1-4)


def _golden(task) -> list[str]:
    return [s["golden"] for s in task.truth["slots"]]


def _oracle_asm(task, sub: Path) -> dict:
    return O.assembly_judge(sub / "solution.json", sub / "solution.mp4", task.input("clips"), _golden(task))


def _asm_sub(task, root: Path, name: str, solution=None, clips=None, frames_each=None) -> Path:
    """The oracle agent's submission, then its solution.json and/or solution.mp4 replaced."""
    sub = root / name
    assembly_oracle(task, sub, np.random.default_rng(0))
    if clips is not None:  # solution.mp4 rebuilt from these clips (each cut to frames_each frames)
        media = [read_media(task.input(f"clips/{c}"), audio=False) for c in clips]
        frames = np.concatenate([m.frames[:frames_each] for m in media])
        write_media(sub / "solution.mp4", frames, media[0].fps)
    if solution is not None:
        (sub / "solution.json").write_text(json.dumps(solution(json.loads((sub / "solution.json").read_text()))))
    return sub


def _both(task, sub: Path, cfg=None):
    ours, official = assembly.verify(task, sub, cfg), _oracle_asm(task, sub)
    assert ours.reward == pytest.approx(official["reward"], abs=1e-6)
    return ours, official


def test_item1_solution_mp4_is_checked(bundles, tmp_path):
    task = bundles["assembly"]
    ours, off = _both(task, _asm_sub(task, tmp_path, "oracle"))
    assert ours.reward == off["reward"] == 1.0
    no_mp4 = _asm_sub(task, tmp_path, "no_mp4")
    (no_mp4 / "solution.mp4").unlink()
    ours, _ = _both(task, no_mp4)  # JSON right, no mp4: 0, not 1.0
    assert ours.reward == 0.0 and ours.status == "missing" and "solution.mp4" in ours.details["reason"]
    distractors = [next(c for c in s["candidates"] if c != s["golden"]) for s in task.truth["slots"]]
    ours, _ = _both(task, _asm_sub(task, tmp_path, "from_distractors", clips=distractors))
    assert ours.reward == 0.0 and ours.details["n_correct"] == len(distractors)  # JSON right, mp4 wrong
    trimmed = _asm_sub(task, tmp_path, "trimmed", clips=_golden(task), frames_each=6)  # 0.5 s each, 1.33 s declared
    ours, _ = _both(task, trimmed)
    assert ours.reward == 0.0 and not any(s.get("honest") for s in ours.details["per_slot"])


def test_item2_the_official_shape_is_read_and_slots_alone_is_refused_with_its_reason(bundles, tmp_path):
    task = bundles["assembly"]
    seg_only = _asm_sub(task, tmp_path, "segments", solution=lambda s: {"segments": s["segments"]})
    ours, off = _both(task, seg_only)
    assert ours.reward == off["reward"] == 1.0
    slots_only = _asm_sub(task, tmp_path, "slots", solution=lambda s: {"slots": s["slots"]})
    ours, off = _both(task, slots_only)
    assert (
        ours.reward == 0.0
        and ours.status == "invalid"
        and ours.details["reason"] == off["reason"] == "solution.json: segments not a list"
    )
    # the project's reading stays a named option; it reads either shape, and says why when it reads neither
    slots = assembly.AssemblyConfig(scheme="slots")
    assert assembly.verify(task, slots_only, slots).reward == 1.0
    assert assembly.verify(task, seg_only, slots).reward == 1.0
    (tmp_path / "neither").mkdir()
    (tmp_path / "neither" / "solution.json").write_text(json.dumps({"picks": _golden(task)}))
    v = assembly.verify(task, tmp_path / "neither", slots)
    assert v.reward == 0.0 and v.status == "invalid" and "none of the storyboard's slots" in v.details["reason"]


def test_item3_slot_count(bundles, tmp_path):
    task = bundles["assembly"]
    extra = _asm_sub(task, tmp_path, "extra", solution=lambda s: {"segments": s["segments"] + [s["segments"][0]]})
    ours, off = _both(task, extra)
    n = len(task.truth["slots"])
    assert (
        ours.reward == 0.0
        and ours.details["reason"] == off["reason"] == f"slot count mismatch: expected {n}, got {n + 1}"
    )


def test_item4_chance_is_a_fixed_third(bundles, tmp_path):
    base = bundles["assembly"]
    truth = json.loads(json.dumps(base.truth))
    for s in truth["slots"]:  # two candidates per slot: the paper's 1/k would be 1/2
        s["candidates"] = [s["golden"], next(c for c in s["candidates"] if c != s["golden"])]
    task = TaskBundle(root=base.root, meta=base.meta, truth=truth)
    n = len(truth["slots"])

    def one_wrong(sol):
        sol["segments"][0]["source"] = sol["slots"]["S1"] = truth["slots"][0]["candidates"][1]
        return sol

    ours, off = _both(task, _asm_sub(task, tmp_path, "one_wrong", solution=one_wrong))
    p = (n - 1) / n
    assert ours.reward == pytest.approx(max(0.0, (p - 1 / 3) * 1.5), abs=1e-9)  # 3 of 4: 0.625
    assert assembly.verify(task, tmp_path / "one_wrong", assembly.AssemblyConfig("slots")).reward == pytest.approx(
        max(0.0, (p - 0.5) / 0.5)
    )  # the named option keeps 1/k: 0.5


# ----------------------------------------------------------------------------- repair (items 5-10)


def _profile(task) -> tuple[dict, str]:
    """The package's profile.json for a synthetic task, written out by hand (one scene: the whole clip)."""
    t = task.truth
    dur = O.probe(task.truth_file("golden.mp4"))["duration_s"]
    prof = {"format": {"duration_s": dur}, "narrative": {"scene_list": [{"index": 0, "start_s": 0.0, "end_s": dur}]}}
    if t["defect"] == "shot_swap":
        (a, b), (_, c) = t["segments"]
        prof["injection"] = {
            "variant": "v03_scene_swap",
            "start_s": a,
            "end_s": c,
            "scene_1": {"group": "A", "broken_start_s": a + c - b, "broken_end_s": c},
            "scene_2": {"group": "B", "broken_start_s": a, "broken_end_s": a + c - b},
        }
        return prof, "v03_scene_swap"
    if t["defect"] == "repeated_frames":
        s, e = t["ranges"][0]["range"]  # the duplicate copy, broken clip's time
        prof["injection"] = {
            "variant": "v06_duplicate_segment",
            "start_s": s,
            "end_s": e,
            "duration_s": e - s,
            "target_scene_index": 0,
            "target_scene": {"start_s": 0.0, "end_s": dur},
        }
        return prof, "v06_duplicate_segment"
    variant = {"colour_shift": "v04_color_grade_shift", "audio_noise": "v05_noise_floor_spike"}[t["defect"]]
    prof["injection"] = {
        "variant": variant,
        "start_s": t["window"][0],
        "end_s": t["window"][1],
        "target_scene_index": 0,
    }
    return prof, variant


def _side_by_side(task, sub: Path):
    prof, variant = _profile(task)
    off = O.score_task(sub / "fixed.mp4", sub / "report.md", task.truth_file("golden.mp4"), prof, variant)
    ours = repair.verify(task, sub, repair.RepairConfig(scheme="official"))
    parts = ours.details["official"]
    for k in ("format", "localization", "edit"):
        assert parts[k]["score"] == pytest.approx(off[k], abs=1e-6), k
    assert ours.reward == pytest.approx(off["final"], abs=1e-6)
    return ours, off


def _sub(root: Path, frames=None, audio=None, sr=16000, report: str | None = None, copy: Path | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if copy is not None:
        shutil.copyfile(copy, root / "fixed.mp4")
    elif frames is not None:
        write_media(root / "fixed.mp4", frames, 12, audio, sr if audio is not None else None)
    if report is not None:
        (root / "report.md").write_text(report, encoding="utf-8")
    return root


def _report(s: float, e: float, kind: str = "defect") -> str:
    return f"# Repair report\n\n## Diagnosis\n- type: {kind}\n- start: {s}\n- end: {e}\n"


def test_item5_video_audio_split_per_variant(bundles, tmp_path):
    for defect, shares in (("colour_shift", (0.9, 0.1)), ("audio_noise", (0.1, 0.9))):
        task = bundles[defect]
        broken = read_media(task.input("broken.mp4"))  # the defect left in, everything else right
        sub = _sub(tmp_path / defect, broken.frames, broken.audio, report=_report(*task.truth["window"]))
        ours, off = _side_by_side(task, sub)
        sc = ours.details["official"]["scoring"]
        assert (sc["video_share"], sc["audio_share"]) == shares
        assert off["edit"] < 60.0


def test_item6_audio_resampled_to_48k(bundles, tmp_path):
    from scipy.signal import resample_poly

    task = bundles["audio_noise"]
    golden = read_media(task.truth_file("golden.mp4"))
    audio441 = resample_poly(golden.audio, 441, 160).astype(np.float32)
    ours, off = _side_by_side(
        task, _sub(tmp_path / "sr", golden.frames, audio441, sr=44100, report=_report(*task.truth["window"]))
    )
    assert ours.details["official"]["format"]["items"]["audio_sample_rate"] is False
    assert off["edit"] > 55.0  # the same audio at another rate is the same audio


def test_item7_no_audio_stream_fails_every_chunk(bundles, tmp_path):
    task = bundles["colour_shift"]
    golden = read_media(task.truth_file("golden.mp4"))
    ours, off = _side_by_side(task, _sub(tmp_path / "mute", golden.frames, None, report=_report(*task.truth["window"])))
    assert off["edit"] == 0.0 and ours.details["official"]["edit"]["error"].startswith("all 1 chunks failed")


def test_item8_start_end_lines_anywhere_in_the_report(bundles, tmp_path):
    task = bundles["colour_shift"]
    s, e = task.truth["window"]
    report = f"Summary\n- start: {s}\n- end: {e}\n\n## Diagnosis\n- type: colour\n- start: 0.0\n- end: 0.4\n"
    ours, off = _side_by_side(task, _sub(tmp_path / "r", copy=task.truth_file("golden.mp4"), report=report))
    assert off["localization"] == pytest.approx(35.0)


def test_item9_shot_swap_two_regions(bundles, tmp_path):
    task = bundles["shot_swap"]
    (a, b), (_, c) = task.truth["segments"]
    two = (
        f"## Diagnosis\n- type: shot swap\n- start: {a}\n- end: {a + c - b}\n\n"
        f"## Diagnosis\n- type: shot swap\n- start: {a + c - b}\n- end: {c}\n"
    )
    ours, off = _side_by_side(task, _sub(tmp_path / "golden", copy=task.truth_file("golden.mp4"), report=two))
    assert off["localization"] == pytest.approx(35.0) and len(ours.details["official"]["localization"]["windows"]) == 2
    one = f"## Diagnosis\n- type: shot swap\n- start: {a}\n- end: {c}\n"  # one outer window: half credit each
    ours, off = _side_by_side(task, _sub(tmp_path / "outer", copy=task.truth_file("golden.mp4"), report=one))
    assert off["localization"] < 35.0
    broken = read_media(task.input("broken.mp4"))
    _side_by_side(task, _sub(tmp_path / "broken", broken.frames, broken.audio, report=two))
    ours, off = _side_by_side(task, _sub(tmp_path / "report_only", report=two))
    assert ours.status == "missing" and off["final"] == pytest.approx(0.35)


def test_item10_repeated_frames_duplicate_copy_in_broken_time(bundles, tmp_path):
    task = bundles["repeated_frames"]
    broken, golden = read_media(task.input("broken.mp4")), read_media(task.truth_file("golden.mp4"))
    frames, audio = perfect_fix(broken, golden, task.truth)
    s, e = task.truth["ranges"][0]["range"]
    ours, off = _side_by_side(task, _sub(tmp_path / "fix", frames, audio, report=_report(s, e)))
    assert off["localization"] == pytest.approx(35.0)
    # both copies reported: the official truth is the duplicate copy alone
    w0, w1 = task.truth["window"]
    ours, off = _side_by_side(task, _sub(tmp_path / "both", frames, audio, report=_report(w0, w1)))
    assert off["localization"] < 30.0


# ----------------------------------------------------------------------------- repurpose's format pillar


@pytest.fixture(scope="module")
def repurpose_tasks(tmp_path_factory):
    info = synth_agentic(
        tmp_path_factory.mktemp("agentic_official_rp"), seed=2, n_assembly=0, n_sequencing=0, n_repair=0, n_repurpose=2
    )
    return [load_task(Path(info["tasks_dir"]) / t) for t in info["tasks"]]


def test_repurpose_format_items_map_to_the_official_pillar0_checks(repurpose_tasks, tmp_path):
    """Both synthetic formats (9:16, 1:1): the project's structured checks and the official judge's
    text-read checks agree on every item, except a silent audio track (official: a stream is present;
    the project also asks for audible sound, ``min_dbfs``)."""
    from vbench_ray.agentic.baselines import solve
    from vbench_ray.agentic.verifiers import repurpose as rp

    for task in repurpose_tasks:
        spec = task.spec
        kinds = {it["id"]: O.format_kind(it) for it in task.rubric["items"] if it["pillar"] == "format"}
        assert kinds == {
            "F-DUR": "duration",
            "F-RES": "resolution",
            "F-CONTAINER": "container",
            "AUDIO-PRESENT": "audio_present",
        }
        good = tmp_path / task.task_id / "good"
        solve("heuristic", task.root, good)
        fin = read_media(good / "final.mp4")
        fps, sr = fin.fps, fin.info.sample_rate
        subs = {"good": good}

        def variant(name, frames, audio):
            write_media(tmp_path / task.task_id / name / "final.mp4", frames, fps, audio, sr)
            subs[name] = tmp_path / task.task_id / name

        over = int(round((spec["runtime_s"] + spec["runtime_tolerance_s"] + 0.5) * fps))
        inside = int(round((spec["runtime_s"] + spec["runtime_tolerance_s"] - 0.25) * fps))
        reps = int(np.ceil(over / len(fin.frames)))
        long_f, long_a = np.concatenate([fin.frames] * reps), np.concatenate([fin.audio] * reps)
        variant("too_long", long_f[:over], long_a[: over * sr // int(fps)])
        variant("long_within_tolerance", long_f[:inside], long_a[: inside * sr // int(fps)])
        src = read_media(task.input("source.mp4"))  # 16:9: the wrong shape
        n = len(fin.frames)
        variant("wide", src.frames[:n], src.audio[: n * sr // int(fps)])
        variant("silent", fin.frames, np.zeros_like(fin.audio))
        for name, sub in subs.items():
            _, rows = rp.evaluate_format(task, sub)
            ours = {r["item_id"]: r["pass"] for r in rows}
            items = {it["id"]: it for it in task.rubric["items"] if it["pillar"] == "format"}
            official = {i: O.pillar0(items[i], sub / "final.mp4") for i in ours}
            if name == "silent":
                assert official["AUDIO-PRESENT"] and not ours["AUDIO-PRESENT"]
                ours["AUDIO-PRESENT"] = True
            assert ours == official, (task.task_id, name, ours, official)
        _, rows = rp.evaluate_format(task, subs["too_long"])
        assert {r["item_id"]: r["pass"] for r in rows}["F-DUR"] is False
        _, rows = rp.evaluate_format(task, subs["wide"])
        assert {r["item_id"]: r["pass"] for r in rows}["F-RES"] is False


def test_swap_without_segments_is_scored_as_one_region(bundles, tmp_path):
    base = bundles["shot_swap"]
    truth = {k: v for k, v in base.truth.items() if k != "segments"}  # segments are optional in a bundle
    task = TaskBundle(root=base.root, meta=base.meta, truth=truth)
    sub = _sub(tmp_path / "w", copy=task.truth_file("golden.mp4"), report=_report(*truth["window"]))
    v = repair.verify(task, sub, repair.RepairConfig(scheme="official"))
    assert v.details["official"]["localization"]["score"] == pytest.approx(35.0)
