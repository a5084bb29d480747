"""A local multi-node Ray cluster, exercised end to end; run as a script by tests/cluster/test_multinode.py.

    python tests/helpers/multinode_cluster.py OUT_DIR [DATA_JSON]   # prints one JSON object (the facts asserted on)

DATA_JSON: a synthetic CoVEBench of 8 tasks, seed 0 (``synth_cove``'s paths as JSON; the session's ``cove_data``),
made here when absent.

Its own process, because a `ray.cluster_utils.Cluster` must not meet the test session's local Ray (`ray_local`).
The cluster, all on 127.0.0.1: a head with no CPUs (drivers and the judge-log writer only, as in cluster.yaml),
a CPU worker node (3 CPUs) and two "GPU" worker nodes (2 CPUs and one fake GPU resource each), started one after
another (a raylet aborts when its agents have not written their ports within 15 s, which nodes starting together on
a loaded 2-core machine miss). The tiny judge of scenario 3 is built by another process while scenarios 1 and 2 run.
Scenarios, in order:

1. `job`: `ray job submit ... -- python jobs/cove.py` (SSIM, MSM, MF on the synthetic CoVEBench, one case per
   block): the run directory, and which node computed each row (`node_frames`).
2. `gpu_pool`: a stream with a CPU stage and a pool stage asking 0.5 GPU, built by `pipeline.build_dataset`;
   the GPU node hosting the first pool actor is removed while that actor loads its "model", then a pool actor's
   process is SIGKILLed after the first rows: where each row ran, every row once.
3. `faults` (a CPU node is added first, replacing the lost GPU node): a CoVEBench run with the tiny hf judge
   streaming (driver here): the judge's replica process is SIGKILLed when the first judge answer is logged, then
   the node its restarted replica runs on is removed (`cluster.remove_node`): the rows on disk, the judge log's
   failed attempts, the replica loads (`engines.jsonl`), the judge's request statuses.
"""

from __future__ import annotations

