"""NRVBench: non-rigid video editing, scored by NRVE-Acc and conventional metrics (paper: seeds/001).

No official code or data format exists (ANCHORS.md §3); the paper is the spec and ``docs/nrv_format.md``
documents the format defined here (App. A lists the fields, §3.2 the construction, App. C the categories):

* ``data.annotations``: JSONL, one edit instance per line (``id``, ``video_id``, ``video``, ``mask``,
  ``category`` in ASB/CTS/DSO/GSF/HFF/LFS, ``difficulty`` in L1-L3, ``source_prompt``, ``target_prompt``,
  ``instruction``, ``negative_prompt``, ``mcq {question, options, answer, partial}``, ``physics {criteria,
  question}``, ``temporal {question, flicker_question}``); ``video`` and ``mask`` resolve under ``data.root``
  (default: the annotations file's folder); ``mask`` is a folder of per-frame mask PNGs.
* ``data.edited_dir``: one sub-folder per method holding ``{id}.mp4`` (case ids ``{method}:{id}``), or the
  videos of one method directly (case ids ``{id}``; the method is named ``data.method`` or the folder). An
  optional ``timing.json`` per method (``{id: {"seconds": s, "frames": n}}`` or ``{id: fps}``) gives FPS
  (Table 3's speed, App. E.6: mean of per-video generation frames per second).

Pipeline: ``control`` stage (negative controls, :mod:`vbench_ray.controls`; a pass-through for real edits)
-> ``frames`` stage (:class:`NRVFrameStage`: decode source, edited video and masks once; the conventional
metrics of Table 3 on App. E.5's scales; the judge's images: the mask-guided ROI frames for ``S_phy`` and
the flow-evidence image of Eq. 4 for ``S_temp``) -> one judge phase per judge (``judges:``; §5, Table 2),
each the three requests of :mod:`vbench_ray.benchmarks.nrv_scoring` per case.

A per-case problem never stops the run: a malformed record, a missing video or mask, or a mask whose frame
count or size differs from the source video's is recorded on the case (``error_load`` / ``error_frames``),
the case is left out of the scores and counted under ``failures``. An edited video whose size or length
differs from the source is resampled (``data.pair_mismatch=resample``) or fails (``fail``).

Summary (``summary.json``): ``metrics.NRVE_Acc`` and the components ``S_instr``, ``S_phy``, ``S_temp`` in
percent (per instance, averaged over judges when there are several, then over instances, with case-level
bootstrap CIs), the enabled conventional metrics and ``FPS``; ``by_category``, ``by_difficulty``,
``by_method``, ``by_judge``; ``cross_judge`` (Table 2: each judge's NRVE-Acc, the cross-judge mean and std,
overall and per method); ``sanity`` when negative-control variants ran (App. F.1); ``agreement`` when
``agreement.human_scores`` is set (§5, App. B.2); ``report_tables`` (the same as rows for the report).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import cv2
import numpy as np
import pyarrow as pa
from omegaconf import OmegaConf

from vbench_ray import controls as ctl
from vbench_ray.benchmarks import nrv_scoring as scoring
from vbench_ray.benchmarks.base import Benchmark, DataError, JudgePhase, failure_report, register_benchmark
from vbench_ray.benchmarks.cove import VIDEO_EXTS, resolve_under
from vbench_ray.config import BaseConfig, ConfigError
from vbench_ray.judges.base import JUDGE_CHOICES, JudgeConfig
from vbench_ray.metrics.base import METRICS
from vbench_ray.metrics.learned import CLIPConfig, LPIPS_ARCHS, LPIPSConfig, StructDistConfig
from vbench_ray.metrics.base import AllFrames
from vbench_ray.metrics.preservation import (BACKGROUND_MODES, BackgroundConfig, MotionScoreConfig,
                                             NIQEConfig)
from vbench_ray.pipeline import Stage, format_exception
from vbench_ray.stats import bootstrap_ci, describe, finite
from vbench_ray.video.flow import farneback_flow, flow_to_color
from vbench_ray.video.frames import FrameMetricsStage
from vbench_ray.video.io import VideoReader, uniform_indices

log = logging.getLogger(__name__)

FRAME_METRICS = ("BG_PSNR", "BG_SSIM", "BG_MSE", "BG_LPIPS", "StructDist", "CLIP_S", "CLIP_E", "NIQE", "MotionScore")
ALL_METRICS = ("NRVE_Acc",) + FRAME_METRICS + ("FPS",)
# Table 3's columns and App. E.5's scales, as shown in summary.json.
METRIC_SCALES = {"BG_PSNR": "dB", "BG_SSIM": "[0,100]", "BG_MSE": "MSE x 1e4", "BG_LPIPS": "LPIPS x 1e3",
                 "StructDist": "x 1e3", "CLIP_S": "cosine x 100", "CLIP_E": "cosine x 100", "NIQE": "NIQE",
                 "MotionScore": "px/frame", "FPS": "frames/s"}
MEDIA_DIR = "nrve_media"
CONTROL_DIR = "variants/controls"
TIMING_FILE = "timing.json"


# ----------------------------------------------------------------------------- config

@dataclass
class NRVDataConfig:
    annotations: str = "???"  # the annotations JSONL (docs/nrv_format.md): one edit instance per line
    root: Optional[str] = None  # root of each record's `video` and `mask` paths (null: the annotations' folder)
    edited_dir: str = "???"  # one sub-folder per method with {id}.mp4, or one method's videos directly
    methods: List[str] = field(default_factory=list)  # methods (sub-folders) to evaluate; empty: all of them
    method: Optional[str] = None  # method name when edited_dir holds the videos directly (null: the folder's name)
    pair_mismatch: str = "resample"  # edited vs source frame count / size differ: resample | fail


@dataclass
class NRVMetricsConfig:
    enabled: List[str] = field(default_factory=lambda: ["NRVE_Acc", "BG_PSNR", "BG_SSIM", "BG_MSE", "MotionScore",
                                                        "FPS"])
    BG_PSNR: BackgroundConfig = field(default_factory=BackgroundConfig)
    BG_SSIM: BackgroundConfig = field(default_factory=BackgroundConfig)
    BG_MSE: BackgroundConfig = field(default_factory=BackgroundConfig)
    BG_LPIPS: LPIPSConfig = field(default_factory=LPIPSConfig)
    StructDist: StructDistConfig = field(default_factory=StructDistConfig)
    CLIP_S: CLIPConfig = field(default_factory=CLIPConfig)
    CLIP_E: CLIPConfig = field(default_factory=CLIPConfig)
    NIQE: NIQEConfig = field(default_factory=NIQEConfig)
    MotionScore: MotionScoreConfig = field(default_factory=MotionScoreConfig)


@dataclass
class NRVMediaConfig:
    roi_frames: int = 8  # edited frames shown for S_phy (uniform), cropped to the mask-guided ROI
    roi_margin: float = 0.1  # ROI = bounding box of the union of the masks, grown by this fraction per side
    roi_max_side: int = 448  # ROI crops larger than this (long side, px) are downscaled
    flow_max_side: int = 384  # frames downscaled to this long side before the Eq. 4 flows
    show_frames: bool = False  # also show I_0, I_m, I_T-1 with the flow image (App. E.3); Eq. 5: flow image only
    format: str = "png"  # png | jpg


@dataclass
class NRVControlsConfig:
    names: List[str] = field(default_factory=list)  # App. F.1 controls run as variants: unchanged, random_mask,
    #                                                  appearance, shuffled, flow_corrupted
    per_category: Optional[int] = None  # controls for the first N instances of each category (F.1: 5); null: all
    methods: List[str] = field(default_factory=list)  # methods whose edits get controls; empty: every method
    amplitude: float = 6.0  # flow_corrupted: largest local displacement, px


@dataclass
class NRVAgreementConfig:
    human_scores: Optional[str] = None  # human scores (JSONL/CSV, vbench_ray.agreement) for rank agreement


def _judge_defaults() -> JudgeConfig:
    # App. E.5: one deterministic retry, then the lowest score; temperature 0 (DESIGN.md)
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


# ----------------------------------------------------------------------------- annotations

def read_annotations(path: Path) -> list[tuple[int, Any]]:
    """``(line number, record or JSON error text)`` for every non-empty line of the annotations JSONL."""
    if not path.is_file():
        raise DataError(f"data.annotations not found: {path}")
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"data.annotations {path} is not UTF-8 text: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as exc:
            out.append((n, f"not valid JSON ({exc.msg} at column {exc.colno})"))
    if not out:
        raise DataError(f"data.annotations {path} holds no records")
    return out


def _text(rec: dict, key: str, where: str, errors: list, required: bool = True) -> None:
    value = rec.get(key)
    if value is None and not required:
        return
    if not isinstance(value, str) or (required and not value.strip()):
        errors.append(f"{where}.{key}: expected a non-empty string, got {value!r}")


def validate_record(rec: Any, where: str) -> list[str]:
    """Problems with one annotation record, each naming its field (``annotations.jsonl:3.mcq.answer``)."""
    if not isinstance(rec, dict):
        return [f"{where}: expected a JSON object, got {type(rec).__name__}"]
    errors: list[str] = []
    rid = rec.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or not str(rid).strip():
        errors.append(f"{where}.id: expected a non-empty id, got {rid!r}")
    elif not re.fullmatch(r"[A-Za-z0-9._-]+", str(rid)):
        errors.append(f"{where}.id: {rid!r} may only hold letters, digits, '.', '_' and '-'")
    for key in ("video", "source_prompt", "target_prompt", "instruction"):
        _text(rec, key, where, errors)
    for key in ("video_id", "mask", "negative_prompt"):
        _text(rec, key, where, errors, required=False)
    if rec.get("category") not in scoring.CATEGORIES:
        errors.append(f"{where}.category: expected one of {list(scoring.CATEGORIES)}, got {rec.get('category')!r}")
    if rec.get("difficulty") not in scoring.DIFFICULTIES:
        errors.append(f"{where}.difficulty: expected one of {list(scoring.DIFFICULTIES)}, got {rec.get('difficulty')!r}")
    mcq = rec.get("mcq")
    if not isinstance(mcq, dict):
        errors.append(f"{where}.mcq: expected an object {{question, options, answer}}, got {mcq!r}")
    else:
        _text(mcq, "question", f"{where}.mcq", errors)
        options = mcq.get("options")
        if not isinstance(options, dict) or len(options) < 2 or not all(
                isinstance(k, str) and re.fullmatch(r"[A-Z]", k) and isinstance(v, str) and v.strip()
                for k, v in options.items()):
            errors.append(f"{where}.mcq.options: expected at least two options {{\"A\": text, \"B\": text, ...}} "
                          f"keyed by single capital letters, got {options!r}")
        else:
            if mcq.get("answer") not in options:
                errors.append(f"{where}.mcq.answer: expected one of {list(options)}, got {mcq.get('answer')!r}")
            partial = mcq.get("partial", [])
            if not isinstance(partial, list) or any(p not in options for p in partial):
                errors.append(f"{where}.mcq.partial: expected a list of option letters, got {partial!r}")
    physics = rec.get("physics", {})
    if not isinstance(physics, dict):
        errors.append(f"{where}.physics: expected an object {{criteria, question}}, got {physics!r}")
    else:
        criteria = physics.get("criteria", [])
        if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
            errors.append(f"{where}.physics.criteria: expected a list of strings, got {criteria!r}")
        _text(physics, "question", f"{where}.physics", errors, required=False)
    temporal = rec.get("temporal")
    if not isinstance(temporal, dict):
        errors.append(f"{where}.temporal: expected an object {{question}}, got {temporal!r}")
    else:
        _text(temporal, "question", f"{where}.temporal", errors)
        _text(temporal, "flicker_question", f"{where}.temporal", errors, required=False)
    return errors


def normalized_record(rec: dict) -> dict:
    """The record with its optional fields filled in (``video_id``, ``mask``, ``negative_prompt``, ``physics``)."""
    out = dict(rec)
    out["id"] = str(rec["id"])
    out["video_id"] = str(rec.get("video_id") or rec["id"])
    out["mask"] = rec.get("mask") or f"masks/{out['video_id']}"
    out.setdefault("negative_prompt", "")
    out["physics"] = {"criteria": [], **(rec.get("physics") or {})}
    out["mcq"] = {"partial": [], **rec["mcq"]}
    return out


# ----------------------------------------------------------------------------- edited videos

def discover_methods(edited_dir: Path, wanted: list[str], flat_name: str | None) -> tuple[list[tuple[str, Path]], bool]:
    """``([(method, folder)], flat)``: per-method sub-folders, or one method's videos directly (flat)."""
    if not edited_dir.is_dir():
        raise DataError(f"data.edited_dir is not a directory: {edited_dir}")
    has_videos = lambda d: any(p.suffix.lower() in VIDEO_EXTS and p.is_file() for p in d.iterdir())  # noqa: E731
    subdirs = sorted(d for d in edited_dir.iterdir() if d.is_dir() and not d.name.startswith(".") and has_videos(d))
    if subdirs:
        if has_videos(edited_dir):
            log.warning("data.edited_dir %s holds method folders and loose videos; the loose videos are ignored",
                        edited_dir)
        names = [d.name for d in subdirs]
        unknown = [m for m in wanted if m not in names]
        if unknown:
            raise DataError(f"data.methods: no folder for {unknown} in data.edited_dir {edited_dir} (found {names})")
        return [(d.name, d) for d in subdirs if not wanted or d.name in wanted], False
    name = flat_name or edited_dir.name
    if wanted and list(wanted) != [name]:
        raise DataError(f"data.methods={list(wanted)}: data.edited_dir {edited_dir} holds the videos of one method "
                        f"({name!r}) directly")
    return [(name, edited_dir)], True


