"""CoVEBench: loader for the official layout, objective-metric stages, exclusions and summary.

Spec: CoVEBench paper App. F.2 (MSM), App. F.3 (SSIM, MF), App. F.4 (sample filtering);
official layout and conventions of NJU-LINK/CoVEBench 4fe1c2f (``src/covebench_eval/``):

* ``data.checklist``: the official ``checklist.json``, a list of tasks with ``id``, ``editing_instruction``,
  ``evaluation_groups[].questions[]``, ``videoA_path`` (relative to ``data.source_dir``) and ``category``
  (``[{"Level 1", "Level 2", "Level 3"}]``).
* ``data.edited_dir``: edited videos named ``{id}.mp4`` or one of the official patterns
  (``task_(\\d+)_output``, ``output_id(\\d+)``, ``video[_-](\\d+)``, a bare number, else the last number).

Exclusions (App. F.3-F.4): SSIM leaves out background changes; MF leaves out camera movement, global
style and instruction-dictated motion changes. They are derived from the task's Level-1 categories by
default; ``metrics.exclude.<METRIC>.ids`` / ``ids_file`` (the official ``configs/filters/*.txt``) replace
the category rule with an explicit id list, as the official code does.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence

import pyarrow as pa

from vbench_ray.benchmarks import cove_checklist as checklist
from vbench_ray.benchmarks import cove_compare
from vbench_ray.benchmarks import cove_vqr as vqr
from vbench_ray.benchmarks.base import (
    Benchmark,
    DataError,
    JudgePhase,
    blank_unavailable,
    duplicate_ids,
    failure_report,
    group_rows,
    judge_availability,
    metric_stats,
    register_benchmark,
)
from vbench_ray.benchmarks.json_array import NotAnArray, iter_json_array
from vbench_ray.config import BaseConfig
from vbench_ray.editors import EDITORS, EditorConfig
from vbench_ray.editors.base import edited_name
from vbench_ray.judges.base import JUDGE_CHOICES, JudgeConfig, JudgeRequest
from vbench_ray.metrics import METRICS
from vbench_ray.metrics.base import metric_choices, metrics_config
from vbench_ray.metrics.stage import decode_stages
from vbench_ray.pipeline import Stage
from vbench_ray.safepaths import HASH_MARK

QUESTION_TYPES = ("AB-MCQ", "Single-TF", "Dual-TF", "Score-MCQ")
DIMENSIONS = ("Execution Accuracy", "Physical Logic", "Semantic Preservation")
VIDEO_EXTS = (".mp4", ".mov", ".webm", ".mkv", ".avi")
# Official edited-video naming, tried in this order (NJU-LINK/CoVEBench 4fe1c2f, src/covebench_eval/common.py
# `task_id_from_path`).
EDITED_NAME_PATTERNS = [re.compile(p) for p in (r"task_(\d+)_output", r"output_id(\d+)", r"video[_-](\d+)", r"^(\d+)$")]
# The frame metrics CoVEBench uses, by their registered names (vbench_ray.metrics): their config sections,
# allowed values and stages all come from the metric classes.
OBJECTIVE_METRICS = ("SSIM", "MSM", "MF", "SRC", "AES", "TQ")
ALL_METRICS = OBJECTIVE_METRICS + checklist.CHECKLIST_METRICS + (vqr.METRIC,)
# judge-backed metrics that are neither frame metrics nor checklist metrics (VQR: VisualQuality-R1, cove_vqr)
JUDGED_METRICS = (vqr.METRIC,)
# `metrics.enabled`'s default (documented in configs/cove.yaml): a metric added to OBJECTIVE_METRICS is off
# until it is named here too (and in the YAML's `enabled`)
DEFAULT_ENABLED = ("SSIM", "MSM", "MF") + checklist.CHECKLIST_METRICS
# App. F.3-F.4: the categories each metric leaves out by default (a metric not named here excludes none).
# SRC: the official category fast path (camera moves, global style; metrics/src.py)
DEFAULT_EXCLUSIONS = {"SSIM": ["Background"], "MF": ["Camera", "Style", "Motion"], "SRC": ["Camera", "Style"]}
# rows whose edited videos are probed together (probe_edited's thread pool) as the loader streams them
PROBE_CHUNK = 256


# ----------------------------------------------------------------------------- config


@dataclass
class CoveDataConfig:
    checklist: str = "???"  # the official checklist.json
    source_dir: str = "???"  # root against which each task's videoA_path is resolved
    edited_dir: Optional[str] = None  # edited videos, {id}.mp4 or the official name patterns (editor.name=precomputed)
    pair_mismatch: str = "resample"  # source/edited frame count or size differ: resample each (official) | fail


@dataclass
class Exclusion:
    categories: List[str] = field(default_factory=list)  # "Level 1" or "Level 1/Level 2" names
    ids: List[str] = field(default_factory=list)  # explicit task ids; replaces the category rule
    ids_file: Optional[str] = None  # one task id per line (the official configs/filters/*.txt)


def _exclusion_factory(metric: str):
    return lambda: Exclusion(categories=list(DEFAULT_EXCLUSIONS.get(metric, [])))


def cove_metrics_config(
    metrics: Sequence[str] = OBJECTIVE_METRICS,
    prefix: str = "Cove",
    module: str = __name__,
    enabled: Sequence[str] = DEFAULT_ENABLED,
) -> type:
    """The ``metrics`` section for these frame metrics: ``enabled`` (its default: ``enabled``), each metric's
    own config (its ``config_class``), and ``exclude.<metric>`` (``DEFAULT_EXCLUSIONS``). ``module`` must
    bind the two classes it makes, ``{prefix}Exclusions`` and ``{prefix}MetricsConfig``."""
    exclusions = make_dataclass(
        f"{prefix}Exclusions", [(m, Exclusion, field(default_factory=_exclusion_factory(m))) for m in metrics]
    )
    exclusions.__module__ = module
    enabled = tuple(enabled)
    return metrics_config(
        f"{prefix}MetricsConfig",
        metrics,
        module=module,
        before=[("enabled", List[str], field(default_factory=lambda: list(enabled)))],
        after=[("exclude", exclusions, field(default_factory=exclusions))],
    )


CoveMetricsConfig = cove_metrics_config()
CoveExclusions = CoveMetricsConfig.__dataclass_fields__["exclude"].type


@dataclass
class CoveConfig(BaseConfig):
    benchmark: str = "cove"
    data: CoveDataConfig = field(default_factory=CoveDataConfig)
    metrics: CoveMetricsConfig = field(default_factory=CoveMetricsConfig)
    judge: JudgeConfig = field(default_factory=lambda: JudgeConfig(max_tokens=16384))
    # VQR's model (VisualQuality-R1-7B), a judge of its own (cove_vqr; configs/judges/visualquality_r1_vllm.yaml)
    vqr: JudgeConfig = field(default_factory=lambda: JudgeConfig(temperature=1.0, top_p=1.0, top_k=50, max_tokens=512))
    score: checklist.CoveScoreConfig = field(default_factory=checklist.CoveScoreConfig)
    editor: EditorConfig = field(default_factory=EditorConfig)


# ----------------------------------------------------------------------------- checklist validation


def validate_task(task: Any, where: str) -> list[str]:
    """Problems with one checklist task, each naming the field (``task[3].evaluation_groups[0]...``)."""
    if not isinstance(task, dict):
        return [f"{where}: expected an object, got {type(task).__name__}"]
    errors = []
    tid = task.get("id")
    if isinstance(tid, bool) or not isinstance(tid, (int, str)) or not str(tid).strip():
        errors.append(f"{where}.id: expected an integer id, got {tid!r}")
    for key in ("editing_instruction", "videoA_path"):
        if not isinstance(task.get(key), str) or not task.get(key):
            errors.append(f"{where}.{key}: expected a non-empty string, got {task.get(key)!r}")
    groups = task.get("evaluation_groups", [])
    if not isinstance(groups, list):
        return errors + [f"{where}.evaluation_groups: expected a list, got {type(groups).__name__}"]
    seen: set = set()
    for g, group in enumerate(groups):
        gw = f"{where}.evaluation_groups[{g}]"
        questions = group.get("questions") if isinstance(group, dict) else None
        if not isinstance(questions, list):
            errors.append(f"{gw}.questions: expected a list")
            continue
        for q, question in enumerate(questions):
            errors += _validate_question(question, f"{gw}.questions[{q}]", seen)
    if not isinstance(task.get("category", []), list):
        errors.append(f"{where}.category: expected a list of {{'Level 1', 'Level 2', 'Level 3'}} objects")
    return errors


def _validate_question(question: Any, where: str, seen: set) -> list[str]:
    if not isinstance(question, dict):
        return [f"{where}: expected an object, got {type(question).__name__}"]
    errors = []
    qid = question.get("id")
    if not isinstance(qid, str) or not qid:
        errors.append(f"{where}.id: expected a question id like 'Q1', got {qid!r}")
    elif qid in seen:
        errors.append(f"{where}.id: duplicate question id {qid!r}")
    seen.add(qid)
    # an unknown type, an unknown dimension or a gold answer under another key is no load error: the official
    # code skips the type, routes by keywords and looks the gold up through its chain (cove_checklist)
    gold = question.get("expected_answer")
    if isinstance(gold, float) and not math.isfinite(gold):
        errors.append(f"{where}.expected_answer: {gold!r} is not a valid answer (NaN/Infinity in the JSON)")
    return errors


def task_categories(task: dict) -> tuple[list[str], list[str]]:
    """Level-1 names and ``Level 1/Level 2`` names of a task, in order, without repeats."""
    level1: list[str] = []
    level12: list[str] = []
    for c in task.get("category") or []:
        if isinstance(c, dict) and c.get("Level 1"):
            l1 = str(c["Level 1"])
            l12 = f"{l1}/{c.get('Level 2')}" if c.get("Level 2") else l1
            level1 += [l1] if l1 not in level1 else []
            level12 += [l12] if l12 not in level12 else []
    return level1, level12


# ----------------------------------------------------------------------------- paths


def resolve_under(root: Path, relative: str, what: str) -> Path:
    """``root/relative``, refusing paths that escape ``root`` (absolute paths, ``..``, symlinks out)."""
    root = root.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise DataError(f"{what} {relative!r} escapes the data root {root}")
    return path


def task_id_from_name(stem: str) -> str | None:
    """The task id an edited file's name stands for (official patterns, then the last number)."""
    for pattern in EDITED_NAME_PATTERNS:
        m = pattern.search(stem)
        if m:
            return str(int(m.group(1)))
    numbers = re.findall(r"\d+", stem)
    return str(int(numbers[-1])) if numbers else None