import io
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Loopback only (docs/stack.md): Ray replaces 127.0.0.1 in an address it connects to with "the node's IP", which it
# takes from the network unless this flag (meant for laptops) is off; then every process here, and the job's
# driver, uses
# 127.0.0.1. Set before Ray is imported: it is read at import.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
BIN = Path(sys.executable).parent


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free ports (the sockets stay open until all are picked, so no port is handed out twice)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def build_judge_in_background(path: Path, log: Path) -> subprocess.Popen:
    """The tiny judge built by a process of its own (it imports torch and transformers: 10-25 s, which nothing
    else in this driver needs) while the first scenarios run; ``wait_for_judge`` before using it."""
    code = "import sys; from vbench_ray.judges.tiny import build_tiny_judge; build_tiny_judge(sys.argv[1], seed=0)"
    with open(log, "w") as err:
        return subprocess.Popen(
            [sys.executable, "-c", code, str(path)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=err
        )


def wait_for_judge(proc: subprocess.Popen, path: Path, log: Path) -> Path:
    if proc.wait(timeout=600) != 0:
        raise RuntimeError(f"building the tiny judge failed (exit {proc.returncode}): {log.read_text()[-3000:]}")
    return path


def _shard_keys(run_dir: Path) -> list[tuple[str, str]]:
    """Every (case_id, variant) in every shard on disk, duplicates kept (the sink must have written none)."""
    import pyarrow.parquet as pq

    keys = []
    for shard in sorted((run_dir / "cases").glob("part-*.parquet")):
        t = pq.read_table(shard, columns=["case_id", "variant"])
        keys += list(zip(t.column("case_id").to_pylist(), t.column("variant").to_pylist()))
    return keys


def _node_column(run_dir: Path, column: str) -> list:
    import pyarrow.parquet as pq

    return [
        v
        for shard in sorted((run_dir / "cases").glob("part-*.parquet"))
        for v in pq.read_table(shard, columns=[column]).column(column).to_pylist()
    ]


class SlowCpu:
    def __call__(self, row: dict) -> dict:
        time.sleep(0.2)
        return {"cpu_value": float(row["i"])}


class GpuPool:
    """Writes its pid where the driver can find it (to kill it), then scores slowly. "Loading the model" lasts until
    the driver has removed a GPU node (its ``loaded`` file; at most 120 s): the loss falls inside the load by the
    order of events, not because a fixed sleep outlasted the driver's polling on a busy machine."""

    def __init__(self, pid_dir: str):
        Path(pid_dir, f"{os.getpid()}.pid").write_text(str(os.getpid()))
        deadline = time.monotonic() + 120
        while not Path(pid_dir, "loaded").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def __call__(self, row: dict) -> dict:
        time.sleep(0.3)
        return {"pool_value": row["cpu_value"] * 2}


def scenario_job(address: str, data: dict, out: Path, env: dict) -> dict:
    run_dir = out / "job_run"
    cmd = [
        str(BIN / "ray"),
        "job",
        "submit",
        "--address",
        address,
        "--working-dir",
        str(REPO),
        "--",
        "python",
        "jobs/cove.py",
        "configs/cove.yaml",
        f"data.checklist={data['checklist']}",
        f"data.source_dir={data['source_dir']}",
        f"data.edited_dir={data['edited_dir']}",
        f"output.dir={run_dir}",
        "wandb.mode=disabled",
        "report.enabled=false",
        "metrics.enabled=[SSIM,MSM,MF]",
        "ray.batch_size=1",
    ]
    for _ in range(36):  # the job agent registers a few seconds after the head is up (longer on a busy machine)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
        if "No available agent" not in proc.stdout + proc.stderr:
            break
        time.sleep(5)
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    return {
        "returncode": proc.returncode,
        "tail": (proc.stdout + proc.stderr)[-3000:],
        "run_dir": str(run_dir),
        "summary_rows": summary.get("n_rows"),
        "failures": summary.get("failures", {}).get("count"),
        "timing_stages": summary.get("timing", {}).get("stages"),
        "stats_file": (run_dir / "ray_data_stats.txt").exists(),
        "keys": _shard_keys(run_dir),
        "node_frames": _node_column(run_dir, "node_frames"),
    }


def node_of(cluster, pid: int):
    """The cluster node whose raylet is an ancestor of process ``pid`` (None if gone)."""
    import psutil
    from ray._private import ray_constants

    try:
        ancestors = {p.pid for p in psutil.Process(pid).parents()}
    except psutil.NoSuchProcess:
        return None
    for node in [cluster.head_node, *cluster.worker_nodes]:
        raylets = node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET, [])
        if raylets and raylets[0].process.pid in ancestors:
            return node
    return None


def scenario_gpu_pool(cluster, out: Path) -> dict:
    import pyarrow as pa

    from vbench_ray.pipeline import Stage, build_dataset

    pid_dir = out / "pool_pids"
    pid_dir.mkdir()
    rows = [{"case_id": f"c{i:03d}", "variant": "base", "i": i} for i in range(24)]
    schema = pa.schema([("case_id", pa.string()), ("variant", pa.string()), ("i", pa.int64())])
    stages = [
        Stage(name="cpu", fn=SlowCpu, outputs={"cpu_value": "float"}, batch_size=1),
        Stage(
            name="pool",
            fn=GpuPool,
            kind="pool",
            init_kwargs={"pid_dir": str(pid_dir)},
            outputs={"pool_value": "float"},
            num_cpus=0.5,
            num_gpus=0.5,
            batch_size=1,
        ),
    ]
    got, killed, events = [], [], {}

    def saboteur():  # a GPU node lost while the pool loads its model
        while "node_removed" not in events:
            pids = [int(f.stem) for f in pid_dir.glob("*.pid")]
            node = node_of(cluster, pids[0]) if pids else None
            if node is not None:
                events["node_removed"] = node.node_id
                cluster.remove_node(node, allow_graceful=False)
                (pid_dir / "loaded").touch()  # the pool actors (the restarted ones too) finish loading now
            time.sleep(0.05)

    thread = threading.Thread(target=saboteur, daemon=True)
    thread.start()
    for block in build_dataset(rows, stages, schema, parallelism=len(rows)).iter_batches(
        batch_size=None, batch_format="pyarrow"
    ):
        got += block.to_pylist()
        if len(got) >= 3 and not killed:  # then a pool actor dies mid-run (its process killed, as by the OOM killer)
            for f in pid_dir.glob("*.pid"):
                node = node_of(cluster, int(f.stem))
                if node is not None:
                    os.kill(int(f.stem), signal.SIGKILL)
                    killed.append(int(f.stem))
                    break
    thread.join(timeout=5)
    return {
        "keys": [(r["case_id"], r["variant"]) for r in got],
        "killed": killed,
        "events": events,
        "pool_pids": sorted(int(f.stem) for f in pid_dir.glob("*.pid")),
        "node_pool": [r["node_pool"] for r in got],
        "node_cpu": [r["node_cpu"] for r in got],
        "pool_values_ok": all(r["pool_value"] == 2 * r["i"] for r in got),
        "errors": [r.get("error_pool") or r.get("error_cpu") for r in got if r.get("error_pool") or r.get("error_cpu")],
    }


