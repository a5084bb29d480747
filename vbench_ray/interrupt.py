"""Ctrl-C during a command: the first stops it cleanly within seconds, a second at once.

The first SIGINT raises ``KeyboardInterrupt`` in the main thread, as Python's own handler does, so the run unwinds:
the stream writes the rows it holds (``runner.drain_to_sink``), the judge engines stop. ``exit_interrupted`` then
ends the process with ``os._exit`` while Ray is still up. Not ``ray.shutdown()`` first, nor the interpreter's
teardown (whose ``atexit`` shuts Ray down): Ray Data's prefetch thread is still running the stream's executor, and
when it finishes, the executor's shutdown reports its stats to Ray; with Ray gone that call initialises Ray again,
starting a fresh local runtime (or attaching to another one on the machine), which would hold a Ctrl-C'd run for
a minute or more. Nothing is lost by skipping the teardown: shards are written atomically, judge-log records are
flushed and synced as they are appended, the live W&B run is finished first with exit code 130 (its steps so far
kept; ``wandb sync`` uploads it as a failed run, and the same command continues its id), and a local Ray's processes
end with the process that started them (``ray_start``: Ray starts them with ``PR_SET_PDEATHSIG``); an attached
cluster sees its driver gone and frees what the run held. A second SIGINT, or a clean-up still running ``GRACE_S``
seconds after the first, ends the process at once. Exit status 130 (128 + SIGINT), the shell's convention.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from typing import Iterator, NoReturn

EXIT_INTERRUPTED = 130
GRACE_S = 15.0  # the most the clean-up after a first Ctrl-C may take before the process ends anyway


def _now(why: str) -> NoReturn:
    try:
        os.write(2, f"\n{why}: exiting now (rows written so far are kept)\n".encode())
    finally:
        os._exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def ctrl_c_guard() -> Iterator[None]:
    """Within the block: the first SIGINT raises ``KeyboardInterrupt`` and arms a ``GRACE_S`` deadline; the
    second ends the process at once. The previous handler comes back after the block. Outside the main thread
    (where no handler can be set), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    state = {"count": 0}

    def handler(signum, frame) -> None:
        state["count"] += 1
        if state["count"] > 1:
            _now("interrupted again")
        timer = threading.Timer(GRACE_S, _now, args=(f"clean-up still running {GRACE_S:.0f} s after Ctrl-C",))
        timer.daemon = True
        timer.start()
        if _held["depth"]:  # inside `held()`: raised when the block ends
            _held["pending"] = True
            return
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


_held = {"depth": 0, "pending": False}


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A step that must not be cut in two: a first Ctrl-C within it raises ``KeyboardInterrupt`` when it ends (the
    second still ends the process at once). A shard of rows and its live W&B progress step are one such step
    (``runner.drain_to_sink``): cut between them, the rows were on disk and never in the W&B run. Outside the main
    thread (where the signal is not handled) it holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
    if not _held["depth"] and _held["pending"]:
        _held["pending"] = False
        raise KeyboardInterrupt


def exit_interrupted(message: str) -> NoReturn:
    """Print ``message``, flush the logs and end the process with status 130, Ray still up (see the module's
    docstring: a Ray shut down under Ray Data's running threads is started again by them)."""
    print(message, file=sys.stderr)
    live = sys.modules.get("vbench_ray.live")  # not imported by a command that streams nothing: no run to end
    if live is not None:
        with contextlib.suppress(BaseException):
            live.finish_open(EXIT_INTERRUPTED)  # the live wandb run ends as failed, with its steps so far
    with contextlib.suppress(BaseException):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)
