"""``replay``: answer from a judge log instead of a model (re-scoring, resume, reproducible tests).

``judge.replay_path`` is a run directory, its ``judge_log.jsonl``, or any JSONL of
``{"request_id": ..., "text": ...}`` lines. A judge log is matched on (request id, hash of the messages
sent), so a re-ask gets the answer that was given to that re-ask; a plain JSONL is matched on request
id alone. A request with no recorded answer comes back as a failure (``error``), never a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from vbench_ray.judges.base import JudgeBackend, JudgeRequest, JudgeResponse, cfg_get
from vbench_ray.judges.log import read_records


class ReplayBackend(JudgeBackend):
    name = "replay"
    asks_a_model = False

    @classmethod
    def problems(cls, node: Any, key: str) -> list[str]:
        path = cfg_get(node, "replay_path")
        if not path:
            return [
                f"`{key}.replay_path` is not set: the replay backend answers from a judge log "
                f"(a run directory or a JSONL of {{\"request_id\", \"text\"}} lines)"
            ]
        if not Path(str(path)).exists():
            return [f"`{key}.replay_path` = {str(path)!r} does not exist"]
        return []

    def __init__(self, cfg):
        super().__init__(cfg)
        if not cfg.replay_path:
            raise ValueError("judge.backend=replay needs judge.replay_path (a run directory or a judge log)")
        path = Path(cfg.replay_path)
        if not path.exists():
            raise FileNotFoundError(f"judge.replay_path not found: {path}")
        self.by_attempt: dict[tuple[str, str], dict] = {}
        self.by_id: dict[str, dict] = {}
        for record in read_records(path):
            if record.get("text") is None:
                continue  # transport failures answer nothing
            if record.get("attempt_hash"):
                self.by_attempt[(record["request_id"], record["attempt_hash"])] = record
            self.by_id.setdefault(record["request_id"], record)  # first answer: the attempt-0 one

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        batch = []
        for request in requests:
            record = self.by_attempt.get((request.request_id, request.prompt_hash())) or self.by_id.get(
                request.request_id
            )
            if record is None:
                batch.append(
                    JudgeResponse(
                        request.request_id, error=f"no recorded answer in {self.cfg.replay_path}", model="replay"
                    )
                )
            else:
                batch.append(
                    JudgeResponse(
                        request.request_id,
                        text=record["text"],
                        latency_s=0.0,
                        prompt_tokens=record.get("prompt_tokens"),
                        completion_tokens=record.get("completion_tokens"),
                        model=record.get("model") or "replay",
                    )
                )
        yield batch
