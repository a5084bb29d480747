"""Issue 30, item 4: a stream with no progress for ``ray.stall_s`` fails naming what it waits for, instead of
sitting at 0 rows with no error (seen: a Serve judge holding more CPUs than planned; here: another job holding the
session Ray's CPUs once the stream is planned)."""

from __future__ import annotations

import threading
import time

import pytest

from helpers.common import REPO, cove_overrides


def test_guard_hands_blocks_on_and_fails_when_none_come():
    from vbench_ray.stall import StreamStalled, guard

    release = threading.Event()

    def blocks():
        yield "a"
        yield "b"
        release.wait(30)  # a stream stuck after two blocks
        yield "c"

    got, t0 = [], time.perf_counter()
    with pytest.raises(StreamStalled, match=r"no progress for 0.5 s \(ray.stall_s\): waiting for X"):
        for block in guard(blocks(), 0.5, lambda: "waiting for X"):
            got.append(block)
    release.set()
    assert got == ["a", "b"] and time.perf_counter() - t0 < 5
    assert list(guard(iter("abc"), None, lambda: "")) == list("abc")  # off: the blocks as they are
    assert list(guard(iter("abc"), 5, lambda: "")) == list("abc")

    def broken():
        yield "a"
        raise RuntimeError("a stage failed")

    with pytest.raises(RuntimeError, match="a stage failed"):  # the stream's own error, not a stall
        list(guard(broken(), 5, lambda: ""))


@pytest.mark.ray
def test_a_stream_that_cannot_be_placed_fails_naming_what_it_waits_for(ray_local, cove_data, tmp_path, capsys):
    import ray

    from vbench_ray.cli import main

    @ray.remote(num_cpus=4)
    class Squatter:  # another job on the cluster, taking every CPU after the plan was made
        def ready(self):
            return True

    squatter = Squatter.remote()
    ray.get(squatter.ready.remote())
    try:
        t0 = time.perf_counter()
        code = main(
            [
                "run",
                str(REPO / "configs" / "cove.yaml"),
                *cove_overrides(cove_data, tmp_path / "run", "metrics.enabled=[SSIM]", "run.limit=1", "ray.stall_s=8"),
            ]
        )
        wall = time.perf_counter() - t0
    finally:
        ray.kill(squatter)
    err = capsys.readouterr().err
    print(f"stalled stream: rc {code} after {wall:.1f} s")
    assert code == 2 and "the stream made no progress for 8 s (ray.stall_s)" in err
    assert "waiting for Ray to place its stages (frames 1 CPU); Ray has 0 of 4 CPUs" in err
    assert wall < 60
