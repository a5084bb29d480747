"""The judge stage: requests -> backend -> parse -> validate -> retry the failed alone -> record.

One generic loop for every benchmark (docs/architecture.md, "Judges"):

1. Requests already answered validly in the run's judge log (same id, same prompt) are not sent again.
2. The rest go to the backend; each response is appended to the log as its batch finishes.
3. A response that fails to parse or validate is re-asked, alone, up to ``judge.max_retries`` times.
   The re-ask repeats the request with a short note quoting what was wrong (deterministic: the same
   failure gives the same re-ask).
4. A transport or engine failure (timeout, 5xx, dead engine) is also retried, from the same budget (but rule 6).
5. One budget per request per run: every attempt in the judge log counts, failed or
   invalid, whichever pass or invocation sent it (the stream, the scoring pass after it, a resume), so a
   request is sent at most ``judge.max_retries + 1`` times in all; raising ``judge.max_retries`` on a resume
   grants more. Attempts are numbered in the order sent (a re-ask after a transport failure is attempt 2,
   not a second attempt 1). A request that was never sent (``JudgeResponse.sent`` False: the endpoint was
   found down, or none of its attempts could connect) spends nothing and is not logged: a later run asks it.
6. A send lost with its replica (``JudgeResponse.engine_fault``: the process or node of the hf replica or the
   Serve LLM replica serving it died, the engine waited until Ray had restarted it or Serve replaced it;
   ``judges/engine.lost_replica_fault``) is logged (``engine_fault`` true) and sent again as it was, and the first
   ``FREE_ENGINE_FAULTS`` such losses of a request spend nothing of its budget. The budget exists so that a
   server that keeps computing (a timeout), an endpoint that is down or a judge that keeps answering badly is
   not paid again and again; a lost replica is none of these: its computation died with its process, nothing
   is still working on the request, and the same prompt goes to the restarted replica. Counting it would make
   an infrastructure fault change a score (a request would lose a re-ask a clean run gives it, or end without an
   answer, as when both sends of ``max_retries: 1`` fall inside one restart). The free losses are bounded
   per request per run (counted from the log, like the budget), so a request that kills its replica every time
   (out of memory on its video) is sent at most ``max_retries + 1 + FREE_ENGINE_FAULTS`` times.

The result per request is ``JudgeResult(status, value, attempts, error)``: ``ok`` with the parsed
value, ``invalid`` (answered, never usable) or ``error`` (never answered).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, replace
from typing import Any

from vbench_ray.judges.base import JudgeRequest, JudgeResponse
from vbench_ray.judges.log import JudgeLog, LogRecord
from vbench_ray.judges.parsing import parse

log = logging.getLogger(__name__)

FREE_ENGINE_FAULTS = 3  # per request per run: sends lost with a restarted replica that spend no budget (rule 6)


@dataclass
class JudgeResult:
    request_id: str
    status: str  # ok | invalid | error
    value: Any = None
    attempts: int = 0
    error: str | None = None


def retry_request(request: JudgeRequest, reason: str) -> JudgeRequest:
    """The same request with a note on what was wrong with the last answer, appended to the last user turn."""
    messages = copy.deepcopy(request.messages)
    note = {
        "type": "text",
        "text": f"Your previous answer could not be used ({reason[:300]}). "
        "Answer again, following the output format exactly.",
    }
    last = messages[-1]
    if isinstance(last.get("content"), str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"].append(note)
    return replace(request, messages=messages, attempt=request.attempt + 1)


class JudgeStage:
    def __init__(self, backend, judge_log: JudgeLog, max_retries: int = 3, before_send=None):
        """``before_send``: called once, before the first request is sent (not at all when the log answers
        everything): where the runner starts the engine, so a finished run loads no model."""
        self.backend = backend
        self.log = judge_log
        self.max_retries = max_retries
        self.before_send = before_send
        self.judge = backend.identity() if hasattr(backend, "identity") else None
        self._faults: dict[str, int] = {}  # per request: its sends lost with a restarted replica, this run (rule 6)

    def run(self, requests: list[JudgeRequest]) -> dict[str, JudgeResult]:
        results: dict[str, JudgeResult] = {}
        base_hash = {r.request_id: r.prompt_hash() for r in requests}
        if len(base_hash) != len(requests):
            raise ValueError("judge request ids must be unique")
        pending = []
        for request in requests:
            done, resumed = self._from_log(request, base_hash[request.request_id])
            if done is not None:
                results[request.request_id] = done
            else:
                pending.append(resumed)
        if len(pending) < len(requests):
            log.info("judge: %d of %d requests answered in the judge log", len(requests) - len(pending), len(requests))
        if pending and self.before_send is not None:
            self.before_send()
        while pending:
            pending = self._round(pending, base_hash, results)
        return results

    def _history(self, request_id: str, prompt_hash: str) -> list[dict]:
        """This judge's earlier records of a request (same prompt), oldest first."""
        return [r for r in self.log.history(request_id, prompt_hash) if self._same_judge(r)]

    def _same_judge(self, record: dict) -> bool:
        """Whether a logged answer came from this judge. Records of logs written before judges had an
        identity match on backend and model name; ``replay`` (identity None) takes any judge's answers."""
        if self.judge is None:
            return True
        if record.get("judge") is not None:
            return record["judge"] == self.judge
        return record.get("backend") == self.backend.name and record.get("model") == self.backend.model_label

    def _from_log(self, request: JudgeRequest, prompt_hash: str) -> tuple[JudgeResult | None, JudgeRequest]:
        """A finished result from earlier records, or the request to send next (with its attempt count)."""
        history = self._history(request.request_id, prompt_hash)
        for record in history:
            if record["parse_status"] == "ok":
                parsed = parse(request.parser, record["text"], request.expected)
                if parsed.ok:
                    return JudgeResult(request.request_id, "ok", parsed.value, record["attempt"] + 1), request
        history = sorted(history, key=lambda r: r.get("attempt", 0))
        invalid = [r for r in history if r["parse_status"] == "invalid"]
        self._faults[request.request_id] = sum(1 for r in history if r.get("engine_fault"))
        if self._spent(request.request_id, len(history)) > self.max_retries:  # its budget is spent: as its last answer
            last = history[-1]
            status = "invalid" if last["parse_status"] == "invalid" else "error"
            return JudgeResult(
                request.request_id,
                status,
                self._partial(request, invalid),
                len(history),
                last.get("parse_error") or last.get("error"),
            ), request
        for record in history:  # rebuild the chain so prompts and attempt numbers continue what was sent
            if record["parse_status"] == "invalid":
                request = retry_request(request, record["parse_error"] or "invalid")
            else:
                request = replace(request, attempt=request.attempt + 1)
        return None, request

    def _round(self, pending: list[JudgeRequest], base_hash: dict, results: dict) -> list[JudgeRequest]:
        by_id = {r.request_id: r for r in pending}
        retry: list[JudgeRequest] = []
        seen: set[str] = set()
        try:
            for batch in self.backend.generate(pending):
                self._record(batch, by_id, base_hash, results, retry, seen)
        except Exception as exc:  # the engine or endpoint died mid-round: what came back is already logged
            log.error(
                "judge backend %s failed mid-run: %s; unanswered requests count a failed attempt",
                self.backend.name,
                exc,
            )
            lost = [
                JudgeResponse(r.request_id, error=f"backend failure: {type(exc).__name__}: {exc}")
                for r in pending
                if r.request_id not in seen
            ]
            self._record(lost, by_id, base_hash, results, retry, seen)
        dropped = [
            JudgeResponse(r.request_id, error="the backend returned no response")
            for r in pending
            if r.request_id not in seen
        ]
        self._record(dropped, by_id, base_hash, results, retry, seen)
        return retry

    def _record(self, batch, by_id, base_hash, results, retry, seen) -> None:
        records = []
        for response in batch:
            request = by_id[response.request_id]
            seen.add(response.request_id)
            if not response.sent:  # never sent: no attempt spent, nothing to log; this invocation gives up on it
                results[request.request_id] = JudgeResult(
                    request.request_id, "error", None, request.attempt, response.error
                )
                continue
            record, result, again = self._judge(request, response, base_hash[request.request_id])
            records.append(record)
            if again is not None:
                retry.append(again)
            else:
                results[request.request_id] = result
        self.log.append(records)

    def _judge(self, request: JudgeRequest, response: JudgeResponse, prompt_hash: str):
        """Log record, final result (or None) and the re-ask (or None) for one response."""
        record = LogRecord(
            request_id=request.request_id,
            attempt=request.attempt,
            backend=self.backend.name,
            model=response.model or self.backend.model_label,
            prompt_hash=prompt_hash,
            attempt_hash=request.prompt_hash(),
            text=response.text,
            error=response.error,
            parse_status="error",
            latency_s=response.latency_s,
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            judge=self.judge,
        )
        attempts = request.attempt + 1
        if response.engine_fault:
            record.engine_fault = True
            self._faults[request.request_id] = self._faults.get(request.request_id, 0) + 1
        can_retry = self._spent(request.request_id, attempts) <= self.max_retries
        if response.error is not None or response.text is None:
            record.parse_error = response.error or "no text"
            if can_retry:
                return record, None, replace(request, attempt=request.attempt + 1)
            partial = self._partial(request, self._history(request.request_id, prompt_hash))
            return record, JudgeResult(request.request_id, "error", partial, attempts, record.parse_error), None
        parsed = parse(request.parser, response.text, request.expected)
        record.parse_status = "ok" if parsed.ok else "invalid"
        record.parse_error, record.parse_note = parsed.error, parsed.note
        if parsed.ok:
            return record, JudgeResult(request.request_id, "ok", parsed.value, attempts), None
        if can_retry:
            return record, None, retry_request(request, parsed.error or "invalid")
        partial = self._partial(request, self._history(request.request_id, prompt_hash), parsed.value)
        return record, JudgeResult(request.request_id, "invalid", partial, attempts, parsed.error), None

    def _spent(self, request_id: str, sends: int) -> int:
        """What ``sends`` sends of a request spent of its budget: all but its first ``FREE_ENGINE_FAULTS`` sends
        lost with a restarted replica (rule 6)."""
        return sends - min(self._faults.get(request_id, 0), FREE_ENGINE_FAULTS)

    @staticmethod
    def _partial(request: JudgeRequest, records: list[dict], last: Any = None) -> Any:
        """The valid parts of a request's answers that never became valid as a whole (with
        ``score.validity=question`` a checklist answer is valid per question, so valid sibling answers are
        kept): dict values merged over the attempts in order, a later valid part replacing an earlier one,
        None never replacing anything."""
        merged: Any = None
        values = [
            parse(request.parser, r["text"], request.expected).value
            for r in records
            if r.get("parse_status") == "invalid" and r.get("text") is not None
        ]
        for value in values + [last]:
            merged = _merge(merged, value)
        return merged


def _merge(old: Any, new: Any) -> Any:
    if new is None:
        return old
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for key, value in new.items():
            out[key] = _merge(out.get(key), value)
        return out
    return new


def judge_stats(results: dict[str, JudgeResult], requests: list[JudgeRequest], judge_log: JudgeLog) -> dict:
    """Counts for summary.json: requests by final status, re-asks, and token totals from the log."""
    statuses = [results[r.request_id].status for r in requests if r.request_id in results]
    ids = {r.request_id for r in requests}
    records = [r for r in judge_log.records if r["request_id"] in ids]
    return {
        "n_requests": len(requests),
        "n_ok": statuses.count("ok"),
        "n_invalid": statuses.count("invalid"),
        "n_error": statuses.count("error"),
        "n_reasked": sum(1 for r in requests if r.request_id in results and results[r.request_id].attempts > 1),
        "n_responses_logged": len(records),
        "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in records),
        "completion_tokens": sum(r.get("completion_tokens") or 0 for r in records),
    }
