"""Live W&B after Ctrl-C: the run interrupted mid-stream still ends its offline W&B run (the exit record with
status 130, the progress steps logged so far), so `wandb sync` uploads a complete, failed run; the same command run
again continues the same W&B id. A real CLI subprocess, a real SIGINT, the offline run files read back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import wandb_records
from helpers.common import REPO, cove_overrides

COVE = REPO / "configs" / "cove.yaml"


def _cli(args: list[str], ray_dir: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "RAY_TMPDIR": ray_dir, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "vbench_ray.cli", *args],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,  # its own process group: SIGINT to the group is a terminal's Ctrl-C
    )


def _exit_codes(path: Path) -> list[int]:
    return [r.exit.exit_code for r in wandb_records.records(path, wait_s=20) if r.WhichOneof("record_type") == "exit"]


@pytest.mark.ray
def test_ctrl_c_finishes_the_offline_wandb_run_and_a_resume_keeps_its_id(cove_data, tmp_path):
    out = tmp_path / "run"
    args = [
        "run",
        str(COVE),
        *cove_overrides(cove_data, out, "ray.workers=1", "ray.num_cpus=2", "ray.shard_rows=1", "ray.shard_seconds=0"),
        "wandb.mode=offline",
        "metrics.enabled=[SSIM]",
    ]
    log = tmp_path / "run.log"
    proc = _cli(args, tempfile.mkdtemp(prefix="vbr", dir="/tmp"), log)
    try:
        deadline = time.monotonic() + 240
        while not any((out / "cases").glob("part-*.parquet")):
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no shard was written"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # the whole group, wandb's service process too, as a terminal does
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert "Traceback" not in text
    rows = pq.read_table(out / "cases").num_rows
    assert 1 <= rows < 8  # interrupted mid-stream

    [first] = sorted((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert _exit_codes(first) == [130]  # ended, as failed: `wandb sync` uploads it as a finished, crashed run
    steps = [h for h in wandb_records.history(first) if "progress/cases_done" in h]
    assert steps and steps[-1]["progress/cases_done"] == rows  # every shard written was logged
    assert steps[-1]["running/SSIM/n"] >= 1
    run_id = wandb_records.run_record(first).run_id

    # the same command again: the remaining rows, into the same W&B run (same id), ended with status 0
    proc = _cli(args, tempfile.mkdtemp(prefix="vbr", dir="/tmp"), log)
    try:
        code = proc.wait(timeout=600)
    finally:
        proc.kill()
    assert code == 0, log.read_text()[-3000:]
    second = [p for p in (out / "wandb").glob("offline-run-*/run-*.wandb") if p != first]
    assert len(second) == 1 and wandb_records.run_record(second[0]).run_id == run_id
    assert _exit_codes(second[0]) == [0]
    steps = [h for h in wandb_records.history(second[0]) if "progress/cases_done" in h]
    assert steps[-1]["progress/cases_done"] == 8 - rows


HELD = """
import json, os, signal, sys
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

from vbench_ray.interrupt import ctrl_c_guard
from vbench_ray.runner import drain_to_sink
from vbench_ray.sinks import CaseSink

schema = pa.schema([("case_id", pa.string()), ("variant", pa.string()), ("SSIM", pa.float64())])
sink, logged = CaseSink(Path(sys.argv[1]), schema), []


def on_write(batch):  # the live W&B step of a shard just written; Ctrl-C comes in between
    os.kill(os.getpid(), signal.SIGINT)
    logged.append(batch.num_rows)


sink.on_write = on_write
blocks = (pa.table({"case_id": [str(i)], "variant": ["base"], "SSIM": [0.5]}, schema=schema) for i in range(3))
with ctrl_c_guard():
    try:
        drain_to_sink(blocks, sink, SimpleNamespace(shard_rows=1, shard_seconds=0.0))
    except KeyboardInterrupt:
        pass
print(json.dumps({"on_disk": pq.read_table(Path(sys.argv[1]) / "cases").num_rows, "logged": sum(logged)}))
sys.stdout.flush()
os._exit(0)  # the first Ctrl-C armed the clean-up deadline
"""


def test_ctrl_c_between_a_shard_and_its_wandb_step_waits_for_the_step(tmp_path):
    """A first Ctrl-C while a shard is written and its live W&B step logged stops the stream after both: every row
    on disk is in the W&B progress (cut between them, the rows were on disk and never logged)."""
    import json

    res = subprocess.run(
        [sys.executable, "-c", HELD, str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=str(REPO)
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"on_disk": 1, "logged": 1}
