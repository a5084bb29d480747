"""Peak GPU memory of a ``command`` editor's processes, from ``nvidia-smi`` (CoVEBench Table 5's "Peak VRAM").

A command's model runs in child processes: ``torch.cuda.max_memory_allocated`` in the actor sees none of it. So,
while the command runs, ``nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`` is
asked every ``editor.gpu_poll_s`` seconds; the MB of every process in the command's process group (the command
is started in a session of its own, so its group holds it and whatever it starts) are summed per poll, and the
peak is the largest sum. This is the memory the driver gives the processes (allocator cache and CUDA context
included), so it reads higher than ``max_memory_allocated`` for the same model; ``edit_peak_from`` says which
measure a row holds. Without ``nvidia-smi``, or when no process of the group ever shows up (a model on the CPU,
or an ``nvidia-smi`` that reports PIDs of another PID namespace, as in some containers), the peak is null and
``edit_peak_from`` says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from typing import Callable

QUERY = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
PEAK_SMI = "nvidia-smi used_memory summed over the command's process group"
NO_SMI = "unavailable: no nvidia-smi on the actor's node"
NOT_SEEN = (
    "unavailable: nvidia-smi never listed a process of the command's group (no GPU used, or PIDs of "
    "another PID namespace)"
)


def parse_compute_apps(text: str) -> dict[int, float]:
    """``pid, used_memory`` lines (MiB) -> MB per pid, summed when a pid is listed once per GPU; lines without a
    number (``[N/A]``, ``[Insufficient Permissions]``) are skipped."""
    out: dict[int, float] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            continue
        try:
            pid, mb = int(parts[0]), float(parts[1])
        except ValueError:
            continue
        out[pid] = out.get(pid, 0.0) + mb
    return out


def group_mb(apps: dict[int, float], pgid: int, getpgid: Callable[[int], int] = os.getpgid) -> float | None:
    """MB used by the processes of group ``pgid`` among ``apps``; None when none of them is in it."""
    total, seen = 0.0, False
    for pid, mb in apps.items():
        try:
            in_group = getpgid(pid) == pgid
        except (ProcessLookupError, PermissionError, OSError):  # gone, or not in our PID namespace
            continue
        if in_group:
            total, seen = total + mb, True
    return total if seen else None


class GroupPeak:
    """Polls nvidia-smi in a thread while a process group runs: ``start()``, then ``stop()`` -> ``(mb, from)``."""

    def __init__(self, pgid: int, interval: float = 0.5, smi: str | None = None):
        self.pgid, self.interval = pgid, max(0.01, float(interval))
        self.smi = smi or shutil.which("nvidia-smi")
        self.peak: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"gpu-peak-{pgid}", daemon=True)

    def start(self) -> "GroupPeak":
        if self.smi:
            self._thread.start()
        return self

    def poll(self) -> None:
        try:
            done = subprocess.run(
                [self.smi, *QUERY], capture_output=True, text=True, timeout=max(5.0, self.interval), check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        if done.returncode != 0:
            return
        mb = group_mb(parse_compute_apps(done.stdout), self.pgid)
        if mb is not None:
            self.peak = mb if self.peak is None else max(self.peak, mb)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval)

    def stop(self) -> tuple[float | None, str]:
        if not self.smi:
            return None, NO_SMI
        self._stop.set()
        self._thread.join(timeout=10)
        return self.peak, PEAK_SMI if self.peak is not None else NOT_SEEN
