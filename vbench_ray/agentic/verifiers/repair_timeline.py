"""The paper's timeline-defect scoring (App. H.1.3): reported ranges matched to the truth, gated by the
honesty check (frames) and the audio check (cross-correlation); see
:mod:`vbench_ray.agentic.verifiers.repair`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from vbench_ray.agentic.verifiers import measures as M
from vbench_ray.agentic.verifiers.base import InvalidSubmission
from vbench_ray.agentic.verifiers.repair_config import RepairConfig
from vbench_ray.agentic.verifiers.repair_stream import Source, _blocks


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
        ok = (
            isinstance(r, (list, tuple))
            and len(r) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in r)
        )
        if not ok or not (0.0 <= r[0] < r[1] <= duration + slack):
            raise InvalidSubmission(
                f"malformed ranges: ranges[{i}] = {json.dumps(r)[:60]} is not "
                f"[start, end] with 0 <= start < end <= {duration:.3f}"
            )
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
        out.append(
            {
                "truth": list(forms[0]),
                "predicted": list(predicted[best]) if best is not None else None,
                "error_s": best_d if best is not None else None,
                "matched": ok,
            }
        )
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


def honesty_check(out: Source, broken: Source, ranges: list[tuple[float, float]], cfg: RepairConfig) -> dict:
    """H.1.3: the broken video minus the reported ranges, compared frame by frame with what was rendered.

    Passes when the frame counts agree within ``honesty_frame_slack`` and every reconstructed frame has
    an SSIM of at least ``honesty_ssim`` with the output frame at the same position (or one frame either
    side); a stretch rendered differently from what was reported fails it. Streams both files; only the
    output frames around the current position are held (small grey copies).
    """
    keep = keep_mask(np.arange(broken.n_frames) / broken.fps, ranges)
    n_rec, n_out = int(keep.sum()), out.n_frames
    result: dict[str, Any] = {"n_frames_expected": n_rec, "n_frames_output": int(n_out)}
    if abs(n_rec - n_out) > cfg.honesty_frame_slack or n_rec == 0:
        result.update(passed=False, reason="the output's length does not match the source minus the reported ranges")
        return result
    out_it = out.frames(cfg.max_side)
    held: dict[int, np.ndarray] = {}  # output index -> small grey frame
    next_out = 0
    scores = []
    i = 0
    for k, f in enumerate(broken.frames(cfg.max_side)):
        if k >= len(keep) or not keep[k]:
            continue
        j = min(n_out - 1, i)
        want = range(max(0, j - 1), min(n_out, j + 2))
        while next_out < want.stop:
            frame = next(out_it, None)
            if frame is None:
                break
            held[next_out] = _small_gray(frame)
            next_out += 1
        for old in [x for x in held if x < want.start]:
            del held[old]
        f = _small_gray(f)
        scores.append(max(M.ssim(f, held[x]) for x in want if x in held))
        i += 1
    result["mean_ssim"] = float(np.mean(scores))
    result["min_ssim"] = float(np.min(scores))
    result["passed"] = result["min_ssim"] >= cfg.honesty_ssim
    if not result["passed"]:
        worst = int(np.argmin(scores))
        result["reason"] = (
            f"the rendered output does not match the source minus the reported ranges "
            f"(frame {worst}, SSIM {scores[worst]:.3f})"
        )
    return result


class _Reconstruction:
    """The broken audio minus the reported ranges, read forward in blocks (``get(lo, hi)`` in the
    reconstruction's own sample index, ``lo`` not decreasing)."""

    def __init__(self, broken: Source, ranges: list[tuple[float, float]], cfg: RepairConfig):
        self.sr = broken.sr
        self.reader = broken.audio()
        self.ranges = ranges
        self.block = max(1, int(cfg.audio_chunk_s * self.sr))
        self.n_src = broken.n_audio
        self.length = sum(
            int(keep_mask(np.arange(lo, hi) / self.sr, ranges).sum()) for lo, hi in _blocks(self.n_src, self.block)
        )
        self._src_pos = 0
        self._buf = np.zeros(0, np.float32)
        self._start = 0

    def get(self, lo: int, hi: int) -> np.ndarray:
        if lo > self._start:
            self._buf = self._buf[lo - self._start :]
            self._start = lo
        while self._start + len(self._buf) < hi and self._src_pos < self.n_src:
            end = min(self.n_src, self._src_pos + self.block)
            chunk = self.reader.get(self._src_pos, end)
            mask = keep_mask(np.arange(self._src_pos, end) / self.sr, self.ranges)
            self._buf = np.concatenate([self._buf, chunk[mask]])
            self._src_pos = end
        return self._buf[lo - self._start : hi - self._start]


def audio_check(
    out: Source, broken: Source, ranges: list[tuple[float, float]], cfg: RepairConfig, segment_s: float = 0.5
) -> dict:
    """H.1.3: the output audio against the broken audio minus the reported ranges, by normalised
    cross-correlation (lags up to ``xcorr_max_lag_s``) over the whole track and over every ``segment_s``
    stretch of it; the lowest peak must reach ``xcorr_threshold``.

    Streamed: the whole-track correlation at each lag is summed block by block (exact), and each segment
    is compared with the output around it as the blocks go by."""
    from scipy.signal import correlate

    if not broken.n_audio:
        return {"passed": True, "skipped": "the broken input has no audio"}
    if not out.n_audio:
        return {"passed": False, "reason": "the output has no audio"}
    sr = broken.sr
    max_lag = int(cfg.xcorr_max_lag_s * sr)
    seg = int(segment_s * sr)
    rec = _Reconstruction(broken, ranges, cfg)
    n_rec, n_out = rec.length, out.n_audio
    # pass 1: energies (the loudness threshold of the segments, the norms of the whole-track correlation)
    e_rec = sum(float(np.sum(rec.get(lo, hi).astype(np.float64) ** 2)) for lo, hi in _blocks(n_rec, rec.block))
    r_out = out.audio()
    e_out = sum(float(np.sum(r_out.get(lo, hi).astype(np.float64) ** 2)) for lo, hi in _blocks(n_out, rec.block))
    loud = math.sqrt(e_rec / n_rec) if n_rec else 0.0
    # pass 2: correlation sums and segment peaks
    rec = _Reconstruction(broken, ranges, cfg)
    r_out = out.audio()
    lag_sums = np.zeros(2 * max_lag + 1)
    peaks = []
    starts = list(range(0, max(1, n_rec - seg // 2), seg))
    block = max(seg, rec.block // max(1, seg) * seg)
    si = 0
    for lo in range(0, max(n_rec, 1), block):
        hi = min(n_rec, lo + block)
        b = rec.get(lo, hi).astype(np.float64)
        a = r_out.get(lo - max_lag, hi + max_lag).astype(np.float64)  # zeros outside the output
        if len(b):
            lag_sums += correlate(a, b, mode="valid", method="fft")[: 2 * max_lag + 1]
        while si < len(starts) and starts[si] < hi:  # blocks are whole segments: none crosses a block end
            start = starts[si]
            part = b[start - lo : start - lo + seg]
            si += 1
            if len(part) and float(np.sqrt(np.mean(part**2))) < 0.05 * loud:
                continue  # near-silent: nothing to compare
            w_lo = max(0, start - max_lag)
            w_hi = min(n_out, start + len(part) + max_lag)
            window = a[w_lo - (lo - max_lag) : w_hi - (lo - max_lag)]
            peaks.append(M.local_xcorr_peak(window, part))
    na, nb = math.sqrt(e_out), math.sqrt(e_rec)
    lags = np.arange(-max_lag, max_lag + 1)
    valid = (lags > -n_rec) & (lags < n_out)
    if na <= 1e-9 or nb <= 1e-9:
        peak, lag = (1.0 if na <= 1e-9 and nb <= 1e-9 else 0.0), 0
    else:
        c = np.where(valid, lag_sums, -np.inf)
        k = int(np.argmax(c))
        peak, lag = float(c[k] / (na * nb)), int(lags[k])
    worst = float(min(peaks)) if peaks else peak
    passed = peak >= cfg.xcorr_threshold and worst >= cfg.xcorr_threshold
    return {
        "xcorr_peak": peak,
        "lag_s": lag / sr,
        "min_segment_xcorr": worst,
        "passed": passed,
        **({} if passed else {"reason": "the output audio does not match the source minus the reported ranges"}),
    }


def timeline_score(out: Source, broken: Source, submission: Path, truth: dict, cfg: RepairConfig) -> dict:
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
    return {
        "ranges": [list(r) for r in ranges],
        "matches": matches,
        "range_recall": recall,
        "range_precision": precision,
        "range_f1": f1,
        "range_score": match_score,
        "honesty": honesty,
        "audio_check": audio,
        "reward": reward,
    }
