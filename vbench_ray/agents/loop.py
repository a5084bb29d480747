"""The agent loop: an OpenAI-compatible chat-completions tool-calling loop over one task's sandbox.

``POST {base_url}/chat/completions`` with ``model``, ``messages``, ``tools`` (:data:`tools.TOOL_SCHEMAS`),
``tool_choice`` and only the sampling fields that are configured (App. A.3: provider defaults unless set).
The same client conventions as the ``http`` judge backend: ``base_url`` ends in ``/v1``; the API key is read
from the environment variable named by ``api_key_env`` and sent as ``Authorization: Bearer``; it is never
logged, never stored in a trajectory, and scrubbed from error texts. Plain ``urllib`` (no SDK).

One **turn** is one model call. The assistant's tool calls are run in order; each answer goes back as a
``tool`` message; images from ``view_frames`` follow as one ``user`` message of ``image_url`` parts (data
URLs), since not every server accepts images inside tool messages. A turn without tool calls gets a short
reminder. Malformed tool calls (arguments that are not JSON, unknown tools) are answered with an error and
the loop goes on. The loop ends at ``submit``, at ``max_turns`` (200), when ``wall_s`` (1800 s) is spent, or
when the server fails for good (after ``max_retries``); every ending is recorded as ``stop_reason``.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from vbench_ray.agents.sandbox import SandboxLimits
from vbench_ray.agents.tools import TOOL_SCHEMAS, Tools, truncate
from vbench_ray.config import bounded
from vbench_ray.judges.backends.media import scrub

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0

SYSTEM_PROMPT = """You are a video post-production agent working in a Linux sandbox.
Your working directory is /sandbox. The task's inputs are in /sandbox/inputs (read-only) and the task's
instruction is in /sandbox/instruction.md. Write every deliverable into /sandbox/outputs/ using the exact file
names the instruction asks for ("your output folder" is /sandbox/outputs). Tools: `shell` (bash with ffmpeg and
ffprobe; no network), `view_frames` (see frames of a video), `read_file`, `write_file`, and `submit` (call it
once, when the deliverables are written). You have at most {max_turns} turns and {wall_s:.0f} seconds."""


@dataclass
class AgentConfig:
    """One (model, harness settings) cell. Defaults are the paper's held-constant settings (App. A.3)."""

    base_url: str = "http://127.0.0.1:8000/v1"  # OpenAI-compatible endpoint (vLLM `.../v1`, an API's base URL)
    model: Optional[str] = None  # the served model name sent as `model` (required for rollouts)
    api_key_env: Optional[str] = None  # name of the env var holding the API key (never the key itself)
    name: Optional[str] = None  # label in trajectories and analytics (default: model)
    harness: str = "vbench-ray"  # harness label for analytics (paper §3.3 compares harnesses)
    max_turns: int = bounded(200, ge=1)  # App. A.3: max agent iterations
    wall_s: float = bounded(1800.0, gt=0)  # App. A.3: per-task wall-clock timeout
    temperature: Optional[float] = bounded(None, ge=0)  # None: provider default (App. A.3: no override)
    top_p: Optional[float] = bounded(None, gt=0, le=1)
    max_tokens: Optional[int] = bounded(None, ge=1)
    seed: Optional[int] = None
    extra_body: dict = field(default_factory=dict)  # more request fields, e.g. {"reasoning_effort": "high"}
    tool_choice: Optional[str] = "auto"  # None: field left out of the request
    request_timeout_s: float = 300.0  # per model call (App. A.3: openclaw's idle timeout, 300 s)
    max_retries: int = 3  # per model call: connection errors, timeouts, 408/409/425/429/5xx
    retry_wait_s: float = 2.0  # backoff base (x 2**attempt, or the server's Retry-After)
    tool_timeout_s: float = 600.0  # per tool call (also capped by the time left)
    max_output_chars: int = 16000  # shell stdout+stderr returned to the model (head + tail)
    max_images: int = 8  # separate frames per view_frames call
    frame_width: int = 320  # default frame width for view_frames
    system_prompt: Optional[str] = None  # None: SYSTEM_PROMPT; may use {max_turns} and {wall_s}
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    keep_sandbox: bool = False  # keep rollouts/<task>/<rep>/sandbox after the rollout
    ray_num_cpus: float = 1.0  # Ray resource request per rollout (the loop waits on the model)
    ray_memory_mb: Optional[int] = None  # Ray memory request per rollout (paper: 8 GB sandboxes)

    @property
    def label(self) -> str:
        return self.name or self.model

    def public(self) -> dict:
        """The config as stored in trajectories (the key's variable name, never its value)."""
        return asdict(self)