def index_edited_videos(edited_dir: Path) -> tuple[dict[str, Path], dict[str, list[Path]], dict[str, Path]]:
    """``(index, ambiguous, by_name)``: task id -> edited video by the official patterns (an exact ``{id}.ext``
    wins; other clashes are ambiguous), and every video by file name (``edited_name(id)``, what ``vbench-ray
    edit`` writes, is looked up there first). Names with ``~`` are ``edited_name``'s one-to-one forms of odd ids:
    never read as a number by the patterns (their hash digits would name another task)."""
    if not edited_dir.is_dir():
        raise DataError(f"data.edited_dir is not a directory: {edited_dir}")
    found: dict[str, list[Path]] = {}
    by_name: dict[str, Path] = {}
    for path in sorted(edited_dir.iterdir()):
        if path.suffix.lower() in VIDEO_EXTS and path.is_file():
            by_name[path.name] = path
            tid = None if HASH_MARK in path.stem else task_id_from_name(path.stem)
            if tid is not None:
                found.setdefault(tid, []).append(path)
    index, ambiguous = {}, {}
    for tid, paths in found.items():
        exact = [p for p in paths if p.stem == tid]
        if len(paths) == 1 or len(exact) == 1:
            index[tid] = exact[0] if exact else paths[0]
        else:
            ambiguous[tid] = paths
    return index, ambiguous, by_name


