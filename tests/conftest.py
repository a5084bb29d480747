"""Shared fixtures: one local Ray runtime per session, one synthetic CoVEBench per session, tiny videos."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.common import RAY_AUTH_VARS, REPO
from helpers.ray_auth import new_token_file, private_ray_auth

# Keep Ray, wandb and caches off the developer's home and out of the repo.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("WANDB_MODE", "offline")


@pytest.fixture(scope="session")
def private_ray_token() -> Path:
    """A token file of this session's own for its in-process Ray runtime (``ray_local``; tests/helpers/ray_auth.py
    says why). Nothing of it is in ``os.environ``: a test that starts a process needing it hands it over."""
    return new_token_file()


@pytest.fixture(autouse=True)
def _ray_auth_stays_scoped():
    """No test leaves Ray's token set-up in this process's environment, where every process a later test starts
    would inherit it: in-process Ray is started by ``ray_local`` (which takes its token out again), never by a
    ``ray.init`` of its own (Ray 2.60 would write ``RAY_AUTH_MODE=token`` into ``os.environ`` and use the user's
    shared ``~/.ray/auth_token``)."""
    before = {k: os.environ.get(k) for k in RAY_AUTH_VARS}
    yield
    after = {k: os.environ.get(k) for k in RAY_AUTH_VARS}
    if after != before:
        for k, v in before.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v
        pytest.fail(f"the test left Ray's auth variables in os.environ ({after}); start Ray through ray_local")


# tests/ (for ``helpers``) and the group folders, whose modules pytest imports by their plain names (a test module
# imports what it shares from ``helpers``, never from another test module: tests/unit/test_repo_layout.py)
TEST_PATHS = [REPO / "tests", *(REPO / "tests" / group for group in ("unit", "pipeline", "cluster", "e2e"))]

SHARED_SERVER = "tiny_vllm_server"  # the session's one vLLM OpenAI server (fixture below)


def pytest_collection_modifyitems(session, config, items):
    """The multi-node tests first: they start a cluster of their own in a subprocess, and on 2 cores they need
    the machine before the shared local Ray (and what earlier tests leave in it) is up. The tests that use the
    shared vLLM server (directly or through another fixture) last, one after the other: the server starts once,
    late, and stays up only while they run (session teardown stops it). Otherwise collection order is kept.
    In a pytest-xdist worker the heavy units (``HEAVY_UNITS``) go first, longest first."""

    def rank(item) -> int:
        if item.fspath.basename == "test_multinode.py":
            return 0
        return 2 if SHARED_SERVER in getattr(item, "fixturenames", ()) else 1

    items.sort(key=rank)
    if hasattr(config, "workerinput"):  # what pytest-xdist sets on a worker's config
        items.sort(key=lambda item: (rank(item) == 2, _heavy_rank(work_unit(item.nodeid))))


# Under pytest-xdist (make test: ``-n 2 --dist loadscope --no-loadscope-reorder``) each worker is a pytest session of
# its own, with its own ``ray_local`` and its own session and module fixtures. A worker takes a unit of work at a time
# (``pytest_xdist_make_scheduler``): a module (its module fixtures built once), the shared vLLM server's users (one
# server; they are named ``test_real_vllm_server_*``, checked by tests/e2e/test_xdist_units.py) or the Serve tests
# (one Serve controller: they share a worker's Ray). The heavy units go first, so that the two workers start on them
# and share out the light modules after; the shared server's users stay last.
HEAVY_UNITS = ("test_multinode.py", "test_judge_vllm_installed.py", "test_job_submit.py", "test_judge_vllm.py", "serve")
SERVE_MODULES = ("test_judge_serve.py", "test_judge_serve_faults.py")
SERVER_TESTS = "test_real_vllm_server"


def work_unit(nodeid: str) -> str:
    """The unit of work an xdist worker takes the test ``nodeid`` in: its module's file name, the shared server's
    or the Serve tests'. From the test id alone: the scheduler, in the controlling process, sees no fixtures."""
    path, _, name = nodeid.partition("::")
    if name.startswith(SERVER_TESTS):
        return SHARED_SERVER
    module = path.rsplit("/", 1)[-1]
    return "serve" if module in SERVE_MODULES else module


def _heavy_rank(unit: str) -> int:
    return HEAVY_UNITS.index(unit) if unit in HEAVY_UNITS else len(HEAVY_UNITS)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist (a dev extra)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scope scheduling with ``work_unit`` as the scope (its ``loadgroup`` renames test ids, which
    pytest 9 no longer lets a plugin do)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


@pytest.fixture(scope="session")
def ray_local(private_ray_token):
    """A local Ray runtime shared by every test that needs one (starting Ray costs ~10 s), with token
    authentication on this session's own token (``private_ray_token``), which only the runtime's own processes
    (GCS, raylet, workers) inherit."""
    import ray

    if not ray.is_initialized():
        # loopback only (docs/stack.md); workers import test modules (by their folder, as pytest does) and
        # ``helpers`` (from tests/), so those folders go on their path
        path = os.pathsep.join([*map(str, TEST_PATHS), str(REPO), os.environ.get("PYTHONPATH", "")])
        # one fake GPU: pools that ask for a GPU schedule (their models still run on the CPU)
        with private_ray_auth(private_ray_token):
            ray.init(
                address="local",
                num_cpus=4,
                num_gpus=1,
                include_dashboard=False,
                log_to_driver=False,
                _node_ip_address="127.0.0.1",
                runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": path}},
            )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def vllm_cache_root(tmp_path_factory) -> Path:
    """The one ``VLLM_CACHE_ROOT`` of every vLLM process the session starts (servers, Ray Data engine actors,
    Serve replicas, the CLI's), in its temp folder: vLLM caches there what it learns inspecting a model class
    (``modelinfos/``, ~19 s of a tiny engine's start), so only the session's first engine of an architecture pays
    it (tests/helpers/tiny/procs.py ``vllm_env``). Nothing from an earlier run is read."""
    return tmp_path_factory.mktemp("vllm_cache")


