"""How a stream's actor stages share the cluster: every pool's size and CPU share, planned together.

Ray Data starts each actor pool's ``min_size`` actors when the stream starts, and an actor holds its CPUs and GPUs
for as long as the stream runs. Sized one pool at a time, the pools' minimums (plus the judge engines' replicas,
plus the decode tasks feeding the pools) can add up to more than the cluster has: then the actors Ray places last
never start, and if they belong to the stream's first stage, nothing moves again (seen on 4 CPUs: four CPU model
pools of one CPU each, a judge stage and an ``hf`` judge replica took 3.25 CPUs, and the first pool, into which Ray
Data had fused the decode tasks, waited forever for one). GPUs likewise: sized alone, each GPU pool asked for every
GPU slot it fits on, so on one GPU two pools of half a GPU asked for four halves, and the pool whose actors Ray
placed second could start only when the first pool had finished (tests/pipeline/test_pool_plan.py shows both).

So ``plan_stages`` sizes them together, from ``ray.cluster_resources()`` less what the judge engines hold:

* **GPU fractions** (``fit_gpu_fractions``): each pool's actors ask for its ``num_gpus`` where every pool's
  starting actors fit the GPUs at once; where they do not, the fractional asks are scaled down to what the GPUs
  hold, shared in proportion to each pool's ``gpu_cost`` (its metric's declared cost per case), none above its
  ask. Refused up front only what cannot run at all (whole-GPU actors that do not fit, a share under
  ``MIN_GPU_SHARE``).
* **GPUs** are split among the GPU pools in proportion to their ``gpu_cost`` (evenly for equal costs): each pool's
  part holds as many of its actors as fit in it (at least one; fewer where they do not pack onto the GPUs, a
  fraction of a GPU never spanning two; a lone pool every slot it fits on), and it starts with that many (unless
  ``ray.pools.<M>`` sets its min), so the starting actors fill the GPUs. Fewer would leave GPUs idle: Ray gives a
  fractional actor the first GPU with room, so actors whose shares add up to one GPU all land on the first (on two
  GPUs, two SRC actors of 0.3 beside MSM, AES and TQ filled GPU 0 and left GPU 1 to the pools' slow growth). A small
  run starts no more actors than it has calls for (``pipeline.build_dataset``). The costliest pool's max is every
  actor it fits on the GPUs alone: Ray Data removes a pool's actors once its input is exhausted and grows a pool
  with queued work into what that frees, so the GPU share of the pools that are done goes to the one still working.
  A cheaper metric pool keeps its part (its cost is in it, so it is done no later), so that it takes none of the
  share the costliest grows into; pools whose costs are not on the metrics' scale (an editor) grow as before.
* **CPUs**: one decode task always has a CPU (the pools are fed by it); each judge stage has its share for one task;
  the pools' starting actors (a GPU pool's part; a CPU pool's starting size) share the rest,
  one CPU each where the cluster has them, a smaller share each where it does not (Ray's CPU count is a scheduling
  quantity, not a limit: an actor with a quarter of a CPU still runs on whatever cores the OS gives it). A CPU pool
  may grow up to the CPUs the others' starting actors leave.
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
MIN_GPU_SHARE = 0.01  # no GPU pool actor is fitted to less of a GPU than this
EPS = 1e-9


class Stage(Protocol):
    """What planning reads of a ``vbench_ray.pipeline.Stage``."""

    name: str
    kind: str  # cpu | pool | judge
    num_cpus: float
    num_gpus: float
    workers: int | None  # cap on the pool's size
    min_workers: int | None  # the pool's starting size, if set
    gpu_cost: float  # a GPU pool's cost per case relative to the others' (its metric's declared cost)
    cost_group: str | None  # pools whose gpu_cost is on one scale (the metric pools); None: compared with none


@dataclass(frozen=True)
class StagePlan:
    """What one stage asks Ray for: CPUs per task/actor, for actor stages the pool's ``(min, max)`` size, and for GPU
    pools the GPUs per actor (the stage's ``num_gpus``, or less where that does not fit: ``fit_gpu_fractions``)."""

    num_cpus: float
    min_size: int = 1
    max_size: int = 1
    num_gpus: float | None = None  # None: the stage's own num_gpus


def plan_stages(
    stages: list[Stage], capacity: dict[str, float], reserved: dict[str, float] | None = None
) -> dict[str, StagePlan]:
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
    fixed = task_cpus + sum(plans[s.name].min_size * s.num_cpus for s in judges)  # a decode task, a judge task each
    on_gpu = [s for s in pools if s.num_gpus]
    fractions = fit_gpu_fractions(on_gpu, gpus) if gpus > EPS else {s.name: s.num_gpus for s in on_gpu}
    sizes = _gpu_pool_sizes(on_gpu, gpus, bool(capacity.get("autoscales")), fractions)
    sizes.update({s.name: (_min_override(s, 1), 0) for s in pools if not s.num_gpus})  # CPU pools' max: below
    starting = sum(sizes[s.name][0] * s.num_cpus for s in pools)  # the pools' starting actors at one CPU share
    left = cpus - fixed
    share = 1.0 if starting <= left + EPS else (left / starting if starting else 1.0)
    if left < -EPS or share < MIN_CPU_SHARE:
        raise ConfigError(
            f"the Ray cluster has {capacity['CPU']:g} CPUs, the judge engines hold {reserved.get('CPU', 0.0):g}; the "
            f"stream needs {fixed:g} for a decode task and a task per judge stage, and its {len(pools)} model "
            f"pool(s) {starting:g} for their first actors (at least {MIN_CPU_SHARE:g} of a CPU each): start Ray with "
            f"more CPUs (ray.num_cpus, or `ray start --num-cpus`) or enable fewer model metrics"
        )
    if share < 1.0:
        log.info(
            "the cluster's %g CPUs do not hold one per starting pool actor beside a decode task and the judge "
            "stages: each pool actor asks for %.2f of a CPU",
            capacity["CPU"],
            share,
        )
    for s in pools:
        low, high = sizes[s.name]
        cpu = s.num_cpus * share
        if not s.num_gpus:  # a CPU pool grows into the CPUs the other pools' starting actors leave
            others = sum(sizes[o.name][0] * o.num_cpus * share for o in pools if o is not s)
            fit = max(low, math.floor((left - others) / max(cpu, MIN_CPU_SHARE) + EPS))
            high = max(low, _capped(fit, s))
        plans[s.name] = StagePlan(num_cpus=cpu, min_size=low, max_size=high, num_gpus=fractions.get(s.name))
    return plans


def fit_gpu_fractions(pools: list[Stage], gpus: float) -> dict[str, float]:
    """GPUs per actor of each GPU pool. What each asks (``num_gpus``) where every pool's starting actors (one each,
    or ``min_workers``) pack onto the ``gpus`` GPUs at once. Where they do not, the fractional asks are fitted to
    what the GPUs hold beside the whole-GPU actors: those GPUs are shared among the fractional pools in proportion to
    their ``gpu_cost``, none above its own ask (water-filling: a pool whose cost-weighted part exceeds its ask keeps
    its ask and the rest is shared among the others again), and scaled down together until the actors pack (a
    fraction never spans two GPUs). Refused (``ConfigError``) only what cannot run at all: whole-GPU actors that do
    not fit, or a fitted fraction under ``MIN_GPU_SHARE``."""
    count = {s.name: _min_override(s, 1) for s in pools}
    asks = {s.name: float(s.num_gpus) for s in pools}
    if _pack([asks[s.name] for s in pools for _ in range(count[s.name])], gpus) is not None:
        return asks
    parts = [s for s in pools if asks[s.name] < 1 - EPS]
    free = _pack([asks[s.name] for s in pools if s not in parts for _ in range(count[s.name])], gpus)
    if free is None or not parts or sum(free) <= EPS:
        _refuse(pools, count, gpus, asks)
    weights = {s.name: _cost(s) for s in parts}
    caps = {s.name: asks[s.name] * count[s.name] for s in parts}

    def fitted(total: float) -> dict[str, float]:  # per-actor fractions when the fractional pools share `total`
        return {n: held / count[n] for n, held in _water_fill(caps, weights, total).items()}

    def packs(fractions: dict[str, float]) -> bool:  # every starting actor, the whole-GPU ones at their asks
        return _pack([{**asks, **fractions}[s.name] for s in pools for _ in range(count[s.name])], gpus) is not None

    low, high = 0.0, sum(free)
    if not packs(fitted(high)):  # the largest total that packs: fractions that do not share a GPU evenly
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if packs(fitted(mid)) else (low, mid)
        high = low
    out = {n: _round_down(f) for n, f in fitted(high).items()}
    if not packs(out):
        out = {n: math.floor(f * 1e4) / 1e4 for n, f in fitted(high).items()}
    if min(out.values()) < MIN_GPU_SHARE:
        _refuse(pools, count, gpus, asks, out)
    log.warning(
        "the GPU pools' starting actors ask for %s GPUs, which do not fit on the %g GPU(s) free of the judge "
        "engines: fitted by cost (%s) to %s",
        _listing(pools, count, asks),
        gpus,
        ", ".join(f"{n} {w:g}" for n, w in weights.items()),
        ", ".join(f"{n} {f:g}" for n, f in out.items()),
    )
    return {**asks, **out}


def _water_fill(caps: dict[str, float], weights: dict[str, float], total: float) -> dict[str, float]:
    """``total`` shared in proportion to ``weights``, none above its ``caps``: a capped share's surplus goes to the
    others, in proportion again."""
    out: dict[str, float] = {}
    left, open_ = total, set(caps)
    while open_:
        weight = sum(weights[n] for n in open_)
        capped = {n for n in open_ if caps[n] <= left * weights[n] / weight + EPS}
        if not capped:
            out.update({n: left * weights[n] / weight for n in open_})
            break
        for n in capped:
            out[n] = caps[n]
            left -= caps[n]
        open_ -= capped
    return out


def _round_down(fraction: float) -> float:
    """To Ray's resolution of a resource (1e-4), down, except a float's last-bit error (0.49999999999 -> 0.5)."""
    return math.floor(fraction * 1e4 + 1e-6) / 1e4


def _cost(stage: Stage) -> float:
    cost = float(getattr(stage, "gpu_cost", 1.0) or 1.0)
    if cost <= 0:
        raise ConfigError(f"stage {stage.name}: gpu_cost must be > 0, got {cost:g}")
    return cost


def _listing(pools: list[Stage], count: dict[str, int], fractions: dict[str, float]) -> str:
    needed = sum(count[s.name] * fractions[s.name] for s in pools)
    return f"{needed:g} ({', '.join(f'{s.name} {count[s.name]} x {fractions[s.name]:g}' for s in pools)})"


def _refuse(
    pools: list[Stage],
    count: dict[str, int],
    gpus: float,
    asks: dict[str, float],
    fitted: dict[str, float] | None = None,
) -> None:
    why = (
        f"fitted to them, a pool's actor would get under {MIN_GPU_SHARE:g} of a GPU ({min(fitted.values()):g})"
        if fitted
        else "the whole-GPU actors alone do not fit, or leave the others no GPU"
    )
    raise ConfigError(
        f"the GPU pools need {_listing(pools, count, asks)} GPUs to start, which cannot run on the "
        f"{gpus:g} GPU(s) free of the judge engines ({why}): enable fewer GPU metrics, lower "
        f"ray.pools.<M>, or add GPUs"
    )


def _gpu_pool_sizes(
    pools: list[Stage], gpus: float, autoscales: bool = False, fractions: dict[str, float] | None = None
) -> dict[str, tuple[int, int]]:
    """``(min, max)`` actors of each GPU pool of ``fractions`` GPUs per actor (``fit_gpu_fractions``). To start, each
    pool's cost-weighted part of ``gpus`` (``gpu_cost``; equal costs split the GPUs evenly) in actors, at least one,
    fewer where the starting actors do not pack onto the GPUs. The max of the costliest pool of a ``cost_group``
    (and of a pool of no group) is every actor it fits on the GPUs alone: Ray Data removes a pool's actors once its
    input is exhausted and grows a pool with queued work within the resources free, so the GPU share of pools that
    are done goes to the pool still working. A cheaper pool of the group keeps its part (its max is its start,
    unless ``ray.pools.<M>`` or ``ray.workers`` sets one): its part already carries its cost, so it is done no
    later than the costliest, and actors it added would take the GPU share the costliest grows into (on two GPUs,
    AES and TQ actors added near the end of their input loaded
    after it was done, while SRC waited for that share)."""
    if not pools:
        return {}
    fractions = fractions or {s.name: s.num_gpus for s in pools}
    if gpus <= EPS:
        names = ", ".join(s.name for s in pools)
        if not autoscales:
            settings = ", ".join(
                dict.fromkeys(getattr(s, "cpu_setting", None) or f"metrics.{s.name}.device=cpu" for s in pools)
            )
            raise ConfigError(
                f"the model pools {names} ask for GPUs, and the Ray cluster has none free of the judge "
                f"engines and adds no nodes: their actors would wait forever. Run them on the CPU "
                f"({settings}), give the judge fewer GPUs, or add GPUs"
            )
        # an autoscaling cluster adds GPU nodes when asked: each pool waits for one actor's share
        log.warning(
            "model pools %s ask for GPUs and the cluster has none free of the judge engines yet: they wait "
            "for the autoscaler to add some",
            names,
        )
        return {s.name: (_min_override(s, 1), _min_override(s, 1)) for s in pools}
    total_cost = sum(_cost(s) for s in pools)
    low = {}
    for s in pools:
        part = gpus * _cost(s) / total_cost
        low[s.name] = _min_override(s, _capped(max(1, math.floor(part / fractions[s.name] + EPS)), s))
    while _pack([fractions[s.name] for s in pools for _ in range(low[s.name])], gpus) is None:
        shrinkable = [s for s in pools if low[s.name] > 1 and s.min_workers is None]
        if not shrinkable:
            raise ConfigError(
                f"the GPU pools need {_listing(pools, low, fractions)} GPUs to start, which do not fit on the "
                f"{gpus:g} GPU(s) free of the judge engines (a fraction of a GPU never spans two): lower "
                f"ray.pools.<M>, or add GPUs"
            )
        widest = max(shrinkable, key=lambda s: low[s.name] * fractions[s.name])
        low[widest.name] -= 1
    empty = _pack([], gpus)
    return {
        s.name: (
            low[s.name],
            low[s.name]
            if _keeps_part(s, pools)
            else max(low[s.name], _capped(_more_fitting(fractions[s.name], empty), s)),
        )
        for s in pools
    }


def _keeps_part(stage: Stage, pools: list[Stage]) -> bool:
    """Whether a GPU pool's max is its start: it is cheaper than the costliest pool of its ``cost_group`` (costs on
    one scale) and no size is set for it (``ray.pools.<M>``, ``ray.workers``). An editor (no group) grows as before."""
    group = getattr(stage, "cost_group", None)
    if group is None or stage.workers:
        return False
    costliest = max(_cost(s) for s in pools if getattr(s, "cost_group", None) == group)
    return _cost(stage) < costliest - EPS


def _pack(actors: list[float], gpus: float) -> list[float] | None:
    """Place actors asking for these GPU amounts onto ``gpus`` GPUs, largest first, as Ray places them (a fraction
    on one GPU, never across two; an amount of one or more on whole GPUs). The free part of each GPU after, or
    None when they do not all fit."""
    free = [1.0] * int(gpus + EPS)
    if gpus - len(free) > EPS:
        free.append(gpus - len(free))
    for amount in sorted(actors, reverse=True):
        if amount >= 1 - EPS:
            whole = [i for i, left in enumerate(free) if left >= 1 - EPS][: math.ceil(amount - EPS)]
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
