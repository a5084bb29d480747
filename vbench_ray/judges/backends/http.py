"""``http``: any OpenAI-compatible chat-completions server, through ``ray.data.llm``'s HTTP processor.

``generate`` builds ``HttpRequestProcessorConfig(url=base_url + "/chat/completions", headers, qps, max_retries,
base_retry_wait_time_in_s, session_factory, concurrency, batch_size)`` and ``build_processor``; every row carries
``payload``, an OpenAI chat request body (``model``, ``messages``, ``temperature``, ``top_p``, ``max_tokens``,
``seed``, and ``top_k`` when ``judge.top_k`` is set: vLLM's OpenAI server reads it as an extra sampling field).
Ray must already be initialised.

**Per-row isolation (why the request step is replaced).** Ray 2.60's ``HttpRequestUDF`` cannot isolate a
failing request: after its retries it raises for the whole batch (which stops the dataset), a non-JSON error
body raises too, it retries 429/408/502/503/504 but not 500, it has no timeout setting (aiohttp's 5 min
default) and it sends a batch's requests one after another. The processor built by ``build_processor`` is
kept (actor pool of ``concurrency`` workers, batching, pre/postprocess), but its request UDF is replaced by a
subclass, :func:`row_isolating_http_udf`, taking the same constructor arguments, that

* sends the rows of a batch concurrently, the n-th no earlier than ``n / qps`` seconds after the first (when
  ``judge.http.qps`` is set; per worker);
* gives each request ``judge.http.timeout_s`` (``aiohttp.ClientTimeout(total=...)``, through the config's
  ``session_factory``);
* retries connection errors, timeouts, 408, 409, 425, 429 and 5xx up to ``judge.http.max_retries`` times, waiting
  ``retry_wait_s * 2**attempt`` seconds (or the server's ``Retry-After``, at most 60 s); other 4xx are not retried;
* never raises: a request that fails for good comes back with ``error`` set (``HTTP 429: <body>``, ``timeout
  after 5.0s``, ``ClientConnectorError: ...``), its neighbours are unaffected;
* returns the raw response body as a string column ``http_body`` (not Ray's ``http_response`` dict: response
  schemas vary between servers and rows, which Arrow does not always unify), parsed by the postprocess into
  ``choices[0].message.content`` and ``usage.{prompt,completion}_tokens``.

Retry wait: ``judge.http.retry_wait_s`` (default 1.0 s, Ray's ``base_retry_wait_time_in_s``).
Sampling: ``judge.http.send_sampling=false`` leaves temperature, top_p, top_k, max_tokens and seed out of the body,
for APIs that accept only their defaults (the official ViDiC judge, gpt-5-mini, is called with none).

Media: ``judge.http.media=file`` sends ``file://`` URLs as they are (a vLLM server on this machine started with
``--allowed-local-media-path``); ``base64`` inlines every local file as a ``data:video/mp4;base64,...`` URL so a
remote API sees it. Frame sampling is then the server's (for a vLLM server: ``--media-io-kwargs``), since extra
request fields would break other OpenAI-compatible APIs.

The API key is read from the variable named by ``judge.http.api_key_env`` and sent as ``Authorization: Bearer``.
It is never logged: it lives only in the request headers, error texts are scrubbed of it, and neither this
object's ``repr`` nor its log lines show it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import os
import time
from typing import Any, Iterator, Optional

from vbench_ray.judges.backends.media import (
    IDX,
    env_vars,
    inline_local_media,
    media_problem,
    opt,
    response_row,
    short,
    stream_responses,
)
from vbench_ray.judges.base import JudgeBackend, JudgeRequest, JudgeResponse

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0
MAX_BATCH = 16


def _config_error(message: str) -> Exception:
    from vbench_ray.config import ConfigError

    return ConfigError(message)


def make_session(timeout_s: float):
    """An aiohttp session whose requests each give up after ``timeout_s`` seconds (the processor's session_factory)."""
    import aiohttp

    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=float(timeout_s)))


def _retry_after(value: Optional[str]) -> Optional[float]:
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value))) if value else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


ERROR_DETAIL = 200  # characters of an error body kept (scrubbed of the key by the caller)


