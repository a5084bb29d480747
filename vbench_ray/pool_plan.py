"""How a stream's actor stages share the cluster: every pool's size and CPU share, planned together (issue 15).

Ray Data starts each actor pool's ``min_size`` actors when the stream starts, and an actor holds its CPUs and GPUs
for as long as the stream runs. Sized one pool at a time, the pools' minimums (plus the judge engines' replicas,
plus the decode tasks feeding the pools) can add up to more than the cluster has: then the actors Ray places last
never start, and if they belong to the stream's first stage, nothing moves again (seen on 4 CPUs: four CPU model
pools of one CPU each, a judge stage and an ``hf`` judge replica took 3.25 CPUs, and the first pool, into which Ray
Data had fused the decode tasks, waited forever for one). GPUs likewise: sized alone, each GPU pool asked for every
GPU slot it fits on, so on one GPU two pools of half a GPU asked for four halves, and the pool whose actors Ray
placed second could start only when the first pool had finished (tests/test_pool_plan.py shows both).

So ``plan_stages`` sizes them together, from ``ray.cluster_resources()`` less what the judge engines hold:

* **GPUs** are split evenly among the GPU pools: each pool starts with as many actors as its share holds (at
  least one; fewer where the starting actors do not pack onto the GPUs, a fraction of a GPU never spanning two)
  and may grow into what the starting actors leave free. A lone GPU pool takes every GPU slot it fits on from the
  start. GPU pools whose first actor each does not fit are refused up front.
* **CPUs**: one decode task always has a CPU (the pools are fed by it); the judge stages' actors have theirs;
  the pools' starting actors share the rest, one CPU each where the cluster has them, a smaller share each where
  it does not (Ray's CPU count is a scheduling quantity, not a limit: an actor with a quarter of a CPU still runs
  on whatever cores the OS gives it). A CPU pool may grow up to the CPUs the others' starting actors leave.
* ``ray.workers`` caps every pool's size and ``ray.pools.<M>: [min, max]`` sets one pool's (``Stage.min_workers``,
  ``Stage.workers``); the sums are checked all the same.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Protocol

from vbench_ray.config import ConfigError

log = logging.getLogger(__name__)

MIN_CPU_SHARE = 0.05  # no pool actor asks for less of a CPU than this
EPS = 1e-9


class Stage(Protocol):
    """What planning reads of a ``vbench_ray.pipeline.Stage``."""

    name: str
    kind: str  # cpu | pool | judge
    num_cpus: float
    num_gpus: float
    workers: int | None  # cap on the pool's size
    min_workers: int | None  # the pool's starting size, if set


@dataclass(frozen=True)
class StagePlan:
    """What one stage asks Ray for: CPUs per task/actor and, for actor stages, the pool's ``(min, max)`` size."""

    num_cpus: float
    min_size: int = 1
    max_size: int = 1


def plan_stages(stages: list[Stage], capacity: dict[str, float],
                reserved: dict[str, float] | None = None) -> dict[str, StagePlan]:
    """Each stage's plan by name, for a cluster of ``capacity`` CPUs/GPUs (and ``autoscales``: whether it can add
    nodes) of which the judge engines hold ``reserved``. Raises ``ConfigError`` when the stages cannot all run at
    once (the stream would wait forever)."""
    reserved = reserved or {"CPU": 0.0, "GPU": 0.0}
    cpus = capacity["CPU"] - reserved.get("CPU", 0.0)
    gpus = max(0.0, capacity["GPU"] - reserved.get("GPU", 0.0))
    judges = [s for s in stages if s.kind == "judge"]
    pools = [s for s in stages if s.kind == "pool"]
    plans = {s.name: StagePlan(num_cpus=s.num_cpus) for s in stages if s.kind == "cpu"}
    for s in judges:
        low = _min_override(s, 1)
        plans[s.name] = StagePlan(num_cpus=s.num_cpus, min_size=low, max_size=max(low, s.workers or low))

    task_cpus = max((s.num_cpus for s in stages if s.kind == "cpu"), default=0.0)
    fixed = task_cpus + sum(plans[s.name].min_size * s.num_cpus for s in judges)  # a decode task, the judge actors
    sizes = _gpu_pool_sizes([s for s in pools if s.num_gpus], gpus, bool(capacity.get("autoscales")))
    sizes.update({s.name: (_min_override(s, 1), 0) for s in pools if not s.num_gpus})  # CPU pools' max: below
    starting = sum(sizes[s.name][0] * s.num_cpus for s in pools)  # the pools' starting actors at one CPU share
    left = cpus - fixed
    share = 1.0 if starting <= left + EPS else (left / starting if starting else 1.0)
    if left < -EPS or share < MIN_CPU_SHARE:
        raise ConfigError(
            f"the Ray cluster has {capacity['CPU']:g} CPUs, the judge engines hold {reserved.get('CPU', 0.0):g}; the "
            f"stream needs {fixed:g} for a decode task and the judge stages' actors, and its {len(pools)} model "
            f"pool(s) {starting:g} for their first actors (at least {MIN_CPU_SHARE:g} of a CPU each): start Ray with "
            f"more CPUs (ray.num_cpus, or `ray start --num-cpus`) or enable fewer model metrics")
    if share < 1.0:
        log.info("the cluster's %g CPUs do not hold one per starting pool actor beside a decode task and the judge "
                 "stages: each pool actor asks for %.2f of a CPU", capacity["CPU"], share)
    for s in pools:
        low, high = sizes[s.name]
        cpu = s.num_cpus * share
        if not s.num_gpus:  # a CPU pool grows into the CPUs the other pools' starting actors leave
            others = sum(sizes[o.name][0] * o.num_cpus * share for o in pools if o is not s)
            fit = max(low, math.floor((left - others) / max(cpu, MIN_CPU_SHARE) + EPS))
            high = max(low, _capped(fit, s))
        plans[s.name] = StagePlan(num_cpus=cpu, min_size=low, max_size=high)
    return plans


