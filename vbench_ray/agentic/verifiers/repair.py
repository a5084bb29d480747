"""Repair verifier (paper §2.5, App. H.1 "Family 2: Repair").

Every measurement ``M`` is placed between the broken input (0) and the golden reference (1):
``s = clip((M_out - M_broken) / (M_golden - M_broken), 0, 1)``, sign flipped where lower is better
(:func:`~vbench_ray.agentic.verifiers.measures.rescale`). Per defect group (``truth.json`` ``group``):

* ``visual`` (colour shift, blur) and ``audio`` (noise, echo, clipping), H.1.1-H.1.2: the corruption
  sits in a known window; ``reward = 0.9 s_in + 0.1 s_out``. Visual: PSNR and SSIM per frame inside the
  window (``repair.visual_metrics``); audio: SI-SDR, LSD and an envelope-correlation intelligibility
  proxy (``repair.audio_metrics``; see :mod:`measures` for the substitutions of PESQ-WB / STOI / SRMR).
  ``s`` per region is the mean over the measurements. ``s_out`` measures the clean region outside the
  window against the golden; since broken and golden are identical there, its lower anchor
  ``M_broken`` is the broken input's value *inside* the window (changing the clean region as much as
  the defect changed the window scores 0). The paper leaves this anchor unstated.
* ``shot_swap`` (H.1.2): whole-video PSNR against the golden (time-aligned frames, PSNR of their pooled
  mean squared error), times a length penalty
  when the output is more than 10% shorter or longer than the golden: the factor falls linearly from 1
  at 10% to 0 at 20% (the paper names the penalty, not its shape).
* ``timeline`` (repeated frames, filler words, wrong sentences; H.1.3): the agent reports time ranges
  to cut (``solution.json``: ``{"ranges": [[start_s, end_s], ...]}`` in the broken video's time). Range
  match: for each ground-truth range the closest unused predicted range is accepted iff both endpoints
  are within the task's ``tolerance_s``; the score is the fraction of ground-truth ranges matched
  (``repair.range_score=f1``: the F1 of matched ranges, the official runner's range-F1). Gates: the
  honesty check (the broken video minus the reported ranges must match the rendered output: frame
  count within ``honesty_frame_slack`` and every frame's SSIM >= ``honesty_ssim``) and the audio check
  (the normalised cross-correlation of the output audio with the broken audio minus the ranges, over
  the whole track and every 0.5 s of it, >= ``xcorr_threshold``); either failing sets the reward to 0.

Hard gates (H.1.4), checked first, each scoring 0 with the reason in ``details``: ``fixed.mp4`` missing
or undecodable; container or codec not the task spec's; audio missing, or its sample rate not the
spec's; a frame size other than the clip's (the measurements compare frames pixel by pixel); duration beyond ``duration_gate`` of the golden; malformed ranges (timeline); a verbatim copy
(same bytes) or near-verbatim copy of the broken input (:func:`near_copy`: every frame within
``near_copy_psnr_db`` and every 0.25 s of audio within ``near_copy_snr_db`` of the broken input, and
closer to it than to the golden where the two differ).

Frames are measured at most ``max_side`` pixels on their longest side (default 640: clips are held in
memory, three at a time); smaller clips are measured at full size.

The golden reference point ``M_golden`` is ``truth.json`` ``reference[region][measure]``, measured when
the task was built on a perfect fix (the defect undone exactly on the broken input's decoded content)
delivered as h264/AAC with the task's settings, i.e. what a flawless agent can reach through one
lossy encode; the bundled golden itself is at least as good and scores 1. Without a
stored reference the ideal value is used (identical: PSNR/SI-SDR at their caps, SSIM 1, LSD 0 ...).
``M_broken`` is measured at verification time from ``inputs/broken.mp4``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

import numpy as np

from vbench_ray.agentic.media import Media, MediaError, read_media, sha256
from vbench_ray.agentic.verifiers import measures as M
from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict

GROUPS = ("visual", "audio", "timeline", "shot_swap")
RANGE_SCORES = ("paper", "f1")


@dataclass
class RepairConfig:
    in_weight: float = 0.9  # H.1.1: reward = in_weight * s_in + (1 - in_weight) * s_out
    visual_metrics: List[str] = field(default_factory=lambda: ["psnr", "ssim"])  # H.1.2; also ciede2000
    audio_metrics: List[str] = field(default_factory=lambda: ["si_sdr", "lsd", "env_corr"])
    psnr_cap_db: float = 60.0  # PSNR of identical frames (infinite) is capped here
    si_sdr_cap_db: float = 60.0  # likewise for SI-SDR of identical audio
    length_tolerance: float = 0.10  # H.1.2 shot swap: no length penalty within +-10% of the golden
    duration_gate: float = 0.5  # H.1.4: duration beyond +-50% of the golden's is "wrong duration" -> 0
    window_duration_tolerance: float = 0.05  # visual/audio defects keep the clip's length: beyond +-5% -> 0
    near_copy_psnr_db: float = 33.0  # H.1.4 near-verbatim copy: every frame this close to the broken input
    near_copy_snr_db: float = 10.0  # ... and every 0.25 s of audio this close
    range_score: str = "paper"  # paper: fraction of ground-truth ranges matched | f1 (official range-F1)
    honesty_ssim: float = 0.9  # H.1.3 honesty check: lowest per-frame SSIM of output vs broken-minus-ranges
    honesty_frame_slack: int = 2  # frames the output may differ in length from that reconstruction
    xcorr_threshold: float = 0.8  # H.1.3 audio check: normalised cross-correlation peak
    xcorr_max_lag_s: float = 0.1  # lags searched by the audio check
    max_side: Optional[int] = 640  # frames are measured downscaled to this longest side (null: full size)


IDEAL = {"psnr": None, "ssim": 1.0, "ciede2000": 0.0, "si_sdr": None, "lsd": 0.0, "env_corr": 1.0}


def _ideal(measure: str, cfg: RepairConfig) -> float:
    if measure == "psnr":
        return cfg.psnr_cap_db
    if measure == "si_sdr":
        return cfg.si_sdr_cap_db
    return IDEAL[measure]


def golden_reference(truth: dict, region: str, measure: str, cfg: RepairConfig) -> float:
    value = ((truth.get("reference") or {}).get(region) or {}).get(measure)
    return float(value) if isinstance(value, (int, float)) else _ideal(measure, cfg)


# ----------------------------------------------------------------------------- gates

def check_format(info, spec: dict, golden_duration: float, cfg: RepairConfig, group: str = "") -> None:
    """H.1.4: container, codecs, sample rate, duration against the task's delivery spec."""
    container = spec.get("container")
    if container and container not in info.container.split(","):
        raise InvalidSubmission(f"fixed.mp4: container {info.container!r} is not {container!r}")
    if not info.has_video:
        raise InvalidSubmission("fixed.mp4 has no video stream")
    vcodec = spec.get("video_codec")
    if vcodec and info.video_codec != vcodec:
        raise InvalidSubmission(f"fixed.mp4: video codec {info.video_codec!r} is not {vcodec!r}")
    acodec = spec.get("audio_codec")
    if acodec:
        if not info.has_audio:
            raise InvalidSubmission("fixed.mp4 has no audio stream (the task's audio must be kept)")
        if info.audio_codec != acodec:
            raise InvalidSubmission(f"fixed.mp4: audio codec {info.audio_codec!r} is not {acodec!r}")
    sr = spec.get("sample_rate")
    if sr and info.has_audio and info.sample_rate != int(sr):
        raise InvalidSubmission(f"fixed.mp4: audio sample rate {info.sample_rate} Hz is not {int(sr)} Hz")
    tolerance = cfg.window_duration_tolerance if group in ("visual", "audio") else cfg.duration_gate
    if golden_duration > 0 and abs(info.duration / golden_duration - 1.0) > tolerance + 1e-9:
        raise InvalidSubmission(f"fixed.mp4: duration {info.duration:.2f} s is too far from the expected "
                                f"{golden_duration:.2f} s (more than {tolerance:.0%} off)")


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))