def error_detail(body: str) -> str:
    """What an error response says, short: the JSON ``error.message`` (or ``error`` / ``detail`` / ``message``)
    when there is one, else the start of the body. Never the whole body: a server may quote the request's
    headers in it (issue 23, item 2), and the callers scrub what is kept."""
    try:
        data = json.loads(body)
    except ValueError:
        return short(body, ERROR_DETAIL)
    if isinstance(data, dict):
        err = data.get("error")
        for value in ((err.get("message") or err.get("type")) if isinstance(err, dict) else err,
                      data.get("detail"), data.get("message")):
            if isinstance(value, str) and value:
                return short(value, ERROR_DETAIL)
    return short(body, ERROR_DETAIL)


_HTTP_UDF = None


def row_isolating_http_udf():
    """A subclass of Ray's ``HttpRequestUDF`` that answers every row, failed or not (see the module docstring)."""
    global _HTTP_UDF
    if _HTTP_UDF is not None:
        return _HTTP_UDF
    import aiohttp
    from ray.llm._internal.batch.stages.http_request_stage import HttpRequestUDF

    class RowIsolatingHttpRequestUDF(HttpRequestUDF):
        async def udf(self, batch):
            async with self.session_factory() as session:
                start = time.monotonic()

                async def paced(n: int, row: dict) -> dict:
                    if self.qps:
                        await asyncio.sleep(max(0.0, start + n / float(self.qps) - time.monotonic()))
                    return await self._send(session, row)

                tasks = [asyncio.ensure_future(paced(n, row)) for n, row in enumerate(batch)]
                for done in asyncio.as_completed(tasks):
                    yield await done

        async def _send(self, session, row: dict) -> dict:
            out = {self.IDX_IN_BATCH_COLUMN: row[self.IDX_IN_BATCH_COLUMN], "http_body": "", "http_status": -1,
                   "http_error": "", "http_latency_s": -1.0, "http_attempts": 0}
            if row.get("vbr_prep_error"):
                out["http_error"] = str(row["vbr_prep_error"])
                return out
            error = "not sent"
            for attempt in range(int(self.max_retries) + 1):
                out["http_attempts"] = attempt + 1
                wait = None
                t0 = time.monotonic()
                try:
                    body, headers = self._build_request(row["payload"])
                    async with session.post(self.url, headers=headers, data=body) as response:
                        status = response.status
                        raw = await response.read()
                        retry_after = response.headers.get("Retry-After")
                    text = raw.decode("utf-8", errors="replace")
                    out.update(http_status=status, http_latency_s=time.monotonic() - t0)
                    if 200 <= status < 300:
                        out.update(http_body=text, http_error="")
                        return out
                    error = f"HTTP {status}: {error_detail(text)}"
                    if status not in RETRY_STATUS:
                        break
                    wait = _retry_after(retry_after)
                except asyncio.TimeoutError:
                    error = f"timeout: no complete response within {session.timeout.total}s"
                except aiohttp.ClientError as exc:
                    error = f"{type(exc).__name__}: {short(str(exc), 300)}"
                except Exception as exc:  # e.g. a payload that cannot be serialised: not worth retrying
                    error = f"{type(exc).__name__}: {short(str(exc), 300)}"
                    break
                if attempt < int(self.max_retries):
                    backoff = float(self.base_retry_wait_time_in_s) * 2 ** attempt
                    await asyncio.sleep(wait if wait is not None else backoff)
            out["http_error"] = f"{error} (after {out['http_attempts']} attempt(s))"
            return out

    _HTTP_UDF = RowIsolatingHttpRequestUDF
    return _HTTP_UDF


def _message_text(content: Any) -> Optional[str]:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _postprocess(row: dict) -> dict:
    """An HTTP result row -> the flat response row: ``choices[0].message.content`` and ``usage``."""
    idx = row[IDX]
    latency = row.get("http_latency_s")
    latency = latency if latency is not None and latency >= 0 else None
    if row.get("http_error"):
        return response_row(idx, error=f"http: {row['http_error']}", latency_s=latency)
    try:
        body = json.loads(row.get("http_body") or "")
    except ValueError:
        return response_row(idx, error=f"http: response is not JSON: {short(row.get('http_body') or '', 120)}",
                            latency_s=latency)
    try:
        choice = body["choices"][0]
        text = _message_text(choice["message"].get("content"))
    except (KeyError, IndexError, TypeError, AttributeError):
        detail = body.get("error") if isinstance(body, dict) else None
        return response_row(idx, latency_s=latency, error="http: no choices[0].message in the response: "
                                                          f"{short(json.dumps(detail or body), ERROR_DETAIL)}")
    if text is None:
        return response_row(idx, error=f"http: the response has no message content "
                                       f"(finish_reason={choice.get('finish_reason')!r})", latency_s=latency)
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return response_row(idx, text=text, latency_s=latency, prompt_tokens=usage.get("prompt_tokens"),
                        completion_tokens=usage.get("completion_tokens"))