def edited_video(folder: Path, instance_id: str) -> Path | None:
    for ext in VIDEO_EXTS:
        p = folder / f"{instance_id}{ext}"
        if p.is_file():
            return p
    return None


def read_timing(folder: Path) -> dict[str, float]:
    """Per instance id, the editor's frames per second from ``timing.json`` (absent: no FPS)."""
    path = folder / TIMING_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        log.warning("ignoring %s: not valid JSON (%s)", path, exc)
        return {}
    out = {}
    for key, value in (data.items() if isinstance(data, dict) else ()):
        try:
            if isinstance(value, dict):
                fps = float(value["frames"]) / float(value["seconds"])
            else:
                fps = float(value)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            log.warning("%s: entry %r is not {seconds, frames} or a number; no FPS for it", path, key)
            continue
        if np.isfinite(fps) and fps > 0:
            out[str(key)] = fps
    return out


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in str(name))


# ----------------------------------------------------------------------------- the frame stage

def _fit_side(frame: np.ndarray, max_side: int) -> np.ndarray:
    h, w = frame.shape[:2]
    s = float(max_side) / max(h, w)
    if s >= 1:
        return frame
    return cv2.resize(frame, (max(2, round(w * s)), max(2, round(h * s))), interpolation=cv2.INTER_AREA)