def near_copy(out: Media, broken: Media, golden: Media, cfg: RepairConfig) -> dict | None:
    """Evidence that ``out`` is the broken input re-encoded, else None.

    A near copy has the broken input's length, every frame within ``near_copy_psnr_db`` and every 0.25 s
    of audio within ``near_copy_snr_db`` of it, and, where the broken input differs from the golden, is
    closer to the broken input than to the golden (so a faithful fix of a subtle defect is not a copy).
    """
    if out.frames.shape != broken.frames.shape:
        return None
    worst_psnr = min(M.psnr(a, b, cap=cfg.psnr_cap_db) for a, b in zip(out.frames, broken.frames))
    if worst_psnr < cfg.near_copy_psnr_db:
        return None
    evidence: dict[str, Any] = {"min_frame_psnr_db": worst_psnr}
    if golden.frames.shape == broken.frames.shape:
        gap = [M.psnr(g, b, cap=cfg.psnr_cap_db) for g, b in zip(golden.frames, broken.frames)]
        level = min(45.0, float(np.median(gap)) - 6.0)  # the defect stands out of the two encodes' noise
        differs = [i for i, v in enumerate(gap) if v < level]
        if differs:
            to_broken = sum(_mse(out.frames[i], broken.frames[i]) for i in differs)
            to_golden = sum(_mse(out.frames[i], golden.frames[i]) for i in differs)
            if to_broken >= to_golden:
                return None
            evidence["defect_frames_closer_to_broken"] = len(differs)
    if broken.audio is not None and len(broken.audio):
        if out.audio is None or not len(out.audio):
            return None
        snr = M.segment_snr(out.audio, broken.audio, broken.sample_rate)
        if snr < cfg.near_copy_snr_db:
            return None
        evidence["min_segment_snr_db"] = snr
        if golden.audio is not None and len(golden.audio) == len(broken.audio):
            n = min(len(out.audio), len(broken.audio))
            o, b, g = out.audio[:n].astype(np.float64), broken.audio[:n], golden.audio[:n]
            step = max(1, broken.sample_rate // 4)
            snrs = {i: M.segment_snr(b[i:i + step], g[i:i + step], broken.sample_rate, 1.0) for i in range(0, n, step)}
            level = min(30.0, float(np.median(list(snrs.values()))) - 10.0)
            segs = [slice(i, i + step) for i, v in snrs.items() if v < level]
            if segs:
                if sum(float(np.sum((o[sl] - b[sl]) ** 2)) for sl in segs) >= \
                        sum(float(np.sum((o[sl] - g[sl]) ** 2)) for sl in segs):
                    return None
                evidence["defect_audio_closer_to_broken"] = len(segs)
    return evidence


# ----------------------------------------------------------------------------- windowed defects

def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _frame_regions(golden: Media, window: list[float]) -> tuple[np.ndarray, np.ndarray]:
    times = np.arange(len(golden.frames)) / golden.fps
    inside = (times >= window[0]) & (times < window[1])
    if not inside.any():
        inside[min(len(times) - 1, int(window[0] * golden.fps))] = True
    return times, inside


def visual_scores(out: Media, broken: Media, golden: Media, truth: dict, cfg: RepairConfig) -> dict:
    times, inside = _frame_regions(golden, truth["window"])
    out_al = M.time_aligned(out.frames, out.fps, times)
    br_al = M.time_aligned(broken.frames, broken.fps, times)
    gold = list(golden.frames)
    pick = lambda frames, mask: [f for f, keep in zip(frames, mask) if keep]  # noqa: E731
    per: dict[str, dict] = {}
    s_in, s_out = [], []
    for m in cfg.visual_metrics:
        hib = M.HIGHER_IS_BETTER[m]
        m_out_in = M.mean_frame_measure(m, pick(out_al, inside), pick(gold, inside), cfg.psnr_cap_db)
        m_br_in = M.mean_frame_measure(m, pick(br_al, inside), pick(gold, inside), cfg.psnr_cap_db)
        g_in = golden_reference(truth, "in", m, cfg)
        rec = {"in": {"out": m_out_in, "broken": m_br_in, "golden": g_in,
                      "s": M.rescale(m_out_in, m_br_in, g_in, hib)}}
        s_in.append(rec["in"]["s"])
        if (~inside).any():
            m_out_out = M.mean_frame_measure(m, pick(out_al, ~inside), pick(gold, ~inside), cfg.psnr_cap_db)
            g_out = golden_reference(truth, "out", m, cfg)
            rec["out"] = {"out": m_out_out, "broken_anchor": m_br_in, "golden": g_out,
                          "s": M.rescale(m_out_out, m_br_in, g_out, hib)}
            s_out.append(rec["out"]["s"])
        per[m] = rec
    return {"measures": per, "s_in": _mean(s_in), "s_out": _mean(s_out) if s_out else 1.0,
            "n_frames_in": int(inside.sum())}


def _fit(audio: np.ndarray | None, n: int) -> np.ndarray:
    audio = np.zeros(0, np.float32) if audio is None else audio
    return np.pad(audio[:n], (0, max(0, n - len(audio[:n]))))


def audio_scores(out: Media, broken: Media, golden: Media, truth: dict, cfg: RepairConfig) -> dict:
    sr = golden.sample_rate
    n = len(golden.audio)
    g = golden.audio
    o, b = _fit(out.audio, n), _fit(broken.audio, n)
    idx = np.arange(n) / sr
    inside = (idx >= truth["window"][0]) & (idx < truth["window"][1])
    per: dict[str, dict] = {}
    s_in, s_out = [], []
    for m in cfg.audio_metrics:
        hib = M.HIGHER_IS_BETTER[m]
        m_out_in = M.audio_measure(m, o[inside], g[inside], sr, cfg.si_sdr_cap_db)
        m_br_in = M.audio_measure(m, b[inside], g[inside], sr, cfg.si_sdr_cap_db)
        g_in = golden_reference(truth, "in", m, cfg)
        rec = {"in": {"out": m_out_in, "broken": m_br_in, "golden": g_in,
                      "s": M.rescale(m_out_in, m_br_in, g_in, hib)}}
        s_in.append(rec["in"]["s"])
        if (~inside).sum() >= sr // 10:
            m_out_out = M.audio_measure(m, o[~inside], g[~inside], sr, cfg.si_sdr_cap_db)
            g_out = golden_reference(truth, "out", m, cfg)
            rec["out"] = {"out": m_out_out, "broken_anchor": m_br_in, "golden": g_out,
                          "s": M.rescale(m_out_out, m_br_in, g_out, hib)}
            s_out.append(rec["out"]["s"])
        per[m] = rec
    return {"measures": per, "s_in": _mean(s_in), "s_out": _mean(s_out) if s_out else 1.0}


def shot_swap_score(out: Media, broken: Media, golden: Media, truth: dict, cfg: RepairConfig) -> dict:
    times = np.arange(len(golden.frames)) / golden.fps
    gold = list(golden.frames)
    m_out = M.pooled_psnr(M.time_aligned(out.frames, out.fps, times), gold, cfg.psnr_cap_db)
    m_br = M.pooled_psnr(M.time_aligned(broken.frames, broken.fps, times), gold, cfg.psnr_cap_db)
    g = golden_reference(truth, "whole", "psnr", cfg)
    s = M.rescale(m_out, m_br, g, True)
    ratio = out.info.duration / golden.info.duration if golden.info.duration else 1.0
    excess = abs(ratio - 1.0) - cfg.length_tolerance
    factor = 1.0 if excess <= 0 else max(0.0, 1.0 - excess / cfg.length_tolerance)
    return {"psnr": {"out": m_out, "broken": m_br, "golden": g}, "s": s, "length_ratio": ratio,
            "length_factor": factor, "reward": s * factor}


# ----------------------------------------------------------------------------- timeline defects

def parse_ranges(solution: Any, duration: float, fps: float) -> list[tuple[float, float]]:
    """Reported cut ranges: ``{"ranges": [[s, e], ...]}`` (or ``{"start", "end"}`` objects, or a bare
    list), each with ``0 <= s < e <= duration``. Anything else -> :class:`InvalidSubmission`."""
    ranges = solution.get("ranges") if isinstance(solution, dict) else solution
    if not isinstance(ranges, list):
        raise InvalidSubmission('malformed ranges: solution.json must hold {"ranges": [[start_s, end_s], ...]}')
    out = []
    slack = 1.0 / fps if fps else 0.0
    for i, r in enumerate(ranges):
        if isinstance(r, dict):
            r = [r.get("start"), r.get("end")]
        ok = isinstance(r, (list, tuple)) and len(r) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in r)
        if not ok or not (0.0 <= r[0] < r[1] <= duration + slack):
            raise InvalidSubmission(f"malformed ranges: ranges[{i}] = {json.dumps(r)[:60]} is not "
                                    f"[start, end] with 0 <= start < end <= {duration:.3f}")
        out.append((float(r[0]), float(r[1])))
    return out