def _gpu_pool_sizes(pools: list[Stage], gpus: float, autoscales: bool = False) -> dict[str, tuple[int, int]]:
    """``(min, max)`` actors of each GPU pool: an even share of ``gpus`` each to start (at least one actor), fewer
    where the starting actors do not pack onto the GPUs, then room to grow into what they leave."""
    if not pools:
        return {}
    if gpus <= EPS:
        names = ", ".join(s.name for s in pools)
        if not autoscales:
            settings = ", ".join(dict.fromkeys(getattr(s, "cpu_setting", None) or f"metrics.{s.name}.device=cpu"
                                               for s in pools))
            raise ConfigError(f"the model pools {names} ask for GPUs, and the Ray cluster has none free of the judge "
                              f"engines and adds no nodes: their actors would wait forever. Run them on the CPU "
                              f"({settings}), give the judge fewer GPUs, or add GPUs")
        # an autoscaling cluster adds GPU nodes when asked: each pool waits for one actor's share
        log.warning("model pools %s ask for GPUs and the cluster has none free of the judge engines yet: they wait "
                    "for the autoscaler to add some", names)
        return {s.name: (_min_override(s, 1), _min_override(s, 1)) for s in pools}
    share = gpus / len(pools)
    low = {}
    for s in pools:
        even = max(1, math.floor(share / s.num_gpus + EPS))
        low[s.name] = _min_override(s, _capped(even, s))
    while (free := _pack([s.num_gpus for s in pools for _ in range(low[s.name])], gpus)) is None:
        shrinkable = [s for s in pools if low[s.name] > 1 and s.min_workers is None]
        if not shrinkable:
            detail = ", ".join(f"{s.name} {low[s.name]} x {s.num_gpus:g}" for s in pools)
            needed = sum(low[s.name] * s.num_gpus for s in pools)
            raise ConfigError(
                f"the GPU pools need {needed:g} GPUs to start ({detail}), which do not fit on the {gpus:g} GPU(s) "
                f"free of the judge engines (a fraction of a GPU never spans two): lower metrics.<M>.gpu_fraction "
                f"or ray.pools.<M>, or add GPUs")
        widest = max(shrinkable, key=lambda s: low[s.name] * s.num_gpus)
        low[widest.name] -= 1
    sizes = {}
    for s in pools:
        grow = low[s.name] + _more_fitting(s.num_gpus, free)
        sizes[s.name] = (low[s.name], max(low[s.name], _capped(grow, s)))
    return sizes


def _pack(actors: list[float], gpus: float) -> list[float] | None:
    """Place actors asking for these GPU amounts onto ``gpus`` GPUs, largest first, as Ray places them (a fraction
    on one GPU, never across two; an amount of one or more on whole GPUs). The free part of each GPU after, or
    None when they do not all fit."""
    free = [1.0] * int(gpus + EPS)
    if gpus - len(free) > EPS:
        free.append(gpus - len(free))
    for amount in sorted(actors, reverse=True):
        if amount >= 1 - EPS:
            whole = [i for i, left in enumerate(free) if left >= 1 - EPS][:math.ceil(amount - EPS)]
            if len(whole) < math.ceil(amount - EPS):
                return None
            for i in whole:
                free[i] = 0.0
            continue
        spot = next((i for i, left in enumerate(free) if left >= amount - EPS), None)
        if spot is None:
            return None
        free[spot] -= amount
    return free


def _more_fitting(amount: float, free: list[float]) -> int:
    """How many more actors of ``amount`` GPUs fit into what is ``free``."""
    if amount >= 1 - EPS:
        return sum(left >= 1 - EPS for left in free) // math.ceil(amount - EPS)
    return sum(math.floor(left / amount + EPS) for left in free)


def _min_override(stage: Stage, default: int) -> int:
    return max(1, int(stage.min_workers)) if stage.min_workers is not None else default


def _capped(actors: int, stage: Stage) -> int:
    """``actors``, or fewer where ``stage.workers`` (``ray.workers`` / ``ray.pools.<M>``'s max) caps the pool."""
    return min(actors, stage.workers) if stage.workers else actors
