"""The four AgenticVBench verifiers (paper §2.4-2.7, App. H), one module per family.

Each ``verify(task, submission_dir, cfg) -> Verdict`` is pure Python over files: the same function
scores a rollout in the Ray job's ``verify`` stage and in ``vbench-ray verify agentic``.
"""

from vbench_ray.agentic.verifiers import assembly, repair, repurpose, sequencing
from vbench_ray.agentic.verifiers.base import InvalidSubmission, Verdict

__all__ = ["InvalidSubmission", "Verdict", "assembly", "repair", "repurpose", "sequencing"]
