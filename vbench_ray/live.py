"""Live W&B: the run's wandb run opens when the stream starts and logs progress as each shard of rows is written.

What a step holds (every ``CaseSink.write``, i.e. every ``ray.shard_rows`` rows or ``ray.shard_seconds``):
``progress/cases_done``, ``progress/cases_total``, ``progress/fraction``, ``progress/failures`` (rows with an
``error_*``), ``progress/elapsed_s``, ``progress/cases_per_s/<stage>`` (rows that passed the stage, per second
since the stream started) and, per numeric metric column, ``running/<metric>/mean`` and ``running/<metric>/n``
(per variant in a sweep: ``running/<variant>/<metric>/...``). The end of the run (``sinks.log_to_wandb``) logs
the summary and the per-case table into the same wandb run.

Resume: the wandb id of each run name is kept in ``RUN_DIR/wandb/run_ids.json``; a rerun into the same
directory opens the same id with ``resume="allow"``, so W&B shows one run, continued.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)

IDS = "run_ids.json"
_open: dict[str, Any] = {}  # run name -> the open wandb run the stream logs into
BOOKKEEPING = ("at_", "seconds_", "error_", "excluded_")  # column prefixes that are no metric
COUNTERS = {"videos_opened", "frames_decoded"}  # decode counters, not metrics


def wandb_env(run_dir: str | Path) -> dict[str, str]:
    """Keep every file wandb writes inside the run directory (docs/stack.md)."""
    root = Path(run_dir).resolve() / "wandb"
    root.mkdir(parents=True, exist_ok=True)
    return {
        "WANDB_DIR": str(root.parent),
        "WANDB_CACHE_DIR": str(root / ".cache"),
        "WANDB_DATA_DIR": str(root / ".data"),
        "WANDB_CONFIG_DIR": str(root / ".config"),
        "WANDB_SILENT": "true",
    }


def run_id(run_dir: str | Path, name: str) -> str:
    """The wandb id of ``name`` in this run directory: made once, then the same on every resume."""
    path = Path(run_dir).resolve() / "wandb" / IDS
    ids = json.loads(path.read_text()) if path.is_file() else {}
    if name not in ids:
        import secrets
        import string

        ids[name] = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))  # wandb's form
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ids, indent=1, sort_keys=True))
    return ids[name]


def sweep_config(sweep_info: dict | None, variant: str | None = None) -> dict:
    """wandb ``config`` keys of a sweep: its axes and values (``sweep/axes``), and for a variant its axis and
    value as ``sweep/axis``, ``sweep/value`` and ``sweep/<axis>`` (W&B's grouping and parallel coordinates)."""
    if not sweep_info:
        return {}
    axes: dict[str, list] = {}
    for v in sweep_info.get("variants") or []:
        if v.get("axis"):
            axes.setdefault(v["axis"], []).append(v.get("value"))
    out: dict[str, Any] = {"sweep/axes": axes}
    if variant is not None:
        out["variant"] = variant
        match = next((v for v in sweep_info.get("variants") or [] if v.get("name") == variant), {})
        out["sweep/axis"] = match.get("axis") or "base"
        out["sweep/value"] = match.get("value")
        if match.get("axis"):
            out[f"sweep/{match['axis']}"] = match.get("value")
        if match.get("axis") == "noise":  # "blur:9": its kind and numeric level, for parallel coordinates
            kind, _, level = str(match.get("value")).partition(":")
            out["sweep/noise_kind"], out["sweep/noise_level"] = kind, float(level) if level else None
    return out


def open_run(run_dir: str | Path, wandb_cfg: Any, name: str, config: dict):
    """The wandb run called ``name``: the one the stream opened, else a new one (same id on a resume)."""
    run = _open.pop(name, None)
    if run is not None:
        run.config.update(config, allow_val_change=True)
        return run
    import wandb

    return wandb.init(
        mode=wandb_cfg.mode,
        project=wandb_cfg.project,
        entity=wandb_cfg.entity,
        group=wandb_cfg.group,
        tags=list(wandb_cfg.tags),
        name=name,
        config=config,
        id=run_id(run_dir, name),
        resume="allow",
        dir=str(Path(run_dir).resolve()),
        reinit="create_new",
        settings=wandb.Settings(console="off"),
    )  # the terminal's output stays out of the run's files


def finish_open(exit_code: int) -> None:
    """End every wandb run the stream still holds open, with ``exit_code`` (Ctrl-C: ``interrupt.exit_interrupted``
    calls it with 130 before the process ends without its interpreter teardown, which would otherwise leave the
    offline run without its exit record: ``wandb sync`` would then upload it as a run that never ended). The steps
    logged so far are in the run's file already; a resume opens the same id (:func:`run_id`)."""
    while _open:
        name, run = _open.popitem()
        try:
            run.finish(exit_code=exit_code)
        except Exception as exc:  # the process is ending anyway: say so and go on
            log.warning("wandb run %s not finished: %s", name, exc)


class Progress:
    """Counts and running means over the rows written so far; one wandb step per call of :meth:`update`."""

    def __init__(self, run: Any, total: int, metrics: set[str] | None = None, per_variant: bool = False):
        self.run, self.total, self.start = run, total, time.monotonic()
        self.per_variant = per_variant  # a sweep: running means keyed running/<variant>/<metric>
        self.metrics = metrics  # the enabled metrics: running means of these columns only (None: every number)
        self.done = self.failed = 0
        self.stage_rows: dict[str, int] = {}
        self.sums: dict[str, list[float]] = {}  # key -> [sum, n]

    def update(self, batch: pa.Table) -> None:
        if self.run is None or not batch.num_rows:
            return
        try:
            self.run.log(self._step(batch))
        except Exception as exc:  # progress is for watching; a wandb hiccup never stops the run
            log.warning("wandb progress not logged: %s", exc)

    def _is_metric(self, name: str, kind: pa.DataType, names: list[str]) -> bool:
        if (
            name.startswith(BOOKKEEPING)
            or name in COUNTERS
            or not (pa.types.is_floating(kind) or pa.types.is_integer(kind))
        ):
            return False
        if self.metrics and self.metrics & set(names):  # a benchmark whose rows hold its enabled metrics
            return name in self.metrics
        return True

    def _step(self, batch: pa.Table) -> dict:
        self.done += batch.num_rows
        errors = [c.to_pylist() for n, c in zip(batch.column_names, batch.columns) if n.startswith("error_")]
        self.failed += sum(any(e) for e in zip(*errors)) if errors else 0
        variants = batch.column("variant").to_pylist() if "variant" in batch.column_names else [None] * batch.num_rows
        for name, col in zip(batch.column_names, batch.columns):
            if name.startswith("at_"):
                self.stage_rows[name[3:]] = self.stage_rows.get(name[3:], 0) + len(col) - col.null_count
            elif self._is_metric(name, col.type, batch.column_names):
                for v, x in zip(variants, col.to_pylist()):
                    if x is not None and math.isfinite(x):
                        acc = self.sums.setdefault(f"{v}/{name}" if self.per_variant else name, [0.0, 0])
                        acc[0] += x
                        acc[1] += 1
        elapsed = max(time.monotonic() - self.start, 1e-9)
        step: dict[str, Any] = {
            "progress/cases_done": self.done,
            "progress/cases_total": self.total,
            "progress/fraction": self.done / self.total if self.total else 1.0,
            "progress/failures": self.failed,
            "progress/elapsed_s": elapsed,
        }
        for stage, n in self.stage_rows.items():
            step[f"progress/cases_per_s/{stage}"] = n / elapsed
        for key, (total, n) in self.sums.items():
            step[f"running/{key}/mean"] = total / n
            step[f"running/{key}/n"] = n
        return step


def start(run_dir: Path, cfg: Any, name: str, config: dict, sweep_info: dict | None, total: int) -> Progress:
    """Open the run's wandb run (the base variant's in a sweep) before the stream and return its progress logger;
    a disabled wandb gives a logger that does nothing."""
    if cfg.wandb.mode == "disabled" or total == 0:
        return Progress(None, total)
    import os

    os.environ.update(wandb_env(run_dir))
    if sweep_info:
        name, config = f"{name}/base", {**config, **sweep_config(sweep_info, "base")}
    try:
        run = open_run(run_dir, cfg.wandb, name, config)
    except Exception as exc:
        log.warning("wandb did not start; no live progress: %s", exc)
        return Progress(None, total)
    _open[name] = run
    metrics = cfg.get("metrics")
    enabled = metrics.get("enabled") if hasattr(metrics, "get") else None
    return Progress(run, total, {str(m) for m in enabled} if enabled else None, per_variant=bool(sweep_info))
