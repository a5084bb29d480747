"""AgenticVBench: agent rollouts verified as Ray Data tasks, Repurpose rubric items judged, scores per family.

Spec: AgenticVBench paper §2.4-2.7 and App. H (the verifiers, :mod:`vbench_ray.agentic.verifiers`),
§3 and App. A.4 (K=3 repetitions per task averaged; failed rollouts scored 0; per-family means), and
PhiloLabs/agentic-vbench 4ed7ffc (official layout and judge). Bundle and submission format: docs/agentic_bundle.md.

Cases are rollouts: one row per ``(task, repetition)``, ``case_id = "{task_id}:{rep}"``.

* ``data.tasks_dir``: task bundles, one folder per task (``task.json``, ``instruction.md``, ``inputs/``,
  ``truth/``). ``data.families`` selects families.
* ``data.submissions_dir``: any agent's outputs, ``SUBMISSIONS/<task_id>/<rep>/`` (or the deliverables
  directly in ``SUBMISSIONS/<task_id>/``). With ``data.reps = K``, every task gets K rollouts: reps beyond
  K are ignored (with a warning), absent ones are **missing** rollouts scored 0 and counted.
* ``data.agent`` (``random`` | ``heuristic`` | ``oracle``): run a baseline agent first, as a Ray stage
  writing ``OUTPUT/submissions/<agent>/<task_id>/<rep>/`` (or ``data.submissions_dir``), then verify
  its rollouts like any other.

Stages (Ray Data tasks): ``agent`` (only with ``data.agent``) and ``verify``, which runs the family's
verifier and writes ``reward``, ``status`` (``ok`` | ``invalid`` | ``missing``), ``reason`` and
``details`` (the ``reward.json`` details) per rollout. A Repurpose rollout's Format pillar is scored
there and the frames for its judge are written to ``OUTPUT/judge_frames/``; the ``rubric`` judge phase
asks one request per remaining rubric item, and the rollout's reward is computed in the summary
(``judgments.parquet`` holds every item). A rollout whose verification raised is **failed**: scored 0,
counted, listed under ``failures``.

Summary: per family, the mean over tasks of the mean over the task's K rollouts, with a bootstrap CI
over tasks (``metrics.<family>``; ``metrics.overall`` pools all tasks); ``sequencing_strict``
(App. H.2 Eq. 7) and ``repurpose_format`` (the programmatic Format pillar alone) beside them;
``by_category`` per sub-type (e.g. ``repair/colour_shift``); ``counts`` of ok / invalid / missing /
failed rollouts per family; ``by_task`` with every rollout's reward (computed in ``agentic_summary``).
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import pyarrow as pa

from vbench_ray.agentic.bundle import FAMILIES, BundleError, find_reps, list_tasks, load_task
from vbench_ray.agentic.verifiers import measures
from vbench_ray.agentic.verifiers import repurpose as rp
from vbench_ray.cfgutil import plain
from vbench_ray.agentic.verifiers.assembly import SCHEMES as ASSEMBLY_SCHEMES
from vbench_ray.agentic.verifiers.assembly import AssemblyConfig
from vbench_ray.agentic.verifiers.repair import RANGE_SCORES, SCHEMES as REPAIR_SCHEMES
from vbench_ray.agentic.verifiers.repair import RepairConfig
from vbench_ray.agentic.verifiers.sequencing import NAME_RULES as SEQUENCING_NAMES
from vbench_ray.agentic.verifiers.sequencing import SCORES as SEQUENCING_SCORES
from vbench_ray.agentic.verifiers.sequencing import VIDEO_CHECKS as SEQUENCING_VIDEO
from vbench_ray.agentic.verifiers.sequencing import SequencingConfig
from vbench_ray.benchmarks import agentic_summary as scores
from vbench_ray.benchmarks.base import (
    Benchmark,
    DataError,
    JudgePhase,
    duplicate_ids,
    register_benchmark,
)
from vbench_ray.agents.loop import AgentConfig
from vbench_ray.config import BaseConfig, bounded
from vbench_ray.judges.base import JudgeConfig
from vbench_ray.pipeline import Stage
from vbench_ray.safepaths import unique_component

log = logging.getLogger(__name__)

AGENTS = ("random", "heuristic", "oracle")
PRIMARY_INPUT = {"repair": "broken.mp4", "repurpose": "source.mp4"}
PRIMARY_OUTPUT = {
    "assembly": "solution.mp4",
    "sequencing": "solution.mp4",
    "repair": "fixed.mp4",
    "repurpose": "final.mp4",
}


# ----------------------------------------------------------------------------- config


@dataclass
class AgenticDataConfig:
    tasks_dir: str = "???"  # task bundles, one folder per task (docs/agentic_bundle.md)
    submissions_dir: Optional[str] = (
        None  # SUBMISSIONS/<task_id>/<rep>/ deliverables (default with data.agent: OUTPUT/submissions/<agent>)
    )
    agent: Optional[str] = (
        None  # null: score data.submissions_dir | random | heuristic | oracle: run a baseline agent first
    )
    reps: int = bounded(
        3, ge=1
    )  # K repetitions per task (paper: K=3); absent ones are missing rollouts, scored 0 and counted
    families: List[str] = field(default_factory=lambda: list(FAMILIES))  # families to evaluate


@dataclass
class AgenticConfig(BaseConfig):
    benchmark: str = "agentic"
    data: AgenticDataConfig = field(default_factory=AgenticDataConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)  # agent.model set: run LLM rollouts (docs/agents.md)
    assembly: AssemblyConfig = field(default_factory=AssemblyConfig)  # assembly.scheme: official | slots
    sequencing: SequencingConfig = field(default_factory=SequencingConfig)
    repair: RepairConfig = field(default_factory=RepairConfig)
    repurpose: rp.RepurposeConfig = field(default_factory=rp.RepurposeConfig)
    judge: JudgeConfig = field(default_factory=lambda: JudgeConfig(max_tokens=1024))


# ----------------------------------------------------------------------------- stage functions (Ray tasks)


def case_id_of(task_id: str, rep: str) -> str:
    return f"{task_id}:{rep}"


def agent_row(row: dict, agent: str, seed: int) -> dict:
    """The ``agent`` stage: a baseline agent writes this rollout's deliverables."""
    from vbench_ray.agentic.baselines import solve

    info = solve(agent, row["task_dir"], row["submission_dir"], rep=row["rep"], seed=seed)
    return {"agent_info": json.dumps(info, default=str)}


