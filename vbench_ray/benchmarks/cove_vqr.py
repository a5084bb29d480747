"""CoVEBench's VQR (Comprehensive Quality, paper Table 2 and App. F): VisualQuality-R1 through the judge machinery.

Spec (CoVEBench paper, App. F, "Comprehensive Quality (VQR)"): VisualQuality-R1 is applied to 10 sampled frames
of each edited video and VQR is the mean of its scores over those frames. Where the paper is silent, this follows
the official evaluator (NJU-LINK/CoVEBench 4fe1c2f ``metrics/vq/vqr/eval_vqr.py``) and VisualQuality-R1's published
usage:

* frames: ``uniform_indices(T, 10)`` of the **edited** video (the official sampler: ``min(T, 10)`` distinct frames
  at ``round(i * (T-1) / 9)``), written as JPEG (quality 95, as the official script) under
  ``RUN_DIR/vqr_frames/<variant>/<case>/frame_NNNNNN.jpg`` by the decode stage (``VQRFrames``, a
  ``vbench_ray.metrics.stage.FrameSink``: the 10 indices join the union the frame metrics decode, so each video is
  read once per case), so ``build`` stays pure and per row;
* one judge request per **frame** (the official script scores frames one image at a time), one image part and
  the published prompt (``PROMPT``: "... a float between 1 and 5, rounded to two decimal places ...", with the
  answer-only template the official CoVEBench script uses, ``QUESTION_TEMPLATE``);
* the answer: the last ``<answer>...</answer>`` span (else the text after ``</think>``), its first number; it
  must lie on the published scale **[1, 5]** or the request is invalid and re-asked like any judge request (the
  official script takes any number, and a reply without one fails the whole video);
* per case: the mean of the 10 frame scores, on VisualQuality-R1's 1-5 scale (higher is better). As in the
  official script, a case with a frame that never got a usable score has no VQR (counted ``n_failed``);
* the model's sampling (``configs/judges/visualquality_r1_vllm.yaml``): as the official script
  (``do_sample=True, top_k=50, top_p=1``, 512 new tokens, seeded): ``vqr.top_k`` 50, ``vqr.top_p`` 1,
  ``vqr.max_tokens`` 512, seed 0; the script passes no temperature (the checkpoint's generation_config, else
  transformers' 1.0), the shipped config samples at temperature 1.

Per-frame answers are rows of ``judgments.parquet`` with ``metric == "VQR"`` (``group``: the frame's position,
``question_id``: ``frame_NNNNNN``, the frame index in the video); raw answers are in the judge log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vbench_ray.judges.base import JudgeRequest, request_id
from vbench_ray.judges.parsing import VQR_SCALE as SCALE, parse_vqr_score  # noqa: F401 (the parser)
from vbench_ray.safepaths import unique_component, within

METRIC = "VQR"
STAGE = "vqr"
FRAMES = 10  # paper App. F / official `--frames 10`
JPEG_QUALITY = 95  # official frame dump
FRAME_DIR = "vqr_frames"
PARSER = "vqr_score"  # vbench_ray.judges.parsing.parse_vqr_score; SCALE: 1-5, the prompt's "float between 1 and 5"

PROMPT = (
    "You are doing the image quality assessment task. Here is the question: What is your overall rating on "
    "the quality of this picture? The rating should be a float between 1 and 5, rounded to two decimal "
    "places, with 1 representing very poor quality and 5 representing excellent quality."
)
QUESTION_TEMPLATE = "{question} Please only output the final answer with only one score in <answer> </answer> tags."


# ----------------------------------------------------------------------------- the frames, from the decode stage


def frame_dir(run_dir: str | Path, case_id: str, variant: str) -> Path:
    """One folder per (variant, case), one-to-one (``safepaths.unique_component``): frames found there are reused
    on resume, so case ids ``a b`` and ``a_b`` must never share one (the second would be scored on the first's)."""
    return within(Path(run_dir) / FRAME_DIR, unique_component(variant), unique_component(case_id))


@dataclass(frozen=True)
class VQRFrames:
    """The decode stage's sink for VQR (``vbench_ray.metrics.stage.FrameSink``): the edited video's ``frames``
    uniform frames, from the decode the frame metrics share, written as JPEGs; the row's ``vqr_frames`` is the
    JSON list of their paths."""

    run_dir: str
    frames: int = FRAMES
    name: str = METRIC  # error_VQR: a frame that could not be written
    column: str = "vqr_frames"

    def indices(self, info) -> list[int]:
        from vbench_ray.video.io import uniform_indices

        return uniform_indices(info.num_frames, self.frames)

    def write(self, row: dict, indices: list[int], frames: np.ndarray) -> str:
        from PIL import Image

        if not len(indices):
            raise ValueError(f"edited video {row.get('edited_path')} has no frames")
        out_dir = frame_dir(self.run_dir, row["case_id"], row.get("variant") or "base")
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for idx, frame in zip(indices, frames):
            path = out_dir / f"frame_{idx:06d}.jpg"
            if not path.exists():  # deterministic content: a resumed run reuses it
                tmp = path.with_name(path.name + ".tmp")
                Image.fromarray(np.ascontiguousarray(frame)).save(tmp, format="JPEG", quality=JPEG_QUALITY)
                tmp.replace(path)
            paths.append(str(path.resolve()))
        return json.dumps(paths)


def frame_sink(cfg) -> VQRFrames:
    """VQR's sink for the decode stage of this run (frames under ``output.dir``)."""
    return VQRFrames(run_dir=str(Path(cfg.output.dir).resolve()), frames=FRAMES)


# ----------------------------------------------------------------------------- requests


def frame_paths(case: dict) -> list[str]:
    raw = case.get("vqr_frames")
    return list(json.loads(raw)) if raw else []


def messages(image_path: str) -> list[dict]:
    """One user turn: the frame, then the published question (official order: image, then text)."""
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": Path(image_path).resolve().as_uri()}},
                {"type": "text", "text": QUESTION_TEMPLATE.format(question=PROMPT)},
            ],
        }
    ]


