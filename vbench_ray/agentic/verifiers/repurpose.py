"""Repurpose verifier: the Format pillar programmatically, the other pillars as judged rubric items.

Spec: paper §2.7 (five pillars: Format, Visual, Narrative, Sound, optional Penalty; binary items with
signed weights, ~30 items and ~36 points per task) and the official ``steps/solve/tests/judge.py`` of
PhiloLabs/agentic-vbench 3fad058.

* **Format** (programmatic, like the official pillar 0's ffprobe checks): ``check.type`` is
  ``runtime`` (``target_s``, ``tolerance_s``), ``aspect_ratio`` (``target`` such as ``"9:16"``,
  ``tolerance`` relative, default 0.02), ``container`` (``name``: an FFmpeg format name such as
  ``mp4``) or ``audio_present`` (an audio stream louder than ``min_dbfs``, default -60 dBFS), all read
  with PyAV. (The official pillar 0 also runs scene detection, OCR, whisper and librosa; those checks
  are not implemented here.)
* **Visual, Narrative, Sound, Penalty**: one judge request per item (request id
  ``agentic/{case_id}/{variant}/rubric/{item_id}``) with the brief, frames of the deliverable at about
  1 fps (30-250 frames, at most 512 px, JPEG quality 72, as the official grader), for Sound items a
  text summary of the audio track (our judge stage is vision-language; the official sends audio to an
  audio model), and the item. The system prompt ends "When genuinely uncertain, fail." and asks for
  exactly one JSON object ``{"pass": true|false, "why": "..."}`` (parser ``agentic_rubric_item``). An
  item whose request never yields a valid answer fails.
* **Score**: ``sum(pass_i * w_i) / sum(positive w_i)``, clamped to [0, 1]; negative weights are
  penalties (an item describing a violation that is present costs ``|w|``). ``repurpose.invert_negative``:
  ``never`` (paper: ``pass * w`` for every item), ``narrative_essential`` (official ``judge.py``: a
  negative-weight item flagged ``narrative_essential`` is phrased as a requirement and costs ``|w|``
  when it *fails*) or ``always`` (every negative item is read that way).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import numpy as np

from vbench_ray.agentic.media import Media, MediaError, read_media
from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict
from vbench_ray.judges.base import JudgeRequest, request_id as judge_request_id
from vbench_ray.judges.parsing import Parsed, extract_json, register_parser

INVERT_MODES = ("never", "narrative_essential", "always")
PARSER = "agentic_rubric_item"
STAGE = "rubric"  # the judge stage of every request id (agentic/{case}/{variant}/rubric/{item})


@dataclass
class RepurposeFramesConfig:
    fps: float = 1.0  # frames per second of the deliverable shown to the judge (official: ~1 fps)
    min_frames: int = 30  # official: 30-250 frames per deliverable
    max_frames: int = 250
    max_side: int = 512  # px, longest side of a frame
    jpeg_quality: int = 72


@dataclass
class RepurposeConfig:
    judge_enabled: bool = True  # false: only the Format pillar is scored; judged items count as failed
    invert_negative: str = "never"  # never (paper) | narrative_essential (official judge.py) | always
    audio_summary: bool = True  # Sound items also get a text summary of the deliverable's audio track
    frames: RepurposeFramesConfig = field(default_factory=RepurposeFramesConfig)


# ----------------------------------------------------------------------------- format pillar


def _ratio(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*[:/x]\s*(\d+(?:\.\d+)?)\s*", str(value))
    if not m:
        raise ValueError(f"aspect ratio {value!r} is not W:H")
    return float(m.group(1)) / float(m.group(2))


def loudness_dbfs(audio: np.ndarray | None) -> float:
    if audio is None or not len(audio):
        return -math.inf
    rms = float(np.sqrt(np.mean(np.asarray(audio, np.float64) ** 2)))
    return 20.0 * math.log10(rms) if rms > 0 else -math.inf


def format_check(check: dict, media: Media, path: Path) -> tuple[bool, str]:
    """One programmatic Format item: ``(passed, why)``."""
    info = media.info
    kind = check["type"]
    if kind == "runtime":
        target, tol = float(check["target_s"]), float(check.get("tolerance_s", 0.0))
        ok = abs(info.duration - target) <= tol + 1e-6
        return ok, f"runtime {info.duration:.2f} s (target {target:g} s +- {tol:g} s)"
    if kind == "aspect_ratio":
        target, tol = _ratio(check["target"]), float(check.get("tolerance", 0.02))
        got = info.display_aspect
        ok = math.isfinite(got) and abs(got / target - 1.0) <= tol
        return ok, f"display aspect {info.width}x{info.height} = {got:.4f} (target {check['target']} = {target:.4f})"
    if kind == "container":
        name = str(check.get("name", "mp4"))
        ok = name in info.container.split(",") and path.suffix.lower().lstrip(".") == name
        return ok, f"container {info.container!r}, file {path.name} (required: {name})"
    if kind == "audio_present":
        level = loudness_dbfs(media.audio)
        floor = float(check.get("min_dbfs", -60.0))
        ok = info.has_audio and level > floor
        return ok, (
            f"audio stream {info.audio_codec}, loudness {level:.1f} dBFS" if info.has_audio else "no audio stream"
        )
    raise ValueError(f"unknown format check {kind!r}")


def _keep_fps(path: Path, cfg: RepurposeFramesConfig) -> float | None:
    """A frame rate to keep while decoding that still yields the judge's frames (``min_frames`` spread
    over the header's duration), so a long deliverable is never held in memory whole."""
    import av

    try:
        with av.open(str(path)) as c:
            duration = float(c.duration) / 1e6 if c.duration else 0.0
    except Exception:  # the full decode reports the problem
        return None
    if duration <= 0:
        return None
    return max(cfg.fps, cfg.min_frames / duration) * 2.0


