"""``repair.scheme=official``: the public verifier package's repair score on any input.

Reimplemented from PhiloLabs/AgentVBench at commit f058cd6, ``verifiers/repair``: ``score.py``
(``score_task``: ``(format + localization + edit) / 100``, each part clipped to [0, its points], and
``_edit_kwargs_for``: per-variant ``scoring`` of ``lib/tasks/<variant>/task.json``),
``lib/rubrics/format.py`` (seven ffprobe items against the source), ``lib/rubrics/_localize.py``
(report parsing, ``score_with_scene`` and ``score_with_scene_multi``), ``lib/tasks/v0*/localize.py``
(per-variant truth windows and scene-hit targets) and ``lib/rubrics/edit.py`` (``score_edit``).

The package scores a task from a ground-truth *profile* (``ground_truth/<cell>/profile.json``); a
project task's profile is read from its ``truth.json`` (:func:`official_profile`):

* the variant (``VARIANT``): ``colour_shift`` -> ``v04_color_grade_shift`` (video/audio 0.9/0.1),
  ``audio_noise`` -> ``v05_noise_floor_spike`` (0.1/0.9), timeline defects -> ``v06_duplicate_segment``,
  ``shot_swap`` -> ``v03_scene_swap``. ``blur``, ``audio_echo`` and ``audio_clipping`` have no variant in
  the package: they are scored as a single-window variant with the edit defaults (0.6/0.4, w_in 2.5,
  w_out 1.0).
* ``duration_s``: the golden's container duration; the scene list: ``truth.json`` ``scenes`` (``[[s, e],
  ...]`` in the golden's time), else the whole clip as one scene (the synthetic clips are one shot).
* windowed defects: truth window ``window``; scene-hit target the scene holding most of the window
  (the package stores it as ``target_scene_index``).
* timeline defects: truth window and edit window the duplicate copy in the broken clip's time
  (``ranges[0]``); scene-hit target from the containing scene's start to ``max(its end + the copy's
  length, next scene's end)`` (``v06_duplicate_segment/localize.py``).
* shot swap: two regions, the two exchanged stretches where they sit in the broken clip, each worth
  half the localisation points (``v03_scene_swap/localize.py``); the package's edit window for this
  variant reads ``scene_1.original_start_s`` and ``scene_4.original_end_s``, which its own swap profiles
  do not have, so its edit scores every sample as outside the window; so does this one. A swap without
  ``segments`` is scored as one region, its ``window``.

Media are read as the package reads them: frames with OpenCV (seek per 10 s chunk, BGR); audio mono,
resampled to 48 kHz, 16-bit (the package shells out to ``ffmpeg -ac 1 -ar 48000 pcm_s16le``; here PyAV's
resampler, the same libswresample); ffprobe's fields from PyAV. A fixed clip with no audio stream fails
every chunk (the package's audio extraction errors), so its edit part is 0, as in the package. Where the
package decodes a chunk's source frames whole, this keeps only the lag band (21 frames) in memory.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from vbench_ray.agentic.verifiers.base import Verdict
from vbench_ray.agentic.verifiers.repair_official_edit import EDIT_POINTS, audio_48k, edit_score, xcorr_lagged

__all__ = [  # the scheme's public names, whichever of its two modules holds them
    "OFFICIAL_POINTS",
    "audio_48k",
    "diagnosis_windows",
    "edit_score",
    "format_score",
    "localization_score",
    "official_profile",
    "official_score",
    "parse_timestamp",
    "probe_summary",
    "xcorr_lagged",
]

OFFICIAL_POINTS = {"format": 5.0, "localization": 35.0, "edit": EDIT_POINTS}
VARIANT = {
    "colour_shift": "v04_color_grade_shift",
    "audio_noise": "v05_noise_floor_spike",
    "repeated_frames": "v06_duplicate_segment",
    "shot_swap": "v03_scene_swap",
}
# lib/tasks/<variant>/task.json "scoring" at f058cd6 (keys score_edit accepts)
VARIANT_SCORING = {
    "v01_frozen_scene": {"w_in": 2.5, "w_out": 1.0},
    "v03_scene_swap": {"w_in": 2.5},
    "v04_color_grade_shift": {"w_in": 2.5, "video_share": 0.9, "audio_share": 0.1},
    "v05_noise_floor_spike": {"w_in": 2.5, "video_share": 0.1, "audio_share": 0.9},
    "v06_duplicate_segment": {"w_in": 2.5},
    "v07_audio_video_desync": {"w_in": 2.5, "w_out": 1.0, "video_share": 0.1, "audio_share": 0.9},
}
EDIT_DEFAULTS = {
    "w_in": 2.5,
    "w_out": 1.0,
    "video_share": 0.6,
    "audio_share": 0.4,
    "sample_fps": 10.0,
    "chunk_s": 10.0,
    "max_lag_ms": 150.0,
    "chroma_norm": 25.0,
    "band": 10,
    "lag_penalty": 0.03,
    "topk": 3,
}
W_SCENE, W_ENDPOINT, W_IOU, DECAY = 5.0 / 35.0, 10.0 / 35.0, 10.0 / 35.0, 3.0

_TS = (
    re.compile(r"^\s*(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)\s*$"),
    re.compile(r"^\s*(\d+):(\d{1,2}(?:\.\d+)?)\s*$"),
    re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$"),
)
_FIELD = re.compile(r"^\s*-\s*(type|start|end)\s*:\s*(.+?)\s*$", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*-\s*window[_\s-]?(\d+)[_\s-]?(start|end)\s*:\s*(.+?)\s*$", re.IGNORECASE)
_DIAGNOSIS = re.compile(r"^\s*##\s+Diagnosis\b", re.IGNORECASE)


# ----------------------------------------------------------------------------- the profile


def official_profile(truth: dict, golden_duration: float) -> dict:
    """What the package's ``profile.json`` would say about this task (see the module docstring)."""
    defect, group = truth.get("defect"), truth.get("group")
    variant = VARIANT.get(defect) or {"timeline": "v06_duplicate_segment", "shot_swap": "v03_scene_swap"}.get(group)
    scenes = [(float(s), float(e)) for s, e in truth.get("scenes") or [[0.0, golden_duration]]]
    prof: dict[str, Any] = {
        "variant": variant or f"(none: {defect})",
        "duration_s": float(golden_duration),
        "scoring": {**EDIT_DEFAULTS, **VARIANT_SCORING.get(variant or "", {})},
    }
    if group == "shot_swap" and not truth.get("segments"):  # no stretches given: one region, the window
        s, e = (float(x) for x in truth["window"])
        prof.update(regions=[(s, e)], region_scenes=[[scenes[_scene_of(scenes, s, e)]]], edit_window=None)
        return prof
    if group == "shot_swap":
        (a, b), (_, c) = truth["segments"]
        first = (float(a), float(a) + (float(c) - float(b)))  # the later stretch, moved first
        second = (first[1], float(c))
        prof.update(regions=[first, second], region_scenes=[[first], [second]], edit_window=None)
        return prof
    if group == "timeline":
        rng = truth["ranges"][0]
        s, e = rng["range"] if isinstance(rng, dict) else rng
        s, e = float(s), float(e)
        i = _scene_of(scenes, s, e)
        hi = scenes[i][1] + (e - s)
        if i + 1 < len(scenes):
            hi = max(hi, scenes[i + 1][1])
        prof.update(regions=[(s, e)], region_scenes=[[(scenes[i][0], hi)]], edit_window=(s, e))
        return prof
    s, e = (float(x) for x in truth["window"])
    prof.update(regions=[(s, e)], region_scenes=[[scenes[_scene_of(scenes, s, e)]]], edit_window=(s, e))
    return prof