def _group(path: str) -> str:
    return Path(path).stem  # frame_NNNNNN: the frame's index in the edited video


def build_requests(case: dict) -> list[JudgeRequest]:
    """One request per sampled frame of a case that loaded and whose frames were written (pure, per row)."""
    if case.get("error_load"):
        return []
    return [
        JudgeRequest.build(
            "cove",
            case["case_id"],
            case.get("variant") or "base",
            STAGE,
            _group(p),
            messages(p),
            parser=PARSER,
            expected={"low": SCALE[0], "high": SCALE[1]},
        )
        for p in frame_paths(case)
    ]


def requests_of(cases: list[dict]) -> list[JudgeRequest]:
    return [r for case in cases for r in build_requests(case)]


# ----------------------------------------------------------------------------- scoring


def frame_rows(case: dict, results: dict) -> list[dict]:
    """Rows of ``judgments.parquet`` (the checklist's schema), one per frame request of the case: the parsed
    score (null unless valid), the status and the last error."""
    rows = []
    for pos, path in enumerate(frame_paths(case)) if not case.get("error_load") else ():
        rid = request_id("cove", case["case_id"], case.get("variant") or "base", STAGE, _group(path))
        res = results.get(rid)
        ok = res is not None and res.status == "ok" and isinstance(res.value, dict)
        rows.append(
            {
                "case_id": case["case_id"],
                "variant": case.get("variant") or "base",
                "group": pos,
                "target_element": None,
                "question_id": _group(path),
                "type": METRIC,
                "metric": METRIC,
                "expected": None,
                "answer": res.value.get("answer") if ok else None,
                "status": res.status if res is not None else "missing",
                "request_id": rid,
                "correct": None,
                "score": float(res.value["score"]) if ok else None,
                "parse": None,
                "alt_answer": None,
                "alt_correct": None,
                "alt_score": None,
                "categories": list(case.get("categories") or []),
                "group_categories": [],
                "error": None if ok else (res.error if res is not None else "not judged"),
            }
        )
    return rows


def case_scores(rows: list[dict]) -> dict[tuple[str, str], float | None]:
    """``{(case_id, variant): VQR}``: the mean frame score, None when any frame has no usable score."""
    frames: dict[tuple[str, str], list] = {}
    for r in rows:
        if r["metric"] == METRIC:
            frames.setdefault((r["case_id"], r["variant"]), []).append(r["score"])
    return {k: (float(np.mean(v)) if v and all(s is not None for s in v) else None) for k, v in frames.items()}


def summarize(cases: list[dict], judged: list[dict], cfg) -> tuple[dict, dict]:
    """(headline stats of VQR, ``{category: {"VQR": stats}}``); CIs over cases (``stats.describe``)."""
    from vbench_ray.benchmarks.base import group_rows, judge_availability, metric_stats

    rows = [r for r in judged if r["metric"] == METRIC]
    scores = case_scores(rows)
    per_case = [
        {
            "case_id": c["case_id"],
            "categories": c.get("categories") or [],
            METRIC: scores.get((c["case_id"], c.get("variant") or "base")),
        }
        for c in cases
    ]
    seed = cfg.run.seed
    stats = metric_stats(per_case, METRIC, cfg.stats, seed)
    stats.update(
        n_failed=sum(1 for r in per_case if r[METRIC] is None),
        n_frames=len(rows),
        n_invalid=sum(1 for r in rows if r["status"] != "ok"),
        scale=f"{SCALE[0]:g}-{SCALE[1]:g}",
        higher_is_better=True,
    )
    stats = judge_availability(stats, rows, float(cfg.vqr.max_invalid_fraction), what="VQR frame answers")
    categories = {
        cat: {METRIC: metric_stats(members, METRIC, cfg.stats, seed)}
        for cat, members in group_rows(per_case, "categories").items()
    }
    return stats, categories
