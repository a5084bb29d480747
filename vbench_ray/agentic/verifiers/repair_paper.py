"""The paper's repair scheme (App. H.1.1-H.1.2, H.1.4): hard gates, windowed defects (visual, audio)
and shot swaps. Timeline defects (H.1.3) are in :mod:`~vbench_ray.agentic.verifiers.repair_timeline`;
the scheme as a whole is described in :mod:`vbench_ray.agentic.verifiers.repair`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from vbench_ray.agentic.verifiers import measures as M
from vbench_ray.agentic.verifiers.base import InvalidSubmission
from vbench_ray.agentic.verifiers.repair_config import RepairConfig, audio_measures_for, golden_reference
from vbench_ray.agentic.verifiers.repair_stream import FrameCursor, Source, _blocks


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
        raise InvalidSubmission(
            f"fixed.mp4: duration {info.duration:.2f} s is too far from the expected "
            f"{golden_duration:.2f} s (more than {tolerance:.0%} off)"
        )


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))


def _psnr_of_mse(mse: float, cap: float) -> float:
    return cap if mse <= M.EPS else float(min(cap, 10.0 * math.log10(255.0**2 / mse)))


def near_copy(out: Source, broken: Source, golden: Source, cfg: RepairConfig) -> dict | None:
    """Evidence that ``out`` is the broken input re-encoded, else None.

    A near copy has the broken input's length, every frame within ``near_copy_psnr_db`` and every 0.25 s
    of audio within ``near_copy_snr_db`` of it, and, where the broken input differs from the golden, is
    closer to the broken input than to the golden (so a faithful fix of a subtle defect is not a copy).
    Streams the three files in step; stops at the first frame that is not a copy.
    """
    if out.n_frames != broken.n_frames or (out.info.width, out.info.height) != (broken.info.width, broken.info.height):
        return None
    with_golden = golden.n_frames == broken.n_frames and (golden.info.width, golden.info.height) == (
        broken.info.width,
        broken.info.height,
    )
    ob, gap, og = [], [], []  # per frame: MSE out-broken, PSNR golden-broken, MSE out-golden
    g_it = golden.frames(cfg.max_side) if with_golden else None
    for o, b in zip(out.frames(cfg.max_side), broken.frames(cfg.max_side)):
        mse = _mse(o, b)
        if _psnr_of_mse(mse, cfg.psnr_cap_db) < cfg.near_copy_psnr_db:
            return None
        ob.append(mse)
        if g_it is not None:
            g = next(g_it)
            gap.append(M.psnr(g, b, cap=cfg.psnr_cap_db))
            og.append(_mse(o, g))
    evidence: dict[str, Any] = {"min_frame_psnr_db": _psnr_of_mse(max(ob), cfg.psnr_cap_db)}
    if gap:
        level = min(45.0, float(np.median(gap)) - 6.0)  # the defect stands out of the two encodes' noise
        differs = [i for i, v in enumerate(gap) if v < level]
        if differs:
            if sum(ob[i] for i in differs) >= sum(og[i] for i in differs):
                return None
            evidence["defect_frames_closer_to_broken"] = len(differs)
    if broken.n_audio:
        if not out.n_audio:
            return None
        sr = broken.sr
        n = min(out.n_audio, broken.n_audio)
        step = max(1, int(sr * 0.25))
        use_golden = golden.n_audio == broken.n_audio
        ro, rb, rg = out.audio(), broken.audio(), golden.audio() if use_golden else None
        worst = math.inf
        snr_bg, sse_ob, sse_og = [], [], []
        for lo, hi in _blocks(n, int(cfg.audio_chunk_s * sr) // step * step or step):
            o, b = ro.get(lo, hi).astype(np.float64), rb.get(lo, hi).astype(np.float64)
            g = rg.get(lo, hi).astype(np.float64) if rg is not None else None
            for s in range(0, hi - lo, step):
                oe, be = o[s : s + step], b[s : s + step]
                noise, sig = float(np.sum((be - oe) ** 2)), float(np.sum(be**2))
                if not (sig <= M.EPS and noise <= M.EPS):
                    worst = min(worst, 10.0 * math.log10(max(sig, M.EPS) / max(noise, M.EPS)))
                if g is not None:
                    ge = g[s : s + step]
                    sig_g, noise_g = float(np.sum(ge**2)), float(np.sum((ge - be) ** 2))
                    snr_bg.append(
                        math.inf
                        if sig_g <= M.EPS and noise_g <= M.EPS
                        else 10.0 * math.log10(max(sig_g, M.EPS) / max(noise_g, M.EPS))
                    )
                    sse_ob.append(noise)
                    sse_og.append(float(np.sum((oe - ge) ** 2)))
            if worst < cfg.near_copy_snr_db:
                return None
        evidence["min_segment_snr_db"] = worst
        if snr_bg:
            level = min(30.0, float(np.median(snr_bg)) - 10.0)
            segs = [i for i, v in enumerate(snr_bg) if v < level]
            if segs:
                if sum(sse_ob[i] for i in segs) >= sum(sse_og[i] for i in segs):
                    return None
                evidence["defect_audio_closer_to_broken"] = len(segs)
    return evidence


# ----------------------------------------------------------------------------- windowed defects


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _aligned_index(t: float, fps: float, n: int) -> int:
    """The frame shown at time ``t`` (nearest earlier frame, clamped), as :func:`measures.time_aligned`."""
    return int(min(max(math.floor(t * fps + 1e-6), 0), n - 1))


def _inside_frames(golden: Source, window: list[float]) -> np.ndarray:
    times = np.arange(golden.n_frames) / golden.fps
    inside = (times >= window[0]) & (times < window[1])
    if not inside.any():
        inside[min(len(times) - 1, int(window[0] * golden.fps))] = True
    return inside


def visual_scores(out: Source, broken: Source, golden: Source, truth: dict, cfg: RepairConfig) -> dict:
    """Per-frame measures, in and out of the window, over the golden's frames and the output's and broken
    input's frames shown at the same times; one pass, frames decoded one at a time."""
    inside = _inside_frames(golden, truth["window"])
    names = list(cfg.visual_metrics)
    vals = {m: {"out_in": [], "br_in": [], "out_out": []} for m in names}
    oc, bc = FrameCursor(out.path, cfg.max_side), FrameCursor(broken.path, cfg.max_side)
    for i, g in enumerate(golden.frames(cfg.max_side)):
        if i >= len(inside):
            break
        t = i / golden.fps
        o = oc.at(_aligned_index(t, out.fps, out.n_frames))
        if inside[i]:
            b = bc.at(_aligned_index(t, broken.fps, broken.n_frames))
            for m in names:
                vals[m]["out_in"].append(M.frame_measure(m, o, g, cfg.psnr_cap_db))
                vals[m]["br_in"].append(M.frame_measure(m, b, g, cfg.psnr_cap_db))
        else:
            for m in names:
                vals[m]["out_out"].append(M.frame_measure(m, o, g, cfg.psnr_cap_db))
    per: dict[str, dict] = {}
    s_in, s_out = [], []
    for m in names:
        hib = M.HIGHER_IS_BETTER[m]
        m_out_in, m_br_in = _mean(vals[m]["out_in"]), _mean(vals[m]["br_in"])
        g_in = golden_reference(truth, "in", m, cfg)
        rec = _rescaled_in(m_out_in, m_br_in, g_in, hib)
        s_in.append(rec["in"]["s"])
        if vals[m]["out_out"]:
            rec["out"] = _rescaled_out(_mean(vals[m]["out_out"]), m_br_in, golden_reference(truth, "out", m, cfg), hib)
            s_out.append(rec["out"]["s"])
        per[m] = rec
    return {
        "measures": per,
        "s_in": _mean(s_in),
        "s_out": _mean(s_out) if s_out else 1.0,
        "n_frames_in": int(inside.sum()),
    }


