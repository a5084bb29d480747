"""AgenticVBench's scores: each rollout's reward (Repurpose's from its judged rubric items), the means per task
and family, and ``summary.json``.

Spec: AgenticVBench paper §3 and App. A.4 (K repetitions per task averaged, failed rollouts scored 0, per-family
means over tasks), §2.7 (Repurpose's rubric), §3.2 (trajectory analytics).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from vbench_ray.agentic.bundle import FAMILIES, load_task
from vbench_ray.agentic.verifiers import repurpose as rp
from vbench_ray.benchmarks.base import failure_report, judge_availability
from vbench_ray.stats import describe

OUTCOMES = ("ok", "invalid", "missing", "failed")

JUDGMENT_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("variant", pa.string()),
        ("task_id", pa.string()),
        ("rep", pa.string()),
        ("item_id", pa.string()),
        ("pillar", pa.string()),
        ("weight", pa.float64()),
        ("narrative_essential", pa.bool_()),
        ("passed", pa.bool_()),
        ("why", pa.string()),
        ("status", pa.string()),
        ("contribution", pa.float64()),
        ("request_id", pa.string()),
    ]
)


def failed(row: dict) -> bool:
    return any(v for k, v in row.items() if k.startswith("error_"))


def repurpose_scores(cases: list[dict], results: dict | None, cfg, judged: list[dict] | None = None) -> dict:
    """Per Repurpose rollout that passed its gates: every rubric item with its outcome, and the score.

    Judge answers come from the judge phase's ``results`` (request id -> JudgeResult) or, when
    summarising from disk, from the ``judged`` item rows; without either, judged items count as failed.
    """
    by_item: dict[tuple, dict] = {}
    for j in judged or []:
        by_item[(j["case_id"], j["variant"], j["item_id"])] = j
    tasks: dict[str, Any] = {}
    out = {}
    for case in cases:
        if case.get("family") != "repurpose" or case.get("status") != "ok" or failed(case):
            continue
        task = tasks.get(case["task_dir"]) or tasks.setdefault(case["task_dir"], load_task(case["task_dir"]))
        fmt = json.loads(case["details"]).get("format_items", [])
        answers: dict[str, Any] = {}
        for item in rp.judged_items(task.rubric):
            if results is not None:
                res = results.get(rp.request_id(case["case_id"], case["variant"], item["id"]))
                answers[item["id"]] = (
                    res.value
                    if res is not None and res.status == "ok"
                    else (res.status if res is not None else "missing")
                )
            else:
                j = by_item.get((case["case_id"], case["variant"], item["id"]))
                if j is not None and j["status"] == "ok":
                    answers[item["id"]] = {"pass": bool(j["passed"]), "why": j["why"]}
                elif j is not None:
                    answers[item["id"]] = j["status"]
        scored = rp.score_items(fmt, task.rubric, answers, cfg.repurpose)
        out[(case["case_id"], case["variant"])] = {**scored, "task_id": case["task_id"], "rep": case["rep"]}
    return out


def rollout_rewards(rows: list[dict], judged: list[dict] | None, cfg) -> list[dict]:
    """Every rollout with its final reward and outcome (ok | invalid | missing | failed); failed and
    missing rollouts score 0 (paper §3: failed rollouts are scored as 0)."""
    repurpose = repurpose_scores(rows, None, cfg, judged)
    out = []
    for r in rows:
        if failed(r):
            outcome, reward = "failed", 0.0
        else:
            outcome = r.get("status") or "failed"
            reward = r.get("reward")
            if r.get("family") == "repurpose" and outcome == "ok":
                reward = repurpose[(r["case_id"], r["variant"])]["reward"]
            reward = 0.0 if reward is None or outcome != "ok" else float(reward)
        fmt_share = r.get("format_share") if outcome == "ok" else 0.0
        out.append(
            {
                "case_id": r["case_id"],
                "task_id": r.get("task_id") or r["case_id"].split(":")[0],
                "family": r.get("family"),
                "subtype": r.get("subtype"),
                "rep": r.get("rep"),
                "categories": r.get("categories") or [],
                "outcome": outcome,
                "reward": reward,
                "strict": int(r.get("strict") or 0) if outcome == "ok" else 0,
                "format_share": float(fmt_share or 0.0),
                "reason": r.get("reason") or next((v for k, v in r.items() if k.startswith("error_") and v), None),
            }
        )
    return out


def task_means(rollouts: list[dict]) -> dict[str, dict]:
    """Per task: the mean over its rollouts (K repetitions) of reward, strict match and Format share."""
    tasks: dict[str, dict] = {}
    for r in rollouts:
        t = tasks.setdefault(
            r["task_id"],
            {
                "family": r["family"],
                "subtype": r["subtype"],
                "categories": r["categories"],
                "rewards": {},
                "outcomes": {},
                "_strict": [],
                "_fmt": [],
            },
        )
        t["rewards"][r["rep"]] = r["reward"]
        t["outcomes"][r["rep"]] = r["outcome"]
        t["_strict"].append(r["strict"])
        t["_fmt"].append(r["format_share"])
    for t in tasks.values():
        t["mean"] = float(np.mean(list(t["rewards"].values())))
        t["strict"] = float(np.mean(t.pop("_strict")))
        t["format_share"] = float(np.mean(t.pop("_fmt")))
    return {k: v for k, v in tasks.items() if v["family"] is not None}


def analytics_table(analytics: dict) -> dict:
    """Trajectory analytics (paper §3.2) as a report table: one row overall, per model and per family."""
    groups = [("overall", analytics.get("overall"))]
    groups += [(f"model {k}", v) for k, v in (analytics.get("by_model") or {}).items()]
    groups += [(f"family {k}", v) for k, v in (analytics.get("by_family") or {}).items()]
    rows = []
    for name, g in groups:
        if not g:
            continue
        share = f"{g['top_tool']} ({100 * g['top_tool_share']:.0f}%)" if g.get("top_tool") else "–"
        rows.append(
            [
                name,
                str(g["n_rollouts"]),
                f"{g['tool_calls']['mean'] or 0:.1f}",
                share,
                f"{g['turns']['median'] or 0:.0f}",
                str(g["prompt_tokens"]["total"]),
                str(g["completion_tokens"]["total"]),
                f"{g['wall_s']['median'] or 0:.1f}",
                str(g["submitted"]),
            ]
        )
    return {
        "title": "Agent trajectories (§3.2)",
        "columns": [
            "Group",
            "Rollouts",
            "Tool calls (mean)",
            "Most-used tool",
            "Turns (median)",
            "Prompt tokens",
            "Completion tokens",
            "Wall s (median)",
            "Submitted",
        ],
        "rows": rows,
    }


def summarize(cases: pa.Table, judgments: pa.Table | None, cfg: Any, runs_llm_agent: bool) -> dict:
    """``summary.json`` of an AgenticVBench run (``benchmarks.agentic``'s docstring says what it holds);
    ``runs_llm_agent``: the LLM agent's trajectory analytics are added (paper §3.2)."""
    rows = cases.to_pylist()
    judged = judgments.to_pylist() if judgments is not None else None
    rollouts = rollout_rewards(rows, judged, cfg)
    seed, st = cfg.run.seed, cfg.stats
    tasks = task_means(rollouts)

    def stats(values):
        return describe(values, seed=seed, n_resamples=st.bootstrap_samples, confidence=st.confidence)

    summary: dict[str, Any] = {
        "benchmark": "agentic",
        "n_cases": len(tasks),
        "n_rows": len(rows),
        "n_tasks": len(tasks),
        "reps": cfg.data.reps,
        "agent": cfg.data.agent,
        "metrics": {},
        "by_category": {},
        "counts": {},
    }
    families = [f for f in FAMILIES if any(t["family"] == f for t in tasks.values())]
    for fam in families:
        members = [t for t in tasks.values() if t["family"] == fam]
        summary["metrics"][fam] = {
            **stats([t["mean"] for t in members]),
            "scale": "[0,1]",
            "higher_is_better": True,
            "n_rollouts": sum(len(t["rewards"]) for t in members),
        }
    if tasks:
        summary["metrics"]["overall"] = {
            **stats([t["mean"] for t in tasks.values()]),
            "scale": "[0,1]",
            "higher_is_better": True,
        }
    seq = [t for t in tasks.values() if t["family"] == "sequencing"]
    if seq:
        summary["metrics"]["sequencing_strict"] = {
            **stats([t["strict"] for t in seq]),
            "scale": "[0,1]",
            "higher_is_better": True,
        }
    rep_tasks = [t for t in tasks.values() if t["family"] == "repurpose"]
    if rep_tasks:
        summary["metrics"]["repurpose_format"] = {
            **stats([t["format_share"] for t in rep_tasks]),
            "scale": "[0,1]",
            "higher_is_better": True,
        }
        summary["repurpose_judged"] = bool(cfg.repurpose.judge_enabled)
        items = [j for j in judged or [] if j["status"] != "programmatic"]
        if cfg.repurpose.judge_enabled and items:  # a dead judge is not a score (base.unusable_judge)
            for m in ("repurpose", "overall"):
                if m in summary["metrics"]:
                    judge_availability(
                        summary["metrics"][m],
                        items,
                        float(cfg.judge.max_invalid_fraction),
                        what="judged rubric items",
                    )
    for t in tasks.values():
        for cat in t["categories"]:
            summary["by_category"].setdefault(cat, []).append(t["mean"])
    summary["by_category"] = {cat: {"reward": stats(v)} for cat, v in sorted(summary["by_category"].items())}
    for fam in families:
        members = [r for r in rollouts if r["family"] == fam]
        counts = {o: sum(r["outcome"] == o for r in members) for o in OUTCOMES}
        reasons: dict[str, int] = {}
        for r in members:
            if r["outcome"] in ("invalid", "missing") and r.get("reason"):
                key = str(r["reason"])[:120]
                reasons[key] = reasons.get(key, 0) + 1
        summary["counts"][fam] = {
            "tasks": len({r["task_id"] for r in members}),
            "rollouts": len(members),
            **counts,
            "reasons": dict(sorted(reasons.items(), key=lambda x: -x[1])[:10]),
        }
    summary["by_task"] = {
        tid: {k: t[k] for k in ("family", "subtype", "mean", "rewards", "outcomes")} for tid, t in sorted(tasks.items())
    }
    summary["failures"] = failure_report(rows)
    rollouts = Path(cfg.output.dir).resolve() / "agent" / "rollouts_summary.json"
    if runs_llm_agent and rollouts.exists():  # trajectory analytics (paper §3.2)
        info = json.loads(rollouts.read_text())
        summary["agent"] = {
            "model": info.get("model"),
            "label": info.get("label"),
            "harness": info.get("harness"),
            "counts": info.get("counts"),
            "analytics": info.get("analytics"),
        }
        summary.setdefault("report_tables", []).append(analytics_table(info.get("analytics") or {}))
    return summary