def roi_box(masks: np.ndarray, margin: float) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)`` (exclusive ends) of the union of the masks grown by ``margin`` per side; None if empty."""
    union = masks.any(axis=0)
    ys, xs = np.nonzero(union)
    if not len(ys):
        return None
    h, w = union.shape
    x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
    mx, my = int(round((x1 - x0) * margin)), int(round((y1 - y0) * margin))
    return max(0, x0 - mx), max(0, y0 - my), min(w, x1 + mx), min(h, y1 + my)


def flow_evidence(first: np.ndarray, middle: np.ndarray, last: np.ndarray, max_side: int = 384) -> np.ndarray:
    """Eq. 4: ``Concat(Vis(Flow(I_0, I_m)), Vis(Flow(I_m, I_T-1)))``, side by side, one colour scale.

    Frames are downscaled to ``max_side`` (long side), grey, Farneback flow (``video.flow``), colour-coded
    with ``flow_to_color`` (hue = direction, brightness = magnitude) at the larger of the two maxima.
    """
    grays = [cv2.cvtColor(np.ascontiguousarray(_fit_side(f, max_side)), cv2.COLOR_RGB2GRAY)
             for f in (first, middle, last)]
    f1, f2 = farneback_flow(grays[0], grays[1]), farneback_flow(grays[1], grays[2])
    peak = max(float(np.linalg.norm(f1, axis=-1).max()), float(np.linalg.norm(f2, axis=-1).max()))
    return np.hstack([flow_to_color(f1, peak or None), flow_to_color(f2, peak or None)])


def _write_image(path: Path, rgb: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    ok, buf = cv2.imencode(path.suffix, cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError(f"cannot encode {path.name}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buf.tobytes())
    tmp.replace(path)
    return str(path.resolve())


class MaskMismatch(ValueError):
    """The mask of a case does not match its source video (frame count or size)."""


class NRVFrameStage(FrameMetricsStage):
    """Row -> conventional metrics, the judge's images, and bookkeeping (decode each video once).

    Reads the source video, the edited video and the case's masks; a mask whose frame count or size
    differs from the source video's raises (the case fails with ``error_frames``). Each metric gets
    ``n`` uniformly sampled frame pairs (``frames: null`` = every frame of the shorter video), source and
    edited sampled at the same relative positions, the edited frames resized to the source size when they
    differ, and the masks of the source frames. The judge's images (``judged``) go to
    ``media_dir/<variant>/<case>/``: ``roi_NN`` (the ROI crops), ``flow`` (Eq. 4) and ``frame_{0,m,last}``.
    """

    def __init__(self, metrics: dict[str, dict], video_backend: str = "auto", pair_mismatch: str = "resample",
                 media: dict | None = None, media_dir: str = "", judged: bool = True):
        super().__init__(metrics, video_backend, pair_mismatch)
        self.media = dict(media or {})
        self.media_dir = Path(media_dir)
        self.judged = judged

    def __call__(self, row: dict) -> dict:
        if row.get("control_skip"):
            return {}
        out: dict[str, Any] = {"frames_decoded": 0, "videos_opened": 2}
        source = VideoReader(row["source_path"], self.backend)
        edited = VideoReader(row["edited_path"], self.backend)
        si, ei = source.info, edited.info
        masks = ctl.read_masks(row["mask_path"])
        if masks.shape != (si.num_frames, si.height, si.width):
            raise MaskMismatch(f"mask/video mismatch: mask {row['mask_path']} has {len(masks)} frames of "
                               f"{masks.shape[2]}x{masks.shape[1]}, source video {row['source_path']} has "
                               f"{si.num_frames} frames of {si.width}x{si.height}")
        out["warning_pair"] = self._check_pair(source, edited)
        plans = {}
        for m in self.metrics:
            sampling = m.sampling()
            if isinstance(sampling, AllFrames):  # every frame: of the shorter video when frames are paired
                n = min(si.num_frames, ei.num_frames) if m.needs_source else ei.num_frames
            else:
                n = int(sampling.n)
            plans[m.name] = (uniform_indices(ei.num_frames, n), uniform_indices(si.num_frames, n))
        roi_idx = uniform_indices(ei.num_frames, int(self.media.get("roi_frames", 8))) if self.judged else []
        temp_idx = [0, ei.num_frames // 2, ei.num_frames - 1] if self.judged else []
        want_e = sorted({i for e, _ in plans.values() for i in e} | set(roi_idx) | set(temp_idx))
        want_s = sorted({i for m in self.metrics if m.needs_source for i in plans[m.name][1]})
        frames_e = dict(zip(want_e, edited.read(want_e))) if want_e else {}
        frames_s = dict(zip(want_s, source.read(want_s))) if want_s else {}
        out["frames_decoded"] = len(frames_e) + len(frames_s)
        texts = self._texts(row)
        for m in self.metrics:
            try:
                idx_e, idx_s = plans[m.name]
                e = np.stack([frames_e[i] for i in idx_e])
                s = np.stack([frames_s[i] for i in idx_s]) if m.needs_source else None
                if s is not None and e.shape[1:3] != s.shape[1:3]:
                    e = np.stack([cv2.resize(f, (si.width, si.height), interpolation=cv2.INTER_AREA) for f in e])
                kwargs: dict[str, Any] = {}
                if getattr(m, "needs_mask", False):
                    kwargs["mask"] = masks[idx_s] if e.shape[1:3] == (si.height, si.width) else None
                if getattr(m, "needs_text", False):
                    kwargs["texts"] = texts
                out[m.name] = float(m.compute(e, s, **kwargs))
            except Exception as exc:  # one metric failing must not lose the others
                log.warning("metric %s failed on case %s: %s", m.name, row.get("case_id"), exc)
                out[f"error_{m.name}"] = format_exception(exc)
        if self.judged:
            out.update(self._media(row, masks, (si.width, si.height), (ei.width, ei.height), frames_e,
                                   roi_idx, temp_idx))
        return out

    @staticmethod
    def _texts(row: dict) -> dict:
        ann = json.loads(row.get("annotations") or "{}")
        return {"source_prompt": ann.get("source_prompt"), "target_prompt": ann.get("target_prompt")}

    def _media(self, row, masks, source_size, edited_size, frames, roi_idx, temp_idx) -> dict:
        folder = self.media_dir / safe_name(row["variant"]) / safe_name(row["case_id"])
        ext = ".jpg" if self.media.get("format") == "jpg" else ".png"
        out: dict[str, Any] = {}
        box = roi_box(masks, float(self.media.get("roi_margin", 0.1)))
        (ws, hs), (we, he) = source_size, edited_size
        if box is None:
            out["warning_mask"] = "the mask is empty in every frame; the ROI is the whole frame"
            box_e = (0, 0, we, he)
        else:
            sx, sy = we / ws, he / hs
            box_e = (int(np.floor(box[0] * sx)), int(np.floor(box[1] * sy)),
                     max(int(np.ceil(box[2] * sx)), int(np.floor(box[0] * sx)) + 1),
                     max(int(np.ceil(box[3] * sy)), int(np.floor(box[1] * sy)) + 1))
        x0, y0, x1, y1 = box_e
        max_side = int(self.media.get("roi_max_side", 448))
        roi = [_write_image(folder / f"roi_{k:02d}{ext}", _fit_side(frames[i][y0:y1, x0:x1], max_side))
               for k, i in enumerate(roi_idx)]
        first, middle, last = (frames[i] for i in temp_idx)
        flow = _write_image(folder / f"flow{ext}", flow_evidence(first, middle, last,
                                                                 int(self.media.get("flow_max_side", 384))))
        names = ("frame_0", "frame_m", "frame_last")
        stills = [_write_image(folder / f"{n}{ext}", _fit_side(f, int(self.media.get("flow_max_side", 384))))
                  for n, f in zip(names, (first, middle, last))] if self.media.get("show_frames") else []
        out.update(nrve_roi=json.dumps(roi), nrve_flow=flow, nrve_frames=json.dumps(stills),
                   roi_box=json.dumps([int(v) for v in box_e]))
        return out


# ----------------------------------------------------------------------------- benchmark

def _plain(node) -> dict:
    return OmegaConf.to_container(node, resolve=True) if not isinstance(node, dict) else dict(node)


def _is_control(variant: str) -> bool:
    return str(variant).startswith("control:")


CASE_ERRORS = ("error_load", "error_control", "error_frames")  # a conventional metric's own error_<metric> is not


def judgeable(row: dict) -> bool:
    """A row the judges see: loaded, rendered, framed (its images exist), and not a skipped control."""
    return not any(row.get(k) for k in CASE_ERRORS) and not row.get("control_skip") and bool(row.get("nrve_flow"))


@register_benchmark
class NRVBench(Benchmark):
    name = "nrv"
    config_class = NRVConfig
    config_choices = {**JUDGE_CHOICES, "data.pair_mismatch": ("resample", "fail"),
                      "score.normalize": scoring.NORMALIZATIONS, "media.format": ("png", "jpg"),
                      "metrics.BG_LPIPS.arch": LPIPS_ARCHS,
                      **{f"metrics.{m}.background": BACKGROUND_MODES for m in ("BG_PSNR", "BG_SSIM", "BG_MSE")}}

    # -- configuration
    def enabled(self, cfg) -> list[str]:
        unknown = [m for m in cfg.metrics.enabled if m not in ALL_METRICS]
        if unknown:
            raise DataError(f"metrics.enabled: unknown metric(s) {unknown}; NRVBench metrics are {list(ALL_METRICS)}")
        return list(dict.fromkeys(cfg.metrics.enabled))

    def frame_metrics(self, cfg) -> list[str]:
        return [m for m in self.enabled(cfg) if m in FRAME_METRICS]

    def judged(self, cfg) -> bool:
        return "NRVE_Acc" in self.enabled(cfg)

    def judge_specs(self, cfg) -> list[tuple[str, Any]]:
        """``[(label, judge config)]``: ``judge`` alone, or ``judge`` merged with each ``judges`` entry."""
        entries = list(cfg.judges) if cfg.judges else [None]
        specs, labels = [], set()
        for i, entry in enumerate(entries):
            if entry is None:
                merged = cfg.judge
            else:
                try:
                    merged = OmegaConf.merge(OmegaConf.structured(JudgeConfig), cfg.judge, entry)
                except Exception as exc:
                    raise ConfigError(f"judges[{i}]: {exc}".split("\n")[0]) from None
            if merged.backend not in JUDGE_CHOICES["judge.backend"]:
                raise ConfigError(f"judges[{i}].backend = {merged.backend!r} is not one of {list(JUDGE_CHOICES['judge.backend'])}")
            raw = merged.name or (Path(merged.model).name if merged.model else f"{merged.backend}{i}")
            label = re.sub(r"[^A-Za-z0-9._-]+", "_", str(raw))
            if label in labels:
                raise ConfigError(f"judges[{i}]: the judge label {label!r} is used twice; give each judge a "
                                  f"distinct `name`")
            labels.add(label)
            specs.append((label, merged))
        return specs

    def variants(self, cfg) -> list | None:
        """``base`` plus the configured negative controls (``controls.names``), or None without controls."""
        if not cfg.controls.names:
            return None
        try:
            return ctl.control_variants(cfg.controls.names)
        except ValueError as exc:
            raise ConfigError(f"controls.names: {exc}") from None

    def _check_models(self, cfg) -> None:
        """Learned metrics need local weights: fail before any Ray work, naming the key."""
        need = {"BG_LPIPS": [("weights",), ("backbone_weights", "lin_weights")], "StructDist": [("weights",)],
                "CLIP_S": [("model",)], "CLIP_E": [("model",)], "NIQE": [("model",)]}
        for m in self.frame_metrics(cfg):
            node = getattr(cfg.metrics, m)
            options = need.get(m, [])
            if options and not any(all(getattr(node, k) and Path(getattr(node, k)).exists() for k in keys)
                                   for keys in options):
                keys = " or ".join("+".join(f"metrics.{m}.{k}" for k in keys) for keys in options)
                raise ConfigError(f"metric {m} is enabled but its weights are not available: set {keys} to a "
                                  f"local path (or remove {m} from metrics.enabled)")

    # -- schema and stages
    def case_fields(self, cfg) -> list[pa.Field]:
        return [pa.field("method", pa.string()), pa.field("instance_id", pa.string()),
                pa.field("video_id", pa.string()), pa.field("category", pa.string()),
                pa.field("difficulty", pa.string()), pa.field("mask_path", pa.string()),
                pa.field("FPS", pa.float64()), pa.field("control_eligible", pa.bool_())]

    def schema(self, cfg) -> pa.Schema:
        """The base schema without repeats: the control stage re-declares ``edited_path``."""
        fields, seen = [], set()
        for f in super().schema(cfg):
            if f.name not in seen:
                seen.add(f.name)
                fields.append(f)
        return pa.schema(fields)

    def stages(self, cfg) -> list[Stage]:
        run_dir = Path(cfg.output.dir).resolve()
        stages = [ctl.control_stage(run_dir / CONTROL_DIR, cfg.run.seed, cfg.video.backend, cfg.controls.amplitude,
                                    workers=cfg.ray.workers, batch_size=cfg.ray.batch_size)]
        metrics = self.frame_metrics(cfg)
        judged = self.judged(cfg)
        if not metrics and not judged:
            return stages
        resources: dict[str, float] = {}
        for m in metrics:
            for k, v in METRICS[m](getattr(cfg.metrics, m)).resources().items():
                resources[k] = max(resources.get(k, 0.0), v)
        outputs = {**{m: "float" for m in metrics}, **{f"error_{m}": "str" for m in metrics},
                   "frames_decoded": "int", "videos_opened": "int", "warning_pair": "str", "warning_mask": "str",
                   "nrve_roi": "str", "nrve_flow": "str", "nrve_frames": "str", "roi_box": "str"}
        stages.append(Stage(
            name="frames", fn=NRVFrameStage,
            init_kwargs={"metrics": {m: _plain(getattr(cfg.metrics, m)) for m in metrics},
                         "video_backend": cfg.video.backend, "pair_mismatch": cfg.data.pair_mismatch,
                         "media": _plain(cfg.media), "media_dir": str(run_dir / MEDIA_DIR), "judged": judged},
            outputs=outputs, num_cpus=1.0, num_gpus=resources.get("num_gpus", 0.0),
            workers=cfg.ray.workers, batch_size=cfg.ray.batch_size))
        return stages

    # -- loading
    def load_cases(self, cfg) -> list[dict]:
        self.enabled(cfg)
        if self.judged(cfg):
            self.judge_specs(cfg)
        self._check_models(cfg)
        scoring.weights_of(cfg.score)
        self.variants(cfg)
        path = Path(cfg.data.annotations)
        records = read_annotations(path)
        if cfg.run.limit is not None:
            records = records[: cfg.run.limit]
        root = Path(cfg.data.root) if cfg.data.root else path.parent
        if not root.is_dir():
            raise DataError(f"data.root is not a directory: {root}")
        methods, flat = discover_methods(Path(cfg.data.edited_dir), list(cfg.data.methods), cfg.data.method)
        instances = self._instances(records, path, root)
        rank: dict[str, int] = {}
        eligible_ids = set()
        for inst in instances:
            cat = inst["record"].get("category") if inst["record"] else None
            rank[cat] = rank.get(cat, 0) + 1
            if cfg.controls.per_category is None or rank[cat] <= cfg.controls.per_category:
                eligible_ids.add(inst["id"])
        control_methods = set(cfg.controls.methods) or {m for m, _ in methods}
        rows = []
        for method, folder in methods:
            timing = read_timing(folder)
            for inst in instances:
                rows.append(self._case_row(inst, method, folder, flat, timing,
                                           inst["id"] in eligible_ids and method in control_methods))
        return rows

    def _instances(self, records, path: Path, root: Path) -> list[dict]:
        out, seen = [], set()
        for n, rec in records:
            where = f"{path.name}:{n}"
            if isinstance(rec, str):
                out.append({"id": f"line{n}", "record": None, "errors": [f"{where}: {rec}"], "paths": {}})
                continue
            errors = validate_record(rec, where)
            iid = str(rec.get("id")) if isinstance(rec, dict) and rec.get("id") is not None else f"line{n}"
            if iid in seen:
                errors.append(f"{where}.id: duplicate id {iid!r} (already used by an earlier record)")
                iid = f"line{n}"
            seen.add(iid)
            paths: dict[str, str] = {}
            record = None
            if not errors:
                record = normalized_record(rec)
                try:
                    video = resolve_under(root, record["video"], f"{where}.video")
                    if not video.is_file():
                        raise DataError(f"{where}.video: source video not found: {video}")
                    mask = resolve_under(root, record["mask"], f"{where}.mask")
                    if not mask.is_dir():
                        raise DataError(f"{where}.mask: mask folder not found: {mask}")
                    if not any(p.suffix.lower() in ctl.MASK_EXTS for p in mask.iterdir()):
                        raise DataError(f"{where}.mask: mask folder {mask} holds no mask images")
                    paths = {"video": str(video), "mask": str(mask)}
                except DataError as exc:
                    errors.append(str(exc))
            elif isinstance(rec, dict):
                record = rec  # kept as written (its category still groups the failure)
            out.append({"id": iid, "record": record, "errors": errors, "paths": paths})
        return out

    def _case_row(self, inst: dict, method: str, folder: Path, flat: bool, timing: dict, eligible: bool) -> dict:
        iid, rec = inst["id"], inst["record"] or {}
        case_id = iid if flat else f"{method}:{iid}"
        category = rec.get("category") if rec.get("category") in scoring.CATEGORIES else None
        row = {"benchmark": "nrv", "case_id": case_id, "variant": "base", "method": method, "instance_id": iid,
               "video_id": str(rec["video_id"]) if rec.get("video_id") is not None else None, "category": category,
               "difficulty": rec.get("difficulty") if rec.get("difficulty") in scoring.DIFFICULTIES else None,
               "categories": [category] if category else [],
               "instruction": rec.get("instruction") if isinstance(rec.get("instruction"), str) else None,
               "source_path": inst["paths"].get("video"), "mask_path": inst["paths"].get("mask"),
               "edited_path": None, "annotations": json.dumps(rec, ensure_ascii=False) if rec else None,
               "variant_params": None, "FPS": timing.get(iid), "control_eligible": eligible, "error_load": None}
        errors = list(inst["errors"])
        if not errors:
            video = edited_video(folder, iid)
            if video is None:
                errors.append(f"edited video for {iid} of method {method!r} not found: expected {folder}/{iid}.mp4")
            else:
                row["edited_path"] = str(video)
        if errors:
            row["error_load"] = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        return row

    # -- judging (§4, §5)
    def judge_phases(self, cfg) -> list[JudgePhase]:
        if not self.judged(cfg):
            return []
        specs = self.judge_specs(cfg)
        several = len(specs) > 1
        show = bool(cfg.media.show_frames)

        def builder(label):
            def build(rows: list[dict], _results: dict) -> list:
                return [r for row in rows if judgeable(row)
                        for r in scoring.build_requests(row, _media_of(row), label if several else None, show)]
            return build

        return [JudgePhase(label, judge_cfg, builder(label)) for label, judge_cfg in specs]

    def score_judgments(self, cases: list[dict], results: dict, cfg) -> pa.Table | None:
        if not self.judged(cfg):
            return None
        specs = self.judge_specs(cfg)
        several = len(specs) > 1
        rows = [j for case in cases if judgeable(case) for label, _ in specs
                for j in scoring.judgment_rows(case, results, label, several, cfg.score.normalize)]
        return pa.Table.from_pylist(rows, schema=scoring.JUDGMENT_SCHEMA)

    # -- aggregation
    def summarize(self, cases: pa.Table, cfg, judgments: pa.Table | None = None) -> dict:
        rows = cases.to_pylist()
        judged = judgments.to_pylist() if judgments is not None else []
        labels = [label for label, _ in self.judge_specs(cfg)] if self.judged(cfg) else []
        frame_metrics = self.frame_metrics(cfg)
        with_fps = "FPS" in self.enabled(cfg)
        stats = (cfg.run.seed, cfg.stats.bootstrap_samples, cfg.stats.confidence)
        scored = [r for r in rows if not r.get("control_skip")]
        instances = scoring.instance_scores(judged, cfg.score) if judged else []
        cross = scoring.cross_judge_instances(instances)
        summary: dict[str, Any] = {
            "benchmark": "nrv", "n_cases": len({r["case_id"] for r in scored}), "n_rows": len(rows),
            "n_instances": len({r["instance_id"] for r in scored}),
            "methods": sorted({r["method"] for r in scored if r.get("method")}), "judges": labels,
            "normalize": cfg.score.normalize, "metrics": {}}
        summary["metrics"] = _metric_block(scored, cross, judged, frame_metrics, with_fps, stats, self.judged(cfg))
        for key, column in (("by_category", "category"), ("by_difficulty", "difficulty"), ("by_method", "method")):
            summary[key] = {}
            for value in sorted({r.get(column) for r in scored} - {None}):
                members = [r for r in scored if r.get(column) == value]
                summary[key][value] = _metric_block(
                    members, [c for c in cross if c.get(column) == value],
                    [j for j in judged if j.get(column) == value], frame_metrics, with_fps, stats, self.judged(cfg),
                    brief=True)
        if labels:
            summary["by_judge"] = _by_judge(instances, judged, labels, stats)
            summary["cross_judge"] = _cross_judge(instances, labels)
        variants = {r["variant"] for r in rows}  # the sanity section comes from summarize_variants
        if cfg.agreement.human_scores and labels and "base" in variants:
            summary["agreement"] = self._agreement(instances, scored, cfg)
        summary["failures"] = failure_report(rows)
        summary["judge_status"] = _status_counts(judged)
        summary["report_tables"] = report_tables(summary, frame_metrics, with_fps)
        return summary

    def summarize_variants(self, cases: pa.Table, cfg, judgments: pa.Table | None = None) -> dict:
        """The cross-variant part of the summary (``sanity``: each negative control against the real edits),
        from every variant's rows; ``summarize`` sees one variant at a time."""
        rows = cases.to_pylist()
        judged = judgments.to_pylist() if judgments is not None else []
        if not self.judged(cfg) or not any(_is_control(r["variant"]) for r in rows):
            return {}
        sanity = sanity_section(rows, judged, cfg, self.frame_metrics(cfg))
        return {"sanity": sanity, "report_tables": sanity_tables(sanity)}

    def _agreement(self, instances: list[dict], rows: list[dict], cfg) -> dict:
        from vbench_ray.agreement import HumanScoresError, agreement_summary, read_human_scores

        try:
            records = read_human_scores(cfg.agreement.human_scores)
        except HumanScoresError as exc:
            raise DataError(str(exc)) from None
        per_judge: dict[str, list[dict]] = {}
        for r in scoring.percent_rows([i for i in instances if i["variant"] == "base"]):
            per_judge.setdefault(r["judge"], []).append(r)
        categories = {r["instance_id"]: r["category"] for r in rows if r.get("category")}
        out = agreement_summary(per_judge, records, cfg.score.normalize, scoring.weights_of(cfg.score),
                                cfg.score.epsilon, categories)
        out["human_scores"] = str(cfg.agreement.human_scores)
        return out