def scenario_faults(cluster, data: dict, judge: Path, out: Path) -> dict:
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    run_dir = out / "fault_run"
    cfg = load_config(
        REPO / "configs" / "cove.yaml",
        [
            f"data.checklist={data['checklist']}",
            f"data.source_dir={data['source_dir']}",
            f"data.edited_dir={data['edited_dir']}",
            f"output.dir={run_dir}",
            "wandb.mode=disabled",
            "report.enabled=false",
            "metrics.enabled=[SSIM,MSM,MF,UAS,IFS,VRS,SEM]",
            "ray.batch_size=1",
            "ray.shard_rows=1",
            "ray.shard_seconds=0",
            "judge.include=judges/tiny_hf.yaml",
            f"judge.model={judge}",
        ],
    )
    events: dict = {}
    done = threading.Event()

    def saboteur():
        judge_log, engines = run_dir / "judge_log.jsonl", run_dir / "engines.jsonl"
        while not done.is_set() and len(events) < 2:
            loads = [json.loads(line) for line in engines.read_text().splitlines()] if engines.exists() else []
            if "judge_killed" not in events and judge_log.exists() and judge_log.stat().st_size and loads:
                os.kill(loads[0]["pid"], signal.SIGKILL)  # the hf judge replica, mid-stream
                events["judge_killed"] = {"pid": loads[0]["pid"], "at_s": round(time.time() - t0, 2)}
            if "judge_killed" in events and "node_removed" not in events and len(loads) >= 2:
                node = node_of(cluster, loads[-1]["pid"])  # the node the restarted replica (and its work) is on
                if node is not None and node is not cluster.head_node:
                    cluster.remove_node(node, allow_graceful=False)
                    events["node_removed"] = {
                        "node": node.node_id,
                        "at_s": round(time.time() - t0, 2),
                        "rows_on_disk": len(_shard_keys(run_dir)),
                    }
            time.sleep(0.1)

    logs = io.StringIO()  # the driver's log, as a job's log would show it
    handler = logging.StreamHandler(logs)
    handler.setLevel(logging.INFO)
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    t0 = time.time()
    thread = threading.Thread(target=saboteur, daemon=True)
    thread.start()
    try:
        result = run(cfg)
        summary, error = result.summary, None
    except Exception as exc:  # reported, the test says what went wrong
        summary, error = {}, f"{type(exc).__name__}: {exc}"
    finally:
        done.set()
        thread.join(timeout=5)
        logging.getLogger().removeHandler(handler)
    records = (
        [json.loads(line) for line in (run_dir / "judge_log.jsonl").read_text().splitlines() if line.strip()]
        if (run_dir / "judge_log.jsonl").exists()
        else []
    )
    return {
        "error": error,
        "events": events,
        "summary_rows": summary.get("n_rows"),
        "failures": summary.get("failures", {}).get("count"),
        "keys": _shard_keys(run_dir),
        "judge_failed_attempts": [r.get("error") for r in records if r.get("error")][:5],
        "judge_n_failed_attempts": sum(1 for r in records if r.get("error")),
        "judge": summary.get("judge"),
        "judge_unavailable": {
            m: s.get("unavailable") for m, s in summary.get("metrics", {}).items() if s.get("unavailable")
        },
        "engine_loads": len((run_dir / "engines.jsonl").read_text().splitlines())
        if (run_dir / "engines.jsonl").exists()
        else 0,
        "log_mentions_lost": [
            line for line in logs.getvalue().splitlines() if "fail" in line.lower() or "died" in line.lower()
        ][:10],
        "seconds": round(time.time() - t0, 1),
    }


