"""Repair verifier (paper §2.5, App. H.1 "Family 2: Repair"), and the public verifier's scheme beside it.

``repair.scheme=paper`` (default; the paper's App. H.1). Every measurement ``M`` is placed between the
broken input (0) and the golden reference (1): ``s = clip((M_out - M_broken) / (M_golden - M_broken), 0,
1)``, sign flipped where lower is better (:func:`~vbench_ray.agentic.verifiers.measures.rescale`). Per
defect group (``truth.json`` ``group``):

* ``visual`` (colour shift, blur) and ``audio`` (noise, echo, clipping), H.1.1-H.1.2: the corruption
  sits in a known window; ``reward = 0.9 s_in + 0.1 s_out``. Visual: PSNR and SSIM per frame inside the
  window (``repair.visual_metrics``; LPIPS can be added where the ``lpips`` package runs); audio, with
  ``repair.measures=paper`` (default): PESQ-WB (perceptual quality), STOI (intelligibility; SRMR for
  echo defects, ``repair.reverb_intelligibility``) and SI-SDR (fidelity), ``repair.audio_metrics``;
  with ``repair.measures=substitute`` the numpy stand-ins ``repair.substitute_audio_metrics`` (SI-SDR,
  LSD, envelope correlation). ``s`` per region is the mean over the measurements. ``s_out`` measures
  the clean region outside the window against the golden; since broken and golden are identical there,
  its lower anchor ``M_broken`` is the broken input's value *inside* the window (changing the clean
  region as much as the defect changed the window scores 0). The paper leaves this anchor unstated.
* ``shot_swap`` (H.1.2): whole-video PSNR against the golden (time-aligned frames, PSNR of their pooled
  mean squared error), times a length penalty when the output is more than 10% shorter or longer than
  the golden: the factor falls linearly from 1 at 10% to 0 at 20% (the paper names the penalty, not its
  shape).
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
spec's; a frame size other than the clip's (the measurements compare frames pixel by pixel); duration
beyond ``duration_gate`` of the golden; malformed ranges (timeline); a verbatim copy (same bytes) or
near-verbatim copy of the broken input (:func:`near_copy`: every frame within ``near_copy_psnr_db``
and every 0.25 s of audio within ``near_copy_snr_db`` of the broken input, and closer to it than to
the golden where the two differ).

``repair.scheme=official``: format 5 + report localisation 35 + edit quality 60 points, as the public
verifier package (PhiloLabs/AgentVBench ``verifiers/repair``) scores it, reimplemented here
(:func:`official_score`): no hard gates; the format points are the share of seven ffprobe-style items
matching the golden; localisation reads the ``## Diagnosis`` block of ``report.md``; the edit points
compare ``fixed.mp4`` with the golden (lag-tolerant SSIM x sharpness x chroma on sampled frames, and
a lag-penalised audio cross-correlation, in and out of the defect window, with deductions).

Memory: nothing decodes a whole clip. Frames are decoded one at a time (:func:`media.iter_frames`) and
walked in step across the output, broken and golden files; audio is read forward through a sliding
buffer (:class:`AudioReader`) and measured in stretches of at most ``audio_chunk_s`` seconds (a region
longer than that is measured stretch by stretch and the values averaged, weighted by length; shorter
regions, such as every synthetic task's, are measured whole). What stays in memory is per-frame or
per-segment numbers, a few frames, and one audio stretch per file, so a 2-hour 1080p file needs well
under 2 GB. Frames are measured at most ``max_side`` pixels on their longest side (default 640);
smaller clips are measured at full size.

The golden reference point ``M_golden`` is ``truth.json`` ``reference[region][measure]``, measured when
the task was built on a perfect fix (the defect undone exactly on the broken input's decoded content)
delivered as h264/AAC with the task's settings, i.e. what a flawless agent can reach through one
lossy encode; the bundled golden itself is at least as good and scores 1. Without a stored reference
the ideal value is used (identical: PSNR/SI-SDR at their caps, SSIM/STOI 1, PESQ-WB 4.64, LSD 0 ...;
SRMR, which has no ideal value, is measured on the golden). ``M_broken`` is measured at verification
time from ``inputs/broken.mp4``. ``reward.json`` ``details.measures_used`` names the measures, the
measure set and the scheme.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, List, Optional

import numpy as np

from vbench_ray.agentic.media import MediaError, MediaInfo, audio_limit, iter_audio, iter_frames, probe_stream, sha256
from vbench_ray.agentic.verifiers import measures as M
from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict

GROUPS = ("visual", "audio", "timeline", "shot_swap")
RANGE_SCORES = ("paper", "f1")
MEASURE_SETS = ("paper", "substitute")
SCHEMES = ("paper", "official")


@dataclass
class RepairConfig:
    scheme: str = "paper"  # paper: App. H.1 | official: format 5 + localisation 35 + edit 60 (public verifier)
    measures: str = "paper"  # paper: PESQ-WB/STOI/SRMR (+LPIPS if listed) | substitute: SI-SDR/LSD/env. correlation
    in_weight: float = 0.9  # H.1.1: reward = in_weight * s_in + (1 - in_weight) * s_out
    visual_metrics: List[str] = field(default_factory=lambda: ["psnr", "ssim"])  # H.1.2; also ciede2000, lpips
    audio_metrics: List[str] = field(default_factory=lambda: ["pesq_wb", "stoi", "si_sdr"])  # measures=paper
    reverb_intelligibility: str = "srmr"  # echo defects: this replaces stoi (srmr | stoi)
    substitute_audio_metrics: List[str] = field(default_factory=lambda: ["si_sdr", "lsd", "env_corr"])
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
    audio_chunk_s: float = 60.0  # audio regions longer than this are measured in stretches (memory bound)


IDEAL = {"psnr": None, "ssim": 1.0, "ciede2000": 0.0, "lpips": 0.0, "si_sdr": None, "lsd": 0.0,
         "env_corr": 1.0, "pesq_wb": M.PESQ_WB_MAX, "stoi": 1.0, "srmr": None}


def _ideal(measure: str, cfg: RepairConfig) -> float | None:
    if measure == "psnr":
        return cfg.psnr_cap_db
    if measure == "si_sdr":
        return cfg.si_sdr_cap_db
    return IDEAL[measure]


def golden_reference(truth: dict, region: str, measure: str, cfg: RepairConfig) -> float | None:
    """The stored ``M_golden``, else the measure's ideal value (None: measure it on the golden)."""
    value = ((truth.get("reference") or {}).get(region) or {}).get(measure)
    return float(value) if isinstance(value, (int, float)) else _ideal(measure, cfg)


