"""Verify one rollout (a submission folder against a task bundle): the Ray stage and the CLI share this.

``verify_rollout`` returns the row outputs of the job's ``verify`` stage; for Repurpose it scores the
Format pillar and writes the frames the judge will see, and the rubric judge phase finishes the score.
``verify_cli`` is ``vbench-ray verify agentic --task DIR --submission DIR``: it verifies, judges
Repurpose items when given a judge, writes ``reward.json`` (``{"reward", "details"}``) and returns it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from vbench_ray.agentic.bundle import TaskBundle, load_task
from vbench_ray.agentic.verifiers import assembly, repair, repurpose, sequencing
from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict, json_safe

log = logging.getLogger(__name__)


@dataclass
class VerifySettings:
    assembly: assembly.AssemblyConfig = field(default_factory=assembly.AssemblyConfig)
    sequencing: sequencing.SequencingConfig = field(default_factory=sequencing.SequencingConfig)
    repair: repair.RepairConfig = field(default_factory=repair.RepairConfig)
    repurpose: repurpose.RepurposeConfig = field(default_factory=repurpose.RepurposeConfig)


def _build(cls, value: Any):
    """A dataclass instance from a dataclass, an OmegaConf node or a plain dict (nested)."""
    if isinstance(value, cls):
        return value
    if value is None:
        return cls()
    if not isinstance(value, dict):
        from omegaconf import OmegaConf

        value = OmegaConf.to_container(value, resolve=True)
    kwargs = {}
    for f in fields(cls):
        if f.name in value:
            default = f.default_factory() if callable(f.default_factory) else None  # type: ignore[misc]
            kwargs[f.name] = _build(type(default), value[f.name]) if is_dataclass(default) else value[f.name]
    return cls(**kwargs)


def settings_from(node: Any = None) -> VerifySettings:
    """``VerifySettings`` from the benchmark config (or any mapping with assembly/sequencing/repair/repurpose)."""
    if node is None:
        return VerifySettings()
    get = (lambda k: node.get(k)) if isinstance(node, dict) else (lambda k: getattr(node, k, None))
    return VerifySettings(
        assembly=_build(assembly.AssemblyConfig, get("assembly")),
        sequencing=_build(sequencing.SequencingConfig, get("sequencing")),
        repair=_build(repair.RepairConfig, get("repair")),
        repurpose=_build(repurpose.RepurposeConfig, get("repurpose")),
    )


def verify_rollout(
    task: TaskBundle, submission: Path, settings: VerifySettings | None = None, frames_dir: Path | None = None
) -> dict:
    """Outputs of the ``verify`` stage for one rollout.

    ``reward`` is final for Assembly, Sequencing and Repair; for a Repurpose rollout that passed its
    gates it is null until the rubric judge phase (``format_share`` holds the Format pillar alone).
    """
    settings = settings or VerifySettings()
    submission = Path(submission)
    family = task.family
    if family == "repurpose":
        return _repurpose_rollout(task, submission, settings.repurpose, frames_dir)
    if family == "assembly":
        verdict = assembly.verify(task, submission, settings.assembly)
    elif family == "sequencing":
        verdict = sequencing.verify(task, submission, settings.sequencing)
    else:
        verdict = repair.verify(task, submission, settings.repair)
    payload = verdict.to_json()
    return {
        "reward": verdict.reward,
        "status": verdict.status,
        "details": json.dumps(payload["details"]),
        "reason": verdict.details.get("reason"),
        "strict": verdict.details.get("strict"),
    }


def _repurpose_rollout(task, submission: Path, cfg, frames_dir: Path | None) -> dict:
    try:
        media, fmt = repurpose.evaluate_format(task, submission, cfg.frames)
    except InvalidSubmission as exc:
        verdict = Verdict.zero(exc)
        return {
            "reward": 0.0,
            "status": verdict.status,
            "details": json.dumps(verdict.to_json()["details"]),
            "reason": exc.reason,
        }
    out: dict[str, Any] = {
        "status": "ok",
        "reward": None,
        "format_share": repurpose.format_share(fmt),
        "details": json.dumps(
            json_safe(
                {
                    "format_items": fmt,
                    "duration_s": media.info.duration,
                    "report_md": (submission / "report.md").is_file(),
                }
            )
        ),
    }
    if cfg.judge_enabled and frames_dir is not None and repurpose.judged_items(task.rubric):
        frames = repurpose.write_frames(media, Path(frames_dir), cfg.frames)
        out["judge_frames"] = json.dumps(frames)
        out["judge_audio"] = repurpose.audio_summary(media) if cfg.audio_summary else None
    return out


def _judge_answers(task: TaskBundle, submission: Path, row: dict, judge: list[str] | Any, log_dir: Path) -> dict:
    """Judge a single Repurpose rollout's items; ``judge`` is a JudgeConfig node or key=value overrides."""
    from omegaconf import OmegaConf

    from vbench_ray.judges.backends import build_backend
    from vbench_ray.judges.base import JudgeConfig
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    cfg = judge
    if isinstance(judge, (list, tuple)):
        cfg = OmegaConf.merge(OmegaConf.structured(JudgeConfig(max_tokens=1024)), OmegaConf.from_dotlist(list(judge)))
    case_id = f"{task.task_id}:cli"
    requests = repurpose.build_requests(
        case_id,
        "base",
        repurpose.brief_text(task),
        repurpose.judged_items(task.rubric),
        json.loads(row["judge_frames"]),
        row.get("judge_audio"),
    )
    results = JudgeStage(build_backend(cfg), JudgeLog(log_dir), cfg.max_retries).run(requests)
    answers = {}
    for r in requests:
        res = results.get(r.request_id)
        answers[r.group] = res.value if res is not None and res.status == "ok" else (res.status if res else "missing")
    return answers