def judge_frames_dir(frames_dir: str | Path, case_id: str) -> Path:
    """Where a rollout's frames for the repurpose judge go: one folder per rollout, one-to-one
    (``safepaths.unique_component``: task ids ``a+b`` and ``a_b`` never share, and overwrite, the judge's frames)."""
    return Path(frames_dir) / unique_component(case_id)


def verify_row(row: dict, settings: dict, frames_dir: str | None) -> dict:
    """The ``verify`` stage: the family's verifier on one rollout (:func:`verify_rollout`)."""
    from vbench_ray.agentic.verify import settings_from, verify_rollout

    task = load_task(row["task_dir"])
    sub = row.get("submission_dir")
    if not sub or not Path(sub).is_dir():
        return {
            "reward": 0.0,
            "status": "missing",
            "reason": "no submission folder for this repetition",
            "details": json.dumps({"status": "missing"}),
        }
    frames = judge_frames_dir(frames_dir, row["case_id"]) if frames_dir else None
    return verify_rollout(task, Path(sub), settings_from(settings), frames)


# ----------------------------------------------------------------------------- benchmark


@register_benchmark
class AgenticBench(Benchmark):
    name = "agentic"
    primary_metric = "overall"  # `vbench-ray compare` ranks by it
    paper = "AgenticVBench §2.4-2.7, App. H (official code: PhiloLabs/agentic-vbench)"
    needs = "agent rollouts (a served model) or submissions; a judge for Repurpose's rubric items"
    scored_metrics = {
        **{
            family: (f"AgenticVBench §2.{4 + i}, App. H (verifier)", "[0,1]")
            for i, family in enumerate(("assembly", "repair", "sequencing", "repurpose"))
        },
        "overall": ("AgenticVBench §3.1 (mean over tasks)", "[0,1]"),
    }
    config_class = AgenticConfig
    result_sections = ("assembly", "sequencing", "repair", "repurpose")  # verifier settings: changing them re-verifies
    judge_blocks = {"judge": True}
    config_choices = {
        "data.agent": AGENTS,
        "sequencing.score": SEQUENCING_SCORES,
        "sequencing.names": SEQUENCING_NAMES,
        "sequencing.video": SEQUENCING_VIDEO,
        "repair.range_score": RANGE_SCORES,
        "repair.scheme": REPAIR_SCHEMES,
        "assembly.scheme": ASSEMBLY_SCHEMES,
        "repurpose.invert_negative": rp.INVERT_MODES,
    }

    @staticmethod
    def run_seed_scores(config: dict, variant: str) -> bool:
        """The random and heuristic baseline agents (``data.agent``) draw their picks from ``run.seed``
        (``agentic.baselines.agent_rng``); the oracle, an LLM agent's rollouts and given submissions do not."""
        return (config.get("data") or {}).get("agent") in ("random", "heuristic")

    @staticmethod
    def comparison_options(config: dict) -> dict:
        """Where an LLM agent made the submissions (``agent.model`` set, no ``data.agent``), its decoding as App.
        A.3 holds it (``compare_base.decoding_options``): ``agent.temperature`` and ``agent.max_tokens``, and its
        ``top_p`` and ``seed`` where it samples (a ``null`` temperature is the provider's default, which samples),
        since they pick the rollouts the verifiers score. Its model is what the leaderboard compares."""
        from vbench_ray.compare_base import decoding_options

        agent = config.get("agent")
        if (config.get("data") or {}).get("agent") is not None or not isinstance(agent, dict) or not agent.get("model"):
            return {}
        return decoding_options("agent", agent, keys=("temperature", "max_tokens"))

    def case_fields(self) -> list[pa.Field]:
        return [pa.field(n, pa.string()) for n in ("task_id", "family", "subtype", "rep", "task_dir", "submission_dir")]

    def _check(self) -> None:
        cfg = self.cfg
        unknown = [f for f in cfg.data.families if f not in FAMILIES]
        if unknown:
            raise DataError(f"data.families: unknown famil(ies) {unknown}; known: {list(FAMILIES)}")
        for key, known in (("visual_metrics", measures.VISUAL), ("audio_metrics", measures.AUDIO)):
            bad = [m for m in getattr(cfg.repair, key) if m not in known]
            if bad:
                raise DataError(f"repair.{key}: unknown measurement(s) {bad}; known: {list(known)}")
        if cfg.data.reps < 1:
            raise DataError(f"data.reps must be at least 1, got {cfg.data.reps}")
        if cfg.data.agent is None and not cfg.data.submissions_dir and not cfg.agent.model:
            raise DataError(
                "data.submissions_dir is not set: point it at the agents' outputs "
                "(SUBMISSIONS/<task_id>/<rep>/), set agent.model (and agent.base_url) to run an "
                "LLM agent, or set data.agent to run a baseline agent"
            )

    def runs_llm_agent(self) -> bool:
        return bool(self.cfg.agent.model) and self.cfg.data.agent is None

    def submissions_root(self) -> Path:
        cfg = self.cfg
        if self.runs_llm_agent():
            return Path(cfg.output.dir).resolve() / "agent" / "submissions"
        if cfg.data.submissions_dir:
            return Path(cfg.data.submissions_dir)
        return Path(cfg.output.dir).resolve() / "submissions" / str(cfg.data.agent)

    def stages(self) -> list[Stage]:
        cfg = self.cfg
        stages = []
        common = {"num_cpus": 1.0, "workers": cfg.ray.workers, "batch_size": cfg.ray.batch_size}
        if cfg.data.agent:
            stages.append(
                Stage(
                    name="agent",
                    fn=functools.partial(agent_row, agent=cfg.data.agent, seed=cfg.run.seed),
                    outputs={"agent_info": "str"},
                    **common,
                )
            )
        settings = {k: plain(getattr(cfg, k)) for k in ("assembly", "sequencing", "repair", "repurpose")}
        frames_dir = str(Path(cfg.output.dir).resolve() / "judge_frames") if cfg.repurpose.judge_enabled else None
        stages.append(
            Stage(
                name="verify",
                fn=functools.partial(verify_row, settings=settings, frames_dir=frames_dir),
                outputs={
                    "reward": "float",
                    "status": "str",
                    "reason": "str",
                    "details": "str",
                    "strict": "int",
                    "format_share": "float",
                    "judge_frames": "str",
                    "judge_audio": "str",
                },
                **common,
            )
        )
        return stages

    # -- loading
    def load_cases(self) -> list[dict]:
        cfg = self.cfg
        self._check()
        try:
            task_dirs = list_tasks(cfg.data.tasks_dir)
        except BundleError as exc:
            raise DataError(f"data.tasks_dir: {exc}") from exc
        if not task_dirs:
            raise DataError(f"data.tasks_dir {cfg.data.tasks_dir} holds no task bundle (folders with task.json)")
        if self.runs_llm_agent():
            self._rollouts()
        subs = self.submissions_root()
        if cfg.data.agent is None and not subs.is_dir():
            raise DataError(f"data.submissions_dir is not a directory: {subs}")
        rows: list[dict] = []
        for task_dir in task_dirs:
            rows += self._task_rows(task_dir, subs)
        by_dir = {r["task_dir"]: r["task_id"] for r in rows}  # two bundles claiming one task_id: stop (item 8)
        duplicate_ids(list(by_dir.values()), "task ids", f"data.tasks_dir {cfg.data.tasks_dir}")
        if cfg.run.limit is not None:
            rows = rows[: cfg.run.limit]
        return rows

    def _rollouts(self) -> dict:
        """The LLM agent's K rollouts per task on Ray (resumable), into OUTPUT/agent (issue: agent rollouts)."""
        cfg = self.cfg
        from omegaconf import OmegaConf

        from vbench_ray.agents.rollouts import run_rollouts
        from vbench_ray.ray_start import ensure_ray

        ensure_ray(cfg)
        agent = OmegaConf.to_object(cfg.agent)
        settings = {k: plain(getattr(cfg, k)) for k in ("assembly", "sequencing", "repair", "repurpose")}
        return run_rollouts(
            cfg.data.tasks_dir,
            Path(cfg.output.dir).resolve() / "agent",
            agent,
            k=cfg.data.reps,
            families=list(cfg.data.families),
            verify_settings=settings,
        )

    def _task_rows(self, task_dir: Path, subs: Path) -> list[dict]:
        cfg = self.cfg
        base = {"benchmark": "agentic", "variant": "base", "task_dir": str(task_dir.resolve()), "annotations": None}
        try:
            task = load_task(task_dir)
        except BundleError as exc:  # counted as failed rollouts of its family (when task.json names one)
            family = _family_hint(task_dir)
            return [
                {
                    **base,
                    "case_id": case_id_of(task_dir.name, str(i)),
                    "task_id": task_dir.name,
                    "rep": str(i),
                    "family": family,
                    "categories": [family] if family else [],
                    "error_load": str(exc),
                }
                for i in range(cfg.data.reps)
            ]
        if task.family not in cfg.data.families:
            return []
        base.update(
            task_id=task.task_id,
            family=task.family,
            subtype=task.subtype,
            instruction=task.instruction,
            categories=[task.family] + ([f"{task.family}/{task.subtype}"] if task.subtype else []),
            annotations=json.dumps({"task": task.meta}, ensure_ascii=False),
        )
        if task.family in PRIMARY_INPUT:
            path = task.input(PRIMARY_INPUT[task.family])
            base["source_path"] = str(path) if path.exists() else None
        if cfg.data.agent:
            reps = [(str(i), subs / task.task_id / str(i)) for i in range(cfg.data.reps)]
        else:
            found = find_reps(subs, task.task_id)
            if len(found) > cfg.data.reps:
                log.warning(
                    "task %s: %d repetitions submitted, data.reps=%d; using %s",
                    task.task_id,
                    len(found),
                    cfg.data.reps,
                    [r for r, _ in found[: cfg.data.reps]],
                )
                found = found[: cfg.data.reps]
            reps = [(r, p) for r, p in found]
            names = {r for r, _ in found}
            j = 0
            while len(reps) < cfg.data.reps:
                name = f"missing{j}"
                j += 1
                if name not in names:
                    reps.append((name, None))
        rows = []
        for rep, folder in reps:
            row = {
                **base,
                "case_id": case_id_of(task.task_id, rep),
                "rep": rep,
                "submission_dir": str(Path(folder).resolve()) if folder is not None else None,
            }
            if folder is not None:
                row["edited_path"] = str(Path(folder).resolve() / PRIMARY_OUTPUT[task.family])
            rows.append(row)
        return rows

    # -- judging (Repurpose rubric items, §2.7)
    @classmethod
    def synth(cls, out: Path, n: int, seed: int) -> dict:
        """One synthetic task per family and scoring path (``n`` is not used: the set is fixed)."""
        from vbench_ray.agentic import synth_agentic

        return synth_agentic(out, seed=seed)

    def judge_phases(self) -> list[JudgePhase]:
        cfg = self.cfg
        if "repurpose" not in cfg.data.families or not cfg.repurpose.judge_enabled:
            return []
        return [JudgePhase("rubric", cfg.judge, lambda cases, _results: self.judge_requests(cases))]

    @staticmethod
    def judge_requests(cases: list[dict]) -> list:
        requests, tasks = [], {}
        for case in cases:
            if case.get("family") != "repurpose" or case.get("status") != "ok" or not case.get("judge_frames"):
                continue
            if any(v for k, v in case.items() if k.startswith("error_")):
                continue
            task = tasks.get(case["task_dir"]) or tasks.setdefault(case["task_dir"], load_task(case["task_dir"]))
            requests += rp.build_requests(
                case["case_id"],
                case["variant"],
                rp.brief_text(task),
                rp.judged_items(task.rubric),
                json.loads(case["judge_frames"]),
                case.get("judge_audio"),
            )
        return requests

    def score_judgments(self, cases: list[dict], results: dict) -> pa.Table:
        cfg = self.cfg
        rows = []
        for case, scored in scores.repurpose_scores(cases, results, cfg).items():
            for it in scored["items"]:
                rows.append(
                    {
                        "case_id": case[0],
                        "variant": case[1],
                        "task_id": scored["task_id"],
                        "rep": scored["rep"],
                        "item_id": it["item_id"],
                        "pillar": it["pillar"],
                        "weight": it["weight"],
                        "narrative_essential": it["narrative_essential"],
                        "passed": it["pass"],
                        "why": it["why"],
                        "status": it["status"],
                        "contribution": rp.contribution(
                            it["weight"], bool(it["pass"]), it["narrative_essential"], cfg.repurpose.invert_negative
                        ),
                        "request_id": None
                        if it["status"] == "programmatic"
                        else rp.request_id(case[0], case[1], it["item_id"]),
                    }
                )
        return pa.Table.from_pylist(rows, schema=scores.JUDGMENT_SCHEMA)

    # -- aggregation
    def summarize(self, cases: pa.Table, judgments: pa.Table | None = None) -> dict:
        return scores.summarize(cases, judgments, self.cfg, self.runs_llm_agent())


def _family_hint(task_dir: Path) -> str | None:
    try:
        family = json.loads((task_dir / "task.json").read_text(encoding="utf-8")).get("family")
    except (OSError, ValueError, AttributeError):
        return None
    return family if family in FAMILIES else None
