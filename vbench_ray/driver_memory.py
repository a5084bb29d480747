"""Memory hygiene for the run's driver process, so its memory stays bounded at benchmark scale."""

from __future__ import annotations

import pyarrow as pa


def use_c_allocator() -> None:
    """Make the C library's allocator Arrow's default pool in this process (the run's driver).

    The driver's Arrow work is building the case table chunk by chunk and reading back hundreds of small
    shards: with Arrow's default (mimalloc) the driver's private memory grows to about twice what Arrow holds
    (docs/performance.md, "Driver memory"), the C allocator's stays close to it. Buffers made before the switch
    are still freed by their own pool. Speed is not at stake: the driver copies little (blocks arrive from the
    object store zero-copy)."""
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())


def release_memory() -> None:
    """Hand memory freed by the driver back to the OS: Arrow's pool keeps freed blocks for reuse, and glibc keeps
    the holes the loader's row dicts leave between the case table's buffers (``malloc_trim``; a no-op where the
    C library is not glibc). Without it the RSS after loading 100k cases was about 1.6x the case table."""
    import ctypes

    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
