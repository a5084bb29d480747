"""``http``: any OpenAI-compatible chat-completions server, posted to from the calling process.

The one HTTP judge implementation: the run's engine (``engines.make_engine``, from the driver or a stream's judge
actor) and a backend built by name (``backends.build_backend``: agentic verify, the perf scripts) both post through
``HTTPBackend.generate``. Each request is one ``POST base_url + "/chat/completions"`` whose body is an OpenAI chat
request (``model``, ``messages``, ``temperature``, ``top_p``, ``max_tokens``, ``seed``, and ``top_k`` when
``judge.top_k`` is set: vLLM's OpenAI server reads it as an extra sampling field), ``judge.http.concurrency``
requests in flight, each answer handed over as it arrives.

Transport (per request, never raising: a request that fails for good comes back with ``error`` set, its neighbours
are unaffected):

* ``judge.http.timeout_s`` per attempt; connection errors, timeouts, a body cut short (``http.client.IncompleteRead``,
  a bad status line) and HTTP 408, 409, 425, 429 and 5xx are retried up to ``judge.http.max_retries`` times,
  waiting ``retry_wait_s * 2**attempt`` seconds or the server's ``Retry-After`` (at most 60 s); other 4xx are not;
* ``judge.http.qps``: attempts start no closer than ``1 / qps`` seconds apart (per process);
* an endpoint that accepts no connection is found before anything is computed (``probe``: a TCP connection, nothing
  sent) and, once ``DOWN_AFTER`` requests in a row ended on an attempt that could not connect, is sent nothing more
  by this process; the run then stops with its error. A request none of whose attempts connected reached no server
  (``JudgeResponse.sent`` False, as one not sent at all: no attempt of its budget spent, nothing logged), so a
  resume once the endpoint is back asks it with its whole budget, however the requests in flight when the
  endpoint went away happened to interleave.

Sampling: ``judge.http.send_sampling=false`` leaves temperature, top_p, top_k, max_tokens and seed out of the body,
for APIs that accept only their defaults (the official ViDiC judge, gpt-5-mini, is called with none).

Media: ``judge.http.media=file`` sends ``file://`` URLs as they are (a vLLM server on this machine started with
``--allowed-local-media-path``); ``base64`` inlines every local file as a ``data:video/mp4;base64,...`` URL so a
remote API sees it. Frame sampling is then the server's (for a vLLM server: ``--media-io-kwargs``), since extra
request fields would break other OpenAI-compatible APIs.

The API key is read from the variable named by ``judge.http.api_key_env`` and sent as ``Authorization: Bearer``.
It lives only in the request headers; answers and errors are scrubbed of it (``media.scrub``), and neither this
object's ``repr`` nor its log lines show it.
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Optional

from vbench_ray.judges.backends.media import IDX, inline_local_media, media_problem, opt, response_row, scrub, short
from vbench_ray.judges.base import (
    JudgeBackend,
    JudgeRequest,
    JudgeResponse,
    JudgeUnavailable,
    cfg_get,
    model_problems,
)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0
ERROR_DETAIL = 200  # characters of an error body kept (scrubbed of the key by the caller)
DOWN_AFTER = 3  # consecutive requests none of whose attempts could connect: the endpoint is down

_DOWN_LOCK = threading.Lock()
_DOWN: dict[str, dict] = {}  # per endpoint URL, in this process: consecutive unreachable requests, last error


def _config_error(message: str) -> Exception:
    from vbench_ray.config import ConfigError

    return ConfigError(message)


def _retry_after(value: Optional[str]) -> Optional[float]:
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value))) if value else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


def error_detail(body: str) -> str:
    """What an error response says, short: the JSON ``error.message`` (or ``error`` / ``detail`` / ``message``)
    when there is one, else the start of the body. Never the whole body: a server may quote the request's
    headers in it, and the callers scrub what is kept."""
    try:
        data = json.loads(body)
    except ValueError:
        return short(body, ERROR_DETAIL)
    if isinstance(data, dict):
        err = data.get("error")
        for value in (
            (err.get("message") or err.get("type")) if isinstance(err, dict) else err,
            data.get("detail"),
            data.get("message"),
        ):
            if isinstance(value, str) and value:
                return short(value, ERROR_DETAIL)
    return short(body, ERROR_DETAIL)


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


def _message_text(content: Any) -> Optional[str]:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _postprocess(row: dict) -> dict:
    """An HTTP result row (``http_body``, ``http_error``, ``http_latency_s``) -> the flat response row:
    ``choices[0].message.content`` and ``usage``. Also reads the Serve judge's answers (``engines.ServeEngine``)."""
    idx = row[IDX]
    latency = row.get("http_latency_s")
    latency = latency if latency is not None and latency >= 0 else None
    if row.get("http_error"):
        return response_row(idx, error=f"http: {row['http_error']}", latency_s=latency)
    try:
        body = json.loads(row.get("http_body") or "")
    except ValueError:
        return response_row(
            idx, error=f"http: response is not JSON: {short(row.get('http_body') or '', 120)}", latency_s=latency
        )
    try:
        choice = body["choices"][0]
        text = _message_text(choice["message"].get("content"))
    except (KeyError, IndexError, TypeError, AttributeError):
        detail = body.get("error") if isinstance(body, dict) else None
        return response_row(
            idx,
            latency_s=latency,
            error=f"http: no choices[0].message in the response: {short(json.dumps(detail or body), ERROR_DETAIL)}",
        )
    if text is None:
        return response_row(
            idx,
            error=f"http: the response has no message content (finish_reason={choice.get('finish_reason')!r})",
            latency_s=latency,
        )
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return response_row(
        idx,
        text=text,
        latency_s=latency,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
    )