def audio_measures_for(truth: dict, cfg: RepairConfig) -> list[str]:
    """The audio measurements of this task under ``cfg.measures``."""
    if cfg.measures == "substitute":
        return list(cfg.substitute_audio_metrics)
    names = list(cfg.audio_metrics)
    if truth.get("defect") == "audio_echo" and cfg.reverb_intelligibility != "stoi":
        names = [cfg.reverb_intelligibility if m == "stoi" else m for m in names]
        if cfg.reverb_intelligibility not in names:
            names.append(cfg.reverb_intelligibility)
    return names


def check_config(cfg: RepairConfig) -> None:
    """Unknown option values, unknown measures, or measures that cannot run here -> ValueError."""
    for key, value, known in (("scheme", cfg.scheme, SCHEMES), ("measures", cfg.measures, MEASURE_SETS),
                              ("range_score", cfg.range_score, RANGE_SCORES),
                              ("reverb_intelligibility", cfg.reverb_intelligibility, ("srmr", "stoi"))):
        if value not in known:
            raise ValueError(f"repair.{key}={value!r}: expected one of {list(known)}")
    for key, names, known in (("visual_metrics", cfg.visual_metrics, M.VISUAL),
                              ("audio_metrics", cfg.audio_metrics, M.AUDIO),
                              ("substitute_audio_metrics", cfg.substitute_audio_metrics, M.AUDIO)):
        bad = [m for m in names if m not in known]
        if bad:
            raise ValueError(f"repair.{key}: unknown measurement(s) {bad}; known: {list(known)}")
    if cfg.measures == "paper":
        subs = [m for m in cfg.audio_metrics if m in M.SUBSTITUTES]
        if subs:
            raise ValueError(f"repair.audio_metrics lists substitute measure(s) {subs}: set repair.measures="
                             "substitute to use them")


def measures_used(truth: dict, cfg: RepairConfig) -> dict:
    """What ``reward.json`` records: the scheme, the measure set and the measures of this task."""
    group = truth.get("group")
    out: dict[str, Any] = {"scheme": cfg.scheme, "measure_set": cfg.measures}
    if cfg.scheme == "official":
        out.update(visual=["ssim_lag_sharp_chroma"], audio=["xcorr_lag_penalised"], substitutes=[])
        return out
    visual = list(cfg.visual_metrics) if group == "visual" else (["psnr"] if group == "shot_swap" else [])
    audio = audio_measures_for(truth, cfg) if group == "audio" else []
    if group == "timeline":
        visual, audio = ["ssim (honesty check)"], ["xcorr (audio check)"]
    out.update(visual=visual, audio=audio, substitutes=[m for m in audio if m in M.SUBSTITUTES])
    return out