def _forms(gt: Any) -> list[tuple[float, float]]:
    """A ground-truth range and its equivalent alternatives (e.g. either copy of a repeated segment)."""
    if isinstance(gt, dict):
        return [tuple(gt["range"])] + [tuple(x) for x in gt.get("equivalent", [])]
    return [tuple(gt)]


def match_ranges(truth_ranges: list, predicted: list[tuple[float, float]], tolerance: float) -> list[dict]:
    """H.1.3 range match: per ground-truth range (in order), the closest unused prediction, accepted iff
    both endpoints are within ``tolerance`` (of the range or one of its equivalent forms)."""
    used: set[int] = set()
    out = []
    for gt in truth_ranges:
        forms = _forms(gt)
        best, best_d = None, math.inf
        for j, (ps, pe) in enumerate(predicted):
            if j in used:
                continue
            d = min(max(abs(ps - gs), abs(pe - ge)) for gs, ge in forms)
            if d < best_d:
                best, best_d = j, d
        ok = best is not None and best_d <= tolerance + 1e-9
        if ok:
            used.add(best)
        out.append({"truth": list(forms[0]), "predicted": list(predicted[best]) if best is not None else None,
                    "error_s": best_d if best is not None else None, "matched": ok})
    return out


def keep_mask(times: np.ndarray, ranges: list[tuple[float, float]]) -> np.ndarray:
    keep = np.ones(len(times), bool)
    for s, e in ranges:
        keep &= ~((times >= s - 1e-9) & (times < e - 1e-9))
    return keep