def main(out: Path, data: dict | None = None) -> dict:
    temp_dir = tempfile.mkdtemp(prefix="vbrmn", dir="/tmp")  # short: Ray's socket paths have a length limit
    # a private cluster: token auth with a token of its own (not the user's ~/.ray/auth_token), which every node,
    # this driver and the `ray job submit` below read from the environment; set before Ray is imported (it reads
    # RAY_AUTH_MODE once)
    token = Path(temp_dir) / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    import ray
    from ray.cluster_utils import Cluster

    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        from vbench_ray.synth.cove import synth_cove

        data = synth_cove(out / "data", n=8, seed=0)
    dash, gcs_port, client_port = _free_ports(3)
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ['PATH']}"  # nodes (and the job's `python`) use this env
    # no fixed port: another Ray on the host may hold the dashboard agent's 52365 (every node here has an agent)
    common = {
        "node_ip_address": "127.0.0.1",
        "object_store_memory": 200 * 1024 * 1024,
        "dashboard_agent_listen_port": 0,
    }
    t0 = time.time()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            **common,
            "num_cpus": 0,
            "gcs_server_port": gcs_port,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dash,
            "temp_dir": temp_dir,
            "ray_client_server_port": client_port,
        },
    )
    facts: dict = {}
    judge_build = None
    try:
        cpu_node = cluster.add_node(**common, num_cpus=3)
        gpu_nodes = [cluster.add_node(**common, num_cpus=2, num_gpus=1) for _ in range(2)]
        cluster.wait_for_nodes()
        # A job's driver finds its cluster through `{temp_dir}/ray_current_cluster` (Ray's job supervisor), which
        # `Cluster` writes only to the default /tmp/ray: without it the driver attached to any GCS on the host
        # (another user's, another test session's)
        from ray._private.utils import write_ray_address

        write_ray_address(cluster.address, temp_dir)
        ray.init(
            address=cluster.address,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
            runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}},
        )
        facts["data"] = data
        facts["nodes"] = {
            "head": cluster.head_node.node_id,
            "cpu": cpu_node.node_id,
            "gpu": [n.node_id for n in gpu_nodes],
        }
        facts["cluster_up_s"] = round(time.time() - t0, 1)
        judge_build = build_judge_in_background(out / "tiny-judge", out / "tiny-judge.log")
        env = {**os.environ}
        env.pop("RAY_ADDRESS", None)
        t = time.time()
        facts["job"] = scenario_job(f"http://127.0.0.1:{dash}", data, out, env)
        facts["job"]["seconds"] = round(time.time() - t, 1)
        t = time.time()
        facts["gpu_pool"] = scenario_gpu_pool(cluster, out)
        facts["gpu_pool"]["seconds"] = round(time.time() - t, 1)
        facts["cpu2"] = cluster.add_node(**common, num_cpus=3).node_id  # replaces the GPU node lost above
        t = time.time()
        judge = wait_for_judge(judge_build, out / "tiny-judge", out / "tiny-judge.log")
        facts["judge_wait_s"] = round(time.time() - t, 1)  # what the background build still cost
        facts["faults"] = scenario_faults(cluster, data, judge, out)
        facts["driver_imported"] = sorted(m for m in ("torch", "transformers") if m in sys.modules)
        facts["nodes_alive_after"] = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    finally:
        ray.shutdown()
        cluster.shutdown()
        if judge_build is not None:
            judge_build.kill()  # only if it still runs (the run failed before it was needed)
            judge_build.wait()
    facts["total_s"] = round(time.time() - t0, 1)
    return facts


if __name__ == "__main__":
    result = main(Path(sys.argv[1]), json.loads(sys.argv[2]) if len(sys.argv) > 2 else None)
    (Path(sys.argv[1]) / "facts.json").write_text(json.dumps(result, default=str))  # also kept on disk, to read later
    print("MULTINODE_RESULT " + json.dumps(result, default=str))
