"""The official AgenticVBench judges' rules, transcribed as test oracles (no project code is used here).

* Assembly: PhiloLabs/agentic-vbench at 4ed7ffc, ``tasks/agentic_vbench_assembly/agentic-vbench-assembly-task1/
  steps/solve/tests/judge.py`` (``score``, ``_check_honesty``, ``_read_frames_around``, ``_ssim_gray``).
* Sequencing: the same commit, ``tasks/agentic_vbench_sequencing/agentic-vbench-sequencing-task1/steps/solve/
  tests/judge.py`` (``score``, ``_metric_nd``, ``_metric_lis``, ``_metric_adj``; its ``_check_honesty`` is the
  assembly judge's, run on every slot).
* Repair: in ``agentic_repair_oracles`` (re-exported here).

Everything else is written from the official code's steps, in its order, with its constants.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np

from helpers.agentic_repair_oracles import (  # noqa: F401  (the repair oracle, re-exported)
    TASK_SCORING,
    fields,
    probe,
    score_edit,
    score_format,
    score_localization,
    score_task,
    ts,
    windows,
)

# ----------------------------------------------------------------------------- assembly judge.py


def _asm_frames(path, t_s, n=5, pre=0.10):
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        return []
    cap.set(cv2.CAP_PROP_POS_MSEC, max(0.0, (t_s - pre) * 1000.0))
    out = []
    for _ in range(n):
        ok, fr = cap.read()
        if not ok:
            break
        h, w = fr.shape[:2]
        if max(h, w) > 360:
            s = 360 / max(h, w)
            fr = cv2.resize(fr, (int(round(w * s)), int(round(h * s))), interpolation=cv2.INTER_AREA)
        out.append(fr)
    cap.release()
    return out


def _asm_ssim(a, b):
    if a.shape != b.shape:
        b = cv2.resize(b, (a.shape[1], a.shape[0]), interpolation=cv2.INTER_AREA)
    a = cv2.cvtColor(a, cv2.COLOR_BGR2GRAY).astype(np.float32)
    b = cv2.cvtColor(b, cv2.COLOR_BGR2GRAY).astype(np.float32)
    C1, C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    g = lambda x: cv2.GaussianBlur(x, (11, 11), 1.5)  # noqa: E731
    ma, mb = g(a), g(b)
    sa, sb, sab = g(a * a) - ma * ma, g(b * b) - mb * mb, g(a * b) - ma * mb
    return float(np.mean((2 * ma * mb + C1) * (2 * sab + C2) / ((ma * ma + mb * mb + C1) * (sa + sb + C2))))


def _asm_honest(mp4, clip, seg):
    try:
        olo, ohi = float(seg["output"][0]), float(seg["output"][1])
        slo, shi = float(seg["source_range"][0]), float(seg["source_range"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return False
    if ohi - olo <= 0 or shi - slo <= 0:
        return False
    for k_i in range(1, 4):
        k = k_i / 4
        fa, fb = _asm_frames(mp4, olo + k * (ohi - olo)), _asm_frames(clip, slo + k * (shi - slo))
        if not fa or not fb:
            return False
        best = 0.0
        for x in fa:
            for y in fb:
                best = max(best, _asm_ssim(x, y))
        if best < 0.95:
            return False
    return True


def assembly_judge(solution_json: Path, solution_mp4: Path, materials: Path, correct: list[str]) -> dict:
    """``judge.py`` ``score``: ``{"reward", "reason"}``."""
    if not solution_json.exists():
        return {"reward": 0.0, "reason": "solution.json not found"}
    try:
        sol = json.loads(solution_json.read_text())
    except json.JSONDecodeError:
        return {"reward": 0.0, "reason": "solution.json invalid JSON"}
    segments = sol.get("segments")
    if not isinstance(segments, list):
        return {"reward": 0.0, "reason": "solution.json: segments not a list"}
    pred = [str(s.get("source", "")).strip() for s in segments]
    pred = [p if p.endswith(".mp4") else f"{p}.mp4" for p in pred]
    n = len(correct)
    if len(pred) != n:
        return {"reward": 0.0, "reason": f"slot count mismatch: expected {n}, got {len(pred)}"}
    if not solution_mp4.exists():
        return {"reward": 0.0, "reason": "solution.mp4 not found"}
    honest = 0
    for i in range(n):
        if pred[i] == correct[i] and (materials / pred[i]).exists():
            honest += _asm_honest(solution_mp4, materials / pred[i], segments[i])
    p = honest / n
    return {"reward": max(0.0, (p - 1 / 3) / (1 - 1 / 3)), "reason": "ok"}


# ----------------------------------------------------------------------------- sequencing judge.py


def sequencing_judge(solution_json: Path, solution_mp4: Path, materials: Path, correct: list[str]) -> dict:
    """``judge.py`` ``score``: ``{"reward", "reason", "ordering", "honesty"}``; ``correct`` as its
    ``CORRECT_ORDER`` (clip numbers as text), the clips ``materials/<entry>.mp4``."""
    if not solution_json.exists():
        return {"reward": 0.0, "reason": "solution.json not found"}
    try:
        sol = json.loads(solution_json.read_text())
    except json.JSONDecodeError:
        return {"reward": 0.0, "reason": "solution.json invalid JSON"}
    segments = sol.get("segments")
    if not isinstance(segments, list):
        return {"reward": 0.0, "reason": "solution.json: segments not a list"}
    pred = [str(s.get("source", "")) for s in segments]
    n = len(correct)
    if len(pred) != n:
        return {"reward": 0.0, "reason": "slot count mismatch"}
    if sorted(pred) != sorted(correct):
        return {"reward": 0.0, "reason": "slot set mismatch"}
    pos = {c: i for i, c in enumerate(pred)}
    nd = sum(abs(pos[c] - i) for i, c in enumerate(correct)) / ((n * n) // 2) if (n * n) // 2 else 0.0
    rank = {c: i for i, c in enumerate(correct)}
    tails: list = []
    for x in [rank[c] for c in pred]:
        lo, hi = 0, len(tails)
        while lo < hi:  # bisect_left
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if tails[mid] < x else (lo, mid)
        tails[lo : lo + 1] = [x]
    lis = len(tails) / len(pred)
    adj = (
        1.0
        if n <= 1
        else sum(pos.get(correct[i + 1], -2) - pos.get(correct[i], -1) == 1 for i in range(n - 1)) / (n - 1)
    )
    ordering = (1.0 - nd) * adj * lis
    if not solution_mp4.exists():
        return {"reward": 0.0, "reason": "solution.mp4 not found", "ordering": ordering}
    honest = sum(
        bool(
            (materials / f"{pred[i]}.mp4").exists()
            and _asm_honest(solution_mp4, materials / f"{pred[i]}.mp4", segments[i])
        )
        for i in range(n)
    )
    return {"reward": honest / n * ordering, "reason": "ok", "ordering": ordering, "honesty": honest / n}


# ----------------------------------------------------------------------------- repurpose pillar 0
# PhiloLabs/agentic-vbench at 3fad058, tasks/agentic_vbench_repurpose/boxing/steps/solve/tests/judge.py:
# infer_format_check (the ID-prefix rules), _check_duration, _check_resolution, _check_container,
# _check_audio_present. The rubric's ``criterion`` is the project's item ``text``.


def format_kind(item: dict) -> str:
    iid = (item.get("id") or "").upper()
    for kind, tags in (
        ("audio_present", ("AUDIO-PRESENT", "AUDIO_PRESENT")),
        ("fps", ("FRAMERATE", "FPS")),
        ("resolution", ("RES", "VERTICAL", "HORIZONTAL", "LANDSCAPE", "PORTRAIT", "ASPECT")),
        ("video_codec", ("VIDEO-CODEC", "VIDEO_CODEC")),
        ("audio_codec", ("AUDIO-CODEC", "AUDIO_CODEC")),
        ("container", ("CONTAINER",)),
        ("duration", ("DUR", "RUNTIME")),
    ):
        if any(t in iid for t in tags):
            return kind
    return ""


def check_duration(dur: float, text: str) -> bool:
    t = text.lower()
    rng = re.search(
        r"(\d+(?:\.\d+)?)\s*(?:s\b|sec\b|seconds?\b)\s*(?:[–-]|\s+and\s+|\s+to\s+)\s*(\d+(?:\.\d+)?)\s*(?:s\b|sec|seconds)",
        t,
    ) or re.search(r"(\d+(?:\.\d+)?)\s*(?:[–-]|\s+and\s+|\s+to\s+)\s*(\d+(?:\.\d+)?)\s*(?:s\b|sec|seconds)", t)
    if rng and 1 < float(rng.group(1)) < float(rng.group(2)) < 600:
        return float(rng.group(1)) <= dur <= float(rng.group(2))
    pm = re.search(r"(\d+(?:\.\d+)?)\s*(?:s\b|sec|seconds)\s*[±+\-]\s*(\d+(?:\.\d+)?)\s*(?:s\b|sec|seconds)?", t)
    if pm:
        return abs(dur - float(pm.group(1))) <= float(pm.group(2))
    plausible = [
        float(m) for m in re.findall(r"(\d+(?:\.\d+)?)[\s-]*(?:s\b|sec\b|seconds?\b)", t) if 5 < float(m) < 600
    ]
    if plausible:
        return abs(dur - max(plausible)) <= 2.0
    return 58.0 <= dur <= 62.0


def check_resolution(w: int, h: int, sar: str, text: str) -> bool:
    try:
        n, d = sar.split(":") if ":" in sar else ("1", "1")
        ratio = float(n) / float(d) if float(d) > 0 else 1.0
    except ValueError:
        ratio = 1.0
    square = sar in ("0:1", "") or abs(ratio - 1.0) < 0.02
    targets = [(int(a), int(b)) for a, b in re.findall(r"(\d{3,4})\s*[x×]\s*(\d{3,4})", text)]
    if targets:
        return (w, h) in targets and square
    low = text.lower()
    if "aspect ratio" in low or "width-to-height" in low or "width to height" in low:
        m = re.search(r"(\d+(?:\.\d+)?)\s*(?:[–-]|\s+and\s+|\s+to\s+)\s*(\d+(?:\.\d+)?)", text)
        if m and w > 0 and h > 0 and 0.1 < float(m.group(1)) < float(m.group(2)) < 10:
            return float(m.group(1)) <= w / h <= float(m.group(2)) and square
    return (w, h) == (1920, 1080) and square


def pillar0(item: dict, path: Path) -> bool:
    """The official pillar-0 verdict of one format item on the deliverable at ``path``."""
    import av

    with av.open(str(path)) as c:
        v = c.streams.video[0] if c.streams.video else None
        has_audio = bool(c.streams.audio)
        fmt, dur = c.format.name, (c.duration or 0) / 1e6
        w, h = (v.codec_context.width, v.codec_context.height) if v else (0, 0)
        sar = v.sample_aspect_ratio if v is not None else None
    sar_s = f"{sar.numerator}:{sar.denominator}" if sar else "1:1"
    kind = format_kind(item)
    if kind == "duration":
        return check_duration(dur, item["text"])
    if kind == "resolution":
        return check_resolution(w, h, sar_s, item["text"])
    if kind == "container":
        return "mp4" in fmt.lower() or "mov" in fmt.lower()
    if kind == "audio_present":
        return has_audio
    return False  # "no deterministic check wired"