def _media_of(row: dict) -> dict:
    return {"roi": json.loads(row.get("nrve_roi") or "[]"), "flow": row["nrve_flow"],
            "frames": json.loads(row.get("nrve_frames") or "[]")}


# ----------------------------------------------------------------------------- summary pieces

def _describe(values, stats) -> dict:
    seed, n_resamples, confidence = stats
    return describe(values, seed=seed, n_resamples=n_resamples, confidence=confidence)


def conventional_stats(rows: list[dict], metric: str, stats) -> dict:
    """Mean over cases with a 95% bootstrap CI; PSNR's infinite values (identical background) are counted
    in ``n_infinite`` and left out of the mean (JSON has no infinity)."""
    values = [r.get(metric) for r in rows if not r.get("error_load")]
    out = _describe(values, stats)
    n_inf = sum(1 for v in values if v is not None and np.isinf(v))
    out.update(n_failed=sum(1 for r in rows if r.get(metric) is None and not r.get("error_load")),
               scale=METRIC_SCALES.get(metric), higher_is_better=METRICS[metric].higher_is_better
               if metric in METRICS else True)
    if n_inf:
        out["n_infinite"] = n_inf
    return out


def _metric_block(rows, cross, judged, frame_metrics, with_fps, stats, is_judged, brief: bool = False) -> dict:
    block: dict[str, Any] = {}
    if is_judged:
        judgeable_rows = [r for r in rows if not r.get("control_skip")]
        judged_keys = {(c["case_id"], c["variant"]) for c in cross}
        n_failed = sum(1 for r in judgeable_rows if (r["case_id"], r["variant"]) not in judged_keys)
        for m in scoring.NRVE_METRICS:
            s = _describe([c[m] for c in cross], stats)
            comp = {v: k for k, v in scoring.COMPONENT_METRIC.items()}.get(m)
            s["n_invalid"] = sum(1 for j in judged if not j["valid"] and (comp is None or j["component"] == comp))
            if not brief:
                s.update(n_failed=n_failed, scale="[0,100]", higher_is_better=True)
            block[m] = s
    for m in frame_metrics:
        s = conventional_stats(rows, m, stats)
        block[m] = {k: s[k] for k in ("value", "ci95", "n", "n_infinite") if k in s} if brief else s
    if with_fps:
        fps = [r.get("FPS") for r in rows if not _is_control(r.get("variant", "base"))]
        s = _describe(fps, stats)
        if not brief:
            s.update(scale=METRIC_SCALES["FPS"], higher_is_better=True)
        block["FPS"] = s
    return block