def _scene_of(scenes: list[tuple[float, float]], s: float, e: float) -> int:
    """The scene holding most of ``[s, e]`` (the first such; the nearest when none overlaps)."""
    overlaps = [max(0.0, min(e, b) - max(s, a)) for a, b in scenes]
    if max(overlaps) > 0:
        return int(np.argmax(overlaps))
    return int(np.argmin([min(abs(s - b), abs(a - e)) for a, b in scenes]))


# ----------------------------------------------------------------------------- localisation (35)


def parse_timestamp(text: str | None) -> float | None:
    """``HH:MM:SS.mmm``, ``MM:SS.mmm`` or ``SS.mmm`` -> seconds (None if none of these)."""
    if text is None or not str(text).strip():
        return None
    for rx in _TS:
        m = rx.match(str(text).strip())
        if m:
            parts = [float(x) for x in m.groups()]
            return sum(v * 60.0 ** (len(parts) - 1 - i) for i, v in enumerate(parts))
    return None


def _first_fields(lines: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {"type": None, "start": None, "end": None}
    for ln in lines:
        m = _FIELD.match(ln)
        if m and found[m.group(1).lower()] is None:
            found[m.group(1).lower()] = m.group(2).strip()
    return found


def _window(fields: dict) -> tuple[float, float] | None:
    s, e = parse_timestamp(fields.get("start")), parse_timestamp(fields.get("end"))
    return (s, e) if s is not None and e is not None and e > s else None


def diagnosis_windows(text: str, max_windows: int = 12) -> list[tuple[float, float] | None]:
    """``_localize.parse_diagnosis_windows``: numbered ``- window_N_start/end:`` lines; else one window
    per ``## Diagnosis`` block when there are several; else the first ``- start:``/``- end:`` lines
    anywhere in the report."""
    lines = text.splitlines()
    starts: dict[int, str] = {}
    ends: dict[int, str] = {}
    for ln in lines:
        m = _NUMBERED.match(ln)
        if m:
            (starts if m.group(2).lower() == "start" else ends).setdefault(int(m.group(1)), m.group(3).strip())
    if starts or ends:
        return [_window({"start": starts.get(i), "end": ends.get(i)}) for i in sorted(set(starts) | set(ends))][
            :max_windows
        ]
    heads = [i for i, ln in enumerate(lines) if _DIAGNOSIS.match(ln)]
    if len(heads) > 1:
        out = []
        for n, h in enumerate(heads):
            end = heads[n + 1] if n + 1 < len(heads) else len(lines)
            end = next((j for j in range(h + 1, end) if lines[j].lstrip().startswith("## ")), end)
            out.append(_window(_first_fields(lines[h:end])))
        return out[:max_windows]
    w = _window(_first_fields(lines))
    return [w] if w else []


def _region(pred: tuple[float, float], truth: tuple[float, float], scenes: list, points: float) -> dict:
    """One region's points: scene hit 5/35 + start 10/35 exp(-3|ds|) + end 10/35 exp(-3|de|) + IoU 10/35."""
    (p0, p1), (t0, t1) = pred, truth
    inter, union = max(0.0, min(p1, t1) - max(p0, t0)), max(p1, t1) - min(p0, t0)
    iou = inter / union if p1 > p0 and t1 > t0 and union > 0 else 0.0
    hit = any(p1 >= s and p0 <= e for s, e in scenes)
    parts = {
        "scene_hit": points * W_SCENE * hit,
        "start": points * W_ENDPOINT * math.exp(-DECAY * abs(p0 - t0)),
        "end": points * W_ENDPOINT * math.exp(-DECAY * abs(p1 - t1)),
        "iou": points * W_IOU * iou,
    }
    return {
        "score": float(sum(parts.values())),
        "max": points,
        "predicted_window_s": [p0, p1],
        "truth_window_s": [t0, t1],
        "iou": iou,
        "scene_hit": bool(hit),
        "parts": parts,
    }


def localization_score(report: Path, profile: dict, points: float = OFFICIAL_POINTS["localization"]) -> dict:
    """The variant's localisation: one region (first start/end lines anywhere) or, for a shot swap,
    two regions of ``points / 2`` each, each taking its best predicted window."""
    regions, scenes = profile["regions"], profile["region_scenes"]
    base = {"score": 0.0, "max": points, "truth_windows_s": [list(r) for r in regions]}
    if not report.is_file():
        return {**base, "error": "missing report.md"}
    text = report.read_text(encoding="utf-8", errors="replace")
    if len(regions) == 1:
        fields = _first_fields(text.splitlines())
        if not fields["start"] or not fields["end"]:
            return {**base, "error": "report.md has no '- start:' / '- end:' lines"}
        s, e = parse_timestamp(fields["start"]), parse_timestamp(fields["end"])
        if s is None or e is None:
            return {**base, "error": f"unparseable timestamps: start={fields['start']!r}, end={fields['end']!r}"}
        if e <= s:
            return {**base, "predicted_window_s": [s, e], "error": "non-positive window: end <= start"}
        return {**_region((s, e), regions[0], scenes[0], points), "defect_type": fields["type"]}
    preds = [p for p in diagnosis_windows(text, max(2 * len(regions), 12)) if p is not None]
    per = points / len(regions)
    out = []
    for truth, sc in zip(regions, scenes):
        best = None
        for p in preds:
            r = _region(p, truth, sc, per)
            if best is None or r["score"] > best["score"]:
                best = r
        out.append(best or {"score": 0.0, "max": per, "error": "no parseable predicted window"})
    return {**base, "score": float(sum(r["score"] for r in out)), "windows": out, "n_predicted": len(preds)}


# ----------------------------------------------------------------------------- format (5)


def probe_summary(path: Path) -> dict:
    """``format.py``'s ``_summarize`` of an ffprobe: container, codecs, fps, size, duration, sample rate."""
    import av

    with av.open(str(path)) as c:
        v = c.streams.video[0] if c.streams.video else None
        a = c.streams.audio[0] if c.streams.audio else None
        rate = (v.average_rate or v.base_rate) if v is not None else None
        return {
            "container": c.format.name,
            "video_codec": v.codec_context.name if v is not None else None,
            "audio_codec": a.codec_context.name if a is not None else None,
            "fps": float(rate) if rate else None,
            "resolution": [v.codec_context.width, v.codec_context.height] if v is not None else None,
            "duration_s": c.duration / 1e6 if c.duration is not None else None,
            "audio_sample_rate": int(a.codec_context.sample_rate)
            if a is not None and a.codec_context.sample_rate
            else None,
        }


def format_score(
    fixed: Path,
    golden: Path,
    points: float = OFFICIAL_POINTS["format"],
    fps_tol: float = 0.02,
    duration_tol: float = 0.05,
) -> dict:
    """``points * passed / 7`` over the seven items of ``fixed.mp4`` against the source (golden)."""
    try:
        src = probe_summary(golden)
        fix = probe_summary(fixed)
    except Exception as exc:  # the package: any probe failure fails every item
        return {"score": 0.0, "max": points, "error": f"probe failed: {type(exc).__name__}: {exc}"}

    def near(key, tol):
        return fix[key] is not None and src[key] is not None and abs(fix[key] - src[key]) <= tol

    items = {
        k: fix[k] is not None and src[k] is not None and fix[k] == src[k]
        for k in ("container", "video_codec", "audio_codec", "resolution", "audio_sample_rate")
    }
    items.update(fps=near("fps", fps_tol), duration_s=near("duration_s", duration_tol))
    return {
        "score": points * sum(items.values()) / len(items),
        "max": points,
        "items": items,
        "expected": src,
        "actual": fix,
    }


# ----------------------------------------------------------------------------- the score


def official_score(task, submission: Path, cfg: Any, base: dict) -> Verdict:
    """``score.py`` ``score_task``: (format + localization + edit) / 100, each part clipped to its points."""
    golden = task.truth_file(task.truth["golden"])
    fixed = Path(submission) / "fixed.mp4"
    with_fixed = fixed.is_file()
    profile = official_profile(task.truth, probe_summary(golden)["duration_s"] or 0.0)
    fmt = format_score(fixed, golden) if with_fixed else {"score": 0.0, "max": 5.0, "error": "missing fixed.mp4"}
    loc = localization_score(Path(submission) / "report.md", profile)
    edt = (
        edit_score(fixed, golden, profile) if with_fixed else {"score": 0.0, "max": 60.0, "error": "missing fixed.mp4"}
    )
    parts = {"format": fmt, "localization": loc, "edit": edt}
    norm = {k: min(1.0, max(0.0, float(v["score"]) / OFFICIAL_POINTS[k])) for k, v in parts.items()}
    reward = sum(norm[k] * OFFICIAL_POINTS[k] for k in norm) / sum(OFFICIAL_POINTS.values())
    reason = None if with_fixed else "fixed.mp4 is missing from the submission"
    return Verdict(
        float(reward),
        "ok" if with_fixed else "missing",
        {
            **base,
            **({"reason": reason} if reason else {}),
            "official": {
                **parts,
                "normalised": norm,
                "variant": profile["variant"],
                "scoring": {k: profile["scoring"][k] for k in ("video_share", "audio_share", "w_in", "w_out")},
            },
        },
    )
