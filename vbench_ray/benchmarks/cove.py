"""CoVEBench: what the benchmark is (its config, stages, judge phases and summary). Its data are read in
``cove_data``, its checklist judged and scored in ``cove_checklist``, VQR in ``cove_vqr``.

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
from vbench_ray.benchmarks.cove_data import (
    PROBE_CHUNK,
    ParsedRows,
    SourceIndex,
    case_row,
    exclusion_rule,
    index_edited_videos,
    probe_edited,
    read_checklist,
    scorable,
    task_id_of,
    unusable_edited,
)
from vbench_ray.config import BaseConfig
from vbench_ray.editors import EDITORS, EditorConfig
from vbench_ray.judges.base import JudgeConfig, JudgeRequest
from vbench_ray.metrics import METRICS
from vbench_ray.metrics.base import metric_choices, metrics_config
from vbench_ray.metrics.stage import decode_stages
from vbench_ray.pipeline import Stage

QUESTION_TYPES = ("AB-MCQ", "Single-TF", "Dual-TF", "Score-MCQ")
DIMENSIONS = ("Execution Accuracy", "Physical Logic", "Semantic Preservation")
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


# ----------------------------------------------------------------------------- benchmark


@register_benchmark
class CoveBench(Benchmark):
    name = "cove"
    # `vbench-ray compare` (cove_compare.py)
    primary_metric = "UAS"
    judged_metrics = cove_compare.CHECKLIST
    compare_units = staticmethod(cove_compare.compare_units)
    comparison_options = staticmethod(cove_compare.comparison_options)
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
    judge_blocks = {"judge": True, "vqr": False}  # VQR's answers are read by their own parser (cove_vqr)
    config_choices = {
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

    def enabled_metrics(self) -> list[str]:
        """The enabled objective (frame) metrics."""
        cfg = self.cfg
        known = tuple(self.metric_names) + checklist.CHECKLIST_METRICS + JUDGED_METRICS
        unknown = [m for m in cfg.metrics.enabled if m not in known]
        if unknown:
            raise DataError(f"metrics.enabled: unknown metric(s) {unknown}; CoVEBench metrics are {list(known)}")
        return [m for m in cfg.metrics.enabled if m in self.metric_names]

    def checklist_metrics(self) -> list[str]:
        return [m for m in self.cfg.metrics.enabled if m in checklist.CHECKLIST_METRICS]

    def vqr_enabled(self) -> bool:
        return vqr.METRIC in self.cfg.metrics.enabled

    def case_fields(self) -> list[pa.Field]:
        return [pa.field("categories_l2", pa.list_(pa.string())), pa.field("error_edited", pa.string())] + [
            pa.field(f"excluded_{m}", pa.string()) for m in self.enabled_metrics()
        ]

    def stages(self) -> list[Stage]:
        """Decode (a CPU stage computing the CPU metrics and writing VQR's frames from the same decode), then one
        model pool per model-backed metric."""
        cfg = self.cfg
        metrics = self.enabled_metrics()
        sinks = [vqr.frame_sink(cfg)] if self.vqr_enabled() else []  # VQR's JPEGs for its judge
        if not metrics and not sinks:
            return []
        return decode_stages(cfg, metrics, sinks=sinks, inputs=tuple(f"excluded_{m}" for m in metrics))

    # -- loading
    def check_data(self) -> None:
        """The checklist and the source folder exist, and no task id repeats. The checklist is parsed here, a task at
        a time, and its case rows (the edited videos not yet opened) kept on this bound benchmark, compressed, for
        ``iter_cases``: a run parses the file once."""
        cfg = self.cfg
        checklist = Path(cfg.data.checklist)
        if not checklist.exists():
            raise DataError(f"data.checklist not found: {checklist}")
        if not Path(cfg.data.source_dir).is_dir():
            raise DataError(f"data.source_dir is not a directory: {cfg.data.source_dir}")
        self._parsed = ParsedRows(self._checklist_rows())

    def load_cases(self) -> list[dict]:
        return list(self.iter_cases())

    def iter_cases(self) -> Iterator[dict]:
        """The case rows one at a time: the checklist is parsed a task at a time (or its rows taken from
        ``check_data``'s parse, the first time after it), so memory holds the rows already made, never the parsed
        file. A checklist-wide problem (invalid JSON, duplicate ids) is raised once the file has been read, before
        the caller has computed anything."""
        cfg = self.cfg
        parsed, self._parsed = getattr(self, "_parsed", None), None
        rows = parsed.take() if parsed is not None else self._checklist_rows()
        metrics = self.enabled_metrics()
        # with VQR, the decode stage opens every edited video (error_frames: unusable_edited)
        probe = self.checklist_metrics() and not self.vqr_enabled()
        pending = []
        for row in rows:
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

    def _checklist_rows(self) -> Iterator[dict]:
        """The checklist's case rows, read a task at a time (``cove_data.read_checklist``), the edited videos not
        opened; past ``run.limit`` only the ids are kept, and every id is checked for repeats at the end."""
        cfg = self.cfg
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
        rules = {m: exclusion_rule(m, getattr(cfg.metrics.exclude, m)) for m in self.enabled_metrics()}
        sources = SourceIndex(source_root)
        limit = cfg.run.limit
        ids = []
        for i, task in enumerate(read_checklist(checklist)):
            ids.append(task_id_of(task, i))
            if limit is not None and i >= limit:  # past the limit only the ids are kept (duplicates are checked)
                continue
            yield case_row(i, task, checklist, sources, edited, ambiguous, rules)
        duplicate_ids(ids, "task ids", f"data.checklist {checklist}")

    # -- checklist judging (paper §3.1, App. F.1, F.3)
    def judge_key(self, phase: str) -> str | None:
        return "vqr" if phase == vqr.STAGE else "judge"

    @classmethod
    def synth(cls, out: Path, n: int, seed: int) -> dict:
        from vbench_ray.synth.cove import synth_cove

        return synth_cove(out, n=n, seed=seed)

    def judge_phases(self) -> list[JudgePhase]:
        cfg = self.cfg
        phases = []
        if self.checklist_metrics():
            phases.append(
                JudgePhase(
                    "checklist",
                    cfg.judge,
                    lambda cases, _: self.judge_requests(cases, cfg.judge.parse, cfg.score.validity),
                )
            )
        if self.vqr_enabled():  # VisualQuality-R1, one request per sampled frame (cove_vqr)
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

    def score_judgments(self, cases: list[dict], results: dict) -> pa.Table:
        cfg = self.cfg
        rows = [
            q
            for case in cases
            if scorable(case) and self.checklist_metrics()
            for q in checklist.judgment_rows(
                case,
                results,
                cfg.judge.parse,
                unusable=unusable_edited(case),
                missing_output=cfg.score.missing_output,
                validity=cfg.score.validity,
            )
        ]
        if self.vqr_enabled():
            rows += [f for case in cases for f in vqr.frame_rows(case, results)]
        return pa.Table.from_pylist(rows, schema=checklist.JUDGMENT_SCHEMA)

    def _checklist_summary(self, judgments: pa.Table) -> tuple[dict, dict]:
        cfg = self.cfg
        rows = [r for r in judgments.to_pylist() if r["metric"] not in JUDGED_METRICS]
        metrics = self.checklist_metrics()
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
    def summarize(self, cases: pa.Table, judgments: pa.Table | None = None) -> dict:
        cfg = self.cfg
        # the task JSON is not summarised (the judgments carry the questions): as dicts it is most of the rows' size
        rows = cases.drop_columns([c for c in ("annotations",) if c in cases.column_names]).to_pylist()
        seed = cfg.run.seed
        metrics = self.enabled_metrics()
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
        if judgments is not None and self.checklist_metrics():
            headline, categories = self._checklist_summary(judgments)
            summary["metrics"].update(headline)
            for category, values in categories.items():
                summary["by_category"].setdefault(category, {}).update(values)
            blank_unavailable(summary)
        if self.vqr_enabled():
            judged = judgments.to_pylist() if judgments is not None else []
            summary["metrics"][vqr.METRIC], categories = vqr.summarize(rows, judged, cfg)
            for category, values in categories.items():
                summary["by_category"].setdefault(category, {}).update(values)
        summary["failures"] = failure_report(rows)
        if cfg.editor.name != "precomputed":  # the editing model's cost (Table 5)
            from vbench_ray.editors.cost import edit_report_table, edit_summary

            summary["edit"] = edit_summary(rows, cfg.editor)
            summary.setdefault("report_tables", []).append(edit_report_table(summary["edit"]))
        if self.checklist_metrics():
            unusable = sorted(
                {r["case_id"] for r in rows if scorable(r) and unusable_edited(r)}, key=lambda c: (len(c), c)
            )
            summary["missing_output"] = {
                "rule": cfg.score.missing_output,
                "n_cases": len(unusable),
                "cases": unusable[:50],
            }
        return summary