class _Region:
    """Audio samples of one region (in or out of the window), measured in stretches: samples are appended
    in order and measured whenever a stretch is complete; values are averaged weighted by length."""

    def __init__(self, total: int, size: int, measure):
        self.edges = [hi for _, hi in _blocks(total, size)] if total else []
        self.parts: dict[str, list[np.ndarray]] = {}
        self.count = 0
        self.results: list[tuple[int, dict]] = []
        self.measure = measure

    def add(self, **arrays: np.ndarray) -> None:
        n = len(next(iter(arrays.values())))
        pos = 0
        while pos < n:
            target = self.edges[len(self.results)] if len(self.results) < len(self.edges) else math.inf
            take = int(min(n - pos, target - self.count))
            for k, a in arrays.items():
                self.parts.setdefault(k, []).append(a[pos : pos + take])
            self.count += take
            pos += take
            if self.count >= target:
                self._flush()

    def _flush(self) -> None:
        data = {k: np.concatenate(v) for k, v in self.parts.items()}
        self.parts = {}
        if data:
            length = len(next(iter(data.values())))
            if length:
                self.results.append((length, self.measure(**data)))

    def values(self) -> dict:
        if self.parts:
            self._flush()
        total = sum(n for n, _ in self.results)
        keys = self.results[0][1].keys() if self.results else []
        return {k: sum(n * r[k] for n, r in self.results) / total for k in keys}


def _lower_anchor(measured: float, truth: dict, region: str, m: str, cfg: RepairConfig) -> float:
    stored = golden_reference(truth, region, m, cfg)
    if stored is None:
        return measured
    return min(measured, stored) if M.HIGHER_IS_BETTER[m] else max(measured, stored)


