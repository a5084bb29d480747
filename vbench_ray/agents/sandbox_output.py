"""A sandboxed command's result and its bounded output: stdout and stderr read as they come, only a head and a tail
of each kept (``SandboxLimits.output_kb`` in all), the text saying how many bytes were cut."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

READ_CHUNK = 1 << 16


@dataclass
class CommandResult:
    exit_code: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float
    stdout_bytes: int = 0  # what the command wrote in all (stdout/stderr hold at most a head and a tail)
    stderr_bytes: int = 0


class CappedStream:
    """A stream's first and last bytes and its total length: memory stays bounded whatever a command prints."""

    def __init__(self, limit: int):
        self.head_max = max(0, limit) // 2
        self.tail_max = max(0, limit) - self.head_max
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(self.head) < self.head_max:
            take = self.head_max - len(self.head)
            self.head += chunk[:take]
            chunk = chunk[take:]
        if chunk and self.tail_max:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_max:  # trim in bulk: amortised O(1) per byte
                del self.tail[: len(self.tail) - self.tail_max]

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_max :]) if self.tail_max else b""
        cut = self.total - len(self.head) - len(tail)
        head = self.head.decode("utf-8", "replace")
        if cut <= 0:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        return (
            f"{head}\n... [{cut} bytes cut: the command wrote {self.total} bytes; first and last "
            f"{len(self.head) + len(tail)} kept] ...\n{tail.decode('utf-8', 'replace')}"
        )


def pump(fd: int, sink: CappedStream) -> None:
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except OSError:
            return
        if not chunk:
            return
        sink.feed(chunk)


def feed_stdin(stream, data: bytes) -> None:
    try:
        if data:
            stream.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except (BrokenPipeError, OSError):
            pass