def _small_gray(frame: np.ndarray, width: int = 64) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    if w > width:
        frame = cv2.resize(frame, (width, max(8, int(round(h * width / w)))), interpolation=cv2.INTER_AREA)
    return frame


def honesty_check(out: Media, broken: Media, ranges: list[tuple[float, float]], cfg: RepairConfig) -> dict:
    """H.1.3: the broken video minus the reported ranges, compared frame by frame with what was rendered.

    Passes when the frame counts agree within ``honesty_frame_slack`` and every reconstructed frame has
    an SSIM of at least ``honesty_ssim`` with the output frame at the same position (or one frame either
    side); a stretch rendered differently from what was reported fails it.
    """
    keep = keep_mask(np.arange(len(broken.frames)) / broken.fps, ranges)
    rec = broken.frames[keep]
    result: dict[str, Any] = {"n_frames_expected": int(len(rec)), "n_frames_output": int(len(out.frames))}
    if abs(len(rec) - len(out.frames)) > cfg.honesty_frame_slack or len(rec) == 0:
        result.update(passed=False, reason="the output's length does not match the source minus the reported ranges")
        return result
    outs = [_small_gray(f) for f in out.frames]
    scores = []
    for i, f in enumerate(rec):
        f = _small_gray(f)
        j = min(len(outs) - 1, i)
        scores.append(max(M.ssim(f, outs[k]) for k in range(max(0, j - 1), min(len(outs), j + 2))))
    result["mean_ssim"] = float(np.mean(scores))
    result["min_ssim"] = float(np.min(scores))
    result["passed"] = result["min_ssim"] >= cfg.honesty_ssim
    if not result["passed"]:
        worst = int(np.argmin(scores))
        result["reason"] = (f"the rendered output does not match the source minus the reported ranges "
                            f"(frame {worst}, SSIM {scores[worst]:.3f})")
    return result


