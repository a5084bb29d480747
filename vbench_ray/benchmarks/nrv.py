"""NRVBench: non-rigid video editing, scored by NRVE-Acc and conventional metrics (paper: "Beyond Rigid:
Benchmarking Non-Rigid Video Editing").

No official code or data format is published; the paper is the spec and ``docs/nrv_format.md``
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
-> ``frames`` stage (:class:`~vbench_ray.benchmarks.nrv_media.NRVFrameStage`: decode source, edited video and
masks once; the conventional metrics of Table 3 on App. E.5's scales; the judge's images: the mask-guided ROI
frames for ``S_phy`` and the flow-evidence image of Eq. 4 for ``S_temp``) -> one judge phase per judge
(``judges:``; §5, Table 2), each the three requests of :mod:`vbench_ray.benchmarks.nrv_scoring` per case.

A per-case problem never stops the run: a malformed record, a missing video or mask, or a mask whose frame
count or size differs from the source video's is recorded on the case (``error_load`` / ``error_frames``),
the case is left out of the scores and counted under ``failures``. An edited video whose size or length
differs from the source is resampled (``data.pair_mismatch=resample``) or fails (``fail``).

This module holds the config and the registered ``NRVBench``; the pieces live beside it:
:mod:`~vbench_ray.benchmarks.nrv_data` (annotations, case rows, edited videos, timing),
:mod:`~vbench_ray.benchmarks.nrv_media` (the frame stage and the judge's images),
:mod:`~vbench_ray.benchmarks.nrv_scoring` (judge requests and NRVE-Acc) and
:mod:`~vbench_ray.benchmarks.nrv_summary` (statistics, sanity section, agreement, report tables).

Summary (``summary.json``): ``metrics.NRVE_Acc`` and the components ``S_instr``, ``S_phy``, ``S_temp`` in
percent (per instance, averaged over judges when there are several, then over instances, with case-level
bootstrap CIs), the enabled conventional metrics and ``FPS``; ``by_category``, ``by_difficulty``,
``by_method``, ``by_judge``; ``cross_judge`` (Table 2: each judge's NRVE-Acc, the cross-judge mean and std,
overall and per method); ``sanity`` when negative-control variants ran (App. F.1); ``agreement`` when
``agreement.human_scores`` is set (§5, App. B.2); ``report_tables`` (the same as rows for the report).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
from omegaconf import OmegaConf

from vbench_ray import controls as ctl
from vbench_ray.benchmarks import nrv_scoring as scoring
from vbench_ray.benchmarks.base import (
    Benchmark,
    DataError,
    JudgePhase,
    duplicate_ids,
    failure_report,
    register_benchmark,
)
from vbench_ray.benchmarks.nrv_config import (  # noqa: F401  (the config's classes, re-exported)
    DEFAULT_ENABLED,
    FRAME_METRICS,
    NRVAgreementConfig,
    NRVConfig,
    NRVControlsConfig,
    NRVDataConfig,
    NRVMediaConfig,
    NRVMetricsConfig,
)
from vbench_ray.benchmarks.nrv_data import (
    case_row,
    control_eligible,
    discover_methods,
    read_annotations,
    read_instances,
    read_timing,
)
from vbench_ray.benchmarks.nrv_media import NRVFrameStage
from vbench_ray.benchmarks.nrv_summary import (
    agreement_section,
    blank_unavailable_nrv,
    by_method_category,
    _by_judge,
    _cross_judge,
    _is_control,
    _metric_block,
    _status_counts,
    judges_availability,
    report_tables,
    report_figures as nrv_report_figures,
    sanity_section,
    sanity_tables,
)
from vbench_ray.cfgutil import get, plain
from vbench_ray.config import ConfigError
from vbench_ray.judges.base import JudgeConfig, judge_choices
from vbench_ray.metrics.base import METRICS, metric_choices
from vbench_ray.metrics.stage import decode_stages
from vbench_ray.pipeline import Stage
from vbench_ray.sweeps import variants_from_axes


ALL_METRICS = ("NRVE_Acc",) + FRAME_METRICS + ("FPS",)
MEDIA_DIR = "nrve_media"
CONTROL_DIR = "variants/controls"


# ----------------------------------------------------------------------------- benchmark

CASE_ERRORS = ("error_load", "error_control", "error_frames")  # a conventional metric's own error_<metric> is not


def judgeable(row: dict) -> bool:
    """A row the judges see: loaded, rendered, framed (its images exist), and not a skipped control."""
    return not any(row.get(k) for k in CASE_ERRORS) and not row.get("control_skip") and bool(row.get("nrve_flow"))


@register_benchmark
class NRVBench(Benchmark):
    name = "nrv"
    primary_metric = "NRVE_Acc"  # `vbench-ray compare` ranks by it
    paper = "NRVBench §4 (NRVE-Acc), App. E.5 (conventional metrics); no official code"
    needs = "VLM judges (NRVE-Acc; GPU with vllm), weights for BG_LPIPS, StructDist, CLIP_S, CLIP_E, NIQE"
    scored_metrics = {
        "NRVE_Acc": ("NRVBench §4 (geometric mean of the three)", "[0,100]"),
        "S_instr": ("NRVBench §4.1, Eq. 2", "[0,100]"),
        "S_phy": ("NRVBench §4.2, Eq. 3", "[0,100]"),
        "S_temp": ("NRVBench §4.3, Eq. 4-5", "[0,100]"),
    }
    judge_models = {
        "judge": "Qwen/Qwen2.5-VL-7B-Instruct, -32B-Instruct or -72B-Instruct (Hugging Face; the open "
        "judges of NRVBench §5, App. E.3)"
    }
    config_class = NRVConfig
    report_figures = classmethod(nrv_report_figures)  # categories in App. C's order; Fig. 6's method x category grid
    judge_blocks = {"judge": True}  # `judges` entries are merged onto `judge` and checked alike (judge_specs)
    config_choices = {
        "data.pair_mismatch": ("resample", "fail"),
        "score.normalize": scoring.NORMALIZATIONS,
        "media.format": ("png", "jpg"),
        **metric_choices(FRAME_METRICS),
    }
    metric_names = FRAME_METRICS

    @staticmethod
    def run_seed_scores(config: dict, variant: str) -> bool:
        """A random_mask, shuffled or flow_corrupted control variant (App. F.1) is drawn from ``run.seed``
        (``controls.case_seed``: its mask offset, frame permutation, warps); the real edits (``base``), unchanged and
        appearance draw nothing from it."""
        return str(variant) in {f"control:{name}" for name in ctl.SEEDED}

    # -- configuration
    def enabled(self) -> list[str]:
        cfg = self.cfg
        unknown = [m for m in cfg.metrics.enabled if m not in ALL_METRICS]
        if unknown:
            raise DataError(f"metrics.enabled: unknown metric(s) {unknown}; NRVBench metrics are {list(ALL_METRICS)}")
        return list(dict.fromkeys(cfg.metrics.enabled))

    def frame_metrics(self) -> list[str]:
        return [m for m in self.enabled() if m in self.metric_names]

    def judged(self) -> bool:
        return "NRVE_Acc" in self.enabled()

    def judge_specs(self) -> list[tuple[str, Any]]:
        """``[(label, judge config)]``: ``judge`` alone, or ``judge`` merged with each ``judges`` entry."""
        cfg = self.cfg
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
            for key, allowed in judge_choices(f"judges[{i}]").items():  # what `judge` is checked against
                value = OmegaConf.select(merged, key.split(".", 1)[1])
                if value is not None and value not in allowed:
                    raise ConfigError(f"{key} = {value!r} is not one of {list(allowed)}")
            raw = merged.name or (Path(merged.model).name if merged.model else f"{merged.backend}{i}")
            label = re.sub(r"[^A-Za-z0-9._-]+", "_", str(raw))
            if label in labels:
                raise ConfigError(
                    f"judges[{i}]: the judge label {label!r} is used twice; give each judge a distinct `name`"
                )
            labels.add(label)
            specs.append((label, merged))
        return specs

    def variants(self) -> list | None:
        """``base`` plus the configured negative controls (``controls.names``), or None without controls."""
        cfg = self.cfg
        if not cfg.controls.names:
            return None
        try:  # the one variant expander: controls are the sweep axis `control`
            return variants_from_axes({"control": list(cfg.controls.names)})
        except ConfigError as exc:
            raise ConfigError(f"controls.names: {exc}") from None

    def _check_models(self) -> None:
        """Learned metrics need local weights: fail before any Ray work, naming the key (each metric's own
        ``check_weights``; preflight runs the same checks)."""
        cfg = self.cfg
        problems = []
        for m in self.frame_metrics():
            problems += [
                f"metric {m} is enabled but {p} (or remove {m} from metrics.enabled)"
                for p in METRICS[m].check_weights(getattr(cfg.metrics, m))
            ]
        if problems:
            raise ConfigError("; ".join(problems))

    # -- schema and stages
    def case_fields(self) -> list[pa.Field]:
        return [
            pa.field("method", pa.string()),
            pa.field("instance_id", pa.string()),
            pa.field("video_id", pa.string()),
            pa.field("category", pa.string()),
            pa.field("difficulty", pa.string()),
            pa.field("mask_path", pa.string()),
            pa.field("FPS", pa.float64()),
            pa.field("control_eligible", pa.bool_()),
        ]

    def schema(self, stages: list[Stage] | None = None, phases: list | None = None) -> pa.Schema:
        """The base schema without repeats: the control stage re-declares ``edited_path``."""
        fields, seen = [], set()
        for f in super().schema(stages, phases):
            if f.name not in seen:
                seen.add(f.name)
                fields.append(f)
        return pa.schema(fields)

    def stages(self) -> list[Stage]:
        cfg = self.cfg
        run_dir = Path(cfg.output.dir).resolve()
        stages = [
            ctl.control_stage(
                run_dir / CONTROL_DIR,
                cfg.run.seed,
                cfg.video.backend,
                cfg.controls.amplitude,
                workers=cfg.ray.workers,
                batch_size=cfg.ray.batch_size,
            )
        ]
        metrics = self.frame_metrics()
        judged = self.judged()
        if not metrics and not judged:
            return stages
        return stages + decode_stages(
            cfg,
            metrics,
            fn=NRVFrameStage,
            inputs=("mask_path",),
            init_kwargs={"media": plain(cfg.media), "media_dir": str(run_dir / MEDIA_DIR), "judged": judged},
            outputs={
                "warning_mask": "str",
                "nrve_roi": "str",
                "nrve_flow": "str",
                "nrve_frames": "str",
                "roi_box": "str",
            },
        )

    # -- loading
    def check_data(self) -> None:
        """The annotations file exists and parses, and no instance id repeats. The parsed records are kept on this
        bound benchmark for ``load_cases``: a run parses the file once."""
        cfg = self.cfg
        path = Path(cfg.data.annotations)
        records = read_annotations(path)
        duplicate_ids(
            [str(rec["id"]) for _, rec in records if isinstance(rec, dict) and rec.get("id") is not None],
            "instance ids",
            f"data.annotations {path}",
        )
        self._records = records

    def load_cases(self) -> list[dict]:
        cfg = self.cfg
        self.enabled()
        if self.judged():
            self.judge_specs()
        self._check_models()
        scoring.weights_of(cfg.score)
        self.variants()
        path = Path(cfg.data.annotations)
        records, self._records = getattr(self, "_records", None), None  # check_data's parse, taken once
        if records is None:
            records = read_annotations(path)
        if cfg.run.limit is not None:
            records = records[: cfg.run.limit]
        root = Path(cfg.data.root) if cfg.data.root else path.parent
        if not root.is_dir():
            raise DataError(f"data.root is not a directory: {root}")
        methods, flat = discover_methods(Path(cfg.data.edited_dir), list(cfg.data.methods), cfg.data.method)
        instances = read_instances(records, path, root)
        eligible_ids = control_eligible(instances, cfg.controls.per_category)
        control_methods = set(cfg.controls.methods) or {m for m, _ in methods}
        rows = []
        for method, folder in methods:
            timing = read_timing(folder)
            for inst in instances:
                rows.append(
                    case_row(
                        inst, method, folder, flat, timing, inst["id"] in eligible_ids and method in control_methods
                    )
                )
        return rows

    # -- judging (§4, §5)
    def check_config(self) -> list[str]:
        """``agreement.human_scores``, when set, reads (the learned metrics' weights are each metric's own check)."""
        cfg = self.cfg
        path = get(cfg, "agreement.human_scores")
        if path:
            from vbench_ray.agreement import HumanScoresError, read_human_scores

            try:
                read_human_scores(path)
            except HumanScoresError as exc:
                return [f"`agreement.human_scores`: {exc}"]
        return []

    def judge_key(self, phase: str) -> str | None:
        cfg = self.cfg
        if len(get(cfg, "judges") or []) > 1:
            labels = [label for label, _ in self.judge_specs()]
            return f"judges[{labels.index(phase)}]" if phase in labels else "judge"
        return "judge"

    @classmethod
    def synth(cls, out: Path, n: int, seed: int) -> dict:
        from vbench_ray.synth.nrv import synth_nrv

        return synth_nrv(out, n=n, seed=seed)

    def judge_phases(self) -> list[JudgePhase]:
        cfg = self.cfg
        if not self.judged():
            return []
        specs = self.judge_specs()
        several = len(specs) > 1
        show = bool(cfg.media.show_frames)

        def builder(label):
            def build(rows: list[dict], _results: dict) -> list:
                return [
                    r
                    for row in rows
                    if judgeable(row)
                    for r in scoring.build_requests(row, _media_of(row), label if several else None, show)
                ]

            return build

        return [JudgePhase(label, judge_cfg, builder(label)) for label, judge_cfg in specs]

    def score_judgments(self, cases: list[dict], results: dict) -> pa.Table | None:
        cfg = self.cfg
        if not self.judged():
            return None
        specs = self.judge_specs()
        several = len(specs) > 1
        rows = [
            j
            for case in cases
            if judgeable(case)
            for label, _ in specs
            for j in scoring.judgment_rows(case, results, label, several, cfg.score.normalize)
        ]
        return pa.Table.from_pylist(rows, schema=scoring.JUDGMENT_SCHEMA)

    # -- aggregation
    def summarize(self, cases: pa.Table, judgments: pa.Table | None = None) -> dict:
        cfg = self.cfg
        rows = cases.to_pylist()
        judged = judgments.to_pylist() if judgments is not None else []
        labels = [label for label, _ in self.judge_specs()] if self.judged() else []
        frame_metrics = self.frame_metrics()
        with_fps = "FPS" in self.enabled()
        stats = (cfg.run.seed, cfg.stats.bootstrap_samples, cfg.stats.confidence)
        scored = [r for r in rows if not r.get("control_skip")]
        instances = scoring.instance_scores(judged, cfg.score) if judged else []
        cross = scoring.cross_judge_instances(instances)
        summary: dict[str, Any] = {
            "benchmark": "nrv",
            "n_cases": len({r["case_id"] for r in scored}),
            "n_rows": len(rows),
            "n_instances": len({r["instance_id"] for r in scored}),
            "methods": sorted({r["method"] for r in scored if r.get("method")}),
            "judges": labels,
            "normalize": cfg.score.normalize,
            "metrics": {},
        }
        summary["metrics"] = _metric_block(scored, cross, judged, frame_metrics, with_fps, stats, self.judged())
        for key, column in (("by_category", "category"), ("by_difficulty", "difficulty"), ("by_method", "method")):
            summary[key] = {}
            for value in sorted({r.get(column) for r in scored} - {None}):
                members = [r for r in scored if r.get(column) == value]
                summary[key][value] = _metric_block(
                    members,
                    [c for c in cross if c.get(column) == value],
                    [j for j in judged if j.get(column) == value],
                    frame_metrics,
                    with_fps,
                    stats,
                    self.judged(),
                    brief=True,
                )
        summary["by_method_category"] = by_method_category(
            scored, cross, judged, frame_metrics, with_fps, stats, self.judged()
        )
        if labels:
            summary["by_judge"] = _by_judge(instances, judged, labels, stats)
            summary["cross_judge"] = _cross_judge(instances, labels)
        if self.judged():  # each judge against its own max_invalid_fraction (a `judges` entry's include's too)
            judges_availability(
                summary["metrics"],
                summary.get("by_judge"),
                judged,
                {label: float(spec.max_invalid_fraction) for label, spec in self.judge_specs()},
            )
        blank_unavailable_nrv(summary)
        variants = {r["variant"] for r in rows}  # the sanity section comes from summarize_variants
        if cfg.agreement.human_scores and labels and "base" in variants:
            summary["agreement"] = agreement_section(instances, scored, cfg)
        summary["failures"] = failure_report(rows)
        summary["judge_status"] = _status_counts(judged)
        summary["report_tables"] = report_tables(summary, frame_metrics, with_fps)
        return summary

    def summarize_variants(self, cases: pa.Table, judgments: pa.Table | None = None) -> dict:
        """The cross-variant part of the summary (``sanity``: each negative control against the real edits),
        from every variant's rows; ``summarize`` sees one variant at a time."""
        cfg = self.cfg
        rows = cases.to_pylist()
        judged = judgments.to_pylist() if judgments is not None else []
        if not self.judged() or not any(_is_control(r["variant"]) for r in rows):
            return {}
        sanity = sanity_section(rows, judged, cfg, self.frame_metrics())
        return {"sanity": sanity, "report_tables": sanity_tables(sanity)}


def _media_of(row: dict) -> dict:
    return {
        "roi": json.loads(row.get("nrve_roi") or "[]"),
        "flow": row["nrve_flow"],
        "frames": json.loads(row.get("nrve_frames") or "[]"),
    }
