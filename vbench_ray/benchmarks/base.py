"""The benchmark contract and the pieces every benchmark's summary shares.

A benchmark (lm-evaluation-harness style: one registered class per task family) says how to load
its cases, which stages score them, which columns the case table has, and how rows aggregate into
``summary.json``. The runner does the rest (Ray, resume, sinks, report, wandb).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator, Optional

import pyarrow as pa

from vbench_ray.pipeline import Stage
from vbench_ray.registry import Registry
from vbench_ray.stats import describe

# Columns every case row has, whatever the benchmark.
CASE_FIELDS = [
    pa.field("benchmark", pa.string()),
    pa.field("case_id", pa.string()),
    pa.field("variant", pa.string()),
    pa.field("categories", pa.list_(pa.string())),
    pa.field("instruction", pa.string()),
    pa.field("source_path", pa.string()),
    pa.field("edited_path", pa.string()),
    pa.field("annotations", pa.string()),  # the case's annotation record as JSON text
    pa.field("variant_params", pa.string()),  # what a sweep variant changes, as JSON (null for base)
    pa.field("error_load", pa.string()),
]


@dataclass
class JudgePhase:
    """One judge stage: its name, its judge config node, and how to build its requests from case rows and
    the results of the phases before it (``build(rows, results) -> list[JudgeRequest]``).

    ``build`` must be pure and work on any subset of rows (the stream calls it one row at a time, inside a
    judge task); ``prepare(cases)``, if given, runs once in the driver before the stream (e.g. writing a
    file the phase's replay engine reads)."""

    name: str
    judge_cfg: Any
    build: Callable[[list[dict], dict], list]
    prepare: Optional[Callable[[list[dict]], None]] = None


class DataError(ValueError):
    """Benchmark data that cannot be read at all (a per-case problem is recorded on the case instead)."""


class Benchmark:
    """One benchmark bound to one run's config: ``get_benchmark(name)(cfg)`` (or ``bench_for(cfg)``) holds ``cfg``
    as ``self.cfg``, and every method below reads it from there. What holds without a config (its name, paper,
    config class, metric names, ``synth``) is said by the class."""

    name: ClassVar[str] = ""
    # what `vbench-ray list benchmarks` shows: the paper (sections) and official code it follows, and what a run
    # needs beyond the data and a CPU (weights, a judge, GPUs)
    paper: ClassVar[str] = ""
    needs: ClassVar[str] = ""
    # where each judge's key (judge, vqr, model; judges[i] reads judge) -> the model the paper used and where it is
    # published: said beside a judge model that is not set or not found (preflight, `vbench-ray weights check`)
    judge_models: ClassVar[dict[str, str]] = {}
    # the metrics it scores itself (a judge's, a verifier's), beside the registered frame metrics it names:
    # name -> (paper section, scale), for `vbench-ray list metrics`
    scored_metrics: ClassVar[dict[str, tuple[str, str]]] = {}
    config_class: ClassVar[type] = object
    # allowed values of string keys (checked when a config is loaded: ``choices``), beside its judge blocks'
    config_choices: ClassVar[dict[str, tuple[str, ...]]] = {}
    # its config's judge blocks (judge, vqr, model) -> whether the block's `parse` key is checked too: their allowed
    # values (backend, a backend section's keys, parse) are the backend registry's when the config is checked
    judge_blocks: ClassVar[dict[str, bool]] = {}
    # the frame metrics it uses, by registered name (vbench_ray.metrics): its `metrics` config section is
    # generated from them (vbench_ray.metrics.base.metrics_config), so a new metric is a name added here
    metric_names: ClassVar[tuple[str, ...]] = ()
    # config sections (beyond benchmark, data, metrics) whose change invalidates rows already computed
    result_sections: ClassVar[tuple[str, ...]] = ()

    # the report's breakdown figures as its paper draws them (report_figures): a breakdown's group order (summary
    # key -> names, e.g. a results table's columns) and the table or figure it follows (summary key -> text)
    figure_orders: ClassVar[dict[str, tuple[str, ...]]] = {}
    figure_notes: ClassVar[dict[str, str]] = {}

    @classmethod
    def report_figures(cls, summary: dict) -> list[dict]:
        """The breakdown figures of ``report.html`` and ``RUN_DIR/figures/`` from a ``summary.json`` of this
        benchmark (:mod:`vbench_ray.figures`): one bar chart per metric of each breakdown, groups in
        ``figure_orders``' order, else the summary's; a benchmark whose paper draws more (a two-way grid)
        overrides it."""
        from vbench_ray.figures import breakdowns

        return breakdowns(summary, cls.figure_orders, cls.figure_notes)

    @classmethod
    def choices(cls) -> dict[str, tuple]:
        """``{config key: allowed values}`` checked when a config is loaded (``configure.load_config``): each judge
        block's (``judges.base.judge_choices``, read from the backend registry now), then ``config_choices``."""
        from vbench_ray.judges.base import judge_choices

        out: dict[str, tuple] = {}
        for block, parse in cls.judge_blocks.items():
            out.update(judge_choices(block, parse=parse))
        return {**out, **cls.config_choices}

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def load_cases(self) -> list[dict]:
        """Rows with the ``CASE_FIELDS`` (plus benchmark columns); bad cases carry ``error_load``."""
        raise NotImplementedError

    def check_data(self) -> None:
        """Raise ``DataError`` for whole-data problems found cheaply (ids only, no video opened): a data file that
        does not exist, duplicate ids. The runner calls it before Ray starts, so such a run stops in about a
        second instead of after Ray's start; the loader still checks the same while it reads."""

    def iter_cases(self) -> Iterator[dict]:
        """``load_cases``' rows one at a time; what the runner reads. A benchmark whose data can be large
        streams them (CoVEBench), so the driver never holds every case as dicts."""
        return iter(self.load_cases())

    def stages(self) -> list[Stage]:
        raise NotImplementedError

    def case_fields(self) -> list[pa.Field]:
        """Columns the loader adds beyond ``CASE_FIELDS``."""
        return []

    def schema(self, stages: list[Stage] | None = None, phases: list["JudgePhase"] | None = None) -> pa.Schema:
        """The case table's columns: the case fields, then each stage's and judge phase's. ``stages`` (the editor's
        and the benchmark's) and ``phases``: those the caller built already (``RunPlan``), else built here."""
        from vbench_ray.editors import editor_stages

        fields = list(CASE_FIELDS) + self.case_fields()
        for stage in (editor_stages(self.cfg) + self.stages()) if stages is None else stages:
            fields += stage.persisted_fields()
        for phase in self.judge_phases() if phases is None else phases:  # when each row was judged, failures
            fields += [
                pa.field(f"{k}_judge_{phase.name}", t)
                for k, t in (
                    ("error", pa.string()),
                    ("seconds", pa.float64()),
                    ("at", pa.float64()),
                    ("node", pa.string()),
                )
            ]
        seen: set[str] = set()  # a column written by two stages (a pool metric's error) appears once
        return pa.schema([f for f in fields if not (f.name in seen or seen.add(f.name))])

    def judge_phases(self) -> list["JudgePhase"]:
        """The judge stages this benchmark runs, in order (none for benchmarks without a judge).

        A later phase may build its requests from an earlier one's results (ViDiC: the model under
        test describes, then the judge answers the checklist from the description).
        """
        return []

    def score_judgments(self, cases: list[dict], results: dict) -> pa.Table | None:
        """The judged items (one row per question, rubric item ...) from the judge stage's results."""
        return None

    def summarize(self, cases: pa.Table, judgments: pa.Table | None = None) -> dict:
        raise NotImplementedError

    def variants(self) -> list | None:
        """Variants the benchmark's own config asks for (``vbench_ray.sweeps.Variant``), or None."""
        return None

    def summarize_variants(self, cases: pa.Table, judgments: pa.Table | None = None) -> dict:
        """Summary sections computed across variants (all rows), merged into summary.json."""
        return {}

    # -- the tooling around a run: preflight, synthetic data

    def check_config(self) -> list[str]:
        """This benchmark's own problems of its config, found without reading its cases (a file a key names that does
        not exist or does not parse). ``vbench_ray.preflight.check`` reports them with the generic ones, all at
        once, before Ray starts; a ``ConfigError`` raised here is one problem. Default: none."""
        return []

    def judge_key(self, phase: str) -> str | None:
        """The config key of judge phase ``phase``'s judge (``judge``, ``vqr``, ``judges[1]`` ...): what preflight's
        messages name, and the key of ``judge_models``. None: preflight does not check that phase's judge (its
        answers are replayed from a file the run writes itself)."""
        return "judge"

    @classmethod
    def synth(cls, out: Path, n: int, seed: int) -> dict:
        """Write a deterministic synthetic mini benchmark in this benchmark's official data layout under ``out``
        (``vbench-ray synth <name>``): ``n`` cases (a benchmark with a fixed set may ignore it), seeded by ``seed``.
        Returns what a config needs (paths by name; ``vbench-ray synth`` prints the entries that are not dicts)."""
        raise NotImplementedError(f"benchmark {cls.name!r} has no synthetic data maker (Benchmark.synth)")

    # -- comparing finished runs (`vbench-ray compare`, vbench_ray/compare_runs.py): read from run folders'
    # config.yaml, summary.json and judgments.parquet as plain dicts and frames, so these belong to the class, not
    # to a bound config. All optional; the defaults compare the per-case columns of cases/ and nothing else.

    # the headline metric the leaderboard ranks by unless --rank-by names another (None, or no run has a value
    # for it: the first metric some run has a value for)
    primary_metric: ClassVar[str | None] = None
    # the metrics its judge scores: a score.*, judge.* or model.* option that differs between runs tags only these
    # columns of the leaderboard (None: every column)
    judged_metrics: ClassVar[tuple[str, ...] | None] = None
    # whether its judge reads the video (judge.video.* then decides scores and is compared; a text-only judge's
    # video block is unused)
    judge_reads_video: ClassVar[bool] = True
    # its analyses over the compared runs (leaderboard.json's `analyses`): a function
    # (runs: {label: Run}, *, human_prefs, human_answers, judge_repeats: [Run], seed, n_resamples) -> dict, set
    # as `analyses = staticmethod(f)`; None: analysis inputs (--human-prefs ...) are refused with a CompareError
    analyses: ClassVar[Callable[..., dict] | None] = None

    @staticmethod
    def compare_units(judgments: Any, config: dict, binary: dict) -> dict:
        """Per-case units of the metrics it scores from ``judgments.parquet`` (a ``pandas.DataFrame``) under the
        run's ``config``: ``{metric: {case_id: (num, den)}}`` (the metric on a set of cases is
        ``sum(num) / sum(den)``, as the run scored it); fills ``binary`` with ``{metric: {unit key: correct}}``
        for McNemar where a metric has binary units. Default: none (only the per-case columns of cases/)."""
        return {}

    @staticmethod
    def comparison_options(config: dict) -> dict:
        """Options of the run's ``config`` that decide its scores beyond the generic ones (``score.*``, the judge,
        the metrics' settings, the CI level): ``{dotted key: value}``; runs that differ in one are refused unless
        ``--allow-mixed``. Default: none."""
        return {}

    @staticmethod
    def run_seed_scores(config: dict, variant: str) -> bool:
        """Whether ``run.seed`` picks what is scored in ``variant`` of a run with ``config`` (a perturbation, an
        agent's choices); then runs that differ in it are refused unless ``--allow-mixed``. Default: no (it seeds
        the bootstrap CIs only, which move no value)."""
        return False


BENCHMARKS: Registry = Registry("benchmark", describe=lambda cls: {"section": cls.paper, "needs": cls.needs})


def register_benchmark(cls: type[Benchmark]) -> type[Benchmark]:
    """Class decorator: add ``cls`` to ``BENCHMARKS`` under its ``name`` (a taken name is refused)."""
    return BENCHMARKS.add(cls.name, cls)


def get_benchmark(name: str) -> type[Benchmark]:
    """The benchmark class registered as ``name`` (bind it to a config: ``get_benchmark(name)(cfg)``); an unknown
    name: ``registry.UnknownName`` listing the known ones."""
    return BENCHMARKS[name]


def bench_for(cfg: Any) -> Benchmark:
    """The benchmark ``cfg.benchmark`` names, bound to ``cfg``."""
    return get_benchmark(cfg.benchmark)(cfg)


# ----------------------------------------------------------------------------- summary helpers


def error_columns(rows: list[dict]) -> list[str]:
    return sorted({k for r in rows for k in r if k.startswith("error_")})


def failure_report(rows: list[dict], max_examples: int = 20) -> dict:
    """How many rows failed, at which stage, with a few example messages."""
    by_stage: Counter = Counter()
    examples = []
    failed = 0
    for r in rows:
        errs = [(k[len("error_") :], r[k]) for k in error_columns([r]) if r.get(k)]
        if errs:
            failed += 1
        for stage, msg in errs:
            by_stage[stage] += 1
            if len(examples) < max_examples:
                examples.append({"case_id": r["case_id"], "variant": r["variant"], "stage": stage, "error": msg})
    return {"count": failed, "by_stage": dict(sorted(by_stage.items())), "examples": examples}


def metric_stats(rows: Iterable[dict], metric: str, stats_cfg: Any, seed: int, scale: float = 1.0) -> dict:
    rows = list(rows)
    return describe(
        [r.get(metric) for r in rows],
        seed=seed,
        n_resamples=stats_cfg.bootstrap_samples,
        confidence=stats_cfg.confidence,
        scale=scale,
    )


def group_rows(rows: list[dict], key: str) -> dict[str, list[dict]]:
    """Rows by the values of ``key``; a list-valued key puts a row in every group it names."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        values = r.get(key)
        for v in values if isinstance(values, (list, tuple)) else [values]:
            if v is not None:
                groups.setdefault(str(v), []).append(r)
    return dict(sorted(groups.items()))


def duplicate_ids(ids: Iterable[str], what: str, where: Any) -> None:
    """Raise ``DataError`` naming every id that occurs more than once: a duplicate makes
    the data ambiguous (which record is scored?), so the run stops before any metric is computed."""
    counts = Counter(ids)
    dups = sorted(i for i, n in counts.items() if n > 1)
    if dups:
        shown = ", ".join(f"{i!r} ({counts[i]}x)" for i in dups[:20]) + (
            f" and {len(dups) - 20} more" if len(dups) > 20 else ""
        )
        raise DataError(f"{where}: duplicate {what}: {shown}; each must be unique")


# Final statuses of judged items whose request never got a usable answer (a dead or broken endpoint).
UNUSABLE_STATUSES = ("invalid", "error", "missing")


def judge_availability(
    stats: dict,
    rows: list[dict],
    max_fraction: float,
    unusable: tuple[str, ...] = UNUSABLE_STATUSES,
    what: str = "judge answers",
) -> dict:
    """A dead judge is not a score.

    ``rows`` are the metric's judged items (each with ``status`` and, when known, ``error``: what the endpoint
    or the parser said). When the share of items whose status is in ``unusable`` passes ``max_fraction``
    (``judge.max_invalid_fraction``), the metric's ``value`` and ``ci95`` become null and ``unavailable``
    says why, quoting the most common error; ``vbench-ray run`` then exits non-zero. Below it only
    ``invalid_fraction`` is added (the counts stay as they were)."""
    n = len(rows)
    bad = [r for r in rows if r.get("status") in unusable]
    stats["invalid_fraction"] = (len(bad) / n) if n else None
    if not n or len(bad) / n <= max_fraction:
        return stats
    errors = Counter(str(r.get("error") or r.get("status"))[:300] for r in bad)
    top, count = errors.most_common(1)[0]
    stats["unavailable"] = (
        f"{len(bad)} of {n} {what} ({100.0 * len(bad) / n:.0f}%) never got a usable answer, "
        f"more than judge.max_invalid_fraction={max_fraction:g}; the judge answered: {top!r}"
        f" ({count}x)" + (f"; {len(errors) - 1} other error text(s)" if len(errors) > 1 else "")
    )
    stats["unavailable_errors"] = dict(errors.most_common(5))
    stats["value"] = None
    stats["ci95"] = None
    return stats


def blank_unavailable(summary: dict, keys: tuple[str, ...] = ("by_category", "by_difficulty", "by_method")) -> None:
    """No number where none was earned: a metric the headline reports unavailable (a dead judge) is
    null in every breakdown too (``value`` and ``ci95`` None, ``unavailable`` True), never its fallback scores."""
    dead = [
        m for m, stats in (summary.get("metrics") or {}).items() if isinstance(stats, dict) and stats.get("unavailable")
    ]
    for key in keys:
        for block in (summary.get(key) or {}).values():
            for m in dead:
                if isinstance(block, dict) and isinstance(block.get(m), dict):
                    block[m].update(value=None, ci95=None, unavailable=True)


def unavailable_metrics(summary: dict) -> dict[str, str]:
    """``{metric: reason}`` of every metric a summary reports unavailable (also per judge, ``by_judge``)."""
    out = {}
    for name, stats in (summary.get("metrics") or {}).items():
        if isinstance(stats, dict) and stats.get("unavailable"):
            out[name] = stats["unavailable"]
    return out