def audio_check(out: Media, broken: Media, ranges: list[tuple[float, float]], cfg: RepairConfig,
                segment_s: float = 0.5) -> dict:
    """H.1.3: the output audio against the broken audio minus the reported ranges, by normalised
    cross-correlation (lags up to ``xcorr_max_lag_s``) over the whole track and over every ``segment_s``
    stretch of it; the lowest peak must reach ``xcorr_threshold``."""
    if broken.audio is None or not len(broken.audio):
        return {"passed": True, "skipped": "the broken input has no audio"}
    if out.audio is None or not len(out.audio):
        return {"passed": False, "reason": "the output has no audio"}
    sr = broken.sample_rate
    rec = broken.audio[keep_mask(np.arange(len(broken.audio)) / sr, ranges)]
    max_lag = int(cfg.xcorr_max_lag_s * sr)
    peak, lag = M.xcorr_peak(out.audio, rec, max_lag)
    seg = int(segment_s * sr)
    loud = float(np.sqrt(np.mean(rec.astype(np.float64) ** 2))) if len(rec) else 0.0
    peaks = []
    for start in range(0, max(1, len(rec) - seg // 2), seg):
        part = rec[start:start + seg]
        if float(np.sqrt(np.mean(part.astype(np.float64) ** 2))) < 0.05 * loud:
            continue  # near-silent: nothing to compare
        lo = max(0, start - max_lag)
        window = out.audio[lo:start + len(part) + max_lag]
        peaks.append(M.local_xcorr_peak(window, part))
    worst = float(min(peaks)) if peaks else peak
    passed = peak >= cfg.xcorr_threshold and worst >= cfg.xcorr_threshold
    return {"xcorr_peak": peak, "lag_s": lag / sr, "min_segment_xcorr": worst, "passed": passed,
            **({} if passed else {"reason": "the output audio does not match the source minus the reported ranges"})}


def timeline_score(out: Media, broken: Media, submission: Path, truth: dict, cfg: RepairConfig) -> dict:
    from vbench_ray.agentic.verifiers.base import read_solution_json

    try:
        solution = read_solution_json(submission, missing_status="invalid")
    except InvalidSubmission as exc:
        raise InvalidSubmission(f"malformed ranges: {exc.reason}") from exc
    ranges = parse_ranges(solution, broken.info.duration, broken.fps)
    matches = match_ranges(truth["ranges"], ranges, float(truth["tolerance_s"]))
    n_match = sum(m["matched"] for m in matches)
    recall = n_match / len(matches) if matches else 1.0
    precision = n_match / len(ranges) if ranges else (1.0 if not matches else 0.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    match_score = recall if cfg.range_score == "paper" else f1
    honesty = honesty_check(out, broken, ranges, cfg)
    audio = audio_check(out, broken, ranges, cfg)
    reward = match_score if honesty["passed"] and audio["passed"] else 0.0
    return {"ranges": [list(r) for r in ranges], "matches": matches, "range_recall": recall,
            "range_precision": precision, "range_f1": f1, "range_score": match_score,
            "honesty": honesty, "audio_check": audio, "reward": reward}


# ----------------------------------------------------------------------------- entry point

def load_pair(task, max_side: int | None = None) -> tuple[Media, Media]:
    t = task.truth
    return (read_media(task.input(t["broken"]), max_side=max_side),
            read_media(task.truth_file(t["golden"]), max_side=max_side))


def verify(task, submission: Path, cfg: RepairConfig | None = None) -> Verdict:
    cfg = cfg or RepairConfig()
    truth = task.truth
    group = truth["group"]
    submission = Path(submission)
    base: dict[str, Any] = {"group": group, "defect": truth.get("defect"), "window": truth.get("window"),
                            "report_md": (submission / "report.md").is_file()}
    fixed = submission / "fixed.mp4"
    broken_path = task.input(truth["broken"])
    try:
        if not fixed.is_file():
            raise InvalidSubmission("fixed.mp4 is missing from the submission", status="missing")
        if sha256(fixed) == sha256(broken_path):
            raise InvalidSubmission("fixed.mp4 is a verbatim copy of the broken input")
        try:
            out = read_media(fixed, max_side=cfg.max_side)
        except MediaError as exc:
            raise InvalidSubmission(f"fixed.mp4 cannot be decoded: {exc}") from exc
        broken, golden = load_pair(task, cfg.max_side)
        check_format(out.info, task.spec, golden.info.duration, cfg, group)
        if (out.info.width, out.info.height) != (golden.info.width, golden.info.height):
            raise InvalidSubmission(f"fixed.mp4: frame size {out.info.width}x{out.info.height} is not the "
                                    f"clip's {golden.info.width}x{golden.info.height}")
        copy = near_copy(out, broken, golden, cfg)
        if copy is not None:
            raise InvalidSubmission("fixed.mp4 is a near-verbatim copy of the broken input", near_copy=copy)
    except InvalidSubmission as exc:
        return Verdict.zero(exc, **base)
    base["output"] = {"duration_s": out.info.duration, "n_frames": out.info.num_frames,
                      "sample_rate": out.info.sample_rate}
    if group == "visual":
        parts = visual_scores(out, broken, golden, truth, cfg)
        reward = cfg.in_weight * parts["s_in"] + (1.0 - cfg.in_weight) * parts["s_out"]
    elif group == "audio":
        if out.audio is None:
            return Verdict.zero(InvalidSubmission("fixed.mp4 has no audio to score"), **base)
        parts = audio_scores(out, broken, golden, truth, cfg)
        reward = cfg.in_weight * parts["s_in"] + (1.0 - cfg.in_weight) * parts["s_out"]
    elif group == "shot_swap":
        parts = shot_swap_score(out, broken, golden, truth, cfg)
        reward = parts["reward"]
    else:
        try:
            parts = timeline_score(out, broken, submission, truth, cfg)
        except InvalidSubmission as exc:
            return Verdict.zero(exc, **base)
        reward = parts["reward"]
    return Verdict(float(min(1.0, max(0.0, reward))), "ok", {**base, **parts})


def measure_references(golden: Media, reencoded: Media, truth: dict, cfg: RepairConfig | None = None) -> dict:
    """``truth.json`` ``reference``: every measurement of ``reencoded`` (a perfect fix delivered with the
    task's codec settings) against the golden, per region; computed when a task is built."""
    cfg = cfg or RepairConfig()
    full = RepairConfig(**{**cfg.__dict__, "visual_metrics": list(M.VISUAL), "audio_metrics": list(M.AUDIO)})
    ref: dict[str, dict] = {}
    group = truth["group"]
    if group == "visual":
        parts = visual_scores(reencoded, reencoded, golden, {**truth, "reference": {}}, full)
    elif group == "audio":
        parts = audio_scores(reencoded, reencoded, golden, {**truth, "reference": {}}, full)
    else:
        parts = None
    if parts is not None:
        for m, rec in parts["measures"].items():
            ref.setdefault("in", {})[m] = rec["in"]["out"]
            if "out" in rec:
                ref.setdefault("out", {})[m] = rec["out"]["out"]
    if group in ("shot_swap", "timeline"):
        times = np.arange(len(golden.frames)) / golden.fps
        ref["whole"] = {"psnr": M.pooled_psnr(M.time_aligned(reencoded.frames, reencoded.fps, times),
                                              list(golden.frames), full.psnr_cap_db)}
    return ref
