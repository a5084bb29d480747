"""Where results go: parquet case shards (streamed, resumable), summary.json, Weights & Biases.

Shards are written by the driver as result batches stream out of Ray Data, each one atomically
(``*.tmp`` then ``os.replace``), so a killed run leaves only whole shards behind. On restart the keys
``(case_id, variant)`` found in ``cases/`` are skipped, except rows that failed (carry an ``error_*``),
which are computed again (``output.retry_failed``): the new row supersedes the failed
one, as ``read_all`` keeps the newest row of each key. A half-written ``*.tmp`` is deleted.
"""

from __future__ import annotations

import json
import logging
import math
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from vbench_ray.live import open_run, wandb_env  # noqa: F401  (wandb_env: compare's wandb run too)

log = logging.getLogger(__name__)

Key = tuple[str, str]


def _failed_mask(table: pa.Table) -> list[bool]:
    """Per row: whether any ``error_*`` column holds a message."""
    failed = [False] * table.num_rows
    for name in table.column_names:
        if name.startswith("error_"):
            failed = [f or bool(v) for f, v in zip(failed, table.column(name).to_pylist())]
    return failed


class CaseSink:
    """``run_dir/cases/part-*.parquet``: one row per (case_id, variant), all shards one schema.

    ``retry_failed`` (``output.retry_failed``): rows that failed are not done, so a rerun computes them again
    and the new row supersedes the failed one (``read_all`` keeps the newest row per key)."""

    def __init__(self, run_dir: str | Path, schema: pa.Schema, retry_failed: bool = True):
        self.dir = Path(run_dir) / "cases"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.retry_failed = retry_failed
        for stale in self.dir.glob("*.tmp"):
            stale.unlink()
        self._failed: set[Key] = set()  # keys whose newest row failed
        self.on_write: Callable[[pa.Table], None] | None = None  # e.g. live.Progress.update: W&B while it runs
        self._next: int | None = None  # number of the next shard
        self._done = self._read_keys()

    @property
    def done_keys(self) -> set[Key]:
        """Keys not to compute again: every key with a row, less those whose newest row failed (retry_failed)."""
        return set(self._done - self._failed) if self.retry_failed else set(self._done)

    @property
    def failed_keys(self) -> set[Key]:
        return set(self._failed)

    def _shards(self) -> list[Path]:
        """Shards in the order they were written (``part-<n>-``: n counts up)."""
        return sorted(self.dir.glob("part-*.parquet"), key=lambda p: (_shard_number(p), p.name))

    def _read_keys(self) -> set[Key]:
        keys: set[Key] = set()
        for shard in self._shards():
            try:
                names = pq.read_schema(shard).names
                t = pq.read_table(shard, columns=["case_id", "variant"] + [n for n in names if n.startswith("error_")])
            except Exception as exc:  # an unreadable shard is dropped, its cases recomputed
                log.warning("ignoring unreadable shard %s (%s); its cases will be recomputed", shard, exc)
                quarantine = self.dir.parent / "corrupt_shards"  # out of cases/, so readers of the folder work
                quarantine.mkdir(exist_ok=True)
                shard.rename(quarantine / shard.name)
                continue
            shard_keys = list(zip(t.column("case_id").to_pylist(), t.column("variant").to_pylist()))
            keys.update(shard_keys)
            for key, failed in zip(shard_keys, _failed_mask(t)):  # later shards supersede earlier ones
                (self._failed.add if failed else self._failed.discard)(key)
        return keys

    def write(self, batch: pa.Table) -> int:
        """Append a batch. Rows already present are dropped (so a retry cannot duplicate), except rows replacing
        a failed one when ``retry_failed``. Returns rows written."""
        batch = conform(batch, self.schema)
        keys = list(zip(batch.column("case_id").to_pylist(), batch.column("variant").to_pylist()))
        keep = [k not in self._done or (self.retry_failed and k in self._failed) for k in keys]
        if not any(keep):
            return 0
        batch = batch.filter(pa.array(keep))
        failed = _failed_mask(batch)
        if self._next is None:  # listed once; a counter after that (a 100k-case run writes thousands of shards)
            self._next = max((_shard_number(p) for p in self._shards()), default=-1) + 1
        name = f"part-{self._next:05d}-{uuid.uuid4().hex[:8]}.parquet"
        self._next += 1
        tmp = self.dir / (name + ".tmp")
        pq.write_table(batch, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.dir / name)
        written = [k for k, kept in zip(keys, keep) if kept]
        self._done.update(written)
        for key, fail in zip(written, failed):
            (self._failed.add if fail else self._failed.discard)(key)
        if self.on_write is not None:
            self.on_write(batch)
        return batch.num_rows

    def read_all(self) -> pa.Table:
        """Every key's newest row (a retried row supersedes the failed one), sorted by case and variant."""
        from vbench_ray.driver_memory import release_memory

        shards = self._shards()
        if not shards:
            return self.schema.empty_table()
        table = pa.concat_tables([conform(pq.read_table(s), self.schema) for s in shards])
        table = table.take(_newest_sorted(table.column("case_id"), table.column("variant")))
        release_memory()  # the shards' buffers, freed by the take, back to the OS
        return table


