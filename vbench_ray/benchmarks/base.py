"""The benchmark contract and the pieces every benchmark's summary shares.

A benchmark (lm-evaluation-harness style: one registered class per task family) says how to load
its cases, which stages score them, which columns the case table has, and how rows aggregate into
``summary.json``. The runner does the rest (Ray, resume, sinks, report, wandb).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable

import pyarrow as pa

from vbench_ray.pipeline import Stage
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
    """One judge stage: its name, its judge config node, and how to build its requests from the case
    rows and the results of the phases before it (``build(rows, results) -> list[JudgeRequest]``)."""

    name: str
    judge_cfg: Any
    build: Callable[[list[dict], dict], list]


class DataError(ValueError):
    """Benchmark data that cannot be read at all (a per-case problem is recorded on the case instead)."""


class Benchmark:
    name: ClassVar[str] = ""
    config_class: ClassVar[type] = object
    config_choices: ClassVar[dict[str, tuple[str, ...]]] = {}
    # config sections (beyond benchmark, data, metrics) whose change invalidates rows already computed
    result_sections: ClassVar[tuple[str, ...]] = ()

    def load_cases(self, cfg) -> list[dict]:
        """Rows with the ``CASE_FIELDS`` (plus benchmark columns); bad cases carry ``error_load``."""
        raise NotImplementedError

    def stages(self, cfg) -> list[Stage]:
        raise NotImplementedError

    def case_fields(self, cfg) -> list[pa.Field]:
        """Columns the loader adds beyond ``CASE_FIELDS``."""
        return []

    def schema(self, cfg) -> pa.Schema:
        fields = list(CASE_FIELDS) + self.case_fields(cfg)
        for stage in self.stages(cfg):
            fields += stage.schema_fields()
        return pa.schema(fields)

    def judge_phases(self, cfg) -> list["JudgePhase"]:
        """The judge stages this benchmark runs, in order (none for benchmarks without a judge).

        A later phase may build its requests from an earlier one's results (ViDiC: the model under
        test describes, then the judge answers the checklist from the description).
        """
        return []

    def score_judgments(self, cases: list[dict], results: dict, cfg) -> pa.Table | None:
        """The judged items (one row per question, rubric item ...) from the judge stage's results."""
        return None

    def summarize(self, cases: pa.Table, cfg, judgments: pa.Table | None = None) -> dict:
        raise NotImplementedError

    def variants(self, cfg) -> list | None:
        """Variants the benchmark's own config asks for (``vbench_ray.sweeps.Variant``), or None."""
        return None

    def summarize_variants(self, cases: pa.Table, cfg, judgments: pa.Table | None = None) -> dict:
        """Summary sections computed across variants (all rows), merged into summary.json."""
        return {}


BENCHMARKS: dict[str, type[Benchmark]] = {}


def register_benchmark(cls: type[Benchmark]) -> type[Benchmark]:
    BENCHMARKS[cls.name] = cls
    return cls


def get_benchmark(name: str) -> Benchmark:
    return BENCHMARKS[name]()


# ----------------------------------------------------------------------------- summary helpers

def error_columns(rows: list[dict]) -> list[str]:
    return sorted({k for r in rows for k in r if k.startswith("error_")})


def failure_report(rows: list[dict], max_examples: int = 20) -> dict:
    """How many rows failed, at which stage, with a few example messages."""
    by_stage: Counter = Counter()
    examples = []
    failed = 0
    for r in rows:
        errs = [(k[len("error_"):], r[k]) for k in error_columns([r]) if r.get(k)]
        if errs:
            failed += 1
        for stage, msg in errs:
            by_stage[stage] += 1
            if len(examples) < max_examples:
                examples.append({"case_id": r["case_id"], "variant": r["variant"], "stage": stage, "error": msg})
    return {"count": failed, "by_stage": dict(sorted(by_stage.items())), "examples": examples}


def metric_stats(rows: Iterable[dict], metric: str, stats_cfg: Any, seed: int, scale: float = 1.0) -> dict:
    rows = list(rows)
    return describe([r.get(metric) for r in rows], seed=seed, n_resamples=stats_cfg.bootstrap_samples,
                    confidence=stats_cfg.confidence, scale=scale)


def group_rows(rows: list[dict], key: str) -> dict[str, list[dict]]:
    """Rows by the values of ``key``; a list-valued key puts a row in every group it names."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        values = r.get(key)
        for v in (values if isinstance(values, (list, tuple)) else [values]):
            if v is not None:
                groups.setdefault(str(v), []).append(r)
    return dict(sorted(groups.items()))
