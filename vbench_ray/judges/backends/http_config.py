"""``judge.http``: the settings of the ``http`` backend (``backends/http.py``).

A light module (dataclasses and ``vbench_ray.config`` only): every config build reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from vbench_ray.config import bounded


@dataclass
class HTTPJudgeConfig:
    base_url: Optional[str] = None  # e.g. http://127.0.0.1:8000/v1 (the /chat/completions path is added)
    api_key_env: Optional[str] = None  # name of the environment variable holding the API key (never logged)
    qps: Optional[float] = bounded(None, gt=0, note="null: no limit")  # request rate limit per worker
    # transport retries (5xx, 429, timeouts) with backoff, before the judge's own retries
    max_retries: int = bounded(3, ge=0)
    retry_wait_s: float = bounded(1.0, ge=0)  # first backoff wait; doubles per retry (a server's Retry-After wins)
    send_sampling: bool = True  # false: send no temperature/top_p/max_tokens/seed (APIs that reject them)
    timeout_s: float = bounded(600.0, gt=0)
    concurrency: int = bounded(4, ge=1)  # parallel HTTP workers
    media: str = "file"  # how videos reach the server: file (file:// URL, server on this machine) | base64

    # allowed values of string keys, checked when the config is loaded (``judges.base.judge_choices``)
    CHOICES = {"media": ("file", "base64")}
    # the keys that change the answers, compared by `vbench-ray compare` (``compare_base.backend_options``): without
    # send_sampling the server's own defaults decode (its temperature, its max_tokens); the address, the key, rates,
    # retries, timeouts, workers and how videos travel (the same bytes either way) do not
    SCORING_KEYS = ("send_sampling",)