def verify_cli(
    task_dir: str | Path,
    submission_dir: str | Path,
    out_path: str | Path | None = None,
    judge: list[str] | None = None,
    settings: VerifySettings | dict | None = None,
) -> dict:
    """Verify ``submission_dir`` against the task bundle ``task_dir``; write and return ``reward.json``.

    ``out_path`` defaults to ``SUBMISSION/reward.json``. Repurpose rubric items other than the Format
    pillar need a judge: ``judge`` is a list of ``key=value`` overrides of a judge config (e.g.
    ``["backend=replay", "replay_path=answers.jsonl"]`` or ``["backend=http", "model=...",
    "http.base_url=..."]``); without one they count as failed and ``details.rubric_judged`` is false.
    The judge's frames and log go to ``.<out stem>_judge/`` next to ``out_path``.
    """
    task = load_task(task_dir)
    submission = Path(submission_dir)
    out_path = Path(out_path) if out_path else submission / "reward.json"
    settings = settings if isinstance(settings, VerifySettings) else settings_from(settings)
    if task.family != "repurpose":
        row = verify_rollout(task, submission, settings)
        payload = {"reward": float(row["reward"]), "details": json.loads(row["details"])}
    else:
        work = out_path.parent / f".{out_path.stem}_judge"
        cfg = settings.repurpose
        if not judge:
            cfg = repurpose.RepurposeConfig(**{**cfg.__dict__, "judge_enabled": False})
        verdict_row = _repurpose_rollout(task, submission, cfg, work / "frames")
        answers = {}
        if verdict_row["status"] == "ok" and judge and verdict_row.get("judge_frames"):
            answers = _judge_answers(task, submission, verdict_row, judge, work)
        verdict = repurpose.verify(task, submission, cfg, answers)
        payload = verdict.to_json()
        payload["details"]["rubric_judged"] = bool(judge)
    payload["details"] = {"task_id": task.task_id, "family": task.family, "subtype": task.subtype, **payload["details"]}
    payload = json_safe(payload)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return payload
