"""A stream that stops moving fails, saying what it waits for, instead of sitting at 0 rows.

The plan (``vbench_ray.pool_plan``) refuses what cannot run on the cluster as it is when the stream starts; what
it cannot see is the cluster changing under it (another job on a shared cluster taking the CPUs, a node lost and
not replaced, an engine holding more than it said). Ray Data then waits for resources with no end and no error.
``guard`` hands on the stream's blocks as they come and raises ``StreamStalled`` when none came for
``ray.stall_s`` seconds, naming the stages' asks and what Ray has free; the rows already received are written by
the runner before the error goes on (``runner.drain_to_sink``).
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterable, Iterator

from vbench_ray.config import ConfigError

_END = object()


class StreamStalled(ConfigError):
    """No block left the stream for ``ray.stall_s`` seconds (exit status 2: the cluster's size is the fix)."""


def guard(blocks: Iterable, seconds: float | None, describe: Callable[[], str]) -> Iterator:
    """``blocks``, pulled by a daemon thread, each handed on as it comes; ``StreamStalled`` when none came for
    ``seconds`` (None or 0: wait for ever, the blocks pulled here directly)."""
    if not seconds:
        yield from blocks
        return
    out: queue.Queue = queue.Queue(maxsize=1)  # one block ahead at most: the stream's backpressure stays as it is

    def pull() -> None:
        try:
            for block in blocks:
                out.put(block)
            out.put(_END)
        except BaseException as exc:  # the stream's own failure goes to the consumer
            out.put(exc)

    threading.Thread(target=pull, name="vbench-stream", daemon=True).start()
    while True:
        try:
            item = out.get(timeout=float(seconds))
        except queue.Empty:
            raise StreamStalled(
                f"the stream made no progress for {float(seconds):g} s (ray.stall_s): {describe()}. "
                f"Rows received so far are kept; give the run more CPUs/GPUs (or free them), "
                f"enable fewer model metrics, or raise ray.stall_s for stages that are just slow, "
                f"then run the same command again"
            ) from None
        if item is _END:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def waiting_for(plans: dict, reserved: dict[str, float]) -> str:
    """What the stream's stages ask for against what Ray has free now, and what the judge engines hold."""
    import ray

    free = ray.available_resources() if ray.is_initialized() else {}
    total = ray.cluster_resources() if ray.is_initialized() else {}
    asks = ", ".join(
        f"{name} {p.num_cpus:g} CPU"
        + (f" + {p.num_gpus:g} GPU" if p.num_gpus else "")
        + (f" x {p.min_size}-{p.max_size}" if p.max_size > 1 or p.min_size > 1 else "")
        for name, p in plans.items()
    )
    return (
        f"waiting for Ray to place its stages ({asks}); Ray has {free.get('CPU', 0.0):g} of "
        f"{total.get('CPU', 0.0):g} CPUs and {free.get('GPU', 0.0):g} of {total.get('GPU', 0.0):g} GPUs free, "
        f"the judge engines hold {reserved.get('CPU', 0.0):g} CPUs and {reserved.get('GPU', 0.0):g} GPUs"
    )
