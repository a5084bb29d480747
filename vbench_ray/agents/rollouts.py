"""K rollouts of an agent over every task, as Ray tasks; deliverables verified by the AgenticVBench verifiers.

``run_rollouts(tasks_dir, out_dir, agent_cfg, k=3)`` writes::

    OUT/
      submissions/<task_id>/<rep>/     the deliverables found in /sandbox/outputs (docs/agentic_bundle.md),
                                       and reward.json written by vbench_ray.agentic.verify.verify_cli
      trajectories/<task_id>/<rep>.json   messages (images elided), tool calls, timings, token counts, outcome
      sandboxes/<task_id>/<rep>/       the rollout's sandbox (removed afterwards unless keep_sandbox)
      rollouts_summary.json            scores per task / family, outcome counts, trajectory analytics

Each ``(task, rep)`` is one Ray task (``num_cpus=agent_cfg.ray_num_cpus``, ``memory`` from
``ray_memory_mb``) that builds the sandbox from the task's ``inputs/`` and ``instruction.md`` only, runs the
loop, copies the deliverables, verifies them and writes the trajectory last (atomically). **Resumable:** a
pair whose trajectory is marked done is not run again (its reward is re-verified only if ``reward.json`` is
missing). A rollout that delivers nothing is verified like any other (status ``missing``, reward 0) and
counted; a rollout whose harness crashed is ``failed``, reward 0, counted, and re-run by the next call.

Repurpose rubric items other than the Format pillar need a judge: here they count as failed
(``details.rubric_judged=false``); score the ``submissions/`` folder with the ``agentic`` benchmark
(``data.submissions_dir``) to judge them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Optional

from vbench_ray.agentic.bundle import DELIVERABLES, INPUTS, BundleError, list_tasks, load_task
from vbench_ray.agents.analytics import trajectory_analytics
from vbench_ray.agents.loop import AgentConfig, Secret, read_key, run_agent
from vbench_ray.agents.sandbox import Sandbox
from vbench_ray.agents.tools import Tools
from vbench_ray.safepaths import safe_id, within

log = logging.getLogger(__name__)

SUMMARY = "rollouts_summary.json"


def _write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def rollout_paths(out: Path, task_id: str, rep: str) -> dict[str, Path]:
    """The submission folder, trajectory file and sandbox root of one rollout, all checked to lie inside
    ``out``: the ids come from task bundles (data), and these folders are emptied and deleted."""
    tid, rep = safe_id(task_id, "task_id"), safe_id(rep, "rep")
    return {
        "sub": within(out, "submissions", tid, rep),
        "traj": within(out, "trajectories", tid, f"{rep}.json"),
        "box": within(out, "sandboxes", tid, rep),
    }


def _verify(task_dir: Path, sub: Path, settings: Any) -> dict:
    from vbench_ray.agentic.verify import verify_cli

    try:
        payload = verify_cli(task_dir, sub, settings=settings)
        return {
            "reward": float(payload["reward"]),
            "status": payload["details"].get("status", "ok"),
            "reason": payload["details"].get("reason"),
        }
    except Exception as exc:  # noqa: BLE001 - a verifier crash scores 0 and is listed
        log.exception("verification of %s failed", sub)
        return {"reward": 0.0, "status": "failed", "reason": f"verification raised {type(exc).__name__}: {exc}"}


def rollout_one(
    task_dir: str,
    rep: str,
    out_dir: str,
    cfg: AgentConfig,
    settings: Any = None,
    verify_only: bool = False,
    api_key: Optional[Secret] = None,
) -> dict:
    """One rollout end to end (the body of the Ray task). Returns the trajectory's outcome record."""
    task_dir_p, out = Path(task_dir), Path(out_dir)
    task = load_task(task_dir_p, with_truth=False)  # the agent side never loads the truth (validates task_id)
    paths = rollout_paths(out, task.task_id, rep)  # checked again here: this is where folders get deleted
    sub, traj_path = paths["sub"], paths["traj"]
    if verify_only:
        traj = json.loads(traj_path.read_text(encoding="utf-8"))
    else:
        box = Sandbox(paths["box"], key=f"{out.resolve()}|{task.task_id}|{rep}", limits=cfg.limits)
        traj: dict[str, Any] = {}
        t0 = time.monotonic()
        try:
            box.prepare(task_dir_p / INPUTS, task.instruction)
            tools = Tools(
                box,
                tool_timeout_s=cfg.tool_timeout_s,
                max_output_chars=cfg.max_output_chars,
                max_images=cfg.max_images,
                frame_width=cfg.frame_width,
                deliverables=DELIVERABLES[task.family],
            )
            traj = run_agent(task.instruction, tools, cfg, api_key=api_key)
        except Exception as exc:  # noqa: BLE001 - the harness failed: record, score 0, re-run next time
            log.exception("rollout %s/%s crashed", task.task_id, rep)
            traj = {
                "model": cfg.model,
                "label": cfg.label,
                "harness": cfg.harness,
                "stop_reason": "harness_error",
                "error": f"{type(exc).__name__}: {exc}",
                "turns": [],
                "n_turns": 0,
                "submitted": False,
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                "wall_s": round(time.monotonic() - t0, 3),
            }
        names = tuple(dict.fromkeys(DELIVERABLES[task.family] + ("solution.json",)))
        if sub.is_dir() and not sub.is_symlink():
            for name in (*names, "reward.json"):  # a fresh attempt replaces a crashed one's leftovers (ours only)
                p = sub / name
                if p.is_file() or p.is_symlink():
                    p.unlink()
        sub.mkdir(parents=True, exist_ok=True)
        traj["delivered"] = box.collect(names, sub) if box.work.exists() else []
        box.cleanup(keep=cfg.keep_sandbox)  # keep: its files stay (copied off the tmpfs); never leave a mount
        traj.update(
            task_id=task.task_id,
            family=task.family,
            subtype=task.subtype,
            rep=rep,
            done=traj.get("stop_reason") != "harness_error",
        )
    traj["verification"] = _verify(task_dir_p, sub, settings)
    _write_json_atomic(traj_path, traj)
    return _outcome(traj)


