"""NRVBench's config (``configs/nrv.yaml``): data, the conventional metrics' sections, the judge media, the App. F.1
negative controls, the human-agreement input, the judge(s) and the score options; the benchmark is in ``nrv.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from vbench_ray.benchmarks import nrv_scoring as scoring
from vbench_ray.config import BaseConfig, bounded
from vbench_ray.judges.base import JudgeConfig
from vbench_ray.metrics.base import metrics_config

# Table 3's conventional metrics, by their registered names (vbench_ray.metrics): their config sections,
# allowed values, weight checks and scales (App. E.5, shown in summary.json) come from the metric classes.
FRAME_METRICS = ("BG_PSNR", "BG_SSIM", "BG_MSE", "BG_LPIPS", "StructDist", "CLIP_S", "CLIP_E", "NIQE", "MotionScore")


@dataclass
class NRVDataConfig:
    annotations: str = "???"  # the annotations JSONL (docs/nrv_format.md): one edit instance per line
    root: Optional[str] = None  # root of each record's `video` and `mask` paths (null: the annotations' folder)
    edited_dir: str = "???"  # one sub-folder per method with {id}.mp4, or one method's videos directly
    methods: List[str] = field(default_factory=list)  # methods (sub-folders) to evaluate; empty: all of them
    method: Optional[str] = None  # method name when edited_dir holds the videos directly (null: the folder's name)
    pair_mismatch: str = "resample"  # edited vs source frame count / size differ: resample | fail


DEFAULT_ENABLED = ("NRVE_Acc", "BG_PSNR", "BG_SSIM", "BG_MSE", "MotionScore", "FPS")

# `metrics`: enabled, then one section per frame metric (its config_class)
NRVMetricsConfig = metrics_config(
    "NRVMetricsConfig",
    FRAME_METRICS,
    module=__name__,
    before=[("enabled", List[str], field(default_factory=lambda: list(DEFAULT_ENABLED)))],
)


@dataclass
class NRVMediaConfig:
    roi_frames: int = bounded(8, ge=1)  # edited frames shown for S_phy (uniform), cropped to the mask-guided ROI
    roi_margin: float = bounded(
        0.1, ge=0
    )  # ROI = bounding box of the union of the masks, grown by this fraction per side
    roi_max_side: int = bounded(448, ge=1)  # ROI crops larger than this (long side, px) are downscaled
    flow_max_side: int = bounded(384, ge=1)  # frames downscaled to this long side before the Eq. 4 flows
    show_frames: bool = False  # also show I_0, I_m, I_T-1 with the flow image (App. E.3); Eq. 5: flow image only
    format: str = "png"  # png | jpg


@dataclass
class NRVControlsConfig:
    names: List[str] = field(default_factory=list)  # App. F.1 controls run as variants: unchanged, random_mask,
    #                                                  appearance, shuffled, flow_corrupted
    per_category: Optional[int] = bounded(
        None, ge=1, note="null: all"
    )  # controls for the first N instances of each category (F.1: 5); null: all
    methods: List[str] = field(default_factory=list)  # methods whose edits get controls; empty: every method
    amplitude: float = bounded(6.0, gt=0)  # flow_corrupted: largest local displacement, px


@dataclass
class NRVAgreementConfig:
    human_scores: Optional[str] = None  # human scores (JSONL/CSV, vbench_ray.agreement) for rank agreement


def _judge_defaults() -> JudgeConfig:
    # App. E.5: one deterministic retry, then the lowest score; temperature 0 (deterministic judging)
    return JudgeConfig(max_retries=1, temperature=0.0, max_tokens=512)


@dataclass
class NRVConfig(BaseConfig):
    benchmark: str = "nrv"
    data: NRVDataConfig = field(default_factory=NRVDataConfig)
    metrics: NRVMetricsConfig = field(default_factory=NRVMetricsConfig)
    media: NRVMediaConfig = field(default_factory=NRVMediaConfig)
    judge: JudgeConfig = field(default_factory=_judge_defaults)
    judges: List[Dict[str, Any]] = field(default_factory=list)  # several judges: overrides of `judge`, one each
    score: scoring.NRVScoreConfig = field(default_factory=scoring.NRVScoreConfig)
    controls: NRVControlsConfig = field(default_factory=NRVControlsConfig)
    agreement: NRVAgreementConfig = field(default_factory=NRVAgreementConfig)
