"""Repair settings shared by both schemes: :class:`RepairConfig`, its checks, and the reference points
of the paper's scheme (App. H.1: ``M_golden``). See :mod:`vbench_ray.agentic.verifiers.repair`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from vbench_ray.agentic.verifiers import measures as M

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


IDEAL = {
    "psnr": None,
    "ssim": 1.0,
    "ciede2000": 0.0,
    "lpips": 0.0,
    "si_sdr": None,
    "lsd": 0.0,
    "env_corr": 1.0,
    "pesq_wb": M.PESQ_WB_MAX,
    "stoi": 1.0,
    "srmr": None,
}


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
    for key, value, known in (
        ("scheme", cfg.scheme, SCHEMES),
        ("measures", cfg.measures, MEASURE_SETS),
        ("range_score", cfg.range_score, RANGE_SCORES),
        ("reverb_intelligibility", cfg.reverb_intelligibility, ("srmr", "stoi")),
    ):
        if value not in known:
            raise ValueError(f"repair.{key}={value!r}: expected one of {list(known)}")
    for key, names, known in (
        ("visual_metrics", cfg.visual_metrics, M.VISUAL),
        ("audio_metrics", cfg.audio_metrics, M.AUDIO),
        ("substitute_audio_metrics", cfg.substitute_audio_metrics, M.AUDIO),
    ):
        bad = [m for m in names if m not in known]
        if bad:
            raise ValueError(f"repair.{key}: unknown measurement(s) {bad}; known: {list(known)}")
    if cfg.measures == "paper":
        subs = [m for m in cfg.audio_metrics if m in M.SUBSTITUTES]
        if subs:
            raise ValueError(
                f"repair.audio_metrics lists substitute measure(s) {subs}: set repair.measures=substitute to use them"
            )


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
