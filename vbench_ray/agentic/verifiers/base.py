"""What every AgenticVBench verifier returns, and the submission-file helpers they share."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Status of a verified rollout:
#   ok       scored by the family's formula
#   invalid  the submission exists but a hard gate fired or a deliverable is malformed: reward 0
#   missing  the primary deliverable is absent (a failed rollout, App. A / §3: scored 0 and counted)
STATUSES = ("ok", "invalid", "missing")


class InvalidSubmission(ValueError):
    """A submission that scores 0: the message is the reason recorded in ``details``."""

    def __init__(self, reason: str, status: str = "invalid", **details: Any):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.details = details


@dataclass
class Verdict:
    reward: float
    status: str = "ok"
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The ``reward.json`` payload (the official harness's ``verifier/reward.json``: ``{"reward": ...,
        "details": {...}}``)."""
        return {"reward": float(self.reward), "details": {"status": self.status, **json_safe(self.details)}}

    @classmethod
    def zero(cls, exc: InvalidSubmission, **details: Any) -> "Verdict":
        return cls(0.0, exc.status, {"reason": exc.reason, **details, **exc.details})


def json_safe(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def deliverable(submission: Path, name: str, missing_status: str = "invalid") -> Path:
    """``submission/name``, or :class:`InvalidSubmission` when it is absent."""
    path = Path(submission) / name
    if not path.is_file():
        raise InvalidSubmission(f"{name} is missing from the submission", status=missing_status)
    return path


def read_solution_json(submission: Path, missing_status: str = "missing") -> Any:
    """The parsed ``solution.json``; missing or malformed -> :class:`InvalidSubmission`."""
    path = deliverable(submission, "solution.json", missing_status)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidSubmission(f"solution.json is not valid JSON: {exc}") from exc


def clip_key(name: Any, known: dict[str, str]) -> str | None:
    """The provided clip a submitted name stands for: exact file name, or the name without extension."""
    if not isinstance(name, str):
        return None
    name = name.strip().replace("\\", "/").rsplit("/", 1)[-1]
    if name in known:
        return known[name]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return known.get(stem)


def clip_index(names: list[str]) -> dict[str, str]:
    """Lookup from file name and stem to the canonical clip name."""
    out: dict[str, str] = {}
    for n in names:
        out[n] = n
        out.setdefault(n.rsplit(".", 1)[0] if "." in n else n, n)
    return out
