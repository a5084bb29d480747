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

OFFICIAL_POINTS = {"format": 5.0, "localization": 35.0, "edit": 60.0}
AUDIO_SR = 48000
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


# ----------------------------------------------------------------------------- edit (60)


def audio_48k(path: Path) -> np.ndarray:
    """The first audio stream, mono, resampled to 48 kHz and quantised to 16 bits, as float32 in [-1, 1)."""
    import av

    with av.open(str(path)) as c:
        if not c.streams.audio:
            raise RuntimeError(f"{Path(path).name}: no audio stream to extract")
        res = av.AudioResampler(format="s16", layout="mono", rate=AUDIO_SR)
        parts = []
        for frame in c.decode(c.streams.audio[0]):
            parts.extend(f.to_ndarray().reshape(-1) for f in res.resample(frame))
        parts.extend(f.to_ndarray().reshape(-1) for f in res.resample(None))
    pcm = np.concatenate(parts) if parts else np.zeros(0, np.int16)
    return pcm.astype(np.float32) / 32768.0


def xcorr_lagged(a: np.ndarray, b: np.ndarray, sr: int, max_lag_ms: float = 150.0) -> float | None:
    """Peak of the normalised cross-correlation within +-``max_lag_ms``, times ``max(0, 1 - |lag| /
    max_lag)``, clamped to [0, 1] (two silent signals: 1; None for empty ones)."""
    from scipy.signal import correlate

    n = min(len(a), len(b))
    if n == 0:
        return None
    a, b = np.asarray(a[:n]), np.asarray(b[:n])
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na * nb <= 0.0:
        return 0.0
    xc = correlate(a, b, mode="full", method="fft")
    centre, max_lag = n - 1, max(1, int(round(max_lag_ms * 1e-3 * sr)))
    lo, hi = max(0, centre - max_lag), min(len(xc), centre + max_lag + 1)
    k = int(np.argmax(xc[lo:hi]))
    lag = lo + k - centre
    return float(max(0.0, min(1.0, float(xc[lo + k]) / (na * nb) * max(0.0, 1.0 - abs(lag) / max_lag))))


def _features(bgr: np.ndarray) -> dict:
    import cv2

    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    small = cv2.resize(gray, (9, 8), interpolation=cv2.INTER_AREA)
    return {
        "gray": gray,
        "ab": cv2.cvtColor(bgr, cv2.COLOR_BGR2LAB)[..., 1:3].astype(np.int16),
        "lap": float(cv2.Laplacian(gray, cv2.CV_64F).var()),
        "dhash": (small[:, 1:] > small[:, :-1]).reshape(-1),
    }


def _match(f: dict, s: dict, lag: int, sc: dict) -> float:
    """``SSIM(grey) * min(1, lap_f / lap_s) * max(0, 1 - mean|ab_f - ab_s| / 25) * max(0, 1 - 0.03 |lag|)``."""
    from skimage.metrics import structural_similarity

    ssim = float(structural_similarity(s["gray"], f["gray"], data_range=255))
    sharp = min(1.0, f["lap"] / s["lap"]) if s["lap"] > 1.0 else 1.0
    chroma = max(0.0, 1.0 - float(np.mean(np.abs(s["ab"] - f["ab"]))) / max(sc["chroma_norm"], 1e-6))
    return ssim * sharp * chroma * max(0.0, 1.0 - sc["lag_penalty"] * abs(lag))