class HTTPBackend(JudgeBackend):
    name = "http"

    def __init__(self, cfg):
        super().__init__(cfg)
        h = cfg.http
        base_url = opt(h, "base_url")
        if not base_url or not str(base_url).strip():
            raise _config_error("judge.http.base_url is not set: give the server's OpenAI API root, "
                                "e.g. http://127.0.0.1:8000/v1 (judge.backend=http)")
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
        timeout = opt(h, "timeout_s")
        if timeout is None or float(timeout) <= 0:
            raise _config_error(f"judge.http.timeout_s must be > 0, got {timeout!r}")
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
                raise _config_error(f"judge.http.api_key_env names the environment variable {key_env}, "
                                    f"which is not set (or empty) in this process")
            self.__key = value
        self.key_env = key_env
        self.env = env_vars(cfg)

    def __repr__(self) -> str:
        return f"HTTPBackend(url={self.url!r}, media={self.media!r}, api_key_env={self.key_env!r})"

    @property
    def _secrets(self) -> list[str]:
        return [self.__key] if self.__key else []

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.__key}"} if self.__key else {}

    def processor_config_kwargs(self, n_requests: int) -> dict:
        """Keyword arguments of ``HttpRequestProcessorConfig`` (the key only inside ``headers``)."""
        h = self.cfg.http
        concurrency = int(h.concurrency)
        kwargs = dict(
            url=self.url,
            headers=self.headers(),
            # Ray's field is an int; the request step gets the exact float (set in _build_dataset)
            qps=None if self.qps is None else max(1, int(round(self.qps))),
            max_retries=int(h.max_retries),
            base_retry_wait_time_in_s=self.retry_wait_s,
            session_factory=functools.partial(make_session, float(h.timeout_s)),
            concurrency=concurrency,
            batch_size=max(1, min(MAX_BATCH, math.ceil(max(1, n_requests) / concurrency))),
        )
        if self.env:
            kwargs["http_request_stage"] = {"runtime_env": {"env_vars": dict(self.env)}}
        return kwargs

    def payload_base(self) -> dict:
        body = self.sampling_params() if opt(self.cfg.http, "send_sampling", True) else {}
        if self.cfg.model:
            body = {"model": str(self.cfg.model), **body}
        return body

    def _build_dataset(self, rows: list[dict]):
        import ray
        from ray.data.llm import HttpRequestProcessorConfig, build_processor

        kwargs = self.processor_config_kwargs(len(rows))
        shown = {k: v for k, v in kwargs.items() if k not in ("headers", "session_factory", "http_request_stage")}
        log.info("http judge: %d requests, processor %s, headers %s, timeout %ss, media %s", len(rows),
                 json.dumps(shown, default=str), sorted(kwargs["headers"]), self.cfg.http.timeout_s, self.media)
        config = HttpRequestProcessorConfig(**kwargs)
        base, inline = self.payload_base(), self.media == "base64"

        def preprocess(row: dict) -> dict:
            try:
                messages = json.loads(row["vbr_messages"])
                if inline:
                    messages = inline_local_media(messages)
                return {"payload": {**base, "messages": messages}, "vbr_prep_error": ""}
            except Exception as exc:  # e.g. a media file that vanished: this request fails, not the run
                return {"payload": None, "vbr_prep_error": f"preparing the request failed: {type(exc).__name__}: "
                                                           f"{short(str(exc), 300)}"}

        processor = build_processor(config, preprocess=preprocess, postprocess=_postprocess)
        stage = processor.get_stage_by_name("HttpRequestStage")
        stage.fn = row_isolating_http_udf()
        stage.fn_constructor_kwargs["qps"] = self.qps
        dataset = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows), 64)))
        return processor(dataset)

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        if not requests:
            return
        pre_failed = {}
        for i, request in enumerate(requests):
            problem = media_problem(request.messages)
            if problem:
                pre_failed[i] = f"http: {problem}"
        yield from stream_responses(requests, pre_failed, self._build_dataset, model=self.model_label,
                                    secrets=self._secrets, what="http judge")


__all__ = ["HTTPBackend", "row_isolating_http_udf", "make_session"]
