"""Small helpers shared by test modules: the repository root, a user's environment for subprocesses, CoVEBench
overrides, a script run in a fresh interpreter, a synthetic moving-square video and the check that a shipped YAML
documents its schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]

# Ray's token set-up: only the session's own runtime gets it (tests/helpers/ray_auth.py); a user's shell has none.
RAY_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")


def user_env(**extra: str) -> dict:
    """This process's environment as a user's shell has it: no Ray token set-up (should a caller have set one) and
    no ``RAY_ADDRESS``, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARS and k != "RAY_ADDRESS"}
    env.update(extra)
    return env


RESULT_MARK = "@@RESULT@@ "  # the line a script run by ``run_script`` prints its result on, as JSON


def run_script(script: str, cwd: Path, timeout: float) -> tuple[dict, subprocess.CompletedProcess]:
    """Run ``script`` (Python source) in a fresh interpreter with a user's environment and the repository importable;
    return the JSON it printed after ``RESULT_MARK``, and the finished process. Fails with the script's stderr when
    it exits non-zero."""
    env = user_env(PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-c", script]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith(RESULT_MARK))
    return json.loads(line[len(RESULT_MARK) :]), proc


def cove_overrides(data: dict, out: Path, *extra: str) -> list[str]:
    """Overrides pointing ``configs/cove.yaml`` at a synthetic CoVEBench (``cove_data``) with the CPU metrics only,
    no wandb and no report."""
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