class HTTPBackend(JudgeBackend):
    name = "http"

    @classmethod
    def problems(cls, node: Any, key: str) -> list[str]:
        out = model_problems(node, key, "http", "the served model name", local=False)
        if not cfg_get(node, "http.base_url"):
            out.append(
                f"`{key}.http.base_url` is not set: the http backend needs the server's URL "
                f"(e.g. http://127.0.0.1:8000/v1)"
            )
        env = cfg_get(node, "http.api_key_env")
        if env and not os.environ.get(str(env)):
            out.append(
                f"`{key}.http.api_key_env` names the environment variable {env!r}, which is not set "
                f"(export it, or leave {key}.http.api_key_env null for a server without a key)"
            )
        return out

    def __init__(self, cfg):
        super().__init__(cfg)
        h = cfg.http
        base_url = opt(h, "base_url")
        if not base_url or not str(base_url).strip():
            raise _config_error(
                "judge.http.base_url is not set: give the server's OpenAI API root, "
                "e.g. http://127.0.0.1:8000/v1 (judge.backend=http)"
            )
        base_url = str(base_url).strip()
        if not base_url.startswith(("http://", "https://")):
            raise _config_error(f"judge.http.base_url must start with http:// or https://, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        media = str(opt(h, "media", "file"))
        if media not in ("file", "base64"):
            raise _config_error(f"judge.http.media must be one of ['base64', 'file'], got {media!r}")
        self.media = media
        for key, low in (("max_retries", 0), ("concurrency", 1)):
            value = opt(h, key)
            if value is None or int(value) < low:
                raise _config_error(f"judge.http.{key} must be >= {low}, got {value!r}")
        self.max_retries, self.concurrency = int(h.max_retries), int(h.concurrency)
        timeout = opt(h, "timeout_s")
        if timeout is None or float(timeout) <= 0:
            raise _config_error(f"judge.http.timeout_s must be > 0, got {timeout!r}")
        self.timeout_s = float(timeout)
        qps = opt(h, "qps")
        if qps is not None and float(qps) <= 0:
            raise _config_error(f"judge.http.qps must be > 0 (or null for no limit), got {qps!r}")
        self.qps = None if qps is None else float(qps)
        self.retry_wait_s = float(opt(h, "retry_wait_s", 1.0))
        key_env = opt(h, "api_key_env")
        self.__key: Optional[str] = None
        if key_env:
            value = os.environ.get(str(key_env))
            if not value:
                raise _config_error(
                    f"judge.http.api_key_env names the environment variable {key_env}, "
                    f"which is not set (or empty) in this process"
                )
            self.__key = value
        self.key_env = key_env
        self._pace_lock = threading.Lock()
        self._next_slot = 0.0  # monotonic time before which no attempt starts (judge.http.qps)

    def __repr__(self) -> str:
        return f"HTTPBackend(url={self.url!r}, media={self.media!r}, api_key_env={self.key_env!r})"

    def __getstate__(self):  # a lock does not pickle; the pacing starts afresh in the receiving process
        return {k: v for k, v in self.__dict__.items() if k != "_pace_lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._pace_lock = threading.Lock()

    @property
    def _secrets(self) -> list[str]:
        return [self.__key] if self.__key else []

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.__key}"} if self.__key else {}

    def payload_base(self) -> dict:
        body = self.sampling_params() if opt(self.cfg.http, "send_sampling", True) else {}
        if self.cfg.model:
            body = {"model": str(self.cfg.model), **body}
        return body

    def probe(self) -> None:
        """Raise ``JudgeUnavailable`` when nothing accepts a connection at the endpoint: found before any case is
        computed, not after a minute of retries per case. Only a TCP connection: nothing is sent, nothing is paid."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname, port), timeout=min(10.0, self.timeout_s)):
                pass
        except OSError as exc:
            raise JudgeUnavailable(
                scrub(
                    f"the judge endpoint {self.url} cannot be reached: {type(exc).__name__}: "
                    f"{short(str(exc), 200)}. Start the server (or fix judge.http.base_url) "
                    f"and run the same command again: the run resumes",
                    self._secrets,
                )
            ) from None
        _note_reach(self.url, None)

    def _pace(self) -> None:
        """Wait for this attempt's slot: attempts start ``1 / qps`` seconds apart (no limit without qps)."""
        if self.qps is None:
            return
        with self._pace_lock:
            now = time.monotonic()
            slot = max(now, self._next_slot)
            self._next_slot = slot + 1.0 / self.qps
        time.sleep(max(0.0, slot - now))

    def _post(self, payload: dict) -> tuple[dict, bool]:
        """One request with its transport retries -> (``{http_body, http_error, http_latency_s}``, whether any
        attempt reached the server)."""
        row = {IDX: 0, "http_body": "", "http_error": "", "http_latency_s": -1.0}
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", **self.headers()}
        error, attempts, reached, connected = "not sent", 0, False, False
        for attempt in range(self.max_retries + 1):
            attempts = attempt + 1
            wait, connected = None, True  # this attempt's: False once it could not connect
            self._pace()
            t0 = time.monotonic()
            try:
                request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    reached = True
                    row.update(
                        http_body=response.read().decode("utf-8", errors="replace"),
                        http_latency_s=time.monotonic() - t0,
                    )
                    _note_reach(self.url, None)
                    return row, True
            except urllib.error.HTTPError as exc:
                reached = True
                error = f"HTTP {exc.code}: {error_detail(exc.read().decode('utf-8', errors='replace'))}"
                if exc.code not in RETRY_STATUS:
                    break
                wait = _retry_after(exc.headers.get("Retry-After"))
            except (TimeoutError, socket.timeout):
                reached = True
                error = f"timeout: no complete response within {self.timeout_s}s"
            except http.client.HTTPException as exc:  # IncompleteRead, a bad status line: the body was cut
                reached = True
                error = f"{type(exc).__name__}: the response was cut short"
            except (urllib.error.URLError, ConnectionError, OSError) as exc:
                connected = not _unreachable(exc)
                reached = reached or connected
                error = f"{type(exc).__name__}: {short(str(exc), 200)}"
            if attempt < self.max_retries and not endpoint_down(self.url):
                time.sleep(wait if wait is not None else self.retry_wait_s * 2**attempt)
            elif attempt < self.max_retries:
                break  # other requests found the endpoint down meanwhile: stop spending attempts
        # the endpoint's state is what the last attempt found: a server that closed a first attempt's connection
        # and then refused the retry is gone, and must not clear the count the other requests in flight build
        _note_reach(self.url, None if connected else error)
        row["http_error"] = f"{error} (after {attempts} attempt(s))"
        return row, reached

    def _one(self, request: JudgeRequest) -> JudgeResponse:
        secrets = self._secrets
        problem = media_problem(request.messages)
        if problem:
            return JudgeResponse(request.request_id, error=scrub(f"http: {problem}", secrets), model=self.model_label)
        down = endpoint_down(self.url)
        if down:
            return JudgeResponse(
                request.request_id,
                error=scrub(f"http: not sent: the endpoint is down ({down})", secrets),
                model=self.model_label,
                sent=False,
            )
        try:
            messages = inline_local_media(request.messages) if self.media == "base64" else request.messages
            payload = {**self.payload_base(), "messages": messages}
        except Exception as exc:  # e.g. a media file that vanished: this request fails, not the run
            return JudgeResponse(
                request.request_id,
                model=self.model_label,
                error=scrub(
                    f"http: preparing the request failed: {type(exc).__name__}: {short(str(exc), 200)}", secrets
                ),
            )
        row, reached = self._post(payload)
        out = _postprocess(row)
        error = scrub(out.get("error"), secrets)
        if not reached:  # no attempt connected: nothing reached a server, so nothing of its budget is spent
            return JudgeResponse(request.request_id, error=error, model=self.model_label, sent=False)
        text = scrub(out.get("text"), secrets) if error is None else None  # a server may echo the key
        return JudgeResponse(
            request.request_id,
            text=text,
            error=error,
            latency_s=out.get("latency_s"),
            prompt_tokens=out.get("prompt_tokens"),
            completion_tokens=out.get("completion_tokens"),
            model=self.model_label,
        )

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        """One response per request, in order, each yielded as soon as it (and those before it) are answered."""
        if not requests:
            return
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for response in pool.map(self._one, requests):
                yield [response]


__all__ = ["HTTPBackend", "DOWN_AFTER", "endpoint_down"]
