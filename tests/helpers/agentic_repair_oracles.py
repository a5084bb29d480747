"""The official AgenticVBench repair verifier's rules, transcribed as test oracles (no project code is used here).

* Repair: PhiloLabs/AgentVBench at f058cd6, ``verifiers/repair/score.py`` (``score_task``,
  ``_edit_kwargs_for``), ``lib/rubrics/format.py`` (``score_format``), ``lib/rubrics/_localize.py``
  (``parse_diagnosis``, ``parse_diagnosis_windows``, ``score_with_scene``, ``score_with_scene_multi``),
  ``lib/tasks/v03_scene_swap|v04_color_grade_shift|v05_noise_floor_spike|v06_duplicate_segment/localize.py``
  and ``task.json``, ``lib/rubrics/edit.py`` (``score_edit``, ``_score_chunk_worker``, ``_injection_window``).

The package calls ffprobe / ffmpeg; these machines have neither binary, so their two uses are stood in
by PyAV (the same libav* libraries): the probe's fields, and ``ffmpeg -ss S -t D -i F -ac 1 -ar 48000
pcm_s16le`` as decode -> libswresample to mono 48 kHz s16 -> the samples from S for D seconds.
Everything else is written from the official code's steps, in its order, with its constants.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import cv2
import numpy as np


# ----------------------------------------------------------------------------- repair: format.py


def probe(path: Path) -> dict:
    """ffprobe's ``format.format_name/duration`` and first video/audio stream fields, via PyAV."""
    import av

    with av.open(str(path)) as c:
        v = c.streams.video[0] if c.streams.video else None
        a = c.streams.audio[0] if c.streams.audio else None
        fps = None
        if v is not None:
            fps = float(v.average_rate) if v.average_rate else (float(v.base_rate) if v.base_rate else None)
        return {
            "container": c.format.name,
            "video_codec": v.codec_context.name if v else None,
            "audio_codec": a.codec_context.name if a else None,
            "fps": fps,
            "resolution": [v.codec_context.width, v.codec_context.height] if v else None,
            "duration_s": c.duration / 1e6 if c.duration is not None else None,
            "audio_sample_rate": (a.codec_context.sample_rate or None) if a else None,
        }


def score_format(fixed: Path, source: Path) -> float:
    src, fix = probe(source), probe(fixed)
    eq = lambda a, b: a is not None and b is not None and a == b  # noqa: E731
    near = lambda a, b, t: a is not None and b is not None and abs(a - b) <= t  # noqa: E731
    items = [
        eq(fix["container"], src["container"]),
        eq(fix["video_codec"], src["video_codec"]),
        eq(fix["audio_codec"], src["audio_codec"]),
        near(fix["fps"], src["fps"], 0.02),
        eq(fix["resolution"], src["resolution"]),
        near(fix["duration_s"], src["duration_s"], 0.05),
        eq(fix["audio_sample_rate"], src["audio_sample_rate"]),
    ]
    return 5 * sum(items) / 7


# ----------------------------------------------------------------------------- repair: _localize.py

_HMS = re.compile(r"^\s*(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)\s*$")
_MS = re.compile(r"^\s*(\d+):(\d{1,2}(?:\.\d+)?)\s*$")
_SEC = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$")
_FIELD = re.compile(r"^\s*-\s*(type|start|end)\s*:\s*(.+?)\s*$", re.IGNORECASE)
_WIN = re.compile(r"^\s*-\s*window[_\s-]?(\d+)[_\s-]?(start|end)\s*:\s*(.+?)\s*$", re.IGNORECASE)
_HEAD = re.compile(r"^\s*##\s+Diagnosis\b", re.IGNORECASE)


def ts(raw):
    if raw is None or not str(raw).strip():
        return None
    s = str(raw).strip()
    m = _HMS.match(s)
    if m:
        return float(m.group(1)) * 3600 + float(m.group(2)) * 60 + float(m.group(3))
    m = _MS.match(s)
    if m:
        return float(m.group(1)) * 60 + float(m.group(2))
    m = _SEC.match(s)
    return float(m.group(1)) if m else None


def fields(text: str) -> dict:
    found = {"type": None, "start": None, "end": None}
    for line in text.splitlines():
        m = _FIELD.match(line)
        if m and found[m.group(1).lower()] is None:
            found[m.group(1).lower()] = m.group(2).strip()
    return found