def _by_judge(instances, judged, labels, stats) -> dict:
    out = {}
    for label in labels:
        mine = scoring.percent_rows([i for i in instances if i["judge"] == label])
        out[label] = {m: _describe([r[m] for r in mine], stats) for m in scoring.NRVE_METRICS}
        out[label]["n_invalid"] = sum(1 for j in judged if j["judge"] == label and not j["valid"])
    return out


def _judge_means(instances, labels, metric, percent: bool) -> dict:
    out = {}
    for label in labels:
        vals = [i[metric] for i in instances if i["judge"] == label]
        out[label] = float(np.mean(vals)) * (100.0 if percent else 1.0) if vals else None
    return out


def _cross_judge(instances, labels) -> dict:
    """Table 2: per judge and per method, the mean over instances; across judges, mean and std."""
    out: dict[str, Any] = {m: scoring.cross_judge_stats(_judge_means(instances, labels, m, m != "NRVE_Acc"))
                           for m in scoring.NRVE_METRICS}
    out["by_method"] = {}
    for method in sorted({i["method"] for i in instances}):
        mine = [i for i in instances if i["method"] == method]
        out["by_method"][method] = {m: scoring.cross_judge_stats(_judge_means(mine, labels, m, m != "NRVE_Acc"))
                                    for m in scoring.NRVE_METRICS}
    return out


