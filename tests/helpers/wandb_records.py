"""Read a wandb offline run's ``run-<id>.wandb`` back: its records, as wandb's own protobuf messages.

The file is wandb's LevelDB-style log (wandb/sdk/internal/datastore.py in wandb 0.15-0.17, which wandb 0.31 no
longer ships): a 7-byte header (``:W&B``, a key, a version), then 32 KiB blocks of chunks, each ``crc32 (4) |
length (2) | type (1) | data``; type 1 a whole record, 2/3/4 its first, middle and last pieces. A record is a
``wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK, HEADER, CHUNK = 32768, 7, 7


def records(path: str | Path, wait_s: float = 60.0) -> list:
    """The file's records, once it holds the run's ``exit`` record: ``run.finish()`` can return before wandb's
    service process has written the records out (seen: a 7-byte file right after finish, complete a moment later)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        out = _read(path)
        if any(r.WhichOneof("record_type") == "exit" for r in out) or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def _read(path: str | Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    if len(data) < HEADER:
        return []
    assert data[:4] == b":W&B", "not a wandb log"
    out, pos, parts = [], HEADER, b""
    while pos + CHUNK <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK])
        if kind == 0 and length == 0:
            pos += left
            continue
        if pos + CHUNK + length > len(data):  # a chunk still being written
            break
        chunk = data[pos + CHUNK : pos + CHUNK + length]
        pos += CHUNK + length
        parts = chunk if kind in (1, 2) else parts + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(parts)
            out.append(rec)
    return out


def history(path: str | Path) -> list[dict]:
    """Every ``run.log`` step as ``{key: value}`` (values JSON-decoded)."""
    return [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
        for r in records(path)
        if r.WhichOneof("record_type") == "history"
    ]


def summary(path: str | Path) -> dict:
    """The run's summary (``run.summary`` and the last value of each logged key), its summary records in order."""
    out: dict = {}
    for r in records(path):
        if r.WhichOneof("record_type") == "summary":
            for item in r.summary.update:
                out[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return out


def run_record(path: str | Path):
    """The run's own record (id, name, group, config)."""
    return next(r.run for r in records(path) if r.WhichOneof("record_type") == "run")


def config(path: str | Path) -> dict:
    """The run's config: the run record's, updated by later config records."""
    out: dict = {}
    for r in records(path):
        kind = r.WhichOneof("record_type")
        items = r.run.config.update if kind == "run" else r.config.update if kind == "config" else []
        for item in items:
            out[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return out
