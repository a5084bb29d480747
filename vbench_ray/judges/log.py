"""The judge log: every raw judge response of a run, one JSON line each, appended as answers arrive.

``RUN_DIR/judge_log.jsonl`` records ``request_id, attempt, backend, model, prompt_hash, attempt_hash, text, error,
parse_status, parse_error, latency_s, prompt_tokens, completion_tokens, time, judge, engine_fault``. It is the run's
source of truth for everything a judge said: a restarted run reuses the answers it holds (matched
on request id and prompt hash, so a changed prompt is asked again), and the ``replay`` backend answers
from it, which re-scores a run without any model.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional

log = logging.getLogger(__name__)

LOG_NAME = "judge_log.jsonl"


@dataclass
class LogRecord:
    request_id: str
    attempt: int
    backend: str
    model: Optional[str]
    prompt_hash: str  # of the request as first built (resume matches on it)
    attempt_hash: str  # of the messages actually sent on this attempt (replay matches on it)
    text: Optional[str]
    error: Optional[str]
    parse_status: str  # ok | invalid | error (transport/engine failure)
    parse_error: Optional[str] = None
    parse_note: Optional[str] = None
    latency_s: Optional[float] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    time: float = 0.0
    judge: Optional[str] = None  # JudgeBackend.identity(): which judge answered (the cache matches on it)
    engine_fault: bool = False  # the send was lost with its replica, which the engine restarted (stage.py, rule 6)


def read_records(path: str | Path) -> Iterator[dict]:
    """Records of a judge log (or any JSONL of ``{"request_id", "text"}``); a torn last line is skipped."""
    path = Path(path)
    if path.is_dir():
        path = path / LOG_NAME
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                log.warning("%s:%d: skipping a line that is not JSON (torn write?)", path, n)
                continue
            if isinstance(record, dict) and "request_id" in record:
                yield record


def append_lines(path: Path, blob: bytes) -> None:
    """Append whole lines: if the file does not end with a newline (a line torn by a full
    disk or a kill), start on a fresh line, so the torn line stays alone (skipped by ``read_records``) and the
    new records are not glued onto it; write everything in one call, then flush it to disk."""
    with open(path, "a+b") as fh:
        if fh.seek(0, os.SEEK_END) > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                blob = b"\n" + blob
        fh.seek(0, os.SEEK_END)
        fh.write(blob)
        fh.flush()
        os.fsync(fh.fileno())


class JudgeLog:
    """Append-only JSONL in the run directory."""

    def __init__(self, run_dir: str | Path):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(run_dir) / LOG_NAME
        self.records: list[dict] = list(read_records(self.path))
        self._by_id: dict[str, list[dict]] = {}
        for r in self.records:
            self._by_id.setdefault(r["request_id"], []).append(r)

    def append(self, records: Iterable[LogRecord]) -> None:
        records = [asdict(r) for r in records]
        if not records:
            return
        for r in records:
            r["time"] = r["time"] or time.time()
        blob = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        append_lines(self.path, blob)
        self.records.extend(records)
        for r in records:
            self._by_id.setdefault(r["request_id"], []).append(r)

    def history(self, request_id: str, prompt_hash: str) -> list[dict]:
        """This request's earlier records (same prompt), oldest first."""
        return [r for r in self._by_id.get(request_id, ()) if r.get("prompt_hash") == prompt_hash]
