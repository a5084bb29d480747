"""Procedural AgenticVBench tasks for all four families, in the bundle format of :mod:`bundle`.

``synth_agentic(out_dir, seed)`` writes ``out_dir/tasks/<task_id>/`` bundles and
``out_dir/synth_manifest.json``. Everything is rendered from :mod:`vbench_ray.synth.scenes` (moving
shapes on textured backgrounds) seen through a virtual camera (zoom, roll, pan), with a synthetic tone
track (a melody of sine notes) where a family needs audio:

* **Assembly** (§2.4): storyboard slots, each described by a scene sentence and three cinematic
  variables (shot size = camera zoom, camera angle = roll, camera movement = pan / push / pull). Each
  slot has k=3 candidates: the golden clip and two distractors, each changing exactly one variable of
  the golden (two different variables). Candidates carry no audio (as in the paper).
* **Sequencing** (§2.6): one continuous scene (shapes travelling, camera panning and zooming) cut into
  7-20 clips of 6-10 frames, shuffled under opaque names, with a one-sentence overview.
* **Repair** (§2.5): a 4 s clip with a tone track and one injected defect in a 1 s window, cycling
  over colour shift, blur (visual), repeated frames (timeline: a 0.5 s segment played twice), shot swap
  (two adjacent segments exchanged), and audio noise / echo / clipping. The golden is the clean clip.
* **Repurpose** (§2.7): a 15 s source of five scenes ("beats") with a tone track, a brief with hard
  delivery requirements (runtime, aspect ratio, MP4, audio) and a rubric of signed-weight items over
  the five pillars (Format items programmatic; one penalty item flagged ``narrative_essential``).

Same seed and parameters -> the same task folders (JSON byte-identical; decoded media identical for a
given encoder build). Task ``k`` of a family depends only on ``(seed, family, k)``.

Assembly and Sequencing tasks are made here, Repair tasks in :mod:`vbench_ray.agentic.synth_repair` and Repurpose
tasks in :mod:`vbench_ray.agentic.synth_repurpose`, all from the scenes, camera and tone tracks of
:mod:`vbench_ray.agentic.synth_media`.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np

from vbench_ray.agentic.bundle import INPUTS, write_json, write_task
from vbench_ray.agentic.media import write_media
from vbench_ray.agentic.synth_media import (  # noqa: F401  (the tasks' building blocks; re-exported)
    CAMERA_ANGLES,
    CAMERA_MOVEMENTS,
    CINEMATIC_VARIABLES,
    FPS,
    SHOT_SIZES,
    SR,
    H,
    W,
    camera_params,
    camera_view,
    describe_scene,
    melody,
    random_scene,
    task_rng,
    unique_names,
)
from vbench_ray.agentic.synth_repair import DEFECT_GROUP, REPAIR_DEFECTS, perfect_fix, repair_task  # noqa: F401
from vbench_ray.agentic.synth_repurpose import REPURPOSE_FORMATS, repurpose_task  # noqa: F401
from vbench_ray.synth.scenes import render_scene

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1


# ----------------------------------------------------------------------------- assembly


def _assembly_task(root: Path, seed: int, k: int, n_slots: int) -> dict:
    rng = task_rng(seed, "assembly", k)
    task_id = f"assembly_{k:03d}"
    clips_dir = root / INPUTS / "clips"
    frames = 16
    wc, hc = 2 * W, 2 * H
    slots, truth_slots = [], []
    names = unique_names(rng, "c", 3 * n_slots)
    for s in range(n_slots):
        scene = random_scene(rng, wc, hc, frames, n_shapes=2, travel=0.25)
        canvas = render_scene(scene)
        golden = {
            "shot_size": str(rng.choice(list(SHOT_SIZES))),
            "camera_angle": str(rng.choice(list(CAMERA_ANGLES))),
            "camera_movement": str(rng.choice(CAMERA_MOVEMENTS)),
        }
        changed = rng.choice(CINEMATIC_VARIABLES, size=2, replace=False)
        variants = [("golden", dict(golden), None)]
        for var in changed:
            options = {
                "shot_size": list(SHOT_SIZES),
                "camera_angle": list(CAMERA_ANGLES),
                "camera_movement": list(CAMERA_MOVEMENTS),
            }[str(var)]
            value = str(rng.choice([o for o in options if o != golden[str(var)]]))
            variants.append(("distractor", {**golden, str(var): value}, {"variable": str(var), "value": value}))
        slot_names = names[3 * s : 3 * s + 3]
        order = rng.permutation(3)
        cands, distractors, golden_name = [], {}, None
        for j, vi in enumerate(order):
            kind, params, change = variants[int(vi)]
            name = slot_names[j]
            zoom, ang, pan = camera_params(
                frames, params["shot_size"], params["camera_angle"], params["camera_movement"], wc
            )
            write_media(clips_dir / name, camera_view(canvas, W, H, zoom, ang, pan), FPS)
            cands.append(name)
            if kind == "golden":
                golden_name = name
            else:
                distractors[name] = change
        sid = f"S{s + 1}"
        slots.append({"slot": sid, "description": describe_scene(scene), **golden, "candidates": cands})
        truth_slots.append({"slot": sid, "golden": golden_name, "candidates": cands, "distractors": distractors})
    storyboard = {
        "slots": slots,
        "shot_language": {
            "shot_size": {k2: f"camera zoom x{v:g}" for k2, v in SHOT_SIZES.items()},
            "camera_angle": {k2: f"camera roll {v:+g} degrees" for k2, v in CAMERA_ANGLES.items()},
            "camera_movement": list(CAMERA_MOVEMENTS),
        },
    }
    write_json(root / INPUTS / "storyboard.json", storyboard)
    instruction = (
        "You are assembling a rough cut from a storyboard.\n\n"
        f"`inputs/storyboard.json` lists {n_slots} slots. Each slot has a shot description and three cinematic "
        "variables (shot size, camera angle, camera movement), and names its candidate clips in `inputs/clips/`. "
        "For each slot exactly one candidate matches the storyboard; the others differ in one cinematic variable.\n\n"
        "Deliverables (in your output folder):\n"
        "- `solution.json`: `{\"segments\": [{\"source\": \"<clip file name>\", \"output\": [t0, t1], "
        "\"source_range\": [s0, s1]}, ...]}`, one segment per slot in slot order: the clip picked, where it "
        "sits in `solution.mp4` (seconds) and which part of the clip it shows;\n"
        "- `solution.mp4`: the selected clips concatenated in slot order.\n"
    )
    write_task(
        root,
        {
            "task_id": task_id,
            "family": "assembly",
            "subtype": "storyboard",
            "inputs": {"storyboard": "storyboard.json", "clips": "clips/"},
            "spec": {"fps": FPS},
        },
        instruction,
        {"slots": truth_slots, "k": 3},
    )
    return {"task_id": task_id, "family": "assembly", "n_slots": n_slots}


# ----------------------------------------------------------------------------- sequencing


def _sequencing_task(root: Path, seed: int, k: int, clip_range: tuple[int, int]) -> dict:
    rng = task_rng(seed, "sequencing", k)
    task_id = f"sequencing_{k:03d}"
    n = int(rng.integers(clip_range[0], clip_range[1] + 1))
    lengths = rng.integers(6, 11, size=n)
    total = int(lengths.sum())
    wc, hc = 2 * W, 2 * H
    scene = random_scene(rng, wc, hc, total, n_shapes=3, travel=0.5)
    canvas = render_scene(scene)
    s = np.linspace(0.0, 1.0, total)
    direction = 1 if rng.random() < 0.5 else -1
    zoom = 1.0 + 0.35 * s
    pan = np.stack([direction * 0.2 * wc * (2 * s - 1), 0.05 * hc * np.sin(2 * np.pi * s)], axis=1)
    frames = camera_view(canvas, W, H, zoom, np.zeros(total), pan)
    names = unique_names(rng, "shot", n)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    clips_dir = root / INPUTS / "clips"
    for i, name in enumerate(names):
        write_media(clips_dir / name, frames[bounds[i] : bounds[i + 1]], FPS)
    order = list(names)  # names[i] is the i-th clip of the story
    listing = sorted(names)
    overview = (
        f"One continuous shot: {describe_scene(scene)[:-1].lower()}, while the camera slowly pans "
        f"{'right' if direction > 0 else 'left'} and pushes in."
    )
    instruction = (
        f"Story overview: {overview}\n\n"
        f"`inputs/clips/` holds {n} clips of this shot, shuffled. Recover their original order.\n\n"
        "Deliverables (in your output folder):\n"
        "- `solution.mp4`: the clips concatenated in that order;\n"
        "- `solution.json`: `{\"segments\": [{\"source\": \"<first clip file name>\", \"output\": [start_s, end_s], "
        "\"source_range\": [start_s, end_s]}, ...]}`, every clip exactly once, in order: where each clip sits in "
        "`solution.mp4` (`output`) and which part of the clip it shows (`source_range`). The checker compares "
        "their frames.\n"
    )
    write_task(
        root,
        {
            "task_id": task_id,
            "family": "sequencing",
            "subtype": "continuous_shot",
            "inputs": {"clips": "clips/"},
            "overview": overview,
            "clips": listing,
            "spec": {"fps": FPS},
        },
        instruction,
        {"order": order, "clip_frames": [int(x) for x in lengths]},
    )
    return {"task_id": task_id, "family": "sequencing", "n_clips": n}


# ----------------------------------------------------------------------------- entry point

SYNTH_MARKER = ".vbr-synth"  # in OUT/tasks: a rerun may replace the folder


def synth_agentic(
    out_dir: str | Path,
    seed: int = 0,
    n_assembly: int = 2,
    n_sequencing: int = 3,
    n_repair: int = len(REPAIR_DEFECTS),
    n_repurpose: int = 2,
    n_slots: int = 4,
    sequencing_clips: tuple[int, int] = (7, 20),
) -> dict:
    """Write procedural tasks of all four families under ``out_dir/tasks`` and return what was written:
    ``{"tasks_dir", "manifest", "n_tasks", "tasks": {task_id: family}, "by_family": {family: n}}``.

    Repair task ``k`` gets defect ``REPAIR_DEFECTS[k % 7]`` (colour shift, blur, repeated frames, shot
    swap, audio noise, echo, clipping), so the default ``n_repair=7`` covers every defect once.
    """
    out = Path(out_dir)
    tasks_dir = out / "tasks"
    marker = tasks_dir / SYNTH_MARKER
    if tasks_dir.exists() or tasks_dir.is_symlink():
        # replace only a folder this function wrote: `--out` may point anywhere, even at real data
        if tasks_dir.is_symlink() or not marker.is_file():
            raise ValueError(
                f"{tasks_dir} exists and was not written by `vbench-ray synth agentic` (no "
                f"{SYNTH_MARKER} in it): refusing to replace it; remove it or choose another --out"
            )
        shutil.rmtree(tasks_dir)
    tasks_dir.mkdir(parents=True)
    marker.write_text("written by vbench_ray.agentic.synth; the next synth into this folder replaces it\n")
    lo, hi = int(sequencing_clips[0]), int(sequencing_clips[1])
    if not 2 <= lo <= hi:
        raise ValueError(f"sequencing_clips must be (lo, hi) with 2 <= lo <= hi, got {sequencing_clips}")
    records = []
    for k in range(n_assembly):
        records.append(_assembly_task(tasks_dir / f"assembly_{k:03d}", seed, k, n_slots))
    for k in range(n_sequencing):
        records.append(_sequencing_task(tasks_dir / f"sequencing_{k:03d}", seed, k, (lo, hi)))
    for k in range(n_repair):
        records.append(repair_task(tasks_dir / f"repair_{k:03d}", seed, k))
    for k in range(n_repurpose):
        records.append(repurpose_task(tasks_dir / f"repurpose_{k:03d}", seed, k))
    by_family: dict[str, int] = {}
    for r in records:
        by_family[r["family"]] = by_family.get(r["family"], 0) + 1
    manifest = write_json(
        out / "synth_manifest.json",
        {
            "generator": "vbench_ray.agentic.synth",
            "generator_version": GENERATOR_VERSION,
            "seed": seed,
            "params": {
                "n_assembly": n_assembly,
                "n_sequencing": n_sequencing,
                "n_repair": n_repair,
                "n_repurpose": n_repurpose,
                "n_slots": n_slots,
                "sequencing_clips": [lo, hi],
                "fps": FPS,
                "size": [W, H],
                "sample_rate": SR,
            },
            "tasks": records,
        },
    )
    log.info("synth agentic: %d tasks in %s", len(records), tasks_dir)
    return {
        "tasks_dir": str(tasks_dir),
        "manifest": str(manifest),
        "n_tasks": len(records),
        "tasks": {r["task_id"]: r["family"] for r in records},
        "by_family": by_family,
    }


def dump(info: dict) -> str:
    return json.dumps(info, indent=2)