def _newest_sorted(case_id: pa.ChunkedArray, variant: pa.ChunkedArray) -> pa.Array:
    """Row indices that sort the rows by (case_id, variant), keeping of each key only its last row (the newest:
    shards are read in the order they were written). Computed in Arrow from the two key columns: no Python
    tuple per row (100k of them at benchmark scale)."""
    import pyarrow.compute as pc

    keys = pa.table({"case_id": case_id, "variant": variant, "row": pa.array(range(len(case_id)), pa.int64())})
    order = pc.sort_indices(keys, sort_keys=[("case_id", "ascending"), ("variant", "ascending"), ("row", "descending")])
    c, v = pc.take(case_id, order), pc.take(variant, order)
    if len(order) < 2:
        return order
    # first row of each run of equal keys (its newest row, as rows sort descending within a key)
    changed = pc.or_(pc.not_equal(c[1:], c[:-1]), pc.not_equal(v[1:], v[:-1]))
    first = pa.concat_arrays([pa.array([True]), changed.combine_chunks()])
    return order.filter(first)


def _shard_number(path: Path) -> int:
    try:
        return int(path.name.split("-")[1])
    except (IndexError, ValueError):
        return -1


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast ``table`` to ``schema``; columns the table lacks become nulls."""
    columns = []
    for f in schema:
        if f.name in table.column_names:
            columns.append(table.column(f.name).cast(f.type))
        else:
            columns.append(pa.nulls(table.num_rows, type=f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item"):  # numpy scalars
        return _json_safe(obj.item())
    return obj


def write_json(path: str | Path, obj: Any) -> Path:
    """Write JSON atomically; NaN and inf become null (JSON has neither)."""
    return write_text_atomic(path, json.dumps(_json_safe(obj), indent=2, sort_keys=False) + "\n")


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temporary file next to ``path``, flush it to disk, then rename it over ``path``:
    a full disk or a kill leaves the previous file (or none), never a truncated one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _flatten(prefix: str, obj: Any, out: dict) -> dict:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}/{k}" if prefix else str(k), v, out)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix] = obj
    return out


def wandb_summary(summary: dict) -> tuple[dict[str, float], dict[str, str]]:
    """``summary.json``'s numbers as W&B keys: ``metrics``, every ``by_*`` breakdown the summary has (found by name,
    not listed per benchmark: ``by_method/<method>/<metric>/value``, ``by_method_category/<method>/<category>/
    <metric>/ci_lo``, ``by_judge/<judge>/<metric>/n`` ...) and NRVBench's ``cross_judge`` (``_cross_judge_keys``,
    under ``cross_judge/``). A metric's stats (a dict with ``value`` or ``ci95``) give
    ``value``, ``ci_lo``, ``ci_hi``, ``n`` and their other numbers. Returns ``(numbers, reasons)``: ``reasons`` holds,
    for each metric without a value, its ``.../value`` key and why (``unavailable``, ``note``, the headline metric's
    reason where a breakdown only says ``unavailable: true``, or n=0): text for the W&B summary, never 0 or NaN."""
    headline = {
        m: s["unavailable"] or s.get("note")
        for m, s in (summary.get("metrics") or {}).items()
        if isinstance(s, dict) and isinstance(s.get("unavailable"), str)
    }
    numbers: dict[str, float] = {}
    reasons: dict[str, str] = {}

    def walk(prefix: str, obj: Any, name: str) -> None:
        if isinstance(obj, dict) and ("value" in obj or "ci95" in obj):
            stats(prefix, obj, name)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}/{k}", v, str(k))
        elif _number(obj) is not None:
            numbers[prefix] = obj

    def stats(prefix: str, s: dict, name: str) -> None:
        if _number(s.get("value")) is not None:
            numbers[f"{prefix}/value"] = s["value"]
        else:
            reasons[f"{prefix}/value"] = _why_no_value(s, headline.get(name))
        ci = s.get("ci95")
        if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(c) is not None for c in ci):
            numbers[f"{prefix}/ci_lo"], numbers[f"{prefix}/ci_hi"] = ci
        for k, v in s.items():
            if k not in ("value", "ci95"):
                walk(f"{prefix}/{k}", v, str(k))

    for key, block in summary.items():
        if (key == "metrics" or key.startswith("by_")) and isinstance(block, dict):
            walk(key, block, key)
    _cross_judge_keys(summary.get("cross_judge"), headline, numbers, reasons)
    return numbers, reasons


def _cross_judge_keys(block: Any, headline: dict, numbers: dict, reasons: dict) -> None:
    """NRVBench's ``cross_judge`` block (Table 2: each judge's mean, the judges' mean and std, overall and
    ``by_method``) as ``cross_judge/[by_method/<method>/]<metric>/mean|std|n_judges|per_judge/<judge>``; a mean,
    std or judge's mean without a value is its reason, as in ``wandb_summary``."""

    def stats(prefix: str, s: dict, metric: str) -> None:
        unscored = "no value: no judge scored it" if s.get("n_judges") == 0 else "no value"
        why = (headline.get(metric) or "unavailable") if s.get("unavailable") is True else unscored
        for key in ("mean", "std", "n_judges"):
            if _number(s.get(key)) is not None:
                numbers[f"{prefix}/{key}"] = s[key]
            elif key in s:
                reasons[f"{prefix}/{key}"] = why
        for judge, value in (s.get("per_judge") or {}).items():
            if _number(value) is not None:
                numbers[f"{prefix}/per_judge/{judge}"] = value
            elif judge in (s.get("unavailable_judges") or []):  # blanked: this judge's own metric is unavailable
                reasons[f"{prefix}/per_judge/{judge}"] = headline.get(metric) or "unavailable"
            else:
                reasons[f"{prefix}/per_judge/{judge}"] = "no value: this judge scored none of its instances"

    if not isinstance(block, dict):
        return
    for metric, s in block.items():
        if metric != "by_method" and isinstance(s, dict):
            stats(f"cross_judge/{metric}", s, metric)
    for method, per in (block.get("by_method") or {}).items():
        for metric, s in (per or {}).items():
            if isinstance(s, dict):
                stats(f"cross_judge/by_method/{method}/{metric}", s, metric)