# ----------------------------------------------------------------------------- exclusions


def _exclusion_rule(name: str, excl: Exclusion) -> tuple[set[str] | None, list[str]]:
    ids = {str(i).strip() for i in excl.ids}
    if excl.ids_file:
        path = Path(excl.ids_file)
        if not path.exists():
            raise DataError(f"metrics.exclude.{name}.ids_file not found: {path}")
        ids |= {line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}
    ids = {str(int(i)) if i.isdigit() else i for i in ids}
    return (ids if ids else None), list(excl.categories)


def exclusion_reason(case_id: str, level1: list[str], level12: list[str], rule: tuple) -> str | None:
    """Why a case is left out of a metric, or None. Category names match Level 1 or ``Level 1/Level 2``."""
    ids, categories = rule
    if ids is not None:
        return "ids" if case_id in ids else None
    for cat in categories:
        if cat in level1 or cat in level12:
            return f"category:{cat}"
    return None


# ----------------------------------------------------------------------------- benchmark


@register_benchmark
class CoveBench(Benchmark):
    name = "cove"
    # `vbench-ray compare` (cove_compare.py)
    primary_metric = "UAS"
    judged_metrics = cove_compare.CHECKLIST
    compare_units = staticmethod(cove_compare.compare_units)
    analyses = staticmethod(cove_compare.analyses)
    figure_orders = {
        "by_category": ("Subject", "Background", "Camera", "Motion", "Position", "Visual Effects", "Style")
    }
    figure_notes = {"by_category": "Level-1 categories in the column order of CoVEBench Table 8 (Fig. 5 middle)"}
    paper = "CoVEBench §3.1, App. F (official code: NJU-LINK/CoVEBench)"
    needs = "a VLM checklist judge (UAS/IFS/VRS/SEM; GPU with vllm), weights for AES, TQ, SRC"
    judge_models = {
        "judge": "Qwen/Qwen3.5-122B-A10B (Hugging Face; the official CoVEBench judge)",
        "vqr": "TianheWu/VisualQuality-R1-7B (Hugging Face; the official VQR model)",
    }
    scored_metrics = {
        "UAS": ("CoVEBench §3.1, App. F.1", "percent"),
        "IFS": ("CoVEBench App. F.1", "percent"),
        "VRS": ("CoVEBench App. F.1", "percent"),
        "SEM": ("CoVEBench App. F.3", "0-100"),
        "VQR": ("CoVEBench App. F.2 (VisualQuality-R1)", "1-5"),
    }
    config_class = CoveConfig
    # rows made by another editor (or another editor config) are another model's: never resumed into
    result_sections = ("editor.name", "editor.config_hash")
    metric_names = OBJECTIVE_METRICS  # config_class's metrics section is made from the same list
    config_choices = {
        **JUDGE_CHOICES,
        **{"vqr." + k.split(".", 1)[1]: v for k, v in JUDGE_CHOICES.items() if k.split(".", 1)[1] != "parse"},
        "data.pair_mismatch": ("resample", "fail"),
        "score.aggregation": ("pooled", "per_task"),
        "score.uas_unit": ("group", "task"),
        "score.missing_output": checklist.MISSING_OUTPUT_RULES,
        "score.validity": checklist.VALIDITY_RULES,
        "score.sem_questions": checklist.SEM_QUESTION_RULES,
        **metric_choices(OBJECTIVE_METRICS),
        "editor.name": ("precomputed", *sorted(EDITORS)),
        "editor.layout": ("by_variant", "flat"),
        "editor.frame_rules.resolution_mode": ("exact", "max"),
        "editor.profile": ("table5",),
    }

    def enabled_metrics(self, cfg) -> list[str]:
        """The enabled objective (frame) metrics."""
        known = tuple(self.metric_names) + checklist.CHECKLIST_METRICS + JUDGED_METRICS
        unknown = [m for m in cfg.metrics.enabled if m not in known]
        if unknown:
            raise DataError(f"metrics.enabled: unknown metric(s) {unknown}; CoVEBench metrics are {list(known)}")
        return [m for m in cfg.metrics.enabled if m in self.metric_names]

    def checklist_metrics(self, cfg) -> list[str]:
        return [m for m in cfg.metrics.enabled if m in checklist.CHECKLIST_METRICS]

    @staticmethod
    def vqr_enabled(cfg) -> bool:
        return vqr.METRIC in cfg.metrics.enabled

    def case_fields(self, cfg) -> list[pa.Field]:
        return [pa.field("categories_l2", pa.list_(pa.string())), pa.field("error_edited", pa.string())] + [
            pa.field(f"excluded_{m}", pa.string()) for m in self.enabled_metrics(cfg)
        ]

    def stages(self, cfg) -> list[Stage]:
        """Decode (a CPU stage computing the CPU metrics and writing VQR's frames from the same decode), then one
        model pool per model-backed metric."""
        metrics = self.enabled_metrics(cfg)
        sinks = [vqr.frame_sink(cfg)] if self.vqr_enabled(cfg) else []  # VQR's JPEGs for its judge
        if not metrics and not sinks:
            return []
        return decode_stages(cfg, metrics, sinks=sinks, inputs=tuple(f"excluded_{m}" for m in metrics))

    # -- loading
    def check_data(self, cfg) -> None:
        """The checklist and the source folder exist, and no task id repeats (the checklist streamed, ids kept)."""
        checklist = Path(cfg.data.checklist)
        if not checklist.exists():
            raise DataError(f"data.checklist not found: {checklist}")
        if not Path(cfg.data.source_dir).is_dir():
            raise DataError(f"data.source_dir is not a directory: {cfg.data.source_dir}")
        duplicate_ids(
            [_task_id(task, i) for i, task in enumerate(read_checklist(checklist))],
            "task ids",
            f"data.checklist {checklist}",
        )

    def load_cases(self, cfg) -> list[dict]:
        return list(self.iter_cases(cfg))

    def iter_cases(self, cfg) -> Iterator[dict]:
        """The case rows one at a time: the checklist is parsed a task at a time, so memory holds the
        rows already made, never the parsed file. A checklist-wide problem (invalid JSON, duplicate ids) is
        raised once the file has been read, before the caller has computed anything."""
        checklist = Path(cfg.data.checklist)
        if not checklist.exists():
            raise DataError(f"data.checklist not found: {checklist}")
        source_root = Path(cfg.data.source_dir)
        if not source_root.is_dir():
            raise DataError(f"data.source_dir is not a directory: {source_root}")
        if cfg.editor.name == "precomputed":
            if not cfg.data.edited_dir:
                raise DataError(
                    "data.edited_dir is not set: the folder of edited videos ({id}.mp4), or run an "
                    "editor with editor.name=... to make them"
                )
            edited_root = Path(cfg.data.edited_dir)
            edited, ambiguous, by_name = index_edited_videos(edited_root)
            edited = (edited_root, edited, by_name)
        else:  # the editor stage makes them; the row's edited_path is filled in the stream
            edited, ambiguous = None, {}
        metrics = self.enabled_metrics(cfg)
        rules = {m: _exclusion_rule(m, getattr(cfg.metrics.exclude, m)) for m in metrics}
        sources = _SourceIndex(source_root)
        # with VQR, the decode stage opens every edited video (error_frames: unusable_edited)
        probe = self.checklist_metrics(cfg) and not self.vqr_enabled(cfg)
        limit = cfg.run.limit
        ids, pending = [], []
        for i, task in enumerate(read_checklist(checklist)):
            ids.append(_task_id(task, i))
            if limit is not None and i >= limit:  # past the limit only the ids are kept (duplicates are checked)
                continue
            row = self._case_row(i, task, checklist, sources, edited, ambiguous, rules)
            if not probe:
                yield row
                continue
            pending.append(row)
            if len(pending) >= PROBE_CHUNK:  # probed a chunk at a time (probe_edited's thread pool)
                probe_edited(pending, metrics, cfg.video.backend)
                yield from pending
                pending = []
        if pending:
            probe_edited(pending, metrics, cfg.video.backend)
            yield from pending
        duplicate_ids(ids, "task ids", f"data.checklist {checklist}")

    def _case_row(self, i, task, checklist, sources, edited, ambiguous, rules) -> dict:
        where = f"{checklist.name}: task[{i}]"
        case_id = _task_id(task, i)
        row = {
            "benchmark": "cove",
            "case_id": case_id,
            "variant": "base",
            "categories": [],
            "categories_l2": [],
            "annotations": json.dumps(task, ensure_ascii=False) if isinstance(task, dict) else None,
        }
        errors = validate_task(task, f"{where} (id={case_id})")
        if errors:
            row["error_load"] = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
            return row
        row["instruction"] = task["editing_instruction"]
        row["categories"], row["categories_l2"] = task_categories(task)
        try:
            source = sources.resolve(task["videoA_path"], f"{where}.videoA_path")
            row["source_path"] = str(source)
            if case_id in ambiguous:
                raise DataError(f"several edited videos match task {case_id}: {[p.name for p in ambiguous[case_id]]}")
            if edited is not None:  # else the editor stage makes it
                row["edited_path"] = str(_edited_path(case_id, *edited))
        except DataError as exc:
            if row.get("source_path") and (edited is not None or case_id in ambiguous):
                # the model's output is missing, misnamed or refused: an edited-video failure, scored under
                # score.missing_output like an undecodable one, not a load failure that leaves the metrics
                row["error_edited"] = str(exc)
            else:
                row["error_load"] = str(exc)
        for metric, rule in rules.items():
            row[f"excluded_{metric}"] = exclusion_reason(case_id, row["categories"], row["categories_l2"], rule)
        return row

    # -- checklist judging (paper §3.1, App. F.1, F.3)
    def judge_key(self, cfg, phase: str) -> str | None:
        return "vqr" if phase == vqr.STAGE else "judge"

    def synth(self, out: Path, n: int, seed: int) -> dict:
        from vbench_ray.synth.cove import synth_cove

        return synth_cove(out, n=n, seed=seed)

    def judge_phases(self, cfg) -> list[JudgePhase]:
        phases = []
        if self.checklist_metrics(cfg):
            phases.append(
                JudgePhase(
                    "checklist",
                    cfg.judge,
                    lambda cases, _: self.judge_requests(cases, cfg.judge.parse, cfg.score.validity),
                )
            )
        if self.vqr_enabled(cfg):  # VisualQuality-R1, one request per sampled frame (cove_vqr)
            phases.append(JudgePhase(vqr.STAGE, cfg.vqr, lambda cases, _: vqr.requests_of(cases)))
        return phases

    @staticmethod
    def judge_requests(cases: list[dict], parse: str = "official", validity: str = "request") -> list[JudgeRequest]:
        """Requests of the cases that loaded and whose edited video decodes (a case
        without a usable edited video is not sent; ``score.missing_output`` scores it)."""
        return [
            r
            for case in cases
            if not case.get("error_load") and not unusable_edited(case)
            for r in checklist.build_requests(case, parse, validity)
        ]

    def score_judgments(self, cases: list[dict], results: dict, cfg) -> pa.Table:
        rows = [
            q
            for case in cases
            if scorable(case) and self.checklist_metrics(cfg)
            for q in checklist.judgment_rows(
                case,
                results,
                cfg.judge.parse,
                unusable=unusable_edited(case),
                missing_output=cfg.score.missing_output,
                validity=cfg.score.validity,
            )
        ]
        if self.vqr_enabled(cfg):
            rows += [f for case in cases for f in vqr.frame_rows(case, results)]
        return pa.Table.from_pylist(rows, schema=checklist.JUDGMENT_SCHEMA)

    def _checklist_summary(self, judgments: pa.Table, cfg) -> tuple[dict, dict]:
        rows = [r for r in judgments.to_pylist() if r["metric"] not in JUDGED_METRICS]
        metrics = self.checklist_metrics(cfg)
        args = (cfg.score, cfg.run.seed, cfg.stats.bootstrap_samples, cfg.stats.confidence)
        headline = {}
        for m in metrics:
            stats = {**checklist.aggregate(rows, m, *args), "higher_is_better": True}
            judged = [
                r for r in checklist.metric_rows(rows, m, cfg.score.sem_questions) if r["status"] != checklist.NO_OUTPUT
            ]
            headline[m] = judge_availability(
                stats, judged, float(cfg.judge.max_invalid_fraction), what="checklist answers"
            )
        return headline, checklist.by_category(rows, metrics, *args)

    # -- aggregation
    def summarize(self, cases: pa.Table, cfg, judgments: pa.Table | None = None) -> dict:
        # the task JSON is not summarised (the judgments carry the questions): as dicts it is most of the rows' size
        rows = cases.drop_columns([c for c in ("annotations",) if c in cases.column_names]).to_pylist()
        seed = cfg.run.seed
        metrics = self.enabled_metrics(cfg)
        summary: dict[str, Any] = {
            "benchmark": "cove",
            "n_cases": len({r["case_id"] for r in rows}),
            "n_rows": len(rows),
            "metrics": {},
            "by_category": {},
            "exclusions": {},
        }
        for m in metrics:
            stats = metric_stats(rows, m, cfg.stats, seed)
            excluded = [r for r in rows if r.get(f"excluded_{m}")]
            failed = [r for r in rows if not r.get(f"excluded_{m}") and r.get(m) is None]
            stats.update(
                n_excluded=len(excluded),
                n_failed=len(failed),
                scale=METRICS[m].scale,
                higher_is_better=METRICS[m].higher_is_better,
            )
            summary["metrics"][m] = stats
            reasons: dict[str, int] = {}
            for r in excluded:
                reasons[r[f"excluded_{m}"]] = reasons.get(r[f"excluded_{m}"], 0) + 1
            summary["exclusions"][m] = reasons
        for category, members in group_rows(rows, "categories").items():
            summary["by_category"][category] = {m: metric_stats(members, m, cfg.stats, seed) for m in metrics}
        if judgments is not None and self.checklist_metrics(cfg):
            headline, categories = self._checklist_summary(judgments, cfg)
            summary["metrics"].update(headline)
            for category, values in categories.items():
                summary["by_category"].setdefault(category, {}).update(values)
            blank_unavailable(summary)
        if self.vqr_enabled(cfg):
            judged = judgments.to_pylist() if judgments is not None else []
            summary["metrics"][vqr.METRIC], categories = vqr.summarize(rows, judged, cfg)
            for category, values in categories.items():
                summary["by_category"].setdefault(category, {}).update(values)
        summary["failures"] = failure_report(rows)
        if cfg.editor.name != "precomputed":  # the editing model's cost (Table 5)
            from vbench_ray.editors.cost import edit_report_table, edit_summary

            summary["edit"] = edit_summary(rows, cfg.editor)
            summary.setdefault("report_tables", []).append(edit_report_table(summary["edit"]))
        if self.checklist_metrics(cfg):
            unusable = sorted(
                {r["case_id"] for r in rows if scorable(r) and unusable_edited(r)}, key=lambda c: (len(c), c)
            )
            summary["missing_output"] = {
                "rule": cfg.score.missing_output,
                "n_cases": len(unusable),
                "cases": unusable[:50],
            }
        return summary


