"""One run per run directory: an exclusive lock on ``output.dir`` held for the run's life.

Two runs writing one directory write every row twice, pay every judge request twice and leave a
``config.yaml`` / ``summary.json`` of one beside the shards of the other. So ``run`` takes
``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``RUN_DIR/.run.lock`` before it writes anything and keeps it until it
returns. The file holds who holds it (pid, host, start time), so a second run refuses at once naming the
holder, and the readers (``compare``, ``report``) say a run is in progress instead of reading half a run.

The kernel drops an flock when its holder's process ends however it ends (exit, exception, SIGKILL, a
crashed node's NFS lease), so a lock left by a dead process is simply taken over: the file's stale
contents are overwritten by the new holder. (Linux NFS clients map flock onto POSIX byte-range locks, which
the server arbitrates between hosts.)
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
from pathlib import Path

from vbench_ray.config import ConfigError

LOCK_NAME = ".run.lock"


class RunInProgress(ConfigError):
    """``output.dir`` is held by another run (the message names it): the command refuses, exit status 2."""


def _holder_info(path: Path) -> dict:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _describe(path: Path) -> str:
    info = _holder_info(path)
    if not info:
        return "another run (holder not recorded yet)"
    return f"pid {info.get('pid')} on host {info.get('host')}, started {info.get('started')}"


class RunLock:
    """The held lock (``release`` or leaving the ``with`` block gives it back)."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> "RunLock":
        # O_CREAT and no truncation: opening must not wipe the holder's record before we know we hold it
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunInProgress(
                f"output.dir {self.path.parent} is in use by another run ({_describe(self.path)}); "
                f"wait for it to finish, or choose another output.dir"
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)  # the file no longer names a holder
        finally:
            os.close(self.fd)  # closing drops the flock
            self.fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire() if self.fd is None else self

    def __exit__(self, *exc) -> None:
        self.release()


def holder(run_dir: str | Path) -> str | None:
    """Who holds ``run_dir``'s lock (pid, host, start time), or None when no run is in progress there."""
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # no lock file: no run has held this directory (or it is not readable: nothing to say)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        info = _holder_info(path)
        if info.get("pid") == os.getpid() and info.get("host") == socket.gethostname():
            return None  # the run itself (its report at the end)
        return _describe(path)
    finally:
        os.close(fd)  # a shared lock we got is dropped with the descriptor
    return None


def check_not_in_progress(run_dir: str | Path, what: str) -> None:
    """Raise ``RunInProgress`` when a run holds ``run_dir``: ``what`` (e.g. ``compare``) would read half a run."""
    who = holder(run_dir)
    if who:
        raise RunInProgress(
            f"{run_dir}: a run is in progress there ({who}); its summary.json and rows are not "
            f"final: {what} it once that run has finished"
        )