def _number(v: Any) -> float | None:
    """``v`` if it is a finite int or float (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return v


def _why_no_value(stats: dict, headline: str | None) -> str:
    for key in ("unavailable", "note"):
        if isinstance(stats.get(key), str) and stats[key]:
            return stats[key]
    if stats.get("unavailable") is True:  # a breakdown of a metric the headline reports unavailable
        return headline or "unavailable"
    if stats.get("n") == 0:
        return "no value: nothing scored (n=0)"
    return "no value"


def log_to_wandb(
    run_dir: str | Path,
    wandb_cfg: Any,
    run_name: str,
    config: dict,
    summary: dict,
    cases: pa.Table | None,
    extra_tables: Iterable[tuple[str, pa.Table]] = (),
    curves: Iterable[dict] = (),
) -> str | None:
    """The run's wandb run (the one :mod:`vbench_ray.live` opened for the stream, else a new one with the run
    directory's id for ``run_name``): the resolved config, the summary's metrics and every breakdown
    (:func:`wandb_summary`: ``metrics/SSIM/value``, ``by_method/<method>/<metric>/ci_lo`` ...; a metric without a
    value as its reason, text in the run's summary), the per-case table with the first ``wandb.strips``
    cases' frame strips as images, and each sweep ``curves`` figure (:func:`vbench_ray.figures.sweep_figures`,
    line kind) as a W&B line plot ``sweep/<axis>/<metric>``. Offline by default: ``wandb sync
    RUN_DIR/wandb/offline-run-*`` uploads it later."""
    if wandb_cfg.mode == "disabled":
        return None
    os.environ.update(wandb_env(run_dir))
    import wandb

    run = open_run(run_dir, wandb_cfg, run_name, config)
    try:
        numbers, reasons = wandb_summary(summary)
        run.log(numbers)
        run.summary.update({**numbers, **reasons})
        if wandb_cfg.log_cases and cases is not None and cases.num_rows:
            run.log({"cases": _case_table(cases, Path(run_dir), int(wandb_cfg.get("strips") or 0))})
        for name, table in extra_tables:
            run.log({name: wandb.Table(dataframe=_loggable(table))})
        for fig in curves:
            if fig.get("kind") == "line":
                rows = [[x, v, lo, hi, n] for x, v, lo, hi, n in fig["points"]]
                table = wandb.Table(data=rows, columns=[fig["axis"], fig["metric"], "ci_lo", "ci_hi", "n"])
                run.log(
                    {
                        f"sweep/{fig['axis']}/{fig['metric']}": wandb.plot.line(
                            table, fig["axis"], fig["metric"], title=fig["title"]
                        )
                    }
                )
        return run.dir
    finally:
        run.finish()


def _case_table(cases: pa.Table, run_dir: Path, n_strips: int):
    """The per-case wandb table; the first ``n_strips`` cases with videos get ``source_frames`` /
    ``edited_frames`` images (report's frame strips), the others none."""
    import wandb

    df = _loggable(cases)
    columns = [c for c in ("source_path", "edited_path") if c in df.columns]
    if not n_strips or not columns:
        return wandb.Table(dataframe=df)
    import io

    from PIL import Image

    from vbench_ray.strips import encode_strip, resolve

    images: dict[str, list] = {c.replace("_path", "_frames"): [None] * len(df) for c in columns}
    records = df.to_dict("records")
    shown = 0
    for i, row in enumerate(records):
        if shown >= n_strips:
            break
        if any(str(k).startswith("error_") and isinstance(v, str) for k, v in row.items()):
            continue  # a failed case: its videos may be what failed
        for c in columns:
            path = row[c]
            if isinstance(path, str) and path:
                try:
                    png = encode_strip(resolve(path, run_dir))
                    images[c.replace("_path", "_frames")][i] = wandb.Image(Image.open(io.BytesIO(png)), caption=path)
                except Exception as exc:  # an undecodable video shows no image; the row stays
                    log.warning("no frame strip for %s: %s", path, exc)
        shown += 1
    names = list(df.columns) + list(images)
    data = [list(r.values()) + [images[k][i] for k in images] for i, r in enumerate(records)]
    return wandb.Table(columns=names, data=data)


def _loggable(table: pa.Table):
    """A pandas frame wandb can render: lists become comma-joined text."""
    df = table.to_pandas()
    for col in df.columns:
        if df[col].map(lambda v: isinstance(v, (list, tuple)) or hasattr(v, "tolist")).any():
            df[col] = df[col].map(lambda v: ", ".join(map(str, list(v))) if v is not None else None)
    return df