def _task_id(task: Any, i: int) -> str:
    """A task's case id: its ``id`` (a number without leading zeros), else ``#i``."""
    case_id = str(task.get("id")) if isinstance(task, dict) and task.get("id") is not None else f"#{i}"
    return str(int(case_id)) if case_id.isdigit() else case_id


def scorable(case: dict) -> bool:
    """Whether a case's checklist is scored: it loaded (a missing or undecodable edited video is no load
    failure: ``error_edited``, counted under ``score.missing_output``, never silently out of the metrics)."""
    return not case.get("error_load")


def unusable_edited(case: dict) -> str | None:
    """Why a case's edited video cannot be used (None when it can): the load-time probe's ``error_edited``,
    or a decode failure of the frame stage that names the edited file (a source-video failure does not count)."""
    if case.get("error_edited"):
        return case["error_edited"]
    err, path = case.get("error_frames"), case.get("edited_path")
    return err if err and path and path in err else None


def probe_edited(rows: list[dict], frame_metrics: list[str], backend: str = "auto", threads: int = 8) -> None:
    """Set ``error_edited`` on rows whose edited video does not open and decode its first frame, for the rows
    no frame stage opens (no frame metric enabled, or every one excluded): the judge must not be sent an
    undecodable (zero-byte, corrupt, audio-only) video."""
    from concurrent.futures import ThreadPoolExecutor

    from vbench_ray.video.io import probe

    todo = [
        r
        for r in rows
        if not r.get("error_load") and r.get("edited_path") and all(r.get(f"excluded_{m}") for m in frame_metrics)
    ]

    def check(row: dict) -> None:
        try:
            probe(row["edited_path"], backend)
        except Exception as exc:  # decoders raise their own types; any failure means "not usable"
            row["error_edited"] = f"edited video cannot be decoded: {type(exc).__name__}: {exc}"

    if todo:
        with ThreadPoolExecutor(max_workers=min(threads, len(todo))) as pool:
            list(pool.map(check, todo))


