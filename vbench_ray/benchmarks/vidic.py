"""ViDiC-1K: video difference captioning, scored by a checklist judged from the model's own description.

Spec: ViDiC paper §3.3.2, Table 2, Table 5, App. G.3-G.5; official layout and code: NJU-LINK/ViDiC-1K
b7aeefd (``inference/``, ``judge/judge.py``, ``utils/calculate.py``). The pipeline has no per-case compute stage;
it is three judge phases (:mod:`vbench_ray.benchmarks.vidic_requests`):

1. ``describe``: the **model under test** (``model.*``, any judge backend; temperature 0.7, 2 fps, as
   Table 5 for most models) compares Video A and Video B in free text.
2. ``judge``: a **text-only judge** (``judge.*``; the paper's is gpt-5-mini through an API, i.e.
   ``judge.backend=http``) answers each checklist question yes/no from that description alone.
3. ``error`` (``error_analysis.enabled``): the same judge config labels each wrong answer with one of
   five error categories (App. G.5, Table 6).

Data (``data.*``):

* ``data.checklist``: the official ``checklist.json``, a list of ``{index, video1_path, video2_path,
  structured_analysis: {Similarities: [...], Differences: [...]}}``, each question ``{class, question,
  correct_answer}``. ``data.questions=official`` (default) reads every question as the official code
  (``vidic_questions.parse_questions``): an unknown class is its own class (``"unknown"`` when absent), a
  ``correct_answer`` other than yes/no (``""``, ``"np"``) is matched literally (never stripped); only a
  shape the official scripts crash on is a load error. ``data.questions=strict``: an unknown class, an
  empty question or a ``correct_answer`` not yes/no also makes its case a load error, left out of the
  scores and listed under ``failures``.
* ``data.video_root``: the root against which ``video1_path`` (Video A, ``source_path``) and
  ``video2_path`` (Video B, ``edited_path``) resolve; a path escaping it, or a missing video, is a load
  error whose questions count wrong (the official pipeline gets no description for such a pair, and
  its judge marks every question ``"error"``).
* ``data.responses``: optional official responses file (``[{index, video1_path, video2_path,
  response}]``) joined on ``(video1_path, video2_path)``: the descriptions are scored without running
  the model. They are written to ``RUN_DIR/vidic_responses.jsonl`` and answered through the ``replay``
  backend, so they land in the judge log like any model answer (replaying the run dir later needs no
  responses file). A pair without a response is recorded as an unanswered describe request and its
  questions count wrong. With ``data.responses`` the videos are never opened: ``data.video_root`` may be
  left unset, and missing video files are not load errors.

Sweep variants (``variant_params``): ``fps`` / ``max_frames`` / ``max_pixels`` set the describe request's
frame sampling; ``order: reverse`` presents Video B before Video A, each keeping its own label.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
from omegaconf import OmegaConf

from vbench_ray.benchmarks import vidic_compare
from vbench_ray.benchmarks import vidic_questions as vq
from vbench_ray.benchmarks import vidic_scoring as scoring
from vbench_ray.benchmarks.base import (
    CASE_FIELDS,
    Benchmark,
    DataError,
    JudgePhase,
    duplicate_ids,
    failure_report,
    judge_availability,
    register_benchmark,
)
from vbench_ray.benchmarks.cove_data import resolve_under
from vbench_ray.cfgutil import get
from vbench_ray.config import BaseConfig
from vbench_ray.judges.base import JudgeConfig, JudgeVideoConfig
from vbench_ray.pipeline import Stage

log = logging.getLogger(__name__)

RESPONSES_JSONL = "vidic_responses.jsonl"


# ----------------------------------------------------------------------------- config


@dataclass
class VidicDataConfig:
    checklist: str = "???"  # the official checklist.json
    video_root: Optional[str] = None  # root of video1_path / video2_path (required unless data.responses is set)
    responses: Optional[str] = None  # official responses file: score these descriptions instead of running model.*
    questions: str = (
        "official"  # official: every question scored as the official code | strict: malformed -> load error
    )


@dataclass
class VidicErrorAnalysisConfig:
    enabled: bool = False  # App. G.5: label each wrong answer with an error category (uses judge.*)


def _model_defaults() -> JudgeConfig:
    # Table 5 (Qwen2.5-VL / Qwen3-VL rows) and the official ``inference/get_response_qwen*.py``: temperature 0.7,
    # top_p 0.9, 2 fps
    return JudgeConfig(temperature=0.7, top_p=0.9, max_tokens=2048, video=JudgeVideoConfig(fps=2.0, max_frames=32))


@dataclass
class VidicConfig(BaseConfig):
    benchmark: str = "vidic"
    data: VidicDataConfig = field(default_factory=VidicDataConfig)
    model: JudgeConfig = field(default_factory=_model_defaults)  # the model under test (writes the descriptions)
    judge: JudgeConfig = field(default_factory=lambda: JudgeConfig(temperature=0.0, max_tokens=1024))  # text-only
    error_analysis: VidicErrorAnalysisConfig = field(default_factory=VidicErrorAnalysisConfig)


# ----------------------------------------------------------------------------- files


def read_checklist(path: Path) -> list:
    if not path.exists():
        raise DataError(f"data.checklist not found: {path}")
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"data.checklist {path} is not valid JSON: {exc}") from exc
    if not isinstance(items, list):
        raise DataError(f"data.checklist {path}: expected a JSON list of video pairs, got {type(items).__name__}")
    return items


def response_text(value: Any) -> str:
    """A response as text: strings as they are, objects as JSON (official), nothing as empty."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def read_responses(path: Path) -> dict[tuple[str, str], str]:
    """``(video1_path, video2_path) -> response`` from an official responses file. A pair listed twice
    keeps its last response (the official code builds a dict)."""
    if not path.exists():
        raise DataError(f"data.responses not found: {path}")
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"data.responses {path} is not valid JSON: {exc}") from exc
    if not isinstance(entries, list):
        raise DataError(f"data.responses {path}: expected a JSON list of responses, got {type(entries).__name__}")
    out: dict[tuple[str, str], str] = {}
    duplicates = 0
    for i, entry in enumerate(entries):
        where = f"data.responses {path.name}: entry[{i}]"
        if not isinstance(entry, dict):
            raise DataError(f"{where}: expected an object, got {type(entry).__name__}")
        for key in ("video1_path", "video2_path"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise DataError(f"{where}.{key}: expected a non-empty string, got {entry.get(key)!r}")
        key = vq.pair_key(entry["video1_path"], entry["video2_path"])
        duplicates += key in out
        out[key] = response_text(entry.get("response"))
    if duplicates:
        log.warning(
            "data.responses %s: %d video pair(s) listed more than once; the last response is used", path, duplicates
        )
    return out


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- benchmark


@register_benchmark
class VidicBench(Benchmark):
    name = "vidic"
    # `vbench-ray compare` (vidic_compare.py); the judge reads the model's descriptions, not the videos
    primary_metric = "Avg"
    judged_metrics = tuple(vidic_compare.SECTIONS)
    judge_reads_video = False
    compare_units = staticmethod(vidic_compare.compare_units)
    comparison_options = staticmethod(vidic_compare.comparison_options)
    analyses = staticmethod(vidic_compare.analyses)
    figure_orders = {
        "by_category": ("Subject", "Motion", "Position", "Background", "Camera", "Style", "Playback Technique")
    }
    figure_notes = {"by_category": "the seven classes in the column order of ViDiC Table 2 (Category Performance)"}
    paper = "ViDiC §3.3, App. E (official code: NJU-LINK/ViDiC-1K)"
    needs = "the model under test (a VLM that describes; GPU with vllm) and a text judge"
    scored_metrics = {
        "Sim": ("ViDiC §3.3.2 (similarity questions)", "percent"),
        "Diff": ("ViDiC §3.3.2 (difference questions)", "percent"),
        "Avg": ("ViDiC §3.3.2 (mean of Sim and Diff)", "percent"),
    }
    judge_models = {
        "judge": "gpt-5-mini (OpenAI API, text only; the official ViDiC-1K judge)",
        "model": "any VLM under test, e.g. Qwen/Qwen2.5-VL-7B-Instruct (Hugging Face), or a served model's name",
    }
    config_class = VidicConfig
    judge_blocks = {"judge": True, "model": True}

    def stages(self) -> list[Stage]:
        return []  # everything is judged (describe -> judge -> error analysis)

    def case_fields(self) -> list[pa.Field]:
        have = {f.name for f in CASE_FIELDS}
        return [] if "variant_params" in have else [pa.field("variant_params", pa.string())]

    # -- loading
    def check_data(self) -> None:
        """``data.questions`` is known, the checklist exists and is a list, and no index repeats. The parsed checklist
        is kept on this bound benchmark for ``load_cases``: a run parses the file once."""
        cfg = self.cfg
        if cfg.data.questions not in vq.QUESTION_RULES:
            raise DataError(f"data.questions must be one of {list(vq.QUESTION_RULES)}, got {cfg.data.questions!r}")
        checklist = Path(cfg.data.checklist)
        items = read_checklist(checklist)
        duplicate_ids([_index_id(item, i) for i, item in enumerate(items)], "indexes", f"data.checklist {checklist}")
        self._items = items

    def load_cases(self) -> list[dict]:
        cfg = self.cfg
        checklist = Path(cfg.data.checklist)
        items, self._items = getattr(self, "_items", None), None  # check_data's parse, taken once
        if items is None:
            items = read_checklist(checklist)
        precomputed = cfg.data.responses is not None
        if precomputed:
            read_responses(Path(cfg.data.responses))  # whole-file problems surface before anything runs
        if cfg.data.video_root is None:
            if not precomputed:
                raise DataError(
                    "data.video_root is not set: the videos of the model under test are resolved "
                    "against it (only a run scoring data.responses can do without it)"
                )
            root = None
        else:
            root = Path(cfg.data.video_root)
            if not root.is_dir():
                raise DataError(f"data.video_root is not a directory: {root}")
        duplicate_ids([_index_id(item, i) for i, item in enumerate(items)], "indexes", f"data.checklist {checklist}")
        seen: set[str] = set()
        rows = [
            self._case_row(i, item, checklist, root, not precomputed, seen, cfg.data.questions)
            for i, item in enumerate(items)
        ]
        if cfg.run.limit is not None:
            rows = rows[: cfg.run.limit]
        return rows

    def _case_row(
        self,
        i: int,
        item: Any,
        checklist: Path,
        root: Path | None,
        need_videos: bool,
        seen: set[str],
        rules: str = "official",
    ) -> dict:
        index = item.get("index") if isinstance(item, dict) else None
        where = f"{checklist.name}: item[{i}]" + (f" (index={index})" if index is not None else "")
        errors = []
        if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
            case_id = str(index)
        elif isinstance(index, str) and index.strip().isdigit():
            case_id = str(int(index))
        else:
            case_id = f"#{i}"
            errors.append(f"{where}.index: expected a non-negative integer, got {index!r}")
        if case_id in seen:
            errors.append(f"{where}.index: duplicate index {index!r} (already used by an earlier item)")
            case_id = f"#{i}"
        seen.add(case_id)
        row = {
            "benchmark": "vidic",
            "case_id": case_id,
            "variant": "base",
            "categories": [],
            "instruction": None,
            "source_path": None,
            "edited_path": None,
            "variant_params": None,
            "error_load": None,
            "annotations": json.dumps(item, ensure_ascii=False) if isinstance(item, dict) else None,
        }
        questions, problems = vq.parse_questions(item, where, rules)
        errors += problems
        classes = {q.cls for q in questions} if not problems else set()
        row["categories"] = [c for c in vq.CLASSES if c in classes] + sorted(classes - set(vq.CLASSES))
        if isinstance(item, dict):
            for key, column in (("video1_path", "source_path"), ("video2_path", "edited_path")):
                try:
                    row[column] = self._video(item.get(key), f"{where}.{key}", root, need_videos)
                except DataError as exc:
                    errors.append(str(exc))
        if errors:
            row["error_load"] = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        return row

    @staticmethod
    def _video(relative: Any, where: str, root: Path | None, need_videos: bool) -> str:
        if not isinstance(relative, str) or not relative.strip():
            raise DataError(f"{where}: expected a non-empty path, got {relative!r}")
        if root is None:
            return relative
        path = resolve_under(root, relative, where)
        if need_videos and not path.is_file():
            raise DataError(f"{where}: video not found: {path}")
        return str(path)

    # -- judging
    def check_config(self) -> list[str]:
        """``data.responses``, when set, exists."""
        cfg = self.cfg
        responses = get(cfg, "data.responses")
        if responses and not Path(str(responses)).exists():
            return [f"`data.responses` = {str(responses)!r} does not exist"]
        return []

    def judge_key(self, phase: str) -> str | None:
        """The describe phase's judge is the model under test (``model``), not checked when its precomputed
        responses (``data.responses``) are replayed instead."""
        cfg = self.cfg
        if phase == "describe":
            return None if get(cfg, "data.responses") else "model"
        return "judge"

    @classmethod
    def synth(cls, out: Path, n: int, seed: int) -> dict:
        from vbench_ray.synth.vidic import synth_vidic

        return synth_vidic(out, n=n, seed=seed)

    def judge_phases(self) -> list[JudgePhase]:
        cfg = self.cfg
        phases = [
            self._describe_phase(),
            JudgePhase(
                "judge",
                cfg.judge,
                lambda cases, results: scoring.judge_requests(cases, results, cfg.judge.parse, cfg.data.questions),
            ),
        ]
        if cfg.error_analysis.enabled:
            phases.append(
                JudgePhase(
                    "error",
                    cfg.judge,
                    lambda cases, results: scoring.error_requests(cases, results, cfg.data.questions),
                )
            )
        return phases

    def _describe_phase(self) -> JudgePhase:
        cfg = self.cfg

        def build(cases: list[dict], _results: dict) -> list:
            return [scoring.describe_request(c) for c in cases if scoring.scorable(c)]

        def prepare(cases: list[dict]) -> None:
            self._write_responses(cases, build(cases, {}))

        if cfg.data.responses is None:
            return JudgePhase("describe", cfg.model, build)
        # Precomputed descriptions: the describe phase answers from a JSONL written into the run dir, so
        # they pass through the same parser and judge log as a live model's (and the run replays alone).
        responses = Path(cfg.data.responses)
        replay = OmegaConf.merge(
            cfg.model,
            {
                "backend": "replay",
                "replay_path": str(self._responses_jsonl()),
                "max_retries": 0,
                "name": f"responses:{responses.name}",
            },
        )
        return JudgePhase("describe", replay, build, prepare)

    def _responses_jsonl(self) -> Path:
        return Path(self.cfg.output.dir).resolve() / RESPONSES_JSONL

    def _write_responses(self, cases: list[dict], requests: list) -> None:
        cfg = self.cfg
        responses = read_responses(Path(cfg.data.responses))
        by_case = {(c["case_id"], c["variant"]): c for c in cases}
        lines, missing = [], []
        label = f"responses:{Path(cfg.data.responses).name}"
        for request in requests:
            item = json.loads(by_case[(request.case_id, request.variant)]["annotations"])
            key = vq.pair_key(item["video1_path"], item["video2_path"])
            if key in responses:
                lines.append(
                    json.dumps(
                        {"request_id": request.request_id, "text": responses[key], "model": label}, ensure_ascii=False
                    )
                )
            else:
                missing.append(f"{request.case_id} ({key[0]}, {key[1]})")
        if missing:
            log.warning(
                "data.responses has no response for %d video pair(s); their questions count wrong: %s",
                len(missing),
                ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""),
            )
        path = self._responses_jsonl()
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, "\n".join(lines) + ("\n" if lines else ""))

    def score_judgments(self, cases: list[dict], results: dict) -> pa.Table:
        cfg = self.cfg
        rows = [q for case in cases for q in scoring.judgment_rows(case, results, cfg.judge.parse, cfg.data.questions)]
        return pa.Table.from_pylist(rows, schema=scoring.JUDGMENT_SCHEMA)

    # -- aggregation
    def summarize(self, cases: pa.Table, judgments: pa.Table | None = None) -> dict:
        cfg = self.cfg
        rows = cases.to_pylist()
        judged = judgments.to_pylist() if judgments is not None else []
        args = (cfg.run.seed, cfg.stats.bootstrap_samples, cfg.stats.confidence)
        excluded = [r for r in rows if r.get("error_load") and not vq.item_questions(r, cfg.data.questions)]
        summary: dict[str, Any] = {
            "benchmark": "vidic",
            "n_cases": len({r["case_id"] for r in rows}),
            "n_rows": len(rows),
            "n_questions": len(judged),
            "n_cases_excluded": len(excluded),
            "metrics": {m: {**s, "higher_is_better": True} for m, s in scoring.section_metrics(judged, *args).items()},
            "by_category": scoring.by_class(judged, *args),
            "question_status": _status_counts(judged),
        }
        for m, section in (("Sim", "Similarities"), ("Diff", "Differences"), ("Avg", None)):
            # a dead judge (or model under test) is not a score: judged questions, load errors aside
            members = [
                r for r in judged if r["status"] != "load_error" and (section is None or r["section"] == section)
            ]
            judge_availability(
                summary["metrics"][m],
                members,
                float(cfg.judge.max_invalid_fraction),
                unusable=VIDIC_UNUSABLE,
                what="checklist questions",
            )
        if cfg.error_analysis.enabled:
            summary["error_types"] = scoring.error_type_counts(judged)
        summary["failures"] = _failures(rows, judged)
        return summary