def windows(text: str, max_windows: int) -> list:
    starts, ends = {}, {}
    for line in text.splitlines():
        m = _WIN.match(line)
        if m:
            target = starts if m.group(2).lower() == "start" else ends
            target.setdefault(int(m.group(1)), m.group(3).strip())
    if starts or ends:
        out = []
        for i in sorted(set(starts) | set(ends)):
            s, e = ts(starts.get(i)), ts(ends.get(i))
            out.append(None if s is None or e is None or e <= s else (s, e))
            if len(out) >= max_windows:
                break
        return out
    lines = text.splitlines()
    heads = [i for i, ln in enumerate(lines) if _HEAD.match(ln)]
    if len(heads) > 1:
        out = []
        for i, h in enumerate(heads):
            end = heads[i + 1] if i + 1 < len(heads) else len(lines)
            for j in range(h + 1, end):
                if lines[j].lstrip().startswith("## ") and not _HEAD.match(lines[j]):
                    end = j
                    break
            f = fields("\n".join(lines[h:end]))
            s, e = ts(f["start"]), ts(f["end"])
            out.append(None if s is None or e is None or e <= s else (s, e))
            if len(out) >= max_windows:
                break
        return out
    f = fields(text)
    s, e = ts(f["start"]), ts(f["end"])
    return [] if s is None or e is None or e <= s else [(s, e)]


def _iou(p, t):
    if p[1] <= p[0] or t[1] <= t[0]:
        return 0.0
    union = max(p[1], t[1]) - min(p[0], t[0])
    return max(0.0, min(p[1], t[1]) - max(p[0], t[0])) / union if union > 0 else 0.0


def _one(p, truth, scenes, pts):
    hit = any(p[1] >= s and p[0] <= e for s, e in scenes)
    return (
        pts * 5 / 35 * hit
        + pts * 10 / 35 * math.exp(-3 * abs(p[0] - truth[0]))
        + pts * 10 / 35 * math.exp(-3 * abs(p[1] - truth[1]))
        + pts * 10 / 35 * _iou(p, truth)
    )


def score_localization(report: Path, profile: dict, variant: str) -> float:
    if not report.exists():
        return 0.0
    inj = profile["injection"]
    if variant == "v03_scene_swap":
        groups = {"A": [], "B": []}
        i = 1
        while (entry := inj.get(f"scene_{i}")) is not None:
            if entry.get("group") in groups:
                groups[entry["group"]].append((float(entry["broken_start_s"]), float(entry["broken_end_s"])))
            i += 1
        regions = [
            ((min(s for s, _ in sorted(groups[g])), max(e for _, e in groups[g])), sorted(groups[g]))
            for g in ("A", "B")
        ]
        preds = [p for p in windows(report.read_text(), max(2 * len(regions), 12)) if p is not None]
        per = 35 / len(regions)
        return sum(max((_one(p, t, sc, per) for p in preds), default=0.0) for t, sc in regions)
    truth = (float(inj["start_s"]), float(inj["end_s"]))
    if variant == "v06_duplicate_segment":
        lo = float(inj["target_scene"]["start_s"])
        hi = float(inj["target_scene"]["end_s"]) + float(inj["duration_s"])
        if inj.get("next_scene"):
            hi = max(hi, float(inj["next_scene"]["end_s"]))
        scenes = [(lo, hi)]
    else:
        sc = profile["narrative"]["scene_list"][int(inj["target_scene_index"])]
        scenes = [(float(sc["start_s"]), float(sc["end_s"]))]
    f = fields(report.read_text())
    if not f["start"] or not f["end"]:
        return 0.0
    s, e = ts(f["start"]), ts(f["end"])
    if s is None or e is None or e <= s:
        return 0.0
    return _one((s, e), truth, scenes, 35)


# ----------------------------------------------------------------------------- repair: edit.py

TASK_SCORING = {
    "v03_scene_swap": {"w_in": 2.5},
    "v06_duplicate_segment": {"w_in": 2.5},
    "v04_color_grade_shift": {"w_in": 2.5, "video_share": 0.90, "audio_share": 0.10},
    "v05_noise_floor_spike": {"w_in": 2.5, "video_share": 0.10, "audio_share": 0.90},
}