def _status_counts(judged: list[dict]) -> dict:
    counts: dict[str, int] = {}
    for j in judged:
        key = f"{j['component']}:{j['status']}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


# ----------------------------------------------------------------------------- negative controls (App. F.1)

# What each control should do to the NRVE-Acc components (App. F.1, Table 8, Figure 19): the component its
# failure mode targets must drop below the real edits'; NRVE-Acc (Eq. 1) must drop too.
CONTROL_EXPECTATIONS = {
    "unchanged": ("S_instr", "no edit: instruction alignment should fail"),
    "random_mask": ("S_instr", "edit in the wrong region: localised instruction alignment should fail"),
    "appearance": ("S_phy", "appearance-only change: the physical deformation should be judged absent/implausible"),
    "shuffled": ("S_temp", "frame order corrupted: temporal coherence should fail"),
    "flow_corrupted": ("S_temp", "local motion corrupted: temporal coherence should fail"),
}


def sanity_section(rows: list[dict], judged: list[dict], cfg, frame_metrics: list[str]) -> dict:
    """Each control's components next to the real edits of the same cases, with the expected direction.

    Paired by case: a control's instances are compared with the ``base`` instances of the same case ids
    (the same method's real edit). ``delta = control - reference`` (percent points) with a 95% bootstrap CI
    over cases; an expectation ``held`` when the mean delta is negative, ``significant`` when the whole CI is.
    """
    instances = scoring.instance_scores(judged, cfg.score)
    cross = scoring.cross_judge_instances(instances)
    skipped = {(r["case_id"], r["variant"]) for r in rows if r.get("control_skip")}
    by_variant: dict[str, dict[str, dict]] = {}
    for c in cross:
        if (c["case_id"], c["variant"]) not in skipped:
            by_variant.setdefault(c["variant"], {})[c["case_id"]] = c
    rows_by = {(r["case_id"], r["variant"]): r for r in rows}
    reference = by_variant.get("base", {})
    seed, n_resamples, confidence = cfg.run.seed, cfg.stats.bootstrap_samples, cfg.stats.confidence
    out: dict[str, Any] = {"reference": "base", "controls": {}}
    for variant in sorted(v for v in by_variant if _is_control(v)):
        name = variant.split(":", 1)[1]
        primary, why = CONTROL_EXPECTATIONS.get(name, (None, "unknown control"))
        cases = sorted(set(by_variant[variant]) & set(reference))
        entry: dict[str, Any] = {"variant": variant, "n": len(cases), "expectation": why,
                                 "failure_mode": ctl.FAILURE_MODES.get(name), "components": {}}
        for m in scoring.NRVE_METRICS:
            a = np.array([by_variant[variant][c][m] for c in cases], dtype=float)
            b = np.array([reference[c][m] for c in cases], dtype=float)
            comp: dict[str, Any] = {"control": float(a.mean()) if len(a) else None,
                                    "reference": float(b.mean()) if len(b) else None}
            comp["delta"] = comp["control"] - comp["reference"] if len(a) else None
            comp["delta_ci95"] = bootstrap_ci(a - b, seed=seed, n_resamples=n_resamples, confidence=confidence) \
                if len(a) else None
            if m == primary or m == "NRVE_Acc":
                comp["expected"] = "lower"
                comp["held"] = bool(len(a) and comp["delta"] < 0)
                comp["significant"] = bool(comp["delta_ci95"] is not None and comp["delta_ci95"][1] < 0)
            entry["components"][m] = comp
        entry["primary"] = primary
        entry["held"] = bool(primary and entry["components"][primary].get("held"))
        entry["by_judge"] = {}
        for label in sorted({i["judge"] for i in instances}):
            mine = {(i["case_id"], i["variant"]): i for i in instances if i["judge"] == label}
            pairs = [(mine.get((c, variant)), mine.get((c, "base"))) for c in cases]
            pairs = [(x, y) for x, y in pairs if x and y]
            if primary and pairs:
                d = float(np.mean([x[primary] - y[primary] for x, y in pairs])) * (100.0 if primary != "NRVE_Acc" else 1.0)
                entry["by_judge"][label] = {"delta": d, "held": d < 0}
        conventional = {}
        for m in frame_metrics:
            ctrl = finite([rows_by.get((c, variant), {}).get(m) for c in cases])
            ref = finite([rows_by.get((c, "base"), {}).get(m) for c in cases])
            conventional[m] = {"control": float(ctrl.mean()) if ctrl.size else None,
                               "reference": float(ref.mean()) if ref.size else None}
        entry["conventional"] = conventional
        out["controls"][name] = entry
    out["all_held"] = all(e["held"] for e in out["controls"].values()) if out["controls"] else None
    return out


