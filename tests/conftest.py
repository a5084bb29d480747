"""Shared fixtures: one local Ray runtime per session, one synthetic CoVEBench per session, tiny videos."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent

# Keep Ray, wandb and caches off the developer's home and out of the repo.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("WANDB_MODE", "offline")


# What a test adds to its own process for a private Ray runtime (``private_ray_token``); a user's shell has none
# of it, so subprocesses that run what a user runs get ``user_env()``.
RAY_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")


def user_env(**extra: str) -> dict:
    """This process's environment as a user's shell has it: no Ray token set-up (``private_ray_token``, or the
    ``RAY_AUTH_MODE=token`` that a local ``ray.init`` writes into its own process), no ``RAY_ADDRESS``."""
    env = {k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARS and k != "RAY_ADDRESS"}
    env.update(extra)
    return env


def _private_ray_token() -> str:
    """Token authentication with a token file of this session's own, for the Ray runtimes started in this process
    (``ray_local``, and tests that call ``runner.run`` in-process): Ray 2.60's default token, ``~/.ray/auth_token``,
    is shared by every Ray of the user on the machine. Set when conftest is imported, before any test can start
    Ray: Ray reads the auth mode and token once per process, so a token set later (by the first test that needs
    one) disagrees with what an earlier in-process ``ray.init`` cached, and the next runtime's GCS refuses this
    process ("Missing authorization header"). Subprocesses that run what a user runs get ``user_env()``, without it."""
    import secrets
    import tempfile

    if "RAY_AUTH_TOKEN_PATH" not in os.environ:
        path = Path(tempfile.mkdtemp(prefix="vbr-token-")) / "auth_token"
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(path))
    return os.environ["RAY_AUTH_TOKEN_PATH"]


_PRIVATE_TOKEN = _private_ray_token()


@pytest.fixture(scope="session")
def private_ray_token():
    """The path of this session's own Ray token (set for this process when conftest was imported)."""
    return _PRIVATE_TOKEN


SHARED_SERVER = "tiny_vllm_server"  # the session's one vLLM OpenAI server (fixture below)


def pytest_collection_modifyitems(session, config, items):
    """The multi-node tests first: they start a cluster of their own in a subprocess, and on 2 cores they need
    the machine before the shared local Ray (and what earlier tests leave in it) is up. The tests that use the
    shared vLLM server (directly or through another fixture) last, one after the other: the server starts once,
    late, and stays up only while they run (session teardown stops it). Otherwise collection order is kept."""

    def rank(item) -> int:
        if item.fspath.basename == "test_multinode.py":
            return 0
        return 2 if SHARED_SERVER in getattr(item, "fixturenames", ()) else 1

    items.sort(key=rank)


@pytest.fixture(scope="session")
def ray_local(private_ray_token):
    """A local Ray runtime shared by every test that needs one (starting Ray costs ~10 s)."""
    import ray

    if not ray.is_initialized():
        # loopback only (docs/stack.md); workers import test modules, so tests/ goes on their path
        path = os.pathsep.join([str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH", "")])
        # one fake GPU: pools that ask for a GPU schedule (their models still run on the CPU)
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
def tiny_vllm_server(tmp_path_factory):
    """One real ``vllm.entrypoints.openai.api_server`` for the whole session, serving the tiny random Qwen2-VL
    (``tests/tiny``) on 127.0.0.1 with the union of what its users need (the tests that request it run last,
    ``pytest_collection_modifyitems``):

    * served as ``tiny-judge`` (the ``http`` judge tests; responses carry this first name) and ``tiny-agent``
      (the agent loop);
    * ``--enable-auto-tool-choice --tool-call-parser hermes`` (the agent's tool calls; requests without ``tools``
      are unaffected);
    * up to 8 images (the agent's ``view_frames``) and 2 videos (a Dual-TF judge request) per prompt;
    * ``--allowed-local-media-path`` = the session's base temp directory, which holds every fixture's files
      (the synthetic CoVEBench, the test videos); ``--media-io-kwargs``: 2 fps, at most 8 frames per video.

    Yields ``{"base_url", "port", "health_s", "log", "tag", "model", "names"}``. At session end the server's
    process group and every process carrying its tag are killed, and none may be left.
    """
    from tiny.models import build_tiny_qwen2_vl
    from tiny.procs import tagged_pids, vllm_server

    model = build_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny_models") / "qwen2_vl")
    names = ["tiny-judge", "tiny-agent"]
    with vllm_server(
        model,
        tmp_path_factory.mktemp("vllm_server"),
        served_name=names,
        media_dir=tmp_path_factory.getbasetemp(),
        limit_mm={"image": 8, "video": 2},
        media_io_kwargs={"video": {"fps": 2, "num_frames": 8, "max_frames": 8}},
        extra_args=["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
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


def cove_overrides(data: dict, out: Path, *extra: str) -> list[str]:
    return [
        f"data.checklist={data['checklist']}",
        f"data.source_dir={data['source_dir']}",
        f"data.edited_dir={data['edited_dir']}",
        f"output.dir={out}",
        "wandb.mode=disabled",
        "report.enabled=false",
        "metrics.enabled=[SSIM,MSM,MF]",
        *extra,
    ]


def moving_square_video(t: int = 12, h: int = 48, w: int = 64, step: int = 2, seed: int = 0) -> np.ndarray:
    """A textured background with a bright square moving right by ``step`` px per frame (uint8 THWC)."""
    import cv2

    rng = np.random.default_rng(seed)  # smoothed noise: textured, yet survives yuv420 + h264 intact
    noise = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
    bg = cv2.GaussianBlur(noise, (0, 0), 2.0)
    bg = cv2.normalize(bg, None, 20, 230, cv2.NORM_MINMAX)
    frames = np.repeat(bg[None], t, axis=0).copy()
    for i in range(t):
        x = 4 + i * step
        frames[i, 10:26, x : x + 16] = (250, 40, 40)
    return frames


def assert_yaml_documents(documented, schema, section: str) -> None:
    """The YAML's ``section`` equals the schema's (the dataclass defaults), with one tolerance: in
    ``metrics``, a metric's block (``metrics.<metric>``, ``metrics.exclude.<metric>``) may be absent from the
    YAML, its defaults then coming from the metric's ``config_class`` alone, so a new metric needs no YAML
    edit. Every block that is in the YAML must match exactly."""
    from omegaconf import OmegaConf

    from vbench_ray.metrics import METRICS

    doc = OmegaConf.to_container(documented[section])
    ref = OmegaConf.to_container(schema[section])
    if section == "metrics" and isinstance(doc, dict):
        for node_doc, node_ref in ((doc, ref), (doc.get("exclude"), ref.get("exclude"))):
            if isinstance(node_doc, dict) and isinstance(node_ref, dict):
                for name in [k for k in node_ref if k in METRICS and k not in node_doc]:
                    del node_ref[name]
    assert doc == ref, section


# Loud skips (tests/ci_skips.py): under CI=true a security, sandbox, browser or PyAV test that skips fails.
from ci_skips import pytest_runtest_makereport  # noqa: E402, F401  (a hook: registered by being here)