def evaluate_format(
    task, submission: Path, frames_cfg: RepurposeFramesConfig | None = None
) -> tuple[Media, list[dict]]:
    """Decode ``final.mp4`` (keeping frames for the judge only, when ``frames_cfg``) and score every
    Format item. Missing/undecodable -> :class:`InvalidSubmission`."""
    final = Path(submission) / "final.mp4"
    if not final.is_file():
        raise InvalidSubmission("final.mp4 is missing from the submission", status="missing")
    try:
        media = read_media(
            final,
            max_side=frames_cfg.max_side if frames_cfg else None,
            keep_fps=_keep_fps(final, frames_cfg) if frames_cfg else None,
        )
    except MediaError as exc:
        raise InvalidSubmission(f"final.mp4 cannot be decoded: {exc}") from exc
    if media.frames is None:
        raise InvalidSubmission("final.mp4 has no video stream")
    items = []
    for item in task.rubric["items"]:
        if item["pillar"] != "format":
            continue
        ok, why = format_check(item["check"], media, final)
        items.append(item_row(item, ok, why, "programmatic"))
    return media, items


def item_row(item: dict, passed: bool | None, why: str | None, status: str) -> dict:
    return {
        "item_id": item["id"],
        "pillar": item["pillar"],
        "weight": float(item["weight"]),
        "narrative_essential": bool(item.get("narrative_essential", False)),
        "text": item["text"],
        "pass": passed,
        "why": why,
        "status": status,
    }


# ----------------------------------------------------------------------------- score


def contribution(weight: float, passed: bool, narrative_essential: bool, mode: str) -> float:
    """One item's points: ``pass * w``; a negative item read as a requirement costs ``|w|`` on failure."""
    if mode not in INVERT_MODES:
        raise ValueError(f"repurpose.invert_negative must be one of {INVERT_MODES}, got {mode!r}")
    invert = weight < 0 and (mode == "always" or (mode == "narrative_essential" and narrative_essential))
    return weight * (0.0 if passed else 1.0) if invert else weight * (1.0 if passed else 0.0)


