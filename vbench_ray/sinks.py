"""Where results go: parquet case shards (streamed, resumable), summary.json, Weights & Biases.

Shards are written by the driver as result batches stream out of Ray Data, each one atomically
(``*.tmp`` then ``os.replace``), so a killed run leaves only whole shards behind. On restart the keys
``(case_id, variant)`` found in ``cases/`` are skipped. A half-written ``*.tmp`` is deleted.
"""

from __future__ import annotations

import json
import logging
import math
import os
import uuid
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

Key = tuple[str, str]


class CaseSink:
    """``run_dir/cases/part-*.parquet``: one row per (case_id, variant), all shards one schema."""

    def __init__(self, run_dir: str | Path, schema: pa.Schema):
        self.dir = Path(run_dir) / "cases"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        for stale in self.dir.glob("*.tmp"):
            stale.unlink()
        self._done = self._read_keys()

    @property
    def done_keys(self) -> set[Key]:
        return set(self._done)

    def _shards(self) -> list[Path]:
        return sorted(self.dir.glob("part-*.parquet"))

    def _read_keys(self) -> set[Key]:
        keys: set[Key] = set()
        for shard in self._shards():
            try:
                t = pq.read_table(shard, columns=["case_id", "variant"])
            except Exception as exc:  # an unreadable shard is dropped, its cases recomputed
                log.warning("ignoring unreadable shard %s (%s); its cases will be recomputed", shard, exc)
                quarantine = self.dir.parent / "corrupt_shards"  # out of cases/, so readers of the folder work
                quarantine.mkdir(exist_ok=True)
                shard.rename(quarantine / shard.name)
                continue
            keys.update(zip(t.column("case_id").to_pylist(), t.column("variant").to_pylist()))
        return keys

    def write(self, batch: pa.Table) -> int:
        """Append a batch (rows already present are dropped, so a retry cannot duplicate). Returns rows written."""
        batch = conform(batch, self.schema)
        keys = list(zip(batch.column("case_id").to_pylist(), batch.column("variant").to_pylist()))
        keep = [k not in self._done for k in keys]
        if not any(keep):
            return 0
        batch = batch.filter(pa.array(keep))
        name = f"part-{len(self._shards()):05d}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.dir / (name + ".tmp")
        pq.write_table(batch, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.dir / name)
        self._done.update(k for k, kept in zip(keys, keep) if kept)
        return batch.num_rows

    def read_all(self) -> pa.Table:
        shards = self._shards()
        if not shards:
            return self.schema.empty_table()
        tables = [conform(pq.read_table(s), self.schema) for s in shards]
        return pa.concat_tables(tables).sort_by([("case_id", "ascending"), ("variant", "ascending")])


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
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_json_safe(obj), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def _flatten(prefix: str, obj: Any, out: dict) -> dict:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}/{k}" if prefix else str(k), v, out)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix] = obj
    return out


def wandb_env(run_dir: str | Path) -> dict[str, str]:
    """Keep every file wandb writes inside the run directory (STACK.md)."""
    root = Path(run_dir).resolve() / "wandb"
    root.mkdir(parents=True, exist_ok=True)
    return {"WANDB_DIR": str(root.parent), "WANDB_CACHE_DIR": str(root / ".cache"),
            "WANDB_DATA_DIR": str(root / ".data"), "WANDB_CONFIG_DIR": str(root / ".config"),
            "WANDB_SILENT": "true"}


def log_to_wandb(run_dir: str | Path, wandb_cfg: Any, run_name: str, config: dict, summary: dict,
                 cases: pa.Table | None, extra_tables: Iterable[tuple[str, pa.Table]] = ()) -> str | None:
    """One wandb run: the resolved config, the summary (flattened to ``metrics/SSIM/value`` ...) and the
    per-case table. Offline by default: ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads it later."""
    if wandb_cfg.mode == "disabled":
        return None
    os.environ.update(wandb_env(run_dir))
    import wandb

    run = wandb.init(mode=wandb_cfg.mode, project=wandb_cfg.project, entity=wandb_cfg.entity,
                     group=wandb_cfg.group, tags=list(wandb_cfg.tags), name=run_name, config=config,
                     dir=str(Path(run_dir).resolve()), reinit="finish_previous")
    try:
        flat = _flatten("", {k: summary[k] for k in ("metrics", "by_category", "by_variant") if k in summary}, {})
        run.summary.update(flat)
        run.log(flat)
        if wandb_cfg.log_cases and cases is not None and cases.num_rows:
            run.log({"cases": wandb.Table(dataframe=_loggable(cases))})
        for name, table in extra_tables:
            run.log({name: wandb.Table(dataframe=_loggable(table))})
        return run.dir
    finally:
        run.finish()


def _loggable(table: pa.Table):
    """A pandas frame wandb can render: lists become comma-joined text."""
    df = table.to_pandas()
    for col in df.columns:
        if df[col].map(lambda v: isinstance(v, (list, tuple)) or hasattr(v, "tolist")).any():
            df[col] = df[col].map(lambda v: ", ".join(map(str, list(v))) if v is not None else None)
    return df