class ModelError(RuntimeError):
    pass


class Secret:
    """A value that never shows in ``repr``/``str`` (logs, Ray task names, tracebacks)."""

    def __init__(self, value: str):
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


def read_key(cfg: AgentConfig) -> Optional[Secret]:
    """The API key from ``cfg.api_key_env`` in this process (the Ray driver), or None."""
    value = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
    return Secret(value) if value else None


class ChatClient:
    """A minimal OpenAI-compatible chat-completions client (urllib). The key lives only in the headers.

    ``api_key``: a :class:`Secret` read by the driver (Ray workers do not see the driver's environment);
    without it the variable ``cfg.api_key_env`` is read here."""

    def __init__(self, cfg: AgentConfig, api_key: Optional[Secret] = None):
        self.cfg = cfg
        self.url = cfg.base_url.rstrip("/") + "/chat/completions"
        self._key = (
            api_key.get() if api_key is not None else (os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else "")
        )
        if cfg.api_key_env and not self._key:
            log.warning("agent: environment variable %s is not set; sending no API key", cfg.api_key_env)

    def __repr__(self) -> str:
        return f"ChatClient(url={self.url!r}, model={self.cfg.model!r}, api_key_env={self.cfg.api_key_env!r})"

    def scrub(self, text: str) -> str:
        """``text`` without the key, in any case and any 8+ character piece of it (see ``media.scrub``)."""
        return scrub(text, [self._key]) or ""

    def body(self, messages: list[dict]) -> dict:
        cfg = self.cfg
        body: dict[str, Any] = {"model": cfg.model, "messages": messages, "tools": TOOL_SCHEMAS}
        if cfg.tool_choice is not None:
            body["tool_choice"] = cfg.tool_choice
        for key in ("temperature", "top_p", "max_tokens", "seed"):
            if getattr(cfg, key) is not None:
                body[key] = getattr(cfg, key)
        body.update(cfg.extra_body or {})
        return body

    def complete(self, messages: list[dict], deadline: float) -> tuple[dict, dict]:
        """``(response JSON, call info)``; raises :class:`ModelError` after the retries or at the deadline."""
        data = json.dumps(self.body(messages)).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        attempts, last = 0, ""
        t0 = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ModelError(f"wall-clock budget spent waiting for the model ({last or 'no answer'})")
            attempts += 1
            wait = None
            try:
                req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=max(0.5, min(self.cfg.request_timeout_s, remaining))) as r:
                    payload = json.loads(r.read().decode("utf-8", "replace"))
                return payload, {"attempts": attempts, "latency_s": round(time.monotonic() - t0, 3)}
            except urllib.error.HTTPError as exc:
                body = exc.read().decode("utf-8", "replace") if exc.fp else ""
                last = self.scrub(f"HTTP {exc.code}: {truncate(body, 600)}")
                if exc.code not in RETRY_STATUS:
                    raise ModelError(last) from None
                try:
                    wait = min(MAX_RETRY_AFTER_S, float(exc.headers.get("Retry-After", "")))
                except (TypeError, ValueError):
                    wait = None
            except json.JSONDecodeError as exc:
                last = f"response is not JSON: {exc}"
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                last = self.scrub(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}")
            if attempts > self.cfg.max_retries:
                raise ModelError(f"{last} (after {attempts} attempt(s))")
            time.sleep(
                max(
                    0.0,
                    min(
                        wait if wait is not None else self.cfg.retry_wait_s * 2 ** (attempts - 1),
                        deadline - time.monotonic(),
                    ),
                )
            )