def rubric_score(items: list[dict], mode: str = "never") -> dict:
    """``sum(pass * w) / sum(positive w)`` clamped to [0, 1] (§2.7); unanswered items fail."""
    positive = sum(it["weight"] for it in items if it["weight"] > 0)
    earned = sum(
        contribution(it["weight"], bool(it["pass"]), it.get("narrative_essential", False), mode) for it in items
    )
    raw = earned / positive if positive > 0 else 0.0
    by_pillar: dict[str, dict] = {}
    for it in items:
        p = by_pillar.setdefault(it["pillar"], {"earned": 0.0, "possible": 0.0, "n": 0})
        p["earned"] += contribution(it["weight"], bool(it["pass"]), it.get("narrative_essential", False), mode)
        p["possible"] += max(0.0, it["weight"])
        p["n"] += 1
    return {
        "reward": float(min(1.0, max(0.0, raw))),
        "raw": raw,
        "earned": earned,
        "possible": positive,
        "by_pillar": by_pillar,
    }


# ----------------------------------------------------------------------------- judge evidence


def sample_times(duration: float, cfg: RepurposeFramesConfig) -> np.ndarray:
    """Frame times at ``fps`` (centred in each interval), clamped to ``[min_frames, max_frames]``."""
    n = int(round(duration * cfg.fps))
    n = max(cfg.min_frames, min(cfg.max_frames, n))
    return (np.arange(n) + 0.5) * duration / n


def write_frames(media: Media, out_dir: Path, cfg: RepurposeFramesConfig) -> list[dict]:
    """JPEG frames of the deliverable for the judge: ``[{"t": seconds, "path": ...}]``."""
    import cv2

    out_dir.mkdir(parents=True, exist_ok=True)
    frames = media.frames
    have = media.frame_times if media.frame_times is not None else np.arange(len(frames)) / media.fps
    times = sample_times(media.info.duration, cfg)
    # the last kept frame at or before each sampling time
    idx = sorted(set(np.clip(np.searchsorted(have, times + 1e-9, side="right") - 1, 0, len(frames) - 1).tolist()))
    out = []
    for k, i in enumerate(idx):
        img = frames[i]
        h, w = img.shape[:2]
        scale = min(1.0, cfg.max_side / max(h, w))
        if scale < 1.0:
            img = cv2.resize(img, (max(2, int(w * scale)), max(2, int(h * scale))), interpolation=cv2.INTER_AREA)
        path = out_dir / f"frame_{k:04d}.jpg"
        cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, int(cfg.jpeg_quality)])
        out.append({"t": round(float(have[i]), 3), "path": str(path.resolve())})
    return out


def audio_summary(media: Media) -> str:
    """A text description of the audio track: format and loudness per second (dBFS)."""
    info = media.info
    if not info.has_audio or media.audio is None or not len(media.audio):
        return "The deliverable has no audio track."
    sr = info.sample_rate
    secs = [media.audio[s : s + sr] for s in range(0, len(media.audio), sr)]
    levels = [loudness_dbfs(x) for x in secs]
    txt = ", ".join("silent" if not math.isfinite(v) or v < -60 else f"{v:.0f}" for v in levels)
    silent = sum(1 for v in levels if not math.isfinite(v) or v < -60)
    return (
        f"Audio track: {info.audio_codec}, {sr} Hz, {len(media.audio) / sr:.1f} s. Loudness per second "
        f"(dBFS): {txt}. Silent seconds: {silent}."
    )


def _template(name: str) -> str:
    return resources.files("vbench_ray.judges.prompts").joinpath("agentic", name).read_text()


def system_prompt() -> str:
    return _template("rubric_system.txt")


def judged_items(rubric: dict) -> list[dict]:
    return [it for it in rubric["items"] if it["pillar"] != "format"]


def request_id(case_id: str, variant: str, item_id: str) -> str:
    """``agentic/{case}/{variant}/rubric/{item}`` (``judges.base.request_id``)."""
    return judge_request_id("agentic", case_id, variant, STAGE, item_id)


