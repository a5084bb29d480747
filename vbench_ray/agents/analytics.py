"""Trajectory analytics (AgenticVBench §3.2, Figure 3): tool calls per rollout, the share of all calls that
go to the single most-used tool, turns, tokens and wall time; per model, per task family and per
(model, family), as plain dicts ready for ``summary.json`` and the report.

For a group of rollouts:

* ``tool_calls``: median, mean, total tool calls per rollout (Figure 3's X axis is the median);
* ``top_tool`` / ``top_tool_share``: the most-used tool over all the group's calls and its share of all
  calls (Figure 3's Y axis); ``tool_counts``: every tool's count;
* ``turns``, ``prompt_tokens``, ``completion_tokens``, ``wall_s``: median and mean per rollout;
* ``stop_reasons``: counts (submit, max_turns, wall_timeout, model_error, harness_error);
* ``failed_tool_calls``: calls that answered an error (malformed arguments, unknown tool, non-zero exit).
"""

from __future__ import annotations

from collections import Counter
from statistics import mean, median
from typing import Iterable


def rollout_stats(traj: dict) -> dict:
    """Per-rollout numbers from one trajectory (as written by :func:`vbench_ray.agents.loop.run_agent`)."""
    calls = [c for t in traj.get("turns", []) for c in t.get("tool_calls", [])]
    counts = Counter(c.get("name") or "<none>" for c in calls)
    top, top_n = counts.most_common(1)[0] if counts else (None, 0)
    usage = traj.get("usage") or {}
    return {
        "tool_calls": len(calls),
        "tool_counts": dict(counts),
        "top_tool": top,
        "top_tool_share": top_n / len(calls) if calls else 0.0,
        "failed_tool_calls": sum(1 for c in calls if not c.get("ok", True)),
        "turns": int(traj.get("n_turns", len(traj.get("turns", [])))),
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
        "wall_s": float(traj.get("wall_s") or 0.0),
        "stop_reason": traj.get("stop_reason"),
        "submitted": bool(traj.get("submitted")),
    }


def _dist(values: list[float]) -> dict:
    if not values:
        return {"median": None, "mean": None}
    return {"median": float(median(values)), "mean": float(mean(values))}


def group_stats(rows: list[dict]) -> dict:
    """Aggregate of :func:`rollout_stats` rows."""
    counts: Counter = Counter()
    for r in rows:
        counts.update(r["tool_counts"])
    total = sum(counts.values())
    top, top_n = counts.most_common(1)[0] if counts else (None, 0)
    return {
        "n_rollouts": len(rows),
        "tool_calls": {**_dist([r["tool_calls"] for r in rows]), "total": total},
        "top_tool": top,
        "top_tool_share": top_n / total if total else 0.0,
        "tool_counts": dict(counts.most_common()),
        "failed_tool_calls": sum(r["failed_tool_calls"] for r in rows),
        "turns": _dist([r["turns"] for r in rows]),
        "prompt_tokens": {**_dist([r["prompt_tokens"] for r in rows]), "total": sum(r["prompt_tokens"] for r in rows)},
        "completion_tokens": {
            **_dist([r["completion_tokens"] for r in rows]),
            "total": sum(r["completion_tokens"] for r in rows),
        },
        "wall_s": _dist([r["wall_s"] for r in rows]),
        "stop_reasons": dict(Counter(r["stop_reason"] for r in rows)),
        "submitted": sum(1 for r in rows if r["submitted"]),
    }


def trajectory_analytics(trajectories: Iterable[dict]) -> dict:
    """``{"overall", "by_model", "by_family", "by_model_family"}``; each trajectory needs ``label`` (or
    ``model``) and ``family``. ``by_model_family`` keys are ``"<model>/<family>"``."""
    rows = []
    for t in trajectories:
        s = rollout_stats(t)
        s["model"] = t.get("label") or t.get("model") or "?"
        s["family"] = t.get("family") or "?"
        rows.append(s)
    out: dict = {"overall": group_stats(rows), "by_model": {}, "by_family": {}, "by_model_family": {}}
    for key, pick in (
        ("by_model", lambda r: r["model"]),
        ("by_family", lambda r: r["family"]),
        ("by_model_family", lambda r: f"{r['model']}/{r['family']}"),
    ):
        groups: dict[str, list] = {}
        for r in rows:
            groups.setdefault(pick(r), []).append(r)
        out[key] = {k: group_stats(v) for k, v in sorted(groups.items())}
    return out