def _strip_images(messages: list[dict]) -> list[dict]:
    """Messages for the trajectory file: data URLs replaced by a short placeholder."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for p in content:
                if p.get("type") == "image_url":
                    url = p.get("image_url", {}).get("url", "")
                    parts.append({"type": "image_url", "image_url": {"url": f"<{url[:23]}... {len(url)} chars>"}})
                else:
                    parts.append(p)
            m = {**m, "content": parts}
        out.append(m)
    return out


def run_agent(
    instruction: str, tools: Tools, cfg: AgentConfig, client: ChatClient | None = None, api_key: Optional[Secret] = None
) -> dict:
    """Run the loop on one sandboxed task; return the trajectory (JSON-ready)."""
    client = client or ChatClient(cfg, api_key)
    t0 = time.monotonic()
    started = time.time()
    deadline = t0 + float(cfg.wall_s)
    system = (cfg.system_prompt or SYSTEM_PROMPT).format(max_turns=cfg.max_turns, wall_s=float(cfg.wall_s))
    messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": instruction}]
    turns: list[dict] = []
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    stop_reason, error = "max_turns", None
    submitted = False
    for turn in range(int(cfg.max_turns)):
        if time.monotonic() >= deadline:
            stop_reason = "wall_timeout"
            break
        record: dict[str, Any] = {"turn": turn, "t_start_s": round(time.monotonic() - t0, 3), "tool_calls": []}
        try:
            response, info = client.complete(messages, deadline)
        except ModelError as exc:
            record["error"] = error = str(exc)
            turns.append(record)
            stop_reason = "wall_timeout" if time.monotonic() >= deadline else "model_error"
            break
        record.update(info)
        u = response.get("usage") or {}
        record["prompt_tokens"] = int(u.get("prompt_tokens") or 0)
        record["completion_tokens"] = int(u.get("completion_tokens") or 0)
        usage["prompt_tokens"] += record["prompt_tokens"]
        usage["completion_tokens"] += record["completion_tokens"]
        choices = response.get("choices") or []
        msg = (choices[0].get("message") if choices and isinstance(choices[0], dict) else None) or {}
        record["finish_reason"] = choices[0].get("finish_reason") if choices and isinstance(choices[0], dict) else None
        content = msg.get("content")
        raw_calls = msg.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raw_calls = []
        calls = []
        for i, c in enumerate(raw_calls):
            c = c if isinstance(c, dict) else {}
            fn = c.get("function") if isinstance(c.get("function"), dict) else {}
            calls.append(
                {
                    "id": str(c.get("id") or f"call_{turn}_{i}_{uuid.uuid4().hex[:6]}"),
                    "type": "function",
                    "function": {
                        "name": str(fn.get("name") or ""),
                        "arguments": fn.get("arguments")
                        if isinstance(fn.get("arguments"), str)
                        else json.dumps(fn.get("arguments") or {}),
                    },
                }
            )
        assistant: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else ""}
        if calls:
            assistant["tool_calls"] = calls
        messages.append(assistant)
        record["content_chars"] = len(content) if isinstance(content, str) else 0
        images: list[tuple[str, str]] = []
        for call in calls:
            name = call["function"]["name"]
            c0 = time.monotonic()
            result = tools.call(name, call["function"]["arguments"], remaining_s=deadline - time.monotonic())
            record["tool_calls"].append(
                {
                    "id": call["id"],
                    "name": name,
                    "arguments": call["function"]["arguments"],
                    "ok": result.ok,
                    "wall_s": round(time.monotonic() - c0, 3),
                    "result": truncate(result.text, 2000),
                    **result.info,
                }
            )
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.text})
            images += [(call["id"], url) for url in result.images]
            if result.submit:
                submitted = True
                break  # calls after submit are not run
        if images:
            parts: list[dict] = [
                {
                    "type": "text",
                    "text": f"Images returned by view_frames ({', '.join(sorted({cid for cid, _ in images}))}):",
                }
            ]
            parts += [{"type": "image_url", "image_url": {"url": url}} for _, url in images]
            messages.append({"role": "user", "content": parts})
        if not calls:
            messages.append(
                {
                    "role": "user",
                    "content": "Continue: use the tools to do the task, and call `submit` "
                    "when the deliverables are in /sandbox/outputs.",
                }
            )
        record["wall_s"] = round(time.monotonic() - t0 - record["t_start_s"], 3)
        turns.append(record)
        if submitted:
            stop_reason = "submit"
            break
    else:
        stop_reason = "max_turns"
    wall = time.monotonic() - t0
    if stop_reason == "max_turns" and wall >= cfg.wall_s:
        stop_reason = "wall_timeout"
    return {
        "model": cfg.model,
        "label": cfg.label,
        "harness": cfg.harness,
        "stop_reason": stop_reason,
        "submitted": submitted,
        "error": error,
        "n_turns": len(turns),
        "turns": turns,
        "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]},
        "started_at": started,
        "wall_s": round(wall, 3),
        "messages": _strip_images(messages),
        "config": cfg.public(),
    }