def build_requests(
    case_id: str, variant: str, brief: str, items: list[dict], frames: list[dict], audio_text: str | None
) -> list[JudgeRequest]:
    """One request per judged rubric item, each with the brief and every sampled frame."""
    system = system_prompt()
    template = Template(_template("rubric_item.txt"))
    media: list[dict] = []
    for f in frames:
        media.append({"type": "text", "text": f"t={f['t']:.1f}s"})
        media.append({"type": "image_url", "image_url": {"url": Path(f["path"]).as_uri()}})
    out = []
    for item in items:
        sound = item["pillar"] == "sound" and audio_text
        evidence = f"{len(frames)} frames of the deliverable, in order" + ("; an audio summary" if sound else "")
        text = template.substitute(
            brief=brief.strip(), evidence=evidence, pillar=item["pillar"], item_id=item["id"], item=item["text"]
        )
        content = [{"type": "text", "text": "Frames of the deliverable:"}, *media]
        if sound:
            content.append({"type": "text", "text": audio_text})
        content.append({"type": "text", "text": text})
        out.append(
            JudgeRequest.build(
                "agentic",
                case_id,
                variant,
                STAGE,
                item["id"],
                messages=[{"role": "system", "content": system}, {"role": "user", "content": content}],
                parser=PARSER,
                expected={"item_id": item["id"]},
            )
        )
    return out


_BOOL = {
    "true": True,
    "yes": True,
    "pass": True,
    "passed": True,
    "false": False,
    "no": False,
    "fail": False,
    "failed": False,
}


@register_parser(PARSER)
def parse_rubric_item(text: str, expected: Any) -> Parsed:
    """Exactly one JSON object ``{"pass": bool, "why": str}`` ("yes"/"no" strings are accepted)."""
    try:
        data = extract_json(text)
    except ValueError as exc:
        return Parsed(False, error=str(exc))
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict) or "pass" not in data:
        return Parsed(False, error='expected one JSON object {"pass": true|false, "why": "..."}')
    value = data["pass"]
    if isinstance(value, str):
        value = _BOOL.get(value.strip().lower())
    if not isinstance(value, bool):
        return Parsed(False, error=f'"pass" must be true or false, got {data["pass"]!r}')
    why = data.get("why")
    return Parsed(
        True,
        value={"pass": value, "why": str(why) if why is not None else ""},
        note=None if why is not None else 'no "why" given',
    )


# ----------------------------------------------------------------------------- one rollout


def score_items(format_items: list[dict], rubric: dict, answers: dict[str, Any], cfg: RepurposeConfig) -> dict:
    """Every rubric item with its outcome (format: programmatic; others: ``answers[item_id]``, a dict
    ``{"pass", "why"}`` or a status string when the judge gave no usable answer) and the score."""
    rows = list(format_items)
    for item in judged_items(rubric):
        ans = answers.get(item["id"])
        if isinstance(ans, dict):
            rows.append(item_row(item, bool(ans["pass"]), ans.get("why"), "ok"))
        else:
            rows.append(item_row(item, False, None, ans or ("not_judged" if not cfg.judge_enabled else "missing")))
    return {**rubric_score(rows, cfg.invert_negative), "items": rows}


def format_share(format_items: list[dict]) -> float | None:
    """The Format pillar alone: points earned over its positive points (programmatic, judge-free)."""
    pos = sum(it["weight"] for it in format_items if it["weight"] > 0)
    if pos <= 0:
        return None
    return sum(it["weight"] * bool(it["pass"]) for it in format_items) / pos


def verify(
    task, submission: Path, cfg: RepurposeConfig | None = None, answers: dict[str, Any] | None = None
) -> Verdict:
    """Score one rollout with judge ``answers`` (item id -> ``{"pass", "why"}``) already in hand."""
    cfg = cfg or RepurposeConfig()
    try:
        media, fmt = evaluate_format(task, submission, cfg.frames)
    except InvalidSubmission as exc:
        return Verdict.zero(exc)
    scored = score_items(fmt, task.rubric, answers or {}, cfg)
    return Verdict(
        scored["reward"],
        "ok",
        {
            "format_share": format_share(fmt),
            "earned": scored["earned"],
            "possible": scored["possible"],
            "raw": scored["raw"],
            "by_pillar": scored["by_pillar"],
            "items": scored["items"],
            "invert_negative": cfg.invert_negative,
            "duration_s": media.info.duration,
            "report_md": (Path(submission) / "report.md").is_file(),
        },
    )


def brief_text(task) -> str:
    path = task.input("brief.md")
    return path.read_text(encoding="utf-8") if path.exists() else task.instruction


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
