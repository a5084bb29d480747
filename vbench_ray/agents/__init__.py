"""Agent rollouts for AgenticVBench (docs/agents.md).

* :mod:`~vbench_ray.agents.loop`: ``AgentConfig`` and ``run_agent``, an OpenAI-compatible tool-calling loop.
* :mod:`~vbench_ray.agents.tools`: the tool set (shell, view_frames, read_file, write_file, submit).
* :mod:`~vbench_ray.agents.sandbox`: the per-rollout jail (namespaces, chroot, unprivileged uid, rlimits).
* :mod:`~vbench_ray.agents.rollouts`: ``run_rollouts``: K rollouts per task on Ray, verified, resumable.
* :mod:`~vbench_ray.agents.analytics`: trajectory analytics (paper §3.2).
"""

from vbench_ray.agents.analytics import trajectory_analytics
from vbench_ray.agents.loop import AgentConfig, run_agent
from vbench_ray.agents.rollouts import run_rollouts
from vbench_ray.agents.sandbox import Sandbox, SandboxLimits, check_support

__all__ = [
    "AgentConfig",
    "Sandbox",
    "SandboxLimits",
    "check_support",
    "run_agent",
    "run_rollouts",
    "trajectory_analytics",
]