def _wav48k(path: str, start: float, duration: float) -> np.ndarray:
    """``ffmpeg -ss {start:.3f} -t {duration:.3f} -i path -ac 1 -ar 48000 pcm_s16le`` (see the docstring)."""
    import av

    with av.open(path) as c:
        if not c.streams.audio:
            raise RuntimeError("ffmpeg audio extract failed: no audio stream")
        rs = av.AudioResampler(format="s16", layout="mono", rate=48000)
        pcm = []
        for fr in c.decode(c.streams.audio[0]):
            pcm += [x.to_ndarray().ravel() for x in rs.resample(fr)]
        pcm += [x.to_ndarray().ravel() for x in rs.resample(None)]
    pcm = np.concatenate(pcm)
    a = int(round(float(f"{start:.3f}") * 48000))
    return pcm[a : a + int(round(float(f"{duration:.3f}") * 48000))].astype(np.float32) / 32768.0


def _dh(g):
    r = cv2.resize(g, (9, 8), interpolation=cv2.INTER_AREA)
    return np.packbits((r[:, 1:] > r[:, :-1]).astype(np.uint8).flatten())


def _ham(a, b):
    return int(np.unpackbits(np.bitwise_xor(a, b)).sum())


def _xc(a, b, max_ms=150.0):
    from scipy.signal import correlate

    n = min(a.size, b.size)
    if n == 0:
        return None
    a, b = a[:n], b[:n]
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na * nb <= 0.0:
        return 0.0
    xc = correlate(a, b, mode="full", method="fft")
    c, ml = n - 1, max(1, int(round(max_ms * 1e-3 * 48000)))
    lo, hi = max(0, c - ml), min(len(xc), c + ml + 1)
    w = xc[lo:hi]
    k = int(np.argmax(w))
    return max(0.0, min(1.0, float(w[k]) / (na * nb) * max(0.0, 1.0 - abs(lo + k - c) / float(ml))))


def _chunk(fixed, source, s0, s1, gt):
    from skimage.metrics import structural_similarity as ssim

    dur = s1 - s0
    cs, cf = cv2.VideoCapture(source), cv2.VideoCapture(fixed)
    w, h = int(cs.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cs.get(cv2.CAP_PROP_FRAME_HEIGHT))
    fs = cs.get(cv2.CAP_PROP_FPS) or 24.0
    ff = cf.get(cv2.CAP_PROP_FPS) or fs
    skip = max(1, int(round(ff / 10.0)))
    want = max(2, int(round(dur * 10.0)))
    cs.set(cv2.CAP_PROP_POS_MSEC, s0 * 1000.0)
    src = []
    for _ in range(int(round(dur * fs))):
        ok, fr = cs.read()
        if not ok:
            break
        g = cv2.cvtColor(fr, cv2.COLOR_BGR2GRAY)
        src.append(
            (g, cv2.cvtColor(fr, cv2.COLOR_BGR2LAB)[..., 1:3].copy(), float(cv2.Laplacian(g, cv2.CV_64F).var()), _dh(g))
        )
    cf.set(cv2.CAP_PROP_POS_MSEC, s0 * 1000.0)
    vin, vout = [], []
    for i in range(int(round(dur * ff))):
        ok, fr = cf.read()
        if not ok:
            break
        if i % skip:
            continue
        if not src:
            break
        if fr.shape[:2] != (h, w):
            fr = cv2.resize(fr, (w, h), interpolation=cv2.INTER_AREA)
        g = cv2.cvtColor(fr, cv2.COLOR_BGR2GRAY)
        ab, lap = cv2.cvtColor(fr, cv2.COLOR_BGR2LAB)[..., 1:3], float(cv2.Laplacian(g, cv2.CV_64F).var())
        lo, hi = max(0, i - 10), min(len(src), i + 11)
        if lo >= hi:
            continue
        keys = list(range(lo, hi))
        if hi - lo > 4:
            d = _dh(g)
            keys = sorted(keys, key=lambda k: _ham(d, src[k][3]))[:3]
            if lo <= i < hi and i not in keys:
                keys.append(i)
        best = -1.0
        for k in keys:
            sg, sab, slap, _ = src[k]
            v = float(ssim(sg, g, data_range=255)) * (min(1.0, lap / slap) if slap > 1.0 else 1.0)
            v *= max(0.0, 1.0 - float(np.mean(np.abs(sab.astype(np.int16) - ab.astype(np.int16)))) / 25.0)
            v *= max(0.0, 1.0 - 0.03 * abs(k - i))
            best = max(best, v)
        t = s0 + i / ff
        (vin if gt is not None and gt[0] <= t <= gt[1] else vout).append(best)
        if len(vin) + len(vout) >= want:
            break
    cs.release()
    cf.release()
    a, b = _wav48k(fixed, s0, dur), _wav48k(source, s0, dur)
    n = min(a.size, b.size)
    a, b = a[:n], b[:n]
    r = {
        "n_in": len(vin),
        "n_out": len(vout),
        "v_in": min(1.0, max(0.0, float(np.mean(vin)))) if vin else None,
        "v_out": min(1.0, max(0.0, float(np.mean(vout)))) if vout else None,
    }
    if gt is not None and s1 > gt[0] and s0 < gt[1]:
        o0, o1 = max(s0, gt[0]), min(s1, gt[1])
        i0 = max(0, min(n, int(round((o0 - s0) * 48000))))
        i1 = max(0, min(n, int(round((o1 - s0) * 48000))))
        r.update(
            a_in=_xc(a[i0:i1], b[i0:i1]),
            a_out=_xc(np.concatenate([a[:i0], a[i1:]]), np.concatenate([b[:i0], b[i1:]])),
            d_in=o1 - o0,
            d_out=dur - (o1 - o0),
        )
    else:
        r.update(a_in=None, a_out=_xc(a, b), d_in=0.0, d_out=dur)
    return r