def audio_scores(out: Source, broken: Source, golden: Source, truth: dict, cfg: RepairConfig) -> dict:
    """Audio measures in and out of the window, against the golden (output and broken fitted to the
    golden's length); audio read in stretches of at most ``audio_chunk_s``."""
    sr, n = golden.sr, golden.n_audio
    w0, w1 = truth["window"]
    names = audio_measures_for(truth, cfg)
    cap = cfg.si_sdr_cap_db
    # a non-intrusive measure (SRMR) is also measured on the golden itself: M_golden is the lower of that
    # and the stored perfect fix's value, so that both the golden and a perfect fix reach 1
    nonint = [m for m in names if m in M.NON_INTRUSIVE]
    refs = {m: None if m in nonint else golden_reference(truth, "in", m, cfg) for m in names}
    refs_out = {m: None if m in nonint else golden_reference(truth, "out", m, cfg) for m in names}

    def measure_in(o, b, g):
        res = {}
        for m in names:
            res[f"out:{m}"] = M.audio_measure(m, o, g, sr, cap)
            res[f"broken:{m}"] = M.audio_measure(m, b, g, sr, cap)
            if refs[m] is None:
                res[f"golden:{m}"] = M.audio_measure(m, g, g, sr, cap)
        return res

    def measure_out(o, g):
        res = {}
        for m in names:
            res[f"out:{m}"] = M.audio_measure(m, o, g, sr, cap)
            if refs_out[m] is None:
                res[f"golden:{m}"] = M.audio_measure(m, g, g, sr, cap)
        return res

    size = max(1, int(cfg.audio_chunk_s * sr))
    n_in = sum(
        int(((np.arange(lo, hi) / sr >= w0) & (np.arange(lo, hi) / sr < w1)).sum()) for lo, hi in _blocks(n, size)
    )
    reg_in, reg_out = _Region(n_in, size, measure_in), _Region(n - n_in, size, measure_out)
    ro, rb, rg = out.audio(), broken.audio(), golden.audio()
    for lo, hi in _blocks(n, size):
        o, b, g = ro.get(lo, hi), rb.get(lo, hi), rg.get(lo, hi)
        idx = np.arange(lo, hi) / sr
        inside = (idx >= w0) & (idx < w1)
        if inside.any():
            reg_in.add(o=o[inside], b=b[inside], g=g[inside])
        if (~inside).any():
            reg_out.add(o=o[~inside], g=g[~inside])
    v_in = reg_in.values()
    v_out = reg_out.values() if (n - n_in) >= sr // 10 else {}
    per: dict[str, dict] = {}
    s_in, s_out = [], []
    for m in names:
        hib = M.HIGHER_IS_BETTER[m]
        g_in = refs[m] if refs[m] is not None else _lower_anchor(v_in[f"golden:{m}"], truth, "in", m, cfg)
        m_out_in, m_br_in = v_in[f"out:{m}"], v_in[f"broken:{m}"]
        rec = _rescaled_in(m_out_in, m_br_in, g_in, hib)
        s_in.append(rec["in"]["s"])
        if v_out:
            g_out = (
                refs_out[m] if refs_out[m] is not None else _lower_anchor(v_out[f"golden:{m}"], truth, "out", m, cfg)
            )
            rec["out"] = _rescaled_out(v_out[f"out:{m}"], m_br_in, g_out, hib)
            s_out.append(rec["out"]["s"])
        per[m] = rec
    return {
        "measures": per,
        "s_in": _mean(s_in),
        "s_out": _mean(s_out) if s_out else 1.0,
        "n_audio_stretches": {"in": len(reg_in.results), "out": len(reg_out.results)},
    }


def shot_swap_score(out: Source, broken: Source, golden: Source, truth: dict, cfg: RepairConfig) -> dict:
    sse_o = sse_b = 0.0
    oc, bc = FrameCursor(out.path, cfg.max_side), FrameCursor(broken.path, cfg.max_side)
    n = 0
    for i, g in enumerate(golden.frames(cfg.max_side)):
        t = i / golden.fps
        sse_o += _mse(oc.at(_aligned_index(t, out.fps, out.n_frames)), g)
        sse_b += _mse(bc.at(_aligned_index(t, broken.fps, broken.n_frames)), g)
        n += 1
    m_out, m_br = _psnr_of_mse(sse_o / n, cfg.psnr_cap_db), _psnr_of_mse(sse_b / n, cfg.psnr_cap_db)
    g = golden_reference(truth, "whole", "psnr", cfg)
    s = M.rescale(m_out, m_br, g, True)
    ratio = out.info.duration / golden.info.duration if golden.info.duration else 1.0
    excess = abs(ratio - 1.0) - cfg.length_tolerance
    factor = 1.0 if excess <= 0 else max(0.0, 1.0 - excess / cfg.length_tolerance)
    return {
        "psnr": {"out": m_out, "broken": m_br, "golden": g},
        "s": s,
        "length_ratio": ratio,
        "length_factor": factor,
        "reward": s * factor,
    }


def _rescaled_in(out: float, broken: float, golden: float, hib: bool) -> dict:
    """One measure inside the defect window: the values and the rescaled score ``s`` (``measures.rescale``)."""
    return {"in": {"out": out, "broken": broken, "golden": golden, "s": M.rescale(out, broken, golden, hib)}}


def _rescaled_out(out: float, broken_anchor: float, golden: float, hib: bool) -> dict:
    """One measure outside the window, anchored at the broken clip's in-window value."""
    return {
        "out": out,
        "broken_anchor": broken_anchor,
        "golden": golden,
        "s": M.rescale(out, broken_anchor, golden, hib),
    }
