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
verifier package scores it (PhiloLabs/AgentVBench f058cd6, ``verifiers/repair``), reimplemented in
:mod:`~vbench_ray.agentic.verifiers.repair_official` on any input: no hard gates, the per-variant
video/audio split, audio at 48 kHz, the report read as the package reads it, two regions for a shot
swap, the duplicate copy (broken clip's time) for repeated frames. That module says how a task's
``truth.json`` becomes the package's ground-truth profile, and what differs.

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

from pathlib import Path
from typing import Any

from vbench_ray.agentic.media import MediaError, sha256
from vbench_ray.agentic.verifiers import measures as M
from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict
from vbench_ray.agentic.verifiers.repair_config import (
    GROUPS,
    IDEAL,
    MEASURE_SETS,
    RANGE_SCORES,
    SCHEMES,
    RepairConfig,
    audio_measures_for,
    check_config,
    golden_reference,
    measures_used,
)
from vbench_ray.agentic.verifiers.repair_official import OFFICIAL_POINTS, official_score, parse_timestamp, xcorr_lagged
from vbench_ray.agentic.verifiers.repair_paper import (
    audio_scores,
    check_format,
    near_copy,
    shot_swap_score,
    visual_scores,
)
from vbench_ray.agentic.verifiers.repair_stream import AudioReader, FrameCursor, Source
from vbench_ray.agentic.verifiers.repair_timeline import (
    audio_check,
    honesty_check,
    keep_mask,
    match_ranges,
    parse_ranges,
    timeline_score,
)

__all__ = [
    "GROUPS",
    "IDEAL",
    "MEASURE_SETS",
    "OFFICIAL_POINTS",
    "RANGE_SCORES",
    "SCHEMES",
    "AudioReader",
    "FrameCursor",
    "RepairConfig",
    "Source",
    "audio_check",
    "audio_measures_for",
    "audio_scores",
    "check_config",
    "check_format",
    "golden_reference",
    "honesty_check",
    "keep_mask",
    "match_ranges",
    "measure_references",
    "measures_used",
    "near_copy",
    "official_score",
    "parse_ranges",
    "parse_timestamp",
    "shot_swap_score",
    "timeline_score",
    "verify",
    "visual_scores",
    "xcorr_lagged",
]

# ----------------------------------------------------------------------------- entry point


def verify(task, submission: Path, cfg: RepairConfig | None = None) -> Verdict:
    cfg = cfg or RepairConfig()
    check_config(cfg)
    for name in list(cfg.visual_metrics) + audio_measures_for(task.truth, cfg) if cfg.scheme == "paper" else []:
        reason = M.unavailable(name)
        if reason:
            raise M.MeasureUnavailable(reason)
    truth = task.truth
    group = truth["group"]
    submission = Path(submission)
    base: dict[str, Any] = {
        "group": group,
        "defect": truth.get("defect"),
        "window": truth.get("window"),
        "report_md": (submission / "report.md").is_file(),
        "measures_used": measures_used(truth, cfg),
    }
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
            raise InvalidSubmission(
                f"fixed.mp4: frame size {out.info.width}x{out.info.height} is not the "
                f"clip's {golden.info.width}x{golden.info.height}"
            )
        copy = near_copy(out, broken, golden, cfg)
        if copy is not None:
            raise InvalidSubmission("fixed.mp4 is a near-verbatim copy of the broken input", near_copy=copy)
    except InvalidSubmission as exc:
        return Verdict.zero(exc, **base)
    base["output"] = {
        "duration_s": out.info.duration,
        "n_frames": out.info.num_frames,
        "sample_rate": out.info.sample_rate,
    }
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


def measure_references(golden: str | Path, reencoded: str | Path, truth: dict, cfg: RepairConfig | None = None) -> dict:
    """``truth.json`` ``reference``: every measurement of ``reencoded`` (a perfect fix delivered with the
    task's codec settings, a file) against the golden (a file), per region; computed when a task is built.
    Every audio measure is stored, so that either measure set finds its reference."""
    cfg = cfg or RepairConfig()
    visual = [m for m in M.VISUAL if not M.unavailable(m)]
    audio = [m for m in M.AUDIO if not M.unavailable(m)]
    full = RepairConfig(
        **{
            **cfg.__dict__,
            "visual_metrics": visual,
            "audio_metrics": [],
            "measures": "substitute",
            "substitute_audio_metrics": audio,
        }
    )
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
