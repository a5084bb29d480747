"""Judge phases as stages of the run's one stream (docs/architecture.md, "Data flow").

A benchmark's judge phases (``Benchmark.judge_phases``) become consecutive ``judge`` stages: each row that
reaches a phase's stage gets that phase's requests built from the row alone plus the results of the
earlier phases for the same row (carried in the transient ``judge_state`` column), sent to the run's
engine for that judge (``vbench_ray.judges.engines``: loaded once per run, shared by every phase and round),
parsed, validated and re-asked by the same loop as ever (``JudgeStage``), inside the stage's task: a warm
worker process of the stream (``pipeline``, kind ``judge``), where ``StreamJudge`` is built once per process.

Every response is appended to the run's judge log as it arrives, by the one process that owns the file
(``JudgeLogActor``, on the driver's node), so a killed run loses no answer it paid for and a restart asks
only what the log lacks. After the stream the runner reads the judge log back to score every row, the
rows of earlier runs included, through the same loop (``runner.judge_rows``), which sends nothing for
what the stream already answered.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Any, Callable

from vbench_ray.judges.base import JudgeRequest
from vbench_ray.judges.log import JudgeLog, LogRecord
from vbench_ray.judges.stage import JudgeResult, JudgeStage

log = logging.getLogger(__name__)

STATE_COLUMN = "judge_state"


class JudgeLogActor:
    """The single writer of ``RUN_DIR/judge_log.jsonl`` (a Ray actor pinned to the driver's node)."""

    def __init__(self, run_dir: str):
        self.log = JudgeLog(run_dir)

    def append(self, records: list[dict]) -> int:
        self.log.append([LogRecord(**r) for r in records])
        return len(records)

    def histories(self, keys: list[tuple[str, str]]) -> list[list[dict]]:
        return [self.log.history(rid, prompt_hash) for rid, prompt_hash in keys]


def start_log_actor(run_dir: str):
    """The judge-log actor on this (the driver's) node, where the run directory is."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    actor = (
        ray.remote(JudgeLogActor)
        .options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False))
        .remote(run_dir)
    )
    ray.get(actor.histories.remote([]))  # up (and the existing log read) before the stream starts
    return actor


class RemoteJudgeLog:
    """The ``JudgeLog`` interface of ``JudgeStage``, over the log actor; histories fetched once per batch."""

    def __init__(self, actor):
        self.actor = actor
        self.cache: dict[tuple[str, str], list[dict]] = {}
        self.records: list[dict] = []

    def prefetch(self, requests: list[JudgeRequest]) -> None:
        import ray

        keys = [(r.request_id, r.prompt_hash()) for r in requests]
        self.cache = dict(zip(keys, ray.get(self.actor.histories.remote(keys))))

    def history(self, request_id: str, prompt_hash: str) -> list[dict]:
        return self.cache.get((request_id, prompt_hash), [])

    def append(self, records: list[LogRecord]) -> None:
        import ray

        if records:  # synchronous: the answer is on disk before the judge moves on
            rows = [asdict(r) for r in records]
            ray.get(self.actor.append.remote(rows))
            for r in rows:  # later attempts of this batch see the earlier ones (valid parts are merged)
                self.cache.setdefault((r["request_id"], r["prompt_hash"]), []).append(r)


def _encode(results: dict[str, JudgeResult]) -> dict:
    return {rid: [r.status, r.value, r.attempts, r.error] for rid, r in results.items()}


def _decode(state: str | None) -> dict[str, JudgeResult]:
    raw = json.loads(state) if state else {}
    return {rid: JudgeResult(rid, *values) for rid, values in raw.items()}


class StreamJudge:
    """A ``judge`` stage: the rows of a batch -> their phase's requests -> engine -> results in ``judge_state``."""

    def __init__(
        self, phase: str, build: Callable[[list[dict], dict], list], engine: Any, log_actor: Any, max_retries: int
    ):
        self.phase = phase
        self.build = build
        self.engine = engine
        self.log = RemoteJudgeLog(log_actor)
        self.max_retries = max_retries

    def __call__(self, rows: list[dict]) -> list[dict]:
        states = [_decode(row.get(STATE_COLUMN)) for row in rows]
        per_row = [self.build([row], state) for row, state in zip(rows, states)]
        requests = [r for reqs in per_row for r in reqs]
        if requests:
            self.log.prefetch(requests)
            results = JudgeStage(self.engine, self.log, self.max_retries).run(requests)
        else:
            results = {}
        out = []
        for state, reqs in zip(states, per_row):
            state.update({r.request_id: results[r.request_id] for r in reqs if r.request_id in results})
            out.append({STATE_COLUMN: json.dumps(_encode(state), ensure_ascii=False, default=str)})
        return out
