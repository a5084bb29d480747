"""AgenticVBench ("Can AI Agents Complete Real-World Post-Production Tasks?"): task bundles, the four verifiers,
synthetic tasks and baseline agents.

* :mod:`~vbench_ray.agentic.bundle`: the task bundle and submission folder format (docs/agentic_bundle.md).
* :mod:`~vbench_ray.agentic.verifiers`: Assembly (§2.4), Repair (§2.5, App. H.1), Sequencing (§2.6,
  App. H.2) and Repurpose (§2.7) verifiers.
* :mod:`~vbench_ray.agentic.verify`: one rollout end to end; ``verify_cli`` (``vbench-ray verify agentic``).
* :mod:`~vbench_ray.agentic.synth`: ``synth_agentic`` (``vbench-ray synth agentic``): Assembly and Sequencing
  tasks and the entry point; Repair and Repurpose tasks in ``synth_repair`` and ``synth_repurpose``, the scenes,
  camera and tone tracks they share in ``synth_media``.
* :mod:`~vbench_ray.agentic.baselines`: non-LLM agents (random, heuristic, oracle).

The Ray job is the ``agentic`` benchmark (:mod:`vbench_ray.benchmarks.agentic`, ``jobs/agentic.py``).
"""

from vbench_ray.agentic.bundle import DELIVERABLES, FAMILIES, BundleError, TaskBundle, load_task
from vbench_ray.agentic.baselines import AGENTS, run_baseline, solve
from vbench_ray.agentic.synth import synth_agentic
from vbench_ray.agentic.verify import verify_cli, verify_rollout

__all__ = [
    "AGENTS",
    "DELIVERABLES",
    "FAMILIES",
    "BundleError",
    "TaskBundle",
    "load_task",
    "run_baseline",
    "solve",
    "synth_agentic",
    "verify_cli",
    "verify_rollout",
]
