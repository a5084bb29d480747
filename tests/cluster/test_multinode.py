"""A multi-node Ray cluster on this machine (`ray.cluster_utils.Cluster`, loopback only): placement and faults.

The cluster lives in its own process (tests/helpers/multinode_cluster.py, about 1-2 minutes on 2 cores), so it
never meets the session's local Ray; the script prints the facts as JSON and each test asserts on one part:

* head (0 CPUs: drivers only), a CPU worker node (3 CPUs), two "GPU" worker nodes (2 CPUs, 1 fake GPU each),
  the tiny judge built meanwhile by a process of its own (the driver never imports torch);
* `job`: `ray job submit ... -- python jobs/cove.py` against the cluster's dashboard writes the run directory, and
  the decode stage ran on more than one node (`node_frames` in the case table);
* `gpu_pool`: a pool stage asking 0.5 GPU (`pipeline.Stage(kind="pool", num_gpus=0.5)` through `build_dataset`)
  runs only on GPU nodes, CPU tasks on several nodes; a GPU node is removed while the pool loads its model and a
  pool actor is SIGKILLed mid-run: every row comes out exactly once, computed (no error rows);
* `faults`: a CoVEBench run (SSIM, MSM, MF and the tiny hf judge streaming, one row per shard): the judge's replica
  is SIGKILLed when its first answer is logged, then the node its restarted replica runs on is removed: the run
  finishes with every (case_id, variant) exactly once on disk (no lost, no duplicated rows), nothing failed, and
  the judge log shows the failed attempts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from helpers.common import REPO, user_env
from helpers.tiny.procs import kill_session

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def facts(tmp_path_factory, cove_data):
    out = tmp_path_factory.mktemp("multinode")
    # its own session: every process of the cluster (raylets' workers and agents too) is killed by pid when the
    # script ends, fails or times out, or on Ctrl-C here (tiny.procs.kill_session)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "helpers" / "multinode_cluster.py"),
            str(out),
            json.dumps({k: cove_data[k] for k in ("checklist", "source_dir", "edited_dir")}),  # read only there
        ],
        cwd=REPO,
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        kill_session(proc.pid)
        proc.kill()
        proc.wait()
    lines = [line for line in stdout.splitlines() if line.startswith("MULTINODE_RESULT ")]
    assert proc.returncode == 0 and lines, stdout[-3000:] + stderr[-5000:]
    return json.loads(lines[-1][len("MULTINODE_RESULT ") :])


def _once(keys: list, expected: int) -> None:
    counts = Counter(tuple(k) for k in keys)
    assert len(counts) == expected, f"{len(counts)} distinct rows, expected {expected}"
    assert all(n == 1 for n in counts.values()), [k for k, n in counts.items() if n > 1]


def test_the_driver_leaves_the_judge_build_to_a_process_of_its_own(facts):
    """The tiny judge is built by another process while the first scenarios run: the driver never imports torch."""
    assert facts["driver_imported"] == [], facts["driver_imported"]


def test_job_submit_to_the_cluster_spreads_the_decode_stage(facts, cove_data):
    assert facts["data"]["checklist"] == cove_data["checklist"], "the session's synthetic CoVEBench is reused"
    job = facts["job"]
    assert job["returncode"] == 0, job["tail"]
    assert job["summary_rows"] == 8 and job["failures"] == 0
    _once(job["keys"], 8)
    workers = {facts["nodes"]["cpu"], *facts["nodes"]["gpu"]}
    assert set(job["node_frames"]) <= workers, "a row computed on the head (it has no CPUs) or by no node"
    assert len(set(job["node_frames"])) > 1, f"the decode stage ran on one node only: {Counter(job['node_frames'])}"
    assert job["stats_file"] and job["timing_stages"]["frames"]["rows"] == 8


def test_gpu_pool_lands_only_on_gpu_nodes_and_survives_losses(facts):
    pool = facts["gpu_pool"]
    gpu_nodes = set(facts["nodes"]["gpu"])
    assert pool["events"].get("node_removed") in gpu_nodes, pool["events"]  # a GPU node lost during the load
    assert pool["killed"], "no pool actor was killed mid-run"
    _once(pool["keys"], 24)
    assert pool["errors"] == [] and pool["pool_values_ok"]
    assert set(pool["node_pool"]) <= gpu_nodes, Counter(pool["node_pool"])
    assert len(set(pool["node_cpu"])) > 1, Counter(pool["node_cpu"])
    assert len(pool["pool_pids"]) > len(set(pool["killed"])), "the killed actors were not replaced"


def test_losing_the_judge_replica_and_a_node_mid_run(facts):
    faults = facts["faults"]
    assert faults["error"] is None, faults["error"]
    assert "judge_killed" in faults["events"] and "node_removed" in faults["events"], faults["events"]
    assert faults["events"]["node_removed"]["node"] not in facts["nodes_alive_after"]
    _once(faults["keys"], 8)
    assert faults["summary_rows"] == 8 and faults["failures"] == 0
    # the restart is in the run directory (engines.jsonl: one line per replica load); a call that failed even
    # after Ray's retries is a failed attempt in the judge log, and nothing else failed there
    assert faults["engine_loads"] >= 2, "the judge replica was not restarted"
    assert all("hf judge replica failed" in e for e in faults["judge_failed_attempts"]), faults["judge_failed_attempts"]
    assert not faults["judge_unavailable"], faults["judge_unavailable"]
    # the calls the dead replica held were sent again once it was back: no request ended without an answer
    assert (
        faults["judge"]["n_error"] == 0
        and faults["judge"]["n_ok"] + faults["judge"]["n_invalid"] == faults["judge"]["n_requests"]
    ), faults["judge"]