def _outcome(traj: dict) -> dict:
    v = traj.get("verification") or {}
    status = v.get("status", "failed")
    if traj.get("stop_reason") == "harness_error":
        status = "failed"
    return {
        "task_id": traj["task_id"],
        "family": traj["family"],
        "rep": traj["rep"],
        "reward": float(v.get("reward") or 0.0) if status != "failed" else 0.0,
        "status": status,
        "reason": v.get("reason") or traj.get("error"),
        "stop_reason": traj.get("stop_reason"),
        "error": traj.get("error"),
        "n_turns": traj.get("n_turns"),
        "wall_s": traj.get("wall_s"),
    }


def run_rollouts(
    tasks_dir: str | Path,
    out_dir: str | Path,
    agent_cfg: AgentConfig,
    k: int = 3,
    families: Optional[list[str]] = None,
    task_ids: Optional[list[str]] = None,
    verify_settings: Any = None,
) -> dict:
    """Run every task ``k`` times on Ray (resumable) and verify; write and return ``rollouts_summary.json``.

    Returns ``{"ran", "skipped", "reverified", "rollouts": [...], "by_task", "by_family", "counts",
    "analytics", "config"}``. ``by_task[t]["mean"]`` is the mean over the K rollouts (absent or failed
    ones count 0); ``by_family[f]["mean"]`` the mean over its tasks (paper §3, App. A.4).
    """
    import ray

    if not agent_cfg.model:
        raise ValueError("agent.model is not set: name the served model (and agent.base_url its endpoint)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = []
    for p in list_tasks(tasks_dir):
        try:
            tasks.append(load_task(p, with_truth=False))
        except BundleError as exc:  # not run; the benchmark's verify stage reports it as that task's load error
            log.error("agent rollouts: skipping task bundle %s: %s", p.name, exc)
    if families:
        tasks = [t for t in tasks if t.family in families]
    if task_ids:
        tasks = [t for t in tasks if t.task_id in task_ids]
    reps = [str(r) for r in range(int(k))]
    opts: dict[str, Any] = {"num_cpus": float(agent_cfg.ray_num_cpus), "max_retries": 0}
    if agent_cfg.ray_memory_mb:
        opts["memory"] = int(agent_cfg.ray_memory_mb) * 1024 * 1024
    remote = ray.remote(**opts)(rollout_one)
    key = read_key(agent_cfg)  # read here: Ray workers do not see the driver's environment
    pending, skipped, reverify = {}, [], []
    for t in tasks:
        for rep in reps:
            paths = rollout_paths(out, t.task_id, rep)
            traj_path = paths["traj"]
            done = False
            if traj_path.exists():
                try:
                    done = bool(json.loads(traj_path.read_text(encoding="utf-8")).get("done"))
                except (json.JSONDecodeError, OSError):
                    done = False
            reward_ok = (paths["sub"] / "reward.json").exists()
            if done and reward_ok:
                skipped.append((t.task_id, rep))
                continue
            if done:
                reverify.append((t.task_id, rep))
            pending[(t.task_id, rep)] = remote.remote(str(t.root), rep, str(out), agent_cfg, verify_settings, done, key)
    log.info(
        "agent rollouts: %d to run, %d to re-verify, %d done already",
        len(pending) - len(reverify),
        len(reverify),
        len(skipped),
    )
    for key, ref in pending.items():
        try:
            ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - a Ray task that died: failed, counted, re-run next time
            log.error("rollout %s/%s failed: %s", key[0], key[1], exc)
    # collect every (task, rep) from disk: the summary always covers all K x tasks
    rollouts, trajs = [], []
    for t in tasks:
        for rep in reps:
            path = rollout_paths(out, t.task_id, rep)["traj"]
            try:
                traj = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                traj = {
                    "task_id": t.task_id,
                    "family": t.family,
                    "rep": rep,
                    "stop_reason": "harness_error",
                    "error": "no trajectory (the rollout's Ray task failed)",
                    "turns": [],
                    "usage": {},
                    "label": agent_cfg.label,
                    "model": agent_cfg.model,
                }
            rollouts.append(_outcome(traj))
            trajs.append(traj)
    by_task: dict[str, dict] = {}
    for r in rollouts:
        e = by_task.setdefault(r["task_id"], {"family": r["family"], "rewards": {}})
        e["rewards"][r["rep"]] = r["reward"]
    for e in by_task.values():
        e["mean"] = sum(e["rewards"].values()) / len(reps) if reps else 0.0
    by_family: dict[str, dict] = {}
    for tid, e in by_task.items():
        f = by_family.setdefault(e["family"], {"tasks": []})
        f["tasks"].append(e["mean"])
    for f in by_family.values():
        f["n_tasks"] = len(f["tasks"])
        f["mean"] = sum(f["tasks"]) / len(f["tasks"])
        del f["tasks"]
    counts: dict[str, dict] = {}
    for r in rollouts:
        c = counts.setdefault(r["family"], {"ok": 0, "invalid": 0, "missing": 0, "failed": 0})
        c[r["status"] if r["status"] in c else "failed"] += 1
    cfg_public = agent_cfg.public()
    summary = {
        "model": agent_cfg.model,
        "label": agent_cfg.label,
        "harness": agent_cfg.harness,
        "k": int(k),
        "n_tasks": len(tasks),
        "n_rollouts": len(rollouts),
        "ran": len(pending) - len(reverify),
        "reverified": len(reverify),
        "skipped": len(skipped),
        "rollouts": rollouts,
        "by_task": by_task,
        "by_family": by_family,
        "counts": counts,
        "analytics": trajectory_analytics(trajs),
        "config": cfg_public,
    }
    _write_json_atomic(out / SUMMARY, summary)
    return summary