def score_edit(fixed: Path, source: Path, profile: dict, variant: str) -> float:
    sc = {"w_in": 2.5, "w_out": 1.0, "video_share": 0.6, "audio_share": 0.4, **TASK_SCORING.get(variant, {})}
    inj = profile["injection"]
    try:  # _injection_window: a swap profile without scene_4/original_start_s falls back to None
        gt = (
            (float(inj["scene_1"]["original_start_s"]), float(inj["scene_4"]["original_end_s"]))
            if inj.get("variant") == "v03_scene_swap"
            else (float(inj["start_s"]), float(inj["end_s"]))
        )
    except (KeyError, TypeError, ValueError):
        gt = None
    d = float(profile["format"]["duration_s"])
    chunks, t = [], 0.0
    while t < d - 1e-6:
        chunks.append((t, min(t + 10.0, d)))
        t += 10.0
    rows = []
    for s0, s1 in chunks:
        try:
            rows.append(_chunk(str(fixed), str(source), s0, s1, gt))
        except Exception:
            pass
    if not rows:
        return 0.0

    def wm(k, wk):
        num = den = 0.0
        for r in rows:
            if r[k] is None or (r[wk] or 0) <= 0:
                continue
            num += r[k] * r[wk]
            den += r[wk]
        return num / den if den > 0 else None

    def sub(si, so, budget):
        di = min(budget, sc["w_in"] * budget * max(0.0, 1.0 - si)) if si is not None else 0.0
        do = min(budget, sc["w_out"] * budget * max(0.0, 1.0 - so)) if so is not None else 0.0
        return max(0.0, budget - di - do)

    return sub(wm("v_in", "n_in"), wm("v_out", "n_out"), 60 * sc["video_share"]) + sub(
        wm("a_in", "d_in"), wm("a_out", "d_out"), 60 * sc["audio_share"]
    )


def score_task(fixed: Path, report: Path, source: Path, profile: dict, variant: str) -> dict:
    """``score.py`` ``score_task``: the three parts (points) and ``final_score``."""
    fmt = score_format(fixed, source) if fixed.exists() else 0.0
    loc = score_localization(report, profile, variant)
    edt = score_edit(fixed, source, profile, variant) if fixed.exists() else 0.0
    norm = [min(1.0, max(0.0, fmt / 5)), min(1.0, max(0.0, loc / 35)), min(1.0, max(0.0, edt / 60))]
    return {"format": fmt, "localization": loc, "edit": edt, "final": (norm[0] * 5 + norm[1] * 35 + norm[2] * 60) / 100}