def _video_chunk(fixed: Path, golden: Path, start: float, end: float, window, sc: dict) -> tuple[list, list]:
    """Per sampled output frame of one chunk, its best lag-penalised match among the golden's frames
    within the band, split into (in window, outside)."""
    import cv2

    cap_s, cap_f = cv2.VideoCapture(str(golden)), cv2.VideoCapture(str(fixed))
    try:
        if not cap_s.isOpened() or not cap_f.isOpened():
            raise RuntimeError("cv2 open failed")
        src_w, src_h = int(cap_s.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap_s.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fps_s = cap_s.get(cv2.CAP_PROP_FPS) or 24.0
        fps_f = cap_f.get(cv2.CAP_PROP_FPS) or fps_s
        skip_f = max(1, int(round(fps_f / sc["sample_fps"])))
        dur = end - start
        n_wanted = max(2, int(round(dur * sc["sample_fps"])))
        n_src, n_fix = int(round(dur * fps_s)), int(round(dur * fps_f))
        cap_s.set(cv2.CAP_PROP_POS_MSEC, start * 1000.0)
        cap_f.set(cv2.CAP_PROP_POS_MSEC, start * 1000.0)
        src: dict[int, dict] = {}  # the band of golden frames: index in the chunk -> features
        n_read, src_done = 0, False
        band = int(sc["band"])
        vals_in, vals_out = [], []
        for i in range(n_fix):
            ok, fr = cap_f.read()
            if not ok:
                break
            if i % skip_f:
                continue
            while not src_done and n_read < min(n_src, i + band + 1):
                ok_s, fs = cap_s.read()
                if not ok_s:
                    src_done = True
                    break
                src[n_read] = _features(fs)
                n_read += 1
            for old in [k for k in src if k < i - band]:
                del src[old]
            if n_read == 0:
                break
            if fr.shape[:2] != (src_h, src_w):
                fr = cv2.resize(fr, (src_w, src_h), interpolation=cv2.INTER_AREA)
            f = _features(fr)
            lo, hi = max(0, i - band), min(n_read, i + band + 1)
            if lo >= hi:
                continue
            keys = list(range(lo, hi))
            if 0 < sc["topk"] and hi - lo > sc["topk"] + 1:
                keys = sorted(keys, key=lambda k: int(np.sum(f["dhash"] != src[k]["dhash"])))[: int(sc["topk"])]
                if lo <= i < hi and i not in keys:
                    keys.append(i)
            best = max(_match(f, src[k], k - i, sc) for k in keys)
            ts = start + i / fps_f
            (vals_in if window is not None and window[0] <= ts <= window[1] else vals_out).append(best)
            if len(vals_in) + len(vals_out) >= n_wanted:
                break
        return vals_in, vals_out
    finally:
        cap_s.release()
        cap_f.release()


def edit_score(fixed: Path, golden: Path, profile: dict, points: float = OFFICIAL_POINTS["edit"]) -> dict:
    """``edit.py`` ``score_edit``: 10 s chunks over the golden's duration; video: the mean best match of
    ~10 sampled frames per second, per chunk clamped to [0, 1]; audio: :func:`xcorr_lagged` at 48 kHz in
    and out of the edit window; chunk values pooled (frames by count, audio by duration). Each modality's
    budget (``video_share`` / ``audio_share`` of the points) loses ``w_in`` x its shortfall in the window
    and ``w_out`` x outside it, floored at 0. A chunk that raises (e.g. no audio stream) fails; all
    failed -> 0."""
    sc, window = profile["scoring"], profile["edit_window"]
    duration = profile["duration_s"]
    chunks, t = [], 0.0
    while t < duration - 1e-6:
        chunks.append((t, min(t + sc["chunk_s"], duration)))
        t += sc["chunk_s"]
    audio: dict[str, np.ndarray] = {}
    rows, errors = [], []
    for start, end in chunks:
        try:
            v_in, v_out = _video_chunk(fixed, golden, start, end, window, sc)
            for key, path in (("fixed", fixed), ("golden", golden)):
                if key not in audio:
                    audio[key] = audio_48k(path)
            # ffmpeg -ss {start:.3f} -t {duration:.3f}: times to the millisecond
            s0 = int(round(float(f"{start:.3f}") * AUDIO_SR))
            s1 = s0 + int(round(float(f"{end - start:.3f}") * AUDIO_SR))
            a, b = audio["fixed"][s0:s1], audio["golden"][s0:s1]
            n = min(len(a), len(b))
            a, b = a[:n], b[:n]
            row = {
                "n_in": len(v_in),
                "n_out": len(v_out),
                "v_in": min(1.0, max(0.0, float(np.mean(v_in)))) if v_in else None,
                "v_out": min(1.0, max(0.0, float(np.mean(v_out)))) if v_out else None,
            }
            if window is not None and end > window[0] and start < window[1]:
                w0, w1 = max(start, window[0]), min(end, window[1])
                i0 = max(0, min(n, int(round((w0 - start) * AUDIO_SR))))
                i1 = max(0, min(n, int(round((w1 - start) * AUDIO_SR))))
                row.update(
                    a_in=xcorr_lagged(a[i0:i1], b[i0:i1], AUDIO_SR, sc["max_lag_ms"]),
                    a_out=xcorr_lagged(
                        np.concatenate([a[:i0], a[i1:]]), np.concatenate([b[:i0], b[i1:]]), AUDIO_SR, sc["max_lag_ms"]
                    ),
                    d_in=w1 - w0,
                    d_out=(end - start) - (w1 - w0),
                )
            else:
                row.update(a_in=None, a_out=xcorr_lagged(a, b, AUDIO_SR, sc["max_lag_ms"]), d_in=0.0, d_out=end - start)
            rows.append(row)
        except Exception as exc:  # the package's per-chunk worker: an error fails the chunk
            errors.append(f"chunk [{start:g}, {end:g}] failed: {type(exc).__name__}: {exc}")
    base = {"max": points, "edit_window_s": list(window) if window else None, "n_chunks": len(chunks)}
    if not rows:
        return {**base, "score": 0.0, "error": f"all {len(chunks)} chunks failed", "chunk_errors": errors[:5]}

    def pooled(key, weight):
        pairs = [(r[key], r[weight]) for r in rows if r[key] is not None and r[weight] > 0]
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

    def deduct(sig_in, sig_out, budget):
        d_in = min(budget, sc["w_in"] * budget * max(0.0, 1.0 - sig_in)) if sig_in is not None else 0.0
        d_out = min(budget, sc["w_out"] * budget * max(0.0, 1.0 - sig_out)) if sig_out is not None else 0.0
        return max(0.0, budget - d_in - d_out)

    ssim_in, ssim_out = pooled("v_in", "n_in"), pooled("v_out", "n_out")
    x_in, x_out = pooled("a_in", "d_in"), pooled("a_out", "d_out")
    video = deduct(ssim_in, ssim_out, points * sc["video_share"])
    aud = deduct(x_in, x_out, points * sc["audio_share"])
    return {
        **base,
        "score": float(video + aud),
        "n_failed_chunks": len(errors),
        "video": {"sub": video, "ssim_in": ssim_in, "ssim_out": ssim_out, "share": sc["video_share"]},
        "audio": {"sub": aud, "xcorr_in": x_in, "xcorr_out": x_out, "share": sc["audio_share"]},
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
