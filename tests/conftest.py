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


def _session_ray_token() -> None:
    """Ray 2.60 uses token auth even locally, with one token in ~/.ray/auth_token shared by every Ray on the
    machine; the test session uses a token file of its own so nothing outside can replace it mid-run."""
    import secrets
    import tempfile

    if "RAY_AUTH_TOKEN_PATH" in os.environ:
        return
    path = Path(tempfile.mkdtemp(prefix="vbr-token-")) / "auth_token"
    path.write_text(secrets.token_hex(32))
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(path))


_session_ray_token()


def pytest_collection_modifyitems(session, config, items):
    """The multi-node tests first: they start a cluster of their own in a subprocess, and on 2 cores they need
    the machine before the shared local Ray (and what earlier tests leave in it) is up."""
    items.sort(key=lambda item: 0 if item.fspath.basename == "test_multinode.py" else 1)


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray runtime shared by every test that needs one (starting Ray costs ~10 s)."""
    import ray

    if not ray.is_initialized():
        # loopback only (STACK.md); workers import test modules, so tests/ goes on their path
        path = os.pathsep.join([str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH", "")])
        # one fake GPU: pools that ask for a GPU schedule (their models still run on the CPU)
        ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
                 runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": path}})
    yield ray
    ray.shutdown()


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
    return {"checklist": dst / Path(cove_data["checklist"]).relative_to(root), "source_dir": dst,
            "edited_dir": dst / edited.relative_to(root)}


def cove_overrides(data: dict, out: Path, *extra: str) -> list[str]:
    return [f"data.checklist={data['checklist']}", f"data.source_dir={data['source_dir']}",
            f"data.edited_dir={data['edited_dir']}", f"output.dir={out}", "wandb.mode=disabled",
            "report.enabled=false", "metrics.enabled=[SSIM,MSM,MF]", *extra]


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
        frames[i, 10:26, x:x + 16] = (250, 40, 40)
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
