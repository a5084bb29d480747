"""The ``http`` judge engine: an OpenAI-compatible endpoint posted to from the calling process (the driver, or a
stream's judge actor), ``judge.http.concurrency`` requests at a time, no Ray Data dataset per call.

Issue 30: transport retries (``judge.http.max_retries``, backoff, ``Retry-After``) as in
``vbench_ray.judges.backends.http``, a truncated body (``http.client.IncompleteRead``) included; an endpoint that
accepts no connection is found before anything is computed (``probe``) and, once ``DOWN_AFTER`` requests in a row
could not connect mid-run, is sent nothing more by this process (``JudgeResponse.sent`` False: nothing spent or
logged). The key lives only in the request headers; answers and errors are scrubbed of it (``media.scrub``).
"""

from __future__ import annotations

import errno
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

from vbench_ray.judges.base import JudgeRequest, JudgeResponse, JudgeUnavailable

DOWN_AFTER = 3  # consecutive requests none of whose attempts could connect: the endpoint is down
_DOWN_LOCK = threading.Lock()
_DOWN: dict[str, dict] = {}  # per endpoint URL, in this process: consecutive unreachable requests, last error


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says nothing listens at the endpoint (refused, no such host, no route), as opposed to a
    server that was reached and failed (timeout, reset, 5xx)."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, (ConnectionRefusedError, socket.gaierror)):
        return True
    return isinstance(reason, OSError) and reason.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)


def endpoint_down(url: str) -> str | None:
    """The endpoint's last connection error once ``DOWN_AFTER`` requests in a row could not connect, else None."""
    with _DOWN_LOCK:
        state = _DOWN.get(url) or {}
        return state.get("error") if state.get("count", 0) >= DOWN_AFTER else None


def _note_reach(url: str, error: str | None) -> None:
    """A request's outcome: ``error`` when none of its attempts could connect, None when the server was reached."""
    with _DOWN_LOCK:
        if error is None:
            _DOWN.pop(url, None)
        else:
            state = _DOWN.setdefault(url, {"count": 0})
            state["count"] += 1
            state["error"] = error


def direct_http_backend():
    """``HTTPBackend`` posting from the calling process (no Ray Data dataset per call: judge actors call it).

    Transport retries (``judge.http.max_retries``, backoff, ``Retry-After``) as in
    ``vbench_ray.judges.backends.http``; a truncated body (``http.client.IncompleteRead``) or a dropped
    connection is a transport failure, retried here, not a re-ask. Issue 30, item 2: when ``DOWN_AFTER``
    requests in a row could not connect at all, the endpoint is down: further requests of this process are
    not sent (``JudgeResponse.sent`` False: no attempt spent, nothing logged) and the run stops with the
    endpoint's error (``probe``, before the next pass sends anything)."""
    import http.client

    from vbench_ray.judges.backends import http as http_mod
    from vbench_ray.judges.backends.media import IDX, inline_local_media, media_problem, scrub, short

    class DirectHTTPBackend(http_mod.HTTPBackend):
        def probe(self) -> None:
            """Raise ``JudgeUnavailable`` when nothing accepts a connection at the endpoint (issue 23, item 10:
            found before any case is computed, not after a minute of retries per case). Only a TCP connection:
            nothing is sent, nothing is paid."""
            from urllib.parse import urlsplit

            parts = urlsplit(self.url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                with socket.create_connection((parts.hostname, port), timeout=min(10.0, float(self.cfg.http.timeout_s))):
                    pass
            except OSError as exc:
                raise JudgeUnavailable(scrub(f"the judge endpoint {self.url} cannot be reached: {type(exc).__name__}: "
                                             f"{short(str(exc), 200)}. Start the server (or fix judge.http.base_url) "
                                             f"and run the same command again: the run resumes", self._secrets)) from None
            _note_reach(self.url, None)

        def _post(self, payload: dict) -> dict:
            row = {IDX: 0, "http_body": "", "http_error": "", "http_latency_s": -1.0}
            body = json.dumps(payload).encode()
            headers = {"Content-Type": "application/json", **self.headers()}
            error, attempts, reached = "not sent", 0, False
            for attempt in range(int(self.cfg.http.max_retries) + 1):
                attempts = attempt + 1
                wait = None
                t0 = time.monotonic()
                try:
                    request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
                    with urllib.request.urlopen(request, timeout=float(self.cfg.http.timeout_s)) as response:
                        reached = True
                        row.update(http_body=response.read().decode("utf-8", errors="replace"),
                                   http_latency_s=time.monotonic() - t0)
                        _note_reach(self.url, None)
                        return row
                except urllib.error.HTTPError as exc:
                    reached = True
                    error = f"HTTP {exc.code}: {http_mod.error_detail(exc.read().decode('utf-8', errors='replace'))}"
                    if exc.code not in http_mod.RETRY_STATUS:
                        break
                    wait = http_mod._retry_after(exc.headers.get("Retry-After"))
                except (TimeoutError, socket.timeout):
                    reached = True
                    error = f"timeout: no complete response within {self.cfg.http.timeout_s}s"
                except http.client.HTTPException as exc:  # IncompleteRead, a bad status line: the body was cut
                    reached = True
                    error = f"{type(exc).__name__}: the response was cut short"
                except (urllib.error.URLError, ConnectionError, OSError) as exc:
                    reached = reached or not _unreachable(exc)
                    error = f"{type(exc).__name__}: {short(str(exc), 200)}"
                if attempt < int(self.cfg.http.max_retries) and not endpoint_down(self.url):
                    time.sleep(wait if wait is not None else self.retry_wait_s * 2 ** attempt)
                elif attempt < int(self.cfg.http.max_retries):
                    break  # other requests found the endpoint down meanwhile: stop spending attempts
            _note_reach(self.url, None if reached else error)
            row["http_error"] = f"{error} (after {attempts} attempt(s))"
            return row

        def _one(self, request: JudgeRequest) -> JudgeResponse:
            secrets = self._secrets
            problem = media_problem(request.messages)
            if problem:
                return JudgeResponse(request.request_id, error=scrub(f"http: {problem}", secrets), model=self.model_label)
            down = endpoint_down(self.url)
            if down:
                return JudgeResponse(request.request_id, error=scrub(f"http: not sent: the endpoint is down ({down})",
                                                                     secrets), model=self.model_label, sent=False)
            try:
                messages = inline_local_media(request.messages) if self.media == "base64" else request.messages
                payload = {**self.payload_base(), "messages": messages}
            except Exception as exc:  # e.g. a media file that vanished: this request fails, not the run
                return JudgeResponse(request.request_id, model=self.model_label, error=scrub(
                    f"http: preparing the request failed: {type(exc).__name__}: {short(str(exc), 200)}", secrets))
            out = http_mod._postprocess(self._post(payload))
            error = scrub(out.get("error"), secrets)
            text = scrub(out.get("text"), secrets) if error is None else None  # a server may echo the key
            return JudgeResponse(request.request_id, text=text, error=error,
                                 latency_s=out.get("latency_s"), prompt_tokens=out.get("prompt_tokens"),
                                 completion_tokens=out.get("completion_tokens"), model=self.model_label)

        def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
            if not requests:
                return
            with ThreadPoolExecutor(max_workers=max(1, int(self.cfg.http.concurrency))) as pool:
                for response in pool.map(self._one, requests):
                    yield [response]

    return DirectHTTPBackend
