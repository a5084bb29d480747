"""How ``make test`` shares the suite between two pytest-xdist workers (``-n 2 --dist loadscope
--no-loadscope-reorder``; ``conftest.work_unit``, ``pytest_xdist_make_scheduler``): a collection of the real end-to-end
and cluster modules as a subprocess whose config says it is an xdist worker (``config.workerinput``, what
pytest-xdist sets on a worker) and as a plain run; then two small modules on two real workers."""

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SERVER_USERS = {
    "tests/e2e/test_agent_loop.py::test_real_vllm_server_nonsense_model_is_survived",
    "tests/e2e/test_judge_http.py::test_real_vllm_server_file_and_base64_media",
}
PLUGIN = """
import os


def pytest_configure(config):
    if os.environ.get("AS_XDIST_WORKER"):
        config.workerinput = {"workerid": "gw0"}


def pytest_collection_finish(session):
    (conftest,) = [p for p in session.config.pluginmanager.get_plugins() if hasattr(p, "work_unit")]
    for item in session.items:
        used = "tiny_vllm_server" in item.fixturenames
        print("ITEM", item.nodeid, used, conftest.work_unit(item.nodeid), sep="\t")
"""


def _collect(tmp_path: Path, as_worker: bool) -> list[tuple[str, bool, str]]:
    """(test id, uses the shared server, its unit of work) for every test of tests/e2e and tests/cluster, in the
    order they run."""
    (tmp_path / "as_worker.py").write_text(PLUGIN)
    env = {k: v for k, v in os.environ.items() if k != "AS_XDIST_WORKER"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    if as_worker:
        env["AS_XDIST_WORKER"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "as_worker", "-p", "no:cacheprovider"]
        + [str(TESTS / "e2e"), str(TESTS / "cluster")],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [x.split("\t") for x in done.stdout.splitlines() if x.startswith("ITEM\t")]
    return [(n, used == "True", u) for _, n, used, u in lines]


def test_a_worker_runs_the_heavy_units_first_and_the_shared_servers_users_last_as_one(tmp_path):
    items = _collect(tmp_path, as_worker=True)
    assert len(items) > 50
    # the scheduler tells the shared server's users by their name: every user is named so, and only they are
    assert {n for n, used, _ in items if used} == {n for n, _, u in items if u == "tiny_vllm_server"} == SERVER_USERS
    serve = {"tests/e2e/test_judge_serve.py", "tests/e2e/test_judge_serve_faults.py"}
    assert {u for n, _, u in items if n.split("::")[0] in serve} == {"serve"}
    for n, used, u in items:  # any other test: its module
        if not used and n.split("::")[0] not in serve:
            assert u == n.split("::")[0].rsplit("/", 1)[-1], (n, u)
    units = [u for _, _, u in items]
    order = [u for i, u in enumerate(units) if i == 0 or units[i - 1] != u]
    assert len(order) == len(set(order)), order  # each unit's tests one after another
    heavy = ["test_multinode.py", "test_judge_vllm_installed.py", "test_job_submit.py", "test_judge_vllm.py", "serve"]
    assert order[:5] == heavy, order
    assert order[-1] == "tiny_vllm_server"


def test_a_plain_run_keeps_its_order(tmp_path):
    items = _collect(tmp_path, as_worker=False)
    assert items[0][0].startswith("tests/cluster/test_multinode.py::")  # the cluster first
    assert {n for n, _, _ in items[-2:]} == SERVER_USERS  # the shared server's users last


def test_two_real_workers_run_each_module_on_one_worker(tmp_path):
    modules = ["unit/test_cfgutil.py", "unit/test_registry.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadscope"]
        + ["--no-loadscope-reorder", "--basetemp", str(tmp_path / "base")]
        + [str(TESTS / m) for m in modules],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "scheduling tests via ByWorkUnit" in done.stdout  # conftest's scheduler, not xdist's own
    ran = re.findall(r"^\[(gw\d)\].* PASSED (\S+)", done.stdout, re.M)
    assert len(ran) > 5, done.stdout[-3000:]
    workers: dict[str, set] = {}
    for worker, nodeid in ran:
        workers.setdefault(nodeid.split("::")[0].rsplit("/", 1)[-1], set()).add(worker)
    assert set(workers) == {"test_cfgutil.py", "test_registry.py"}
    assert all(len(w) == 1 for w in workers.values()), workers
