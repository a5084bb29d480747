"""Ctrl-C during a command (issue 23, item 8): the first stops it cleanly within seconds, a second at once.

The first SIGINT raises ``KeyboardInterrupt`` in the main thread, as Python's own handler does, so the run unwinds:
the stream writes the rows it holds (``runner._compute``), Ray Data's iterator shuts its executor down, the judge
engines stop. ``exit_interrupted`` then stops Ray itself and ends the process with ``os._exit``, skipping the
interpreter's teardown: there, after ``atexit`` had shut Ray down, the garbage collector ran a Ray Data
executor's ``__del__``, whose shutdown asks Ray for its stats and so started a fresh local Ray, and the process
hung for over 90 s. A second SIGINT, or a clean-up still running ``GRACE_S`` seconds after the first, ends the
process at once. Exit status 130 (128 + SIGINT), the shell's convention.
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
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def exit_interrupted(message: str) -> NoReturn:
    """Print ``message``, stop Ray (a local runtime's processes; an attached cluster is only disconnected), flush
    the logs and end the process with status 130, before the interpreter's teardown can start a Ray again."""
    print(message, file=sys.stderr)
    with contextlib.suppress(BaseException):
        import ray

        if ray.is_initialized():
            ray.shutdown()
    with contextlib.suppress(BaseException):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)
