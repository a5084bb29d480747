"""Helpers shared by the ``vllm`` and ``http`` judge backends.

Two kinds of helper live here:

* **media**: finding the media parts of OpenAI-style messages (``video_url`` / ``image_url`` content parts),
  turning ``file://`` URLs into paths, checking that the files exist, the common root of all media paths
  (vLLM's ``allowed_local_media_path``), counting media per request (``limit_mm_per_prompt``), and inlining
  local files as base64 ``data:`` URLs so that a remote API can see them (``judge.http.media=base64``).
* **plumbing**: reading the (OmegaConf) judge config, keeping secrets out of error text, and the loop that
  runs a ``ray.data.llm`` processor over the requests and streams back exactly one
  :class:`~vbench_ray.judges.base.JudgeResponse` per request, whatever fails (:func:`stream_responses`).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import logging
import mimetypes
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional
from urllib.parse import quote, quote_plus, unquote, urlparse

from vbench_ray.cfgutil import plain as to_plain
from vbench_ray.judges.base import JudgeRequest, JudgeResponse

log = logging.getLogger(__name__)

MEDIA_PART_TYPES = {"video_url": "video", "image_url": "image"}
IDX = "vbr_idx"  # the dataset column that maps a row back to its request (an int: never clashes with Ray's columns)
ERROR_SNIPPET = 500  # longest error text kept on a response


# ----------------------------------------------------------------------------------------------------------------
# config access
# ----------------------------------------------------------------------------------------------------------------


def opt(node: Any, key: str, default: Any = None) -> Any:
    """``node.key`` if the config has that key (and it is not None), else ``default`` (struct configs raise)."""
    try:
        value = getattr(node, key)
    except Exception:  # AttributeError, omegaconf's ConfigAttributeError / ConfigKeyError
        return default
    return default if value is None else value


def env_vars(cfg: Any) -> dict[str, str]:
    """``judge.env_vars`` as a dict of strings (Ray's ``runtime_env`` wants strings)."""
    raw = to_plain(opt(cfg, "env_vars", {})) or {}
    return {str(k): str(v) for k, v in raw.items() if v is not None}


MIN_FRAGMENT = 8  # a run of this many characters of a secret (or more) is redacted wherever it appears


def scrub(text: Optional[str], secrets: Iterable[str]) -> Optional[str]:
    """``text`` with every secret replaced by ``***`` (an API key must never reach a log or an error).

    Servers echo keys in other shapes than the one sent: upper-cased, masked to their last characters
    (``...a1b2c3d4e5f6``), cut in the middle, or encoded (a header echoed base64-encoded,
    hex, URL-encoded; a key named by its ends, ``sk-AbC...StUv``). So every encoded form of a secret
    (``secret_forms``) is redacted like the secret, matching ignores case, every run of 8 or more characters
    that occurs in a form is redacted, not only the whole of it, and a prefix and a suffix of the secret
    joined by a mask (``...``, ``…``, ``***``) are redacted together. A secret shorter than 8 characters is
    redacted only whole (ignoring case): its fragments would match ordinary words.
    """
    if text is None:
        return None
    for secret in secrets:
        if secret:
            if len(str(secret)) >= MIN_FRAGMENT:  # first: a fragment redacted alone would break the pattern
                ends, tail = _masked_ends(str(secret))
                text = tail.sub(r"\1***", ends.sub("***", text))
            for form in secret_forms(str(secret)):
                text = _redact_one(text, form)
    return text


@functools.lru_cache(maxsize=16)
def secret_forms(secret: str) -> tuple[str, ...]:
    """The secret and the forms a server may echo it in: hex; URL-encoding; base64 and base64url at each of the
    three byte offsets it may sit at inside an encoded header (``Authorization: Bearer <key>`` encoded whole),
    each cut to the characters that come from the secret's bytes alone."""
    raw = secret.encode("utf-8")
    forms = [secret, raw.hex(), quote(secret, safe=""), quote_plus(secret, safe="")]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        first, end = -(-8 * offset // 6), (8 * (offset + len(raw))) // 6  # chars made of the secret's bits only
        stable = encoded[first:end]
        forms += [stable, stable.replace("+", "-").replace("/", "_")]
    return tuple(dict.fromkeys(f for f in forms if f))


MASK = r"(?:\.{2,}|…+|\*{2,}|•+|x{4,})"  # how APIs hide the middle of a key they name


@functools.lru_cache(maxsize=16)
def _masked_ends(secret: str) -> tuple["re.Pattern[str]", "re.Pattern[str]"]:
    """A prefix (3+ characters) and a suffix (2+) of ``secret`` around a mask; a mask and a suffix of 4+ (the
    mask kept)."""
    low = secret.lower()
    prefixes = "|".join(re.escape(low[:k]) for k in range(len(low), 2, -1))
    suffixes = "|".join(re.escape(low[-k:]) for k in range(len(low), 1, -1))
    long_suffixes = "|".join(re.escape(low[-k:]) for k in range(len(low), 3, -1))
    return (
        re.compile(rf"(?:{prefixes})\s*{MASK}\s*(?:{suffixes})", re.IGNORECASE),
        re.compile(rf"({MASK}\s*)(?:{long_suffixes})", re.IGNORECASE),
    )


def _redact_one(text: str, secret: str) -> str:
    # lower-case character by character so that indices in `low` are indices in `text`
    low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    key = secret.lower()
    n = min(MIN_FRAGMENT, len(key))
    grams = {key[i : i + n] for i in range(len(key) - n + 1)}
    spans: list[list[int]] = []
    for i in range(len(low) - n + 1):
        if low[i : i + n] in grams:
            if spans and i <= spans[-1][1]:
                spans[-1][1] = i + n  # overlapping or touching windows: one longer fragment
            else:
                spans.append([i, i + n])
    if not spans:
        return text
    out, pos = [], 0
    for start, end in spans:
        out += [text[pos:start], "***"]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def short(text: str, limit: int = ERROR_SNIPPET) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------------------------
# media parts
# ----------------------------------------------------------------------------------------------------------------


def media_parts(messages: list[dict]) -> Iterator[tuple[str, dict]]:
    """``(kind, part)`` for every ``video_url`` / ``image_url`` content part (kind: ``video`` / ``image``)."""
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") in MEDIA_PART_TYPES:
                yield MEDIA_PART_TYPES[part["type"]], part


def part_url(part: dict) -> str:
    inner = part.get(part.get("type"))
    if isinstance(inner, dict):
        return str(inner.get("url") or "")
    return str(inner or "")


def file_url_path(url: str) -> Optional[Path]:
    """The local path of a ``file://`` URL (percent-decoded), or None for any other URL."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    if parsed.netloc not in ("", "localhost"):
        raise ValueError(f"file URL with a host is not a local file: {url}")
    return Path(unquote(parsed.path))


def media_counts(messages: list[dict]) -> dict[str, int]:
    counts = {"video": 0, "image": 0}
    for kind, _ in media_parts(messages):
        counts[kind] += 1
    return counts


def local_media_paths(messages: list[dict]) -> list[Path]:
    paths = []
    for _, part in media_parts(messages):
        path = file_url_path(part_url(part))
        if path is not None:
            paths.append(path)
    return paths


def media_problem(messages: list[dict]) -> Optional[str]:
    """Why this request's media cannot be sent (missing or unreadable local file, bad URL), or None."""
    for kind, part in media_parts(messages):
        url = part_url(part)
        if not url:
            return f"{kind} part without a URL"
        try:
            path = file_url_path(url)
        except ValueError as exc:
            return str(exc)
        if path is None:
            continue  # http(s) / data URLs are the server's business
        if not path.is_absolute():
            return f"{kind} file URL is not absolute: {url}"
        if not path.is_file():
            return f"{kind} file not found: {path}"
        if not os.access(path, os.R_OK):
            return f"{kind} file not readable: {path}"
    return None


def common_media_root(paths: Iterable[Path]) -> Optional[str]:
    """The deepest directory holding every path (vLLM's ``allowed_local_media_path``), or None if no paths."""
    dirs = {str(Path(p).resolve().parent) for p in paths}
    if not dirs:
        return None
    return os.path.commonpath(sorted(dirs))


def data_url(path: Path, kind: str) -> str:
    """``data:<mime>;base64,...`` for a local file (mime from the suffix; mp4 / png when unknown)."""
    mime, _ = mimetypes.guess_type(str(path))
    if not mime or not mime.startswith(kind + "/"):
        mime = "video/mp4" if kind == "video" else "image/png"
    return f"data:{mime};base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def inline_local_media(messages: list[dict]) -> list[dict]:
    """A copy of ``messages`` whose ``file://`` media URLs are replaced by base64 data URLs."""
    messages = copy.deepcopy(messages)
    for kind, part in media_parts(messages):
        path = file_url_path(part_url(part))
        if path is None:
            continue
        inner = part.get(part["type"])
        url = data_url(path, kind)
        if isinstance(inner, dict):
            inner["url"] = url
        else:
            part[part["type"]] = {"url": url}
    return messages


# ----------------------------------------------------------------------------------------------------------------
# running a ray.data.llm processor
# ----------------------------------------------------------------------------------------------------------------

RESPONSE_COLUMNS = (IDX, "text", "error", "latency_s", "prompt_tokens", "completion_tokens")


def response_row(idx: int, text=None, error=None, latency_s=None, prompt_tokens=None, completion_tokens=None) -> dict:
    """The flat, fixed-schema row that leaves a backend's pipeline (one per request)."""
    return {
        IDX: int(idx),
        "text": None if text is None else str(text),
        "error": None if error is None else str(error),
        "latency_s": None if latency_s is None else float(latency_s),
        "prompt_tokens": None if prompt_tokens is None else int(prompt_tokens),
        "completion_tokens": None if completion_tokens is None else int(completion_tokens),
    }


def is_response_row(row: dict) -> bool:
    return set(row) == set(RESPONSE_COLUMNS)


def request_rows(requests: list[JudgeRequest]) -> list[dict]:
    """Dataset rows: the request index and its messages as JSON (a fixed two-column schema for Arrow)."""
    return [{IDX: i, "vbr_messages": json.dumps(r.messages, ensure_ascii=False)} for i, r in enumerate(requests)]


def stream_responses(
    requests: list[JudgeRequest],
    pre_failed: dict[int, str],
    build_dataset: Callable[[list[dict]], Any],
    model: str,
    secrets: Iterable[str] = (),
    what: str = "judge",
) -> Iterator[list[JudgeResponse]]:
    """Run ``build_dataset(rows)`` (a Ray dataset of :func:`response_row` rows) and stream the responses.

    ``pre_failed`` maps request indices to an error found before sending (missing media...): those come
    back first, without being sent. Every other request comes back exactly once: from the dataset, or, if
    the pipeline raises or loses rows, as a response with ``error`` set. Never raises (but for
    ``KeyboardInterrupt`` and ``SystemExit``).
    """
    secrets = [s for s in secrets if s]
    if pre_failed:
        yield [
            JudgeResponse(requests[i].request_id, error=scrub(msg, secrets), model=model)
            for i, msg in sorted(pre_failed.items())
        ]
    todo = [i for i in range(len(requests)) if i not in pre_failed]
    if not todo:
        return
    rows = [row for row in request_rows(requests) if row[IDX] in set(todo)]
    seen: set[int] = set()
    failure = None
    try:
        dataset = build_dataset(rows)
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            out = []
            for row in batch.to_pylist():
                idx = row.get(IDX)
                if idx is None or idx in seen or idx not in range(len(requests)):
                    continue
                seen.add(idx)
                error = scrub(row.get("error"), secrets)
                text = scrub(row.get("text"), secrets) if error is None else None  # a server may echo the key
                out.append(
                    JudgeResponse(
                        requests[idx].request_id,
                        text=text,
                        error=error,
                        latency_s=row.get("latency_s"),
                        prompt_tokens=row.get("prompt_tokens"),
                        completion_tokens=row.get("completion_tokens"),
                        model=model,
                    )
                )
            if out:
                yield out
    except Exception as exc:  # a dead engine, a failed block...: the requests not answered yet come back failed
        failure = scrub(f"{what} pipeline failed: {type(exc).__name__}: {short(str(exc))}", secrets)
        log.error("%s (%d of %d requests unanswered)", failure, len(set(todo) - seen), len(todo))
    missing = [i for i in todo if i not in seen]
    if missing:
        reason = failure or f"{what} pipeline returned no row for this request"
        yield [JudgeResponse(requests[i].request_id, error=reason, model=model) for i in missing]