# ----------------------------------------------------------------------------- report tables

def _f(value, digits: int = 2) -> str:
    return "–" if value is None or (isinstance(value, float) and not np.isfinite(value)) else f"{value:.{digits}f}"


def sanity_tables(sanity: dict | None) -> list[dict]:
    """The negative-control table (App. F.1): each control's components next to the real edits'."""
    if not sanity or not sanity.get("controls"):
        return []
    rows = []
    for name, e in sanity["controls"].items():
        cells = [name, f"{e['primary']} lower"]
        for m in scoring.NRVE_METRICS:
            c = e["components"][m]
            cells.append(f"{_f(c['control'])} vs {_f(c['reference'])}")
        cells.append("yes" if e["held"] else "NO")
        rows.append(cells)
    return [{"title": "Negative controls (App. F.1): control vs real edits",
             "columns": ["Control", "Expected", *scoring.NRVE_METRICS, "Held"], "rows": rows}]


def report_tables(summary: dict, frame_metrics: list[str], with_fps: bool) -> list[dict]:
    """Tables for report.html: ``[{"title", "columns", "rows"}]`` (cells are plain text)."""
    tables = []
    cross = summary.get("cross_judge")
    if cross:
        judges = summary.get("judges") or []
        rows = []
        for method, per in cross["by_method"].items():
            nrve = per["NRVE_Acc"]
            rows.append([method, _f(per["S_phy"]["mean"]), _f(per["S_temp"]["mean"]), _f(per["S_instr"]["mean"]),
                         *[_f(nrve["per_judge"].get(j)) for j in judges], _f(nrve["mean"]), _f(nrve["std"])])
        tables.append({"title": "NRVE-Acc by method and judge (Table 2)",
                       "columns": ["Method", "S_phy", "S_temp", "S_instr", *judges, "Mean", "Std"], "rows": rows})
    conv = [m for m in frame_metrics] + (["FPS"] if with_fps else [])
    if conv and summary.get("by_method"):
        rows = [[method, *[_f((block.get(m) or {}).get("value")) for m in conv]]
                for method, block in summary["by_method"].items()]
        tables.append({"title": "Conventional metrics by method (Table 3, App. E.5 scales)",
                       "columns": ["Method", *conv], "rows": rows})
    tables += sanity_tables(summary.get("sanity"))
    agreement = summary.get("agreement")
    if agreement and agreement.get("judges"):
        rows = [[label, *[f"{_f(j[d]['rho'], 3)} / {_f(j[d]['tau'], 3)}" for d in scoring.NRVE_METRICS],
                 _f(j["NRVE_Acc"]["signed_deviation"])] for label, j in agreement["judges"].items()]
        mean = agreement["mean_judge"]
        rows.append(["Mean judge", *[f"{_f(mean[d]['rho'], 3)} / {_f(mean[d]['tau'], 3)}" for d in scoring.NRVE_METRICS],
                     "–"])
        tables.append({"title": "Agreement with humans: Spearman rho / Kendall tau over methods (Table 6)",
                       "columns": ["Judge", *scoring.NRVE_METRICS, "Signed deviation"], "rows": rows})
    return tables
