"""Variants: robustness sweeps over fps, resolution, noise and input order (ViDiC §4.3, App. E.4).

A sweep file names a benchmark config and the axes to vary; every case is evaluated once per
variant, and each variant is a ``variant`` value in the case table (``base`` is always included)::

    base: ../vidic.yaml          # the benchmark config the sweep varies (relative to this file)
    name: vidic_robustness       # wandb group and report title
    axes:                        # one axis at a time, the rest at the base setting (the paper's study)
      fps: [0.5, 1, 2, 4]
      resolution: [240, 360, 480, 720]
      noise: [noise:15, noise:30, noise:45, blur:5, blur:9, blur:15, saturation:0.75, saturation:0.5, saturation:0.25]
      order: [forward, reverse]

``resolution`` and ``noise`` change the video files: each (video, variant) is rendered once into
``RUN_DIR/variants/`` and reused by every consumer (both videos of a pair get the same treatment).
``fps`` and ``order`` change how the videos are presented to a model and travel in the row's
``variant_params`` for the benchmark's request builder.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vbench_ray.config import ConfigError
from vbench_ray.controls import CONTROLS
from vbench_ray.safepaths import within
from vbench_ray.video.perturb import Perturbation

log = logging.getLogger(__name__)

AXES = ("fps", "resolution", "noise", "order", "control")
ORDERS = ("forward", "reverse")
VIDEO_COLUMNS = ("source_path", "edited_path")


@dataclass(frozen=True)
class Variant:
    """One setting of the sweep: a name (the ``variant`` column) and what it changes."""

    name: str
    axis: str | None = None  # None: the base setting
    value: Any = None
    params: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def perturbation(self) -> Perturbation | None:
        spec = self.params.get("perturb")
        return Perturbation.parse(spec) if spec else None


BASE = Variant("base")


def make_variant(axis: str, value: Any) -> Variant:
    if axis == "fps":
        fps = float(value)
        if fps <= 0:
            raise ConfigError(f"sweep axis fps: values must be positive, got {value}")
        return Variant(f"fps:{_num(fps)}", axis, fps, {"fps": fps})
    if axis == "resolution":
        short = int(value)
        return Variant(f"res:{short}", axis, short, {"perturb": Perturbation("resize", short).spec})
    if axis == "noise":
        try:
            p = Perturbation.parse(str(value))
        except ValueError as exc:
            raise ConfigError(f"sweep axis noise: {exc}") from None
        if p.kind == "resize":
            raise ConfigError("sweep axis noise: use the resolution axis for resizing")
        return Variant(p.spec, axis, p.spec, {"perturb": p.spec})
    if axis == "order":
        if value not in ORDERS:
            raise ConfigError(f"sweep axis order: values must be {ORDERS}, got {value!r}")
        return BASE if value == "forward" else Variant("order:reverse", axis, value, {"order": "reverse"})
    if axis == "control":  # negative controls (NRVBench App. F.1), for any editing benchmark
        if str(value) not in CONTROLS:
            raise ConfigError(f"sweep axis control: unknown negative control {value!r}; known: {list(CONTROLS)}")
        return Variant(f"control:{value}", axis, str(value), {"control": str(value)})
    raise ConfigError(f"unknown sweep axis {axis!r}; known: {list(AXES)}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def variants_from_axes(axes: dict[str, list]) -> list[Variant]:
    """``base`` plus one variant per axis value, in order, without repeats."""
    out = [BASE]
    for axis, values in axes.items():
        for value in values:
            v = make_variant(axis, value)
            if v.name not in {o.name for o in out}:
                out.append(v)
    return out


# ----------------------------------------------------------------------------- expansion


def expand(cases: list[dict], variants: list[Variant], variant_dir: Path) -> list[dict]:
    """Every case once per variant; perturbed variants point at ``variant_dir/<spec>/<hash>.mp4``."""
    rows = []
    for variant in variants:
        for case in cases:
            row = dict(
                case,
                variant=variant.name,
                variant_params=json.dumps(variant.params, sort_keys=True) if variant.params else None,
            )
            p = variant.perturbation
            if p is not None and not row.get("error_load"):
                for col in VIDEO_COLUMNS:
                    if row.get(col):
                        row[col] = str(perturbed_path(variant_dir, row[col], p))
            rows.append(row)
    return rows


def perturbed_path(variant_dir: Path, source: str, p: Perturbation) -> Path:
    """Where the perturbed copy of ``source`` lives: ``variant_dir/<spec>/<stem>-<hash>.mp4``, checked to lie
    inside ``variant_dir`` (the folder and file names derive from data and sweep files; see safepaths)."""
    digest = hashlib.sha1(str(Path(source).resolve()).encode()).hexdigest()[:16]
    return within(variant_dir, p.spec.replace(":", "_"), f"{Path(source).stem}-{digest}.mp4")


def render_jobs(original: list[dict], variants: list[Variant], variant_dir: Path) -> list[dict]:
    """Unique (video, perturbation) files the expanded cases need and that do not exist yet."""
    jobs: dict[str, dict] = {}
    for variant in variants:
        p = variant.perturbation
        if p is None:
            continue
        for case in original:
            if case.get("error_load"):
                continue
            for col in VIDEO_COLUMNS:
                src = case.get(col)
                if src:
                    dst = perturbed_path(variant_dir, src, p)
                    if not dst.exists():
                        jobs[str(dst)] = {"source": src, "target": str(dst), "spec": p.spec}
    return list(jobs.values())


def render_one(job: dict) -> dict:
    """Decode a whole video once, perturb every frame, write it atomically next to its target."""
    import os

    from vbench_ray.video.encode import write_video
    from vbench_ray.video.io import VideoReader

    reader = VideoReader(job["source"])
    info = reader.info
    frames = Perturbation.parse(job["spec"]).apply(reader.read(range(info.num_frames)))
    target = Path(job["target"])
    tmp = target.with_name(target.stem + ".tmp.mp4")
    write_video(tmp, frames, fps=info.fps or 16.0, crf=0, pix_fmt="yuv444p")  # lossless: keep the noise
    os.replace(tmp, target)
    return {"target": job["target"], "frames": info.num_frames}


def render_variants(jobs: list[dict], workers: int = 2) -> dict:
    """Render the perturbed videos as Ray tasks; a video that fails is left missing (its cases then
    fail to load with a clear error) and reported. Returns counts for the summary."""
    if not jobs:
        return {"rendered": 0, "failed": 0, "videos_decoded": 0}
    import ray

    remote = ray.remote(num_cpus=1)(_render_safe)
    done = ray.get([remote.remote(job) for job in jobs])
    failed = [d for d in done if d.get("error")]
    for d in failed:
        log.error("could not render %s: %s", d["target"], d["error"])
    return {"rendered": len(done) - len(failed), "failed": len(failed), "videos_decoded": len(done)}


def _render_safe(job: dict) -> dict:
    try:
        return render_one(job)
    except Exception as exc:  # reported, and the affected cases fail on their own
        return {"target": job["target"], "error": f"{type(exc).__name__}: {exc}"}