# ----------------------------------------------------------------------------- streaming readers

class FrameCursor:
    """Forward-only access by index to a video decoded one frame at a time (an index past the end gives
    the last frame). Only the current frame is held."""

    def __init__(self, path: Path, max_side: int | None):
        self._it = iter_frames(path, max_side)
        self.index = -1
        self.frame: np.ndarray | None = None
        self.decoded = 0  # frames decoded so far

    def at(self, i: int) -> np.ndarray:
        if i < self.index:
            raise ValueError(f"FrameCursor reads forward only (asked {i} after {self.index})")
        while self.index < i:
            nxt = next(self._it, None)
            if nxt is None:
                break
            self.frame, self.index = nxt, self.index + 1
            self.decoded += 1
        if self.frame is None:
            raise MediaError("video has no frames")
        return self.frame


class AudioReader:
    """Forward sliding window over a file's mono audio: ``get(lo, hi)`` returns samples ``[lo, hi)``
    (zeros outside ``[0, n)``, ``n`` the stream's length capped by :func:`media.audio_limit`); ``lo``
    must not decrease between calls. Holds only the samples from the last ``lo`` on."""

    def __init__(self, path: Path | None, info: MediaInfo | None):
        limit = audio_limit(info) if info is not None else None
        self._it = iter_audio(path, limit) if path is not None and info is not None and info.has_audio else iter(())
        self._buf = np.zeros(0, np.float32)
        self._start = 0  # absolute index of _buf[0]
        self._done = False
        self.max_buffered = 0

    def get(self, lo: int, hi: int) -> np.ndarray:
        out = np.zeros(max(0, hi - lo), np.float32)
        lo_c = max(lo, 0)
        if lo_c > self._start:  # drop what is no longer needed
            self._buf = self._buf[lo_c - self._start:]
            self._start = lo_c
        while not self._done and self._start + len(self._buf) < hi:
            chunk = next(self._it, None)
            if chunk is None:
                self._done = True
                break
            self._buf = np.concatenate([self._buf, chunk])
        self.max_buffered = max(self.max_buffered, len(self._buf))
        a, b = max(lo, self._start), min(hi, self._start + len(self._buf))
        if b > a:
            out[a - lo:b - lo] = self._buf[a - self._start:b - self._start]
        return out


