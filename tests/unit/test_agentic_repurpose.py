"""Repurpose (§2.7): the programmatic Format pillar, rubric judge requests and parsing, and the signed
weight score through `verify_cli` with a replayed judge."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vbench_ray.agentic.baselines import solve
from vbench_ray.agentic.bundle import load_task
from vbench_ray.agentic.media import read_media, write_media
from vbench_ray.agentic.synth import synth_agentic
from vbench_ray.agentic.verifiers import repurpose as rp
from vbench_ray.agentic.verify import verify_cli


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    info = synth_agentic(
        tmp_path_factory.mktemp("agentic_repurpose"), seed=5, n_assembly=0, n_sequencing=0, n_repair=0, n_repurpose=1
    )
    return load_task(Path(info["tasks_dir"]) / "repurpose_000")


@pytest.fixture(scope="module")
def good(task, tmp_path_factory):
    """A format-aware cut of the source (the heuristic baseline): every Format item passes."""
    out = tmp_path_factory.mktemp("good")
    solve("heuristic", task.root, out)
    return out


def _items(task, pillar):
    return [it for it in task.rubric["items"] if it["pillar"] == pillar]


def test_rubric_has_all_pillars_and_a_flagged_penalty(task):
    pillars = {it["pillar"] for it in task.rubric["items"]}
    assert pillars == {"format", "visual", "narrative", "sound", "penalty"}
    assert {it["check"]["type"] for it in _items(task, "format")} == {
        "runtime",
        "aspect_ratio",
        "container",
        "audio_present",
    }
    assert any(it["weight"] < 0 and it.get("narrative_essential") for it in task.rubric["items"])
    assert "Hard requirements" in (task.root / "inputs" / "brief.md").read_text()


def test_format_pillar_is_programmatic(task, good, tmp_path):
    media, fmt = rp.evaluate_format(task, good)
    assert all(it["pass"] and it["status"] == "programmatic" for it in fmt), fmt
    spec = task.spec
    src = read_media(task.input("source.mp4"))
    n = int(round(spec["runtime_s"] * src.fps))
    bad = {
        "runtime": (src.frames[: n * 2], src.audio[: n * 2 * 16000 // 12], "final.mp4"),  # twice too long, 16:9
        "audio_present": (src.frames[:n], np.zeros(n * 16000 // 12, np.float32), "final.mp4"),  # silent
    }
    for name, (frames, audio, fname) in bad.items():
        sub = tmp_path / name
        write_media(sub / fname, frames, src.fps, audio, 16000)
        _, fmt = rp.evaluate_format(task, sub)
        failed = {it["item_id"] for it in fmt if not it["pass"]}
        check_of = {it["id"]: it["check"]["type"] for it in _items(task, "format")}
        assert name in {check_of[i] for i in failed}, (name, fmt)
    _, fmt = rp.evaluate_format(task, tmp_path / "runtime")
    assert {check_of[it["item_id"]]: it["pass"] for it in fmt} == {
        "runtime": False,
        "aspect_ratio": False,
        "container": True,
        "audio_present": True,
    }
    mkv = tmp_path / "mkv"
    write_media(mkv / "final.mkv", src.frames[:n], src.fps, src.audio[: n * 16000 // 12], 16000)
    (mkv / "final.mkv").rename(mkv / "final.mp4")
    _, fmt = rp.evaluate_format(task, mkv)
    assert [it["pass"] for it in fmt if check_of[it["item_id"]] == "container"] == [False]


def test_requests_one_per_judged_item_with_frames(task, good, tmp_path):
    media, _ = rp.evaluate_format(task, good)
    frames = rp.write_frames(media, tmp_path / "frames", rp.RepurposeFramesConfig())
    assert len(frames) == 30  # a 6-8 s deliverable at 1 fps is raised to the 30-frame minimum
    assert all(Path(f["path"]).exists() for f in frames)
    assert [f["t"] for f in frames] == sorted(f["t"] for f in frames)
    items = rp.judged_items(task.rubric)
    reqs = rp.build_requests("repurpose_000:0", "base", rp.brief_text(task), items, frames, rp.audio_summary(media))
    assert [r.request_id for r in reqs] == [f"agentic/repurpose_000:0/base/rubric/{it['id']}" for it in items]
    for r, it in zip(reqs, items):
        system, user = r.messages
        assert system["content"].rstrip().endswith("When genuinely uncertain, fail.")
        assert '{"pass": true or false, "why": "one or two sentences"}' in system["content"]
        images = [p for p in user["content"] if p["type"] == "image_url"]
        assert len(images) == 30 and images[0]["image_url"]["url"].startswith("file://")
        texts = " ".join(p["text"] for p in user["content"] if p["type"] == "text")
        assert it["text"] in texts and "Hard requirements" in texts
        assert ("Loudness per second" in texts) == (it["pillar"] == "sound")
        assert r.parser == rp.PARSER and r.stage == "rubric" and r.group == it["id"]


def _answers(path: Path, case_id: str, task, verdicts: dict[str, object]) -> Path:
    lines = []
    for it in rp.judged_items(task.rubric):
        v = verdicts.get(it["id"], True)
        text = v if isinstance(v, str) else json.dumps({"pass": v, "why": "seen in the frames"})
        lines.append(json.dumps({"request_id": rp.request_id(case_id, "base", it["id"]), "text": text}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_verify_cli_with_a_replayed_judge(task, good, tmp_path):
    case = f"{task.task_id}:cli"
    answers = _answers(tmp_path / "a.jsonl", case, task, {"P1": False})  # P2 (flagged, -2) passes
    judge = ["backend=replay", f"replay_path={answers}", "max_retries=0"]
    out = verify_cli(task.root, good, tmp_path / "never.json", judge=judge)
    # paper (never): 6 format + V1 2 + V2 1 + N1 2 + N2 2 + S1 1 + P2 -2 = 12 of 14 positive points
    assert out["reward"] == pytest.approx(12 / 14) and out["details"]["rubric_judged"] is True
    assert json.loads((tmp_path / "never.json").read_text()) == out
    official = verify_cli(
        task.root,
        good,
        tmp_path / "official.json",
        judge=judge,
        settings={"repurpose": {"invert_negative": "narrative_essential"}},
    )
    assert official["reward"] == pytest.approx(1.0)  # the flagged item passing costs nothing
    # a present violation (P1) costs its weight; an unusable answer fails its item
    answers = _answers(tmp_path / "b.jsonl", case, task, {"P1": True, "V1": "no JSON here"})
    out = verify_cli(
        task.root, good, tmp_path / "b.json", judge=["backend=replay", f"replay_path={answers}", "max_retries=0"]
    )
    assert out["reward"] == pytest.approx((12 - 2 - 2) / 14)
    statuses = {it["item_id"]: it["status"] for it in out["details"]["items"]}
    assert statuses["V1"] == "invalid" and statuses["F-DUR"] == "programmatic"


def test_without_a_judge_only_the_format_pillar_counts(task, good, tmp_path):
    out = verify_cli(task.root, good, tmp_path / "r.json")
    assert out["details"]["rubric_judged"] is False and out["details"]["format_share"] == 1.0
    assert out["reward"] == pytest.approx(6 / 14)
    assert {it["status"] for it in out["details"]["items"] if it["pillar"] != "format"} == {"not_judged"}


def test_missing_or_broken_deliverable_scores_zero(task, tmp_path):
    (tmp_path / "empty").mkdir()
    out = verify_cli(task.root, tmp_path / "empty")
    assert out["reward"] == 0.0 and out["details"]["status"] == "missing"
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "final.mp4").write_bytes(b"junk" * 50)
    out = verify_cli(task.root, tmp_path / "junk")
    assert out["reward"] == 0.0 and out["details"]["status"] == "invalid"


def test_long_deliverables_are_decoded_sparsely(task, good):
    """The judge needs ~1 fps: a deliverable is decoded keeping only enough frames, at most 512 px."""
    full = read_media(good / "final.mp4")
    media, _ = rp.evaluate_format(task, good, rp.RepurposeFramesConfig(max_side=32))
    assert media.info.num_frames == full.info.num_frames and media.info.duration == full.info.duration
    assert len(media.frames) < len(full.frames) and max(media.frames.shape[1:3]) == 32
    assert media.frame_times[0] == 0.0 and np.all(np.diff(media.frame_times) > 0)
    import cv2

    kept = (media.frame_times * full.fps).round().astype(int)
    for j in (0, len(kept) - 1):
        small = cv2.resize(full.frames[kept[j]], media.frames[j].shape[1::-1], interpolation=cv2.INTER_AREA)
        assert np.array_equal(small, media.frames[j])