# Statuses of questions without a usable answer from a live endpoint: the judge's, or no description because
# the model under test never answered (describe_invalid, an unusable description, is the model's own failure).
VIDIC_UNUSABLE = ("invalid", "error", "missing", "describe_error", "describe_missing")


def _index_id(item: Any, i: int) -> str:
    """The case id ``_case_row`` gives an item: its index (an integer, or digits), else ``#i``."""
    index = item.get("index") if isinstance(item, dict) else None
    if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
        return str(index)
    if isinstance(index, str) and index.strip().isdigit():
        return str(int(index))
    return f"#{i}"


def _status_counts(judged: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in judged:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return dict(sorted(counts.items()))


def _failures(rows: list[dict], judged: list[dict]) -> dict:
    """Cove's failure report (load errors), plus the cases whose description never came back usable."""
    report = failure_report(rows)
    failed_describe = sorted(
        {(r["case_id"], r["variant"], r["status"]) for r in judged if r["status"].startswith("describe_")}
    )
    if failed_describe:
        report["count"] += len({(c, v) for c, v, _ in failed_describe})
        report["by_stage"]["describe"] = len(failed_describe)
        room = max(0, 20 - len(report["examples"]))
        report["examples"] += [
            {
                "case_id": c,
                "variant": v,
                "stage": "describe",
                "error": f"no usable description ({status[len('describe_') :]}); its questions count wrong",
            }
            for c, v, status in failed_describe[:room]
        ]
    return report