def _blocks(n: int, size: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into equal consecutive blocks of about ``size`` (one block when ``n <= size``)."""
    k = max(1, int(math.ceil(n / max(1, size))))
    edges = [round(i * n / k) for i in range(k + 1)]
    return [(edges[i], edges[i + 1]) for i in range(k)]


@dataclass
class Source:
    """A media file probed without keeping its content: ``info`` and its kept audio length ``n_audio``."""
    path: Path
    info: MediaInfo
    n_audio: int

    @classmethod
    def probe(cls, path: Path) -> "Source":
        info, n = probe_stream(path)
        return cls(Path(path), info, n)

    @property
    def fps(self) -> float:
        return self.info.fps

    @property
    def sr(self) -> int:
        return int(self.info.sample_rate or 0)

    @property
    def n_frames(self) -> int:
        return self.info.num_frames

    def frames(self, max_side: int | None) -> Iterator[np.ndarray]:
        return iter_frames(self.path, max_side)

    def audio(self) -> AudioReader:
        return AudioReader(self.path if self.n_audio else None, self.info)


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


def _psnr_of_mse(mse: float, cap: float) -> float:
    return cap if mse <= M.EPS else float(min(cap, 10.0 * math.log10(255.0 ** 2 / mse)))


def near_copy(out: Source, broken: Source, golden: Source, cfg: RepairConfig) -> dict | None:
    """Evidence that ``out`` is the broken input re-encoded, else None.

    A near copy has the broken input's length, every frame within ``near_copy_psnr_db`` and every 0.25 s
    of audio within ``near_copy_snr_db`` of it, and, where the broken input differs from the golden, is
    closer to the broken input than to the golden (so a faithful fix of a subtle defect is not a copy).
    Streams the three files in step; stops at the first frame that is not a copy.
    """
    if out.n_frames != broken.n_frames or (out.info.width, out.info.height) != (broken.info.width, broken.info.height):
        return None
    with_golden = golden.n_frames == broken.n_frames and \
        (golden.info.width, golden.info.height) == (broken.info.width, broken.info.height)
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
                oe, be = o[s:s + step], b[s:s + step]
                noise, sig = float(np.sum((be - oe) ** 2)), float(np.sum(be ** 2))
                if not (sig <= M.EPS and noise <= M.EPS):
                    worst = min(worst, 10.0 * math.log10(max(sig, M.EPS) / max(noise, M.EPS)))
                if g is not None:
                    ge = g[s:s + step]
                    sig_g, noise_g = float(np.sum(ge ** 2)), float(np.sum((ge - be) ** 2))
                    snr_bg.append(math.inf if sig_g <= M.EPS and noise_g <= M.EPS else
                                  10.0 * math.log10(max(sig_g, M.EPS) / max(noise_g, M.EPS)))
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
        rec = {"in": {"out": m_out_in, "broken": m_br_in, "golden": g_in,
                      "s": M.rescale(m_out_in, m_br_in, g_in, hib)}}
        s_in.append(rec["in"]["s"])
        if vals[m]["out_out"]:
            m_out_out = _mean(vals[m]["out_out"])
            g_out = golden_reference(truth, "out", m, cfg)
            rec["out"] = {"out": m_out_out, "broken_anchor": m_br_in, "golden": g_out,
                          "s": M.rescale(m_out_out, m_br_in, g_out, hib)}
            s_out.append(rec["out"]["s"])
        per[m] = rec
    return {"measures": per, "s_in": _mean(s_in), "s_out": _mean(s_out) if s_out else 1.0,
            "n_frames_in": int(inside.sum())}


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
                self.parts.setdefault(k, []).append(a[pos:pos + take])
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
    n_in = sum(int(((np.arange(lo, hi) / sr >= w0) & (np.arange(lo, hi) / sr < w1)).sum()) for lo, hi in _blocks(n, size))
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
        rec = {"in": {"out": m_out_in, "broken": m_br_in, "golden": g_in,
                      "s": M.rescale(m_out_in, m_br_in, g_in, hib)}}
        s_in.append(rec["in"]["s"])
        if v_out:
            g_out = refs_out[m] if refs_out[m] is not None else _lower_anchor(v_out[f"golden:{m}"], truth, "out", m, cfg)
            m_out_out = v_out[f"out:{m}"]
            rec["out"] = {"out": m_out_out, "broken_anchor": m_br_in, "golden": g_out,
                          "s": M.rescale(m_out_out, m_br_in, g_out, hib)}
            s_out.append(rec["out"]["s"])
        per[m] = rec
    return {"measures": per, "s_in": _mean(s_in), "s_out": _mean(s_out) if s_out else 1.0,
            "n_audio_stretches": {"in": len(reg_in.results), "out": len(reg_out.results)}}


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
        result["reason"] = (f"the rendered output does not match the source minus the reported ranges "
                            f"(frame {worst}, SSIM {scores[worst]:.3f})")
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
        self.length = sum(int(keep_mask(np.arange(lo, hi) / self.sr, ranges).sum())
                          for lo, hi in _blocks(self.n_src, self.block))
        self._src_pos = 0
        self._buf = np.zeros(0, np.float32)
        self._start = 0

    def get(self, lo: int, hi: int) -> np.ndarray:
        if lo > self._start:
            self._buf = self._buf[lo - self._start:]
            self._start = lo
        while self._start + len(self._buf) < hi and self._src_pos < self.n_src:
            end = min(self.n_src, self._src_pos + self.block)
            chunk = self.reader.get(self._src_pos, end)
            mask = keep_mask(np.arange(self._src_pos, end) / self.sr, self.ranges)
            self._buf = np.concatenate([self._buf, chunk[mask]])
            self._src_pos = end
        return self._buf[lo - self._start:hi - self._start]


def audio_check(out: Source, broken: Source, ranges: list[tuple[float, float]], cfg: RepairConfig,
                segment_s: float = 0.5) -> dict:
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
            lag_sums += correlate(a, b, mode="valid", method="fft")[:2 * max_lag + 1]
        while si < len(starts) and starts[si] < hi:  # blocks are whole segments: none crosses a block end
            start = starts[si]
            part = b[start - lo:start - lo + seg]
            si += 1
            if len(part) and float(np.sqrt(np.mean(part ** 2))) < 0.05 * loud:
                continue  # near-silent: nothing to compare
            w_lo = max(0, start - max_lag)
            w_hi = min(n_out, start + len(part) + max_lag)
            window = a[w_lo - (lo - max_lag):w_hi - (lo - max_lag)]
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
    return {"xcorr_peak": peak, "lag_s": lag / sr, "min_segment_xcorr": worst, "passed": passed,
            **({} if passed else {"reason": "the output audio does not match the source minus the reported ranges"})}


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
    return {"ranges": [list(r) for r in ranges], "matches": matches, "range_recall": recall,
            "range_precision": precision, "range_f1": f1, "range_score": match_score,
            "honesty": honesty, "audio_check": audio, "reward": reward}


# ----------------------------------------------------------------------------- official scheme

OFFICIAL_POINTS = {"format": 5.0, "localization": 35.0, "edit": 60.0}
_TS = (re.compile(r"^\s*(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)\s*$"), re.compile(r"^\s*(\d+):(\d{1,2}(?:\.\d+)?)\s*$"),
       re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$"))
_FIELD = re.compile(r"^\s*-\s*(type|start|end)\s*:\s*(.+?)\s*$", re.IGNORECASE)
_DIAGNOSIS = re.compile(r"^\s*##\s+Diagnosis\b", re.IGNORECASE)


def parse_timestamp(text: str | None) -> float | None:
    """``HH:MM:SS.mmm``, ``MM:SS.mmm`` or ``SS.mmm`` -> seconds (None if none of these)."""
    if text is None:
        return None
    for k, rx in enumerate(_TS):
        m = rx.match(str(text))
        if m:
            parts = [float(x) for x in m.groups()]
            return sum(v * 60.0 ** (len(parts) - 1 - i) for i, v in enumerate(parts))
    return None


def parse_diagnosis(text: str) -> list[dict]:
    """The ``## Diagnosis`` blocks of ``report.md``: per block its first ``- type:``, ``- start:`` and
    ``- end:`` lines (a block ends at the next ``## `` heading). Without a Diagnosis heading, the whole
    report is read as one block (the public verifier's single-window path)."""
    lines = text.splitlines()
    heads = [i for i, ln in enumerate(lines) if _DIAGNOSIS.match(ln)]
    spans = []
    for n, h in enumerate(heads):
        end = heads[n + 1] if n + 1 < len(heads) else len(lines)
        for j in range(h + 1, end):
            if lines[j].lstrip().startswith("## "):
                end = j
                break
        spans.append(lines[h:end])
    if not spans:
        spans = [lines]
    blocks = []
    for span in spans:
        found: dict[str, str | None] = {"type": None, "start": None, "end": None}
        for ln in span:
            m = _FIELD.match(ln)
            if m and found[m.group(1).lower()] is None:
                found[m.group(1).lower()] = m.group(2).strip()
        blocks.append(found)
    return blocks


def localization_score(report: Path, window: tuple[float, float], points: float = 35.0) -> dict:
    """Localisation points: with the reported window ``[s, e]`` (the first Diagnosis block) and the
    truth window ``[ts, te]``: ``points * (5/35 hit + 10/35 exp(-3|s - ts|) + 10/35 exp(-3|e - te|) +
    10/35 IoU)``, ``hit`` when the two windows overlap (the target scene of the public verifier is the
    defect window here: synthetic clips have no scene list)."""
    base = {"score": 0.0, "max": points, "truth_window_s": [float(window[0]), float(window[1])]}
    if not report.is_file():
        return {**base, "error": "missing report.md"}
    blocks = parse_diagnosis(report.read_text(encoding="utf-8", errors="replace"))
    first = blocks[0]
    s, e = parse_timestamp(first["start"]), parse_timestamp(first["end"])
    if first["start"] is None or first["end"] is None:
        return {**base, "error": "report.md has no '- start:' / '- end:' lines in a '## Diagnosis' block"}
    if s is None or e is None:
        return {**base, "error": f"unparseable timestamps: start={first['start']!r}, end={first['end']!r}"}
    if e <= s:
        return {**base, "predicted_window_s": [s, e], "error": "non-positive window: end <= start"}
    ts, te = float(window[0]), float(window[1])
    inter = max(0.0, min(e, te) - max(s, ts))
    union = max(e, te) - min(s, ts)
    iou = inter / union if union > 0 and te > ts else 0.0
    hit = e >= ts and s <= te
    parts = {"hit": points * 5 / 35 * hit, "start": points * 10 / 35 * math.exp(-3.0 * abs(s - ts)),
             "end": points * 10 / 35 * math.exp(-3.0 * abs(e - te)), "iou": points * 10 / 35 * iou}
    return {**base, "score": float(sum(parts.values())), "predicted_window_s": [s, e], "iou": iou,
            "scene_hit": bool(hit), "parts": parts, "defect_type": first["type"], "n_blocks": len(blocks)}


def format_items(out: MediaInfo, golden: MediaInfo, fps_tol: float = 0.02, duration_tol: float = 0.05) -> dict:
    """The public verifier's seven format items of ``fixed.mp4`` against the source (golden)."""
    def eq(a, b):
        return a is not None and b is not None and a == b

    items = {
        "container": eq(out.container, golden.container),
        "video_codec": eq(out.video_codec, golden.video_codec),
        "audio_codec": eq(out.audio_codec, golden.audio_codec),
        "fps": bool(out.fps and golden.fps and abs(out.fps - golden.fps) <= fps_tol),
        "resolution": (out.width, out.height) == (golden.width, golden.height) and out.width > 0,
        "duration_s": abs(out.duration - golden.duration) <= duration_tol,
        "audio_sample_rate": eq(out.sample_rate, golden.sample_rate),
    }
    return items


def _gray_lab(frame: np.ndarray) -> dict:
    import cv2

    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    return {"gray": gray, "ab": cv2.cvtColor(frame, cv2.COLOR_RGB2LAB)[..., 1:3].astype(np.int16),
            "lap": float(cv2.Laplacian(gray, cv2.CV_64F).var()), "dhash": _dhash(gray)}


def _dhash(gray: np.ndarray, size: int = 8) -> np.ndarray:
    import cv2

    small = cv2.resize(gray, (size + 1, size), interpolation=cv2.INTER_AREA)
    return (small[:, 1:] > small[:, :-1]).reshape(-1)


def frame_match(f: dict, s: dict, lag: int, chroma_norm: float = 25.0, lag_penalty: float = 0.03) -> float:
    """One candidate's value: ``SSIM(grey) * min(1, lap_f / lap_s) * max(0, 1 - mean|ab_f - ab_s| / 25)
    * max(0, 1 - 0.03 |lag|)`` (sharpness ratio 1 when the source is flat)."""
    from skimage.metrics import structural_similarity

    ssim = float(structural_similarity(s["gray"], f["gray"], data_range=255))
    sharp = min(1.0, f["lap"] / s["lap"]) if s["lap"] > 1.0 else 1.0
    chroma = max(0.0, 1.0 - float(np.mean(np.abs(s["ab"] - f["ab"]))) / max(chroma_norm, 1e-6))
    return ssim * sharp * chroma * max(0.0, 1.0 - lag_penalty * abs(lag))


def xcorr_lagged(a: np.ndarray, b: np.ndarray, sr: int, max_lag_ms: float = 150.0) -> float | None:
    """Peak of the normalised cross-correlation within +-``max_lag_ms``, times ``max(0, 1 - |lag| /
    max_lag)``, clamped to [0, 1] (two silent signals: 1; None for empty ones)."""
    from scipy.signal import correlate

    n = min(len(a), len(b))
    if n == 0:
        return None
    a, b = np.asarray(a[:n], np.float64), np.asarray(b[:n], np.float64)
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
    return float(max(0.0, min(1.0, xc[lo + k] / (na * nb) * max(0.0, 1.0 - abs(lag) / max_lag))))


def _deduct(sig_in: float | None, sig_out: float | None, budget: float, w_in: float = 2.5, w_out: float = 1.0) -> float:
    """``budget - min(budget, w_in budget (1 - in)) - min(budget, w_out budget (1 - out))``, floored at 0."""
    d_in = min(budget, w_in * budget * max(0.0, 1.0 - sig_in)) if sig_in is not None else 0.0
    d_out = min(budget, w_out * budget * max(0.0, 1.0 - sig_out)) if sig_out is not None else 0.0
    return max(0.0, budget - d_in - d_out)


def edit_score(out: Source, golden: Source, window: tuple[float, float], cfg: RepairConfig,
               points: float = 60.0, chunk_s: float = 10.0, sample_fps: float = 10.0, band: int = 10,
               topk: int = 3) -> dict:
    """Edit points: the output against the golden in ``chunk_s`` chunks. Video: per sampled output frame
    (about ``sample_fps``), the best :func:`frame_match` over golden frames within ``band`` frames (the
    top ``topk`` by dhash distance, plus lag 0), averaged in and out of the window; audio: per chunk,
    :func:`xcorr_lagged` in and out of the window, weighted by duration. Each modality's budget (60% /
    40%) loses 2.5x its shortfall in the window and 1x outside it. Golden frames are held one chunk at a
    time."""
    w0, w1 = float(window[0]), float(window[1])
    duration = golden.info.duration
    fps_s, fps_f = golden.fps, out.fps or golden.fps
    skip_f = max(1, int(round(fps_f / sample_fps)))
    chunks = []
    t = 0.0
    while t < duration - 1e-6:
        chunks.append((t, min(t + chunk_s, duration)))
        t += chunk_s
    g_it, o_it = golden.frames(cfg.max_side), out.frames(cfg.max_side)
    ro, rg = out.audio(), golden.audio()
    sr = golden.sr
    v_in, v_out, a_in, a_out = [], [], [], []  # (value, weight)
    for start, end in chunks:
        dur = end - start
        src = []
        for _ in range(int(round(dur * fps_s))):
            fr = next(g_it, None)
            if fr is None:
                break
            src.append(_gray_lab(fr))
        n_wanted = max(2, int(round(dur * sample_fps)))
        vals_in, vals_out = [], []
        for i in range(int(round(dur * fps_f))):
            fr = next(o_it, None)
            if fr is None:
                break
            if i % skip_f or not src:
                continue
            if fr.shape[:2] != src[0]["gray"].shape:
                import cv2

                fr = cv2.resize(fr, src[0]["gray"].shape[::-1], interpolation=cv2.INTER_AREA)
            f = _gray_lab(fr)
            lo, hi = max(0, i - band), min(len(src), i + band + 1)
            if lo >= hi:
                continue
            keys = list(range(lo, hi))
            if 0 < topk and hi - lo > topk + 1:
                keys = sorted(keys, key=lambda k: int(np.sum(f["dhash"] != src[k]["dhash"])))[:topk]
                if lo <= i < hi and i not in keys:
                    keys.append(i)
            best = max(frame_match(f, src[k], k - i) for k in keys)
            ts = start + i / fps_f
            (vals_in if w0 <= ts <= w1 else vals_out).append(best)
            if len(vals_in) + len(vals_out) >= n_wanted:
                break
        if vals_in:
            v_in.append((min(1.0, max(0.0, float(np.mean(vals_in)))), len(vals_in)))
        if vals_out:
            v_out.append((min(1.0, max(0.0, float(np.mean(vals_out)))), len(vals_out)))
        if sr and golden.n_audio:
            s0, s1 = int(round(start * sr)), int(round(end * sr))
            a, b = ro.get(s0, s1), rg.get(s0, s1)
            if end > w0 and start < w1:
                i0 = max(0, int(round((max(start, w0) - start) * sr)))
                i1 = min(len(a), int(round((min(end, w1) - start) * sr)))
                d_in = min(end, w1) - max(start, w0)
                x_in = xcorr_lagged(a[i0:i1], b[i0:i1], sr)
                x_out = xcorr_lagged(np.concatenate([a[:i0], a[i1:]]), np.concatenate([b[:i0], b[i1:]]), sr)
                if x_in is not None:
                    a_in.append((x_in, d_in))
                if x_out is not None:
                    a_out.append((x_out, dur - d_in))
            else:
                x_out = xcorr_lagged(a, b, sr)
                if x_out is not None:
                    a_out.append((x_out, dur))

    def wmean(pairs):
        pairs = [(v, w) for v, w in pairs if w > 0]
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

    ssim_in, ssim_out, x_in, x_out = wmean(v_in), wmean(v_out), wmean(a_in), wmean(a_out)
    video = _deduct(ssim_in, ssim_out, 0.6 * points)
    audio = _deduct(x_in, x_out, 0.4 * points)
    return {"score": float(video + audio), "max": points, "window_s": [w0, w1],
            "video": {"sub": video, "ssim_in": ssim_in, "ssim_out": ssim_out},
            "audio": {"sub": audio, "xcorr_in": x_in, "xcorr_out": x_out}, "n_chunks": len(chunks)}


def official_score(task, submission: Path, cfg: RepairConfig, base: dict) -> Verdict:
    """``repair.scheme=official``: (format + localisation + edit) / 100, each part clipped to its points."""
    truth = task.truth
    golden = Source.probe(task.truth_file(truth["golden"]))
    window = truth.get("window_golden") or truth.get("window") or [0.0, golden.info.duration]
    fixed = submission / "fixed.mp4"
    out = None
    fmt: dict[str, Any]
    if not fixed.is_file():
        fmt = {"score": 0.0, "max": OFFICIAL_POINTS["format"], "error": "missing fixed.mp4"}
    else:
        try:
            out = Source.probe(fixed)
            items = format_items(out.info, golden.info)
            fmt = {"score": OFFICIAL_POINTS["format"] * sum(items.values()) / len(items),
                   "max": OFFICIAL_POINTS["format"], "items": items}
        except MediaError as exc:
            fmt = {"score": 0.0, "max": OFFICIAL_POINTS["format"], "error": f"fixed.mp4 cannot be decoded: {exc}"}
    loc = localization_score(submission / "report.md", (float(truth.get("window", window)[0]),
                                                        float(truth.get("window", window)[1])),
                             OFFICIAL_POINTS["localization"])
    if out is not None:
        edt = edit_score(out, golden, (float(window[0]), float(window[1])), cfg, OFFICIAL_POINTS["edit"])
    else:
        edt = {"score": 0.0, "max": OFFICIAL_POINTS["edit"], "error": fmt.get("error", "no fixed.mp4")}
    parts = {"format": fmt, "localization": loc, "edit": edt}
    norm = {k: min(1.0, max(0.0, float(v["score"]) / OFFICIAL_POINTS[k])) for k, v in parts.items()}
    reward = sum(norm[k] * OFFICIAL_POINTS[k] for k in norm) / sum(OFFICIAL_POINTS.values())
    status = "ok" if out is not None else "missing"
    reason = None if out is not None else fmt.get("error")
    return Verdict(float(reward), status, {**base, **({"reason": reason} if reason else {}),
                                           "official": {**parts, "normalised": norm}})


# ----------------------------------------------------------------------------- entry point

def verify(task, submission: Path, cfg: RepairConfig | None = None) -> Verdict:
    cfg = cfg or RepairConfig()
    check_config(cfg)
    for name in (list(cfg.visual_metrics) + audio_measures_for(task.truth, cfg) if cfg.scheme == "paper" else []):
        reason = M.unavailable(name)
        if reason:
            raise M.MeasureUnavailable(reason)
    truth = task.truth
    group = truth["group"]
    submission = Path(submission)
    base: dict[str, Any] = {"group": group, "defect": truth.get("defect"), "window": truth.get("window"),
                            "report_md": (submission / "report.md").is_file(),
                            "measures_used": measures_used(truth, cfg)}
    if cfg.scheme == "official":
        return official_score(task, submission, cfg, base)
    fixed = submission / "fixed.mp4"
    broken_path = task.input(truth["broken"])
    try:
        if not fixed.is_file():
            raise InvalidSubmission("fixed.mp4 is missing from the submission", status="missing")
        if sha256(fixed) == sha256(broken_path):
            raise InvalidSubmission("fixed.mp4 is a verbatim copy of the broken input")
        try:
            out = Source.probe(fixed)
        except MediaError as exc:
            raise InvalidSubmission(f"fixed.mp4 cannot be decoded: {exc}") from exc
        broken, golden = Source.probe(broken_path), Source.probe(task.truth_file(truth["golden"]))
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
        if not out.n_audio:
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


def measure_references(golden: str | Path, reencoded: str | Path, truth: dict,
                       cfg: RepairConfig | None = None) -> dict:
    """``truth.json`` ``reference``: every measurement of ``reencoded`` (a perfect fix delivered with the
    task's codec settings, a file) against the golden (a file), per region; computed when a task is built.
    Every audio measure is stored, so that either measure set finds its reference."""
    cfg = cfg or RepairConfig()
    visual = [m for m in M.VISUAL if not M.unavailable(m)]
    audio = [m for m in M.AUDIO if not M.unavailable(m)]
    full = RepairConfig(**{**cfg.__dict__, "visual_metrics": visual, "audio_metrics": [], "measures": "substitute",
                           "substitute_audio_metrics": audio})
    g, r = Source.probe(Path(golden)), Source.probe(Path(reencoded))
    ref: dict[str, dict] = {}
    group = truth["group"]
    bare = {**truth, "reference": {}}
    if group == "visual":
        parts = visual_scores(r, r, g, bare, full)
    elif group == "audio":
        parts = audio_scores(r, r, g, bare, full)
    else:
        parts = None
    if parts is not None:
        for m, rec in parts["measures"].items():
            ref.setdefault("in", {})[m] = rec["in"]["out"]
            if "out" in rec:
                ref.setdefault("out", {})[m] = rec["out"]["out"]
    if group in ("shot_swap", "timeline"):
        ref["whole"] = {"psnr": shot_swap_score(r, r, g, bare, full)["psnr"]["out"]}
    return ref