def _read_only(model: Path) -> Path:
    """Files of a session's model made read-only: its users share it."""
    for path in model.rglob("*"):
        if path.is_file():
            path.chmod(0o444)
    return model


@pytest.fixture(scope="session")
def tiny_qwen2_vl_dir(tmp_path_factory) -> Path:
    """The tiny random-weight Qwen2-VL (tests/helpers/tiny), built once per session (~12 s); read-only."""
    from helpers.tiny.models import build_tiny_qwen2_vl

    return _read_only(build_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny_qwen2_vl") / "qwen2_vl"))


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tmp_path_factory) -> Path:
    """The tiny random-weight Qwen2 (text only), built once per session; read-only."""
    from helpers.tiny.models import build_tiny_qwen2

    return _read_only(build_tiny_qwen2(tmp_path_factory.mktemp("tiny_qwen2") / "qwen2"))


@pytest.fixture(scope="session")
def tiny_judge_dir(tmp_path_factory) -> Path:
    """The tiny random-weight LLaVA judge of the hf backend (``vbench_ray.judges.tiny``, seed 0), built once per
    session; read-only."""
    from vbench_ray.judges.tiny import build_tiny_judge

    return _read_only(build_tiny_judge(tmp_path_factory.mktemp("tiny_judge") / "tiny-llava", seed=0))


@pytest.fixture(scope="session")
def tiny_vllm_server(tmp_path_factory, tiny_qwen2_vl_dir, vllm_cache_root):
    """One real ``vllm.entrypoints.openai.api_server`` for the whole session, serving the tiny random Qwen2-VL
    (``tests/helpers/tiny``) on 127.0.0.1 with the union of what its users need (the tests that request it run last,
    ``pytest_collection_modifyitems``):

    * served as ``tiny-judge`` (the ``http`` judge tests; responses carry this first name) and ``tiny-agent``
      (the agent loop);
    * ``--enable-auto-tool-choice --tool-call-parser hermes`` (the agent's tool calls; requests without ``tools``
      are unaffected);
    * up to 8 images (the agent's ``view_frames``) and 2 videos (a Dual-TF judge request) per prompt;
    * ``--allowed-local-media-path`` = the session's base temp directory, which holds every fixture's files
      (the synthetic CoVEBench, the test videos); ``--media-io-kwargs``: 2 fps, at most 8 frames per video.

    The server runs its model worker inside its EngineCore process (``single_worker``: one process start fewer;
    the server is the tests' own, not a production path). Yields ``{"base_url", "port", "health_s", "log", "tag",
    "model", "names"}``. At session end the server's process group and every process carrying its tag are killed,
    and none may be left.
    """
    from helpers.tiny.procs import tagged_pids, vllm_server

    model = tiny_qwen2_vl_dir
    names = ["tiny-judge", "tiny-agent"]
    with vllm_server(
        model,
        tmp_path_factory.mktemp("vllm_server"),
        served_name=names,
        media_dir=tmp_path_factory.getbasetemp(),
        limit_mm={"image": 8, "video": 2},
        media_io_kwargs={"video": {"fps": 2, "num_frames": 8, "max_frames": 8}},
        extra_args=["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
        cache_root=vllm_cache_root,
        single_worker=True,
    ) as server:
        print(f"shared vLLM server healthy after {server['health_s']:.1f} s")
        yield {**server, "model": model, "names": names}
    left = tagged_pids(server["tag"])
    assert not left, f"processes of the shared vLLM server still running: {left}"


@pytest.fixture(scope="session")
def cove_data(tmp_path_factory):
    """A synthetic CoVEBench of 8 tasks (all 7 edit types), written once per session. Treat as read-only."""
    from vbench_ray.synth.cove import synth_cove

    return synth_cove(tmp_path_factory.mktemp("cove_data"), n=8, seed=0)


@pytest.fixture
def cove_copy(cove_data, tmp_path):
    """A private, writable copy of the synthetic CoVEBench, for tests that break it."""
    root = Path(cove_data["source_dir"])
    dst = tmp_path / "cove"
    shutil.copytree(root, dst)
    edited = Path(cove_data["edited_dir"])
    return {
        "checklist": dst / Path(cove_data["checklist"]).relative_to(root),
        "source_dir": dst,
        "edited_dir": dst / edited.relative_to(root),
    }


# Loud skips (tests/helpers/ci_skips.py): under CI=true a security, sandbox, browser or PyAV test that skips fails.
from helpers.ci_skips import pytest_runtest_makereport  # noqa: E402, F401  (a hook: registered by being here)