def read_checklist(path: Path) -> Iterator[Any]:
    """The checklist's tasks, one at a time (``json_array``: the file is never parsed whole)."""
    if not path.exists():
        raise DataError(f"data.checklist not found: {path}")
    try:
        yield from iter_json_array(path)
    except json.JSONDecodeError as exc:
        raise DataError(f"data.checklist {path} is not valid JSON: {exc}") from exc
    except NotAnArray as exc:
        raise DataError(f"data.checklist {path}: expected a JSON list of tasks, got {exc.type_name}") from None


def _edited_path(case_id: str, root: Path, index: dict[str, Path], by_name: dict[str, Path]) -> Path:
    """The case's edited video: ``edited_name(case_id)`` (what ``vbench-ray edit`` writes), else the official
    patterns' match. Like a source video (``resolve_under``), a video that is a link to a file outside
    ``data.edited_dir`` is refused: the case's ``error_load``."""
    path = by_name.get(edited_name(case_id)) or index.get(case_id)
    if path is None:
        raise DataError(
            f"edited video for task {case_id} not found in data.edited_dir "
            f"(expected {edited_name(case_id)} or an official name pattern)"
        )
    resolve_under(root, path.name, f"data.edited_dir: the edited video of task {case_id}")
    return path


class _SourceIndex:
    """``resolve_under(source_dir, videoA_path)`` and its existence check, once per distinct path: tasks share
    source videos, and resolving (a ``realpath``) plus a ``stat`` per task was most of a 100k-task load."""

    def __init__(self, root: Path):
        self.root = root
        self._seen: dict[str, tuple[Path | None, bool]] = {}

    def resolve(self, relative: str, what: str) -> Path:
        hit = self._seen.get(relative)
        if hit is None:
            try:
                path = resolve_under(self.root, relative, what)
                hit = (path, path.exists())
            except DataError:
                hit = (None, False)
            self._seen[relative] = hit
        path, exists = hit
        if path is None:
            resolve_under(self.root, relative, what)  # raises, naming this task
        if not exists:
            raise DataError(f"{what}: source video not found: {path}")
        return path
