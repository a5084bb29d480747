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
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from vbench_ray.agentic.bundle import INPUTS, TRUTH, write_json, write_task
from vbench_ray.agentic.media import read_media, write_media
from vbench_ray.synth.scenes import (
    BACKGROUND_KINDS,
    BACKGROUND_PALETTES,
    SHAPE_COLORS,
    SHAPE_KINDS,
    Background,
    Scene,
    Shape,
    render_scene,
)

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1
W, H = 128, 96  # output frame size (assembly, sequencing, repair)
FPS = 12
SR = 16000
FAMILY_INDEX = {"assembly": 1, "sequencing": 2, "repair": 3, "repurpose": 4}

SHOT_SIZES = {"wide": 1.0, "medium": 1.5, "close-up": 2.2}
CAMERA_ANGLES = {"level": 0.0, "dutch left": 14.0, "dutch right": -14.0}
CAMERA_MOVEMENTS = ("static", "pan left", "pan right", "push in", "pull out")
CINEMATIC_VARIABLES = ("shot_size", "camera_angle", "camera_movement")
REPAIR_DEFECTS = ("colour_shift", "blur", "repeated_frames", "shot_swap", "audio_noise", "audio_echo", "audio_clipping")
DEFECT_GROUP = {
    "colour_shift": "visual",
    "blur": "visual",
    "repeated_frames": "timeline",
    "shot_swap": "shot_swap",
    "audio_noise": "audio",
    "audio_echo": "audio",
    "audio_clipping": "audio",
}
DELIVERY_SPEC = {"container": "mp4", "video_codec": "h264", "audio_codec": "aac", "sample_rate": SR, "fps": FPS}


def task_rng(seed: int, family: str, k: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), FAMILY_INDEX[family], int(k)])


def _hex(rng: np.random.Generator, n: int = 4) -> str:
    return "".join("0123456789abcdef"[i] for i in rng.integers(0, 16, n))


def unique_names(rng: np.random.Generator, prefix: str, count: int) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        name = f"{prefix}_{_hex(rng)}.mp4"
        if name not in names:
            names.append(name)
    return names


# ----------------------------------------------------------------------------- scenes and camera


def random_scene(
    rng: np.random.Generator, width: int, height: int, frames: int, n_shapes: int = 2, travel: float = 0.6
) -> Scene:
    """Shapes crossing a textured background; ``travel`` is the path length as a share of the width."""
    palette = str(rng.choice(list(BACKGROUND_PALETTES)))
    c0, c1 = BACKGROUND_PALETTES[palette]
    bg = Background(
        kind=str(rng.choice(BACKGROUND_KINDS)),
        palette=palette,
        seed=int(rng.integers(1 << 30)),
        angle=float(rng.uniform(0, 180)),
        period=float(rng.uniform(10, 22)) * width / 128,
        c0=c0,
        c1=c1,
    )
    colors = rng.choice(list(SHAPE_COLORS), size=n_shapes, replace=False)
    shapes = []
    for i in range(n_shapes):
        r = float(rng.uniform(0.07, 0.11)) * min(width, height)
        y0 = float(rng.uniform(0.25, 0.75)) * height
        x0 = float(rng.uniform(0.15, 0.85 - travel)) * width if travel < 0.7 else 0.1 * width
        dx = travel * width * (1 if rng.random() < 0.5 else -1)
        start = (x0, y0) if dx > 0 else (x0 - dx, y0)
        end = (start[0] + dx, y0 + float(rng.uniform(-0.15, 0.15)) * height)
        shapes.append(
            Shape(
                kind=str(rng.choice(SHAPE_KINDS)),
                color_name=str(colors[i]),
                color=SHAPE_COLORS[str(colors[i])],
                radius=r,
                start=start,
                end=end,
                wobble=float(rng.uniform(0, 0.05)) * height,
                wobble_cycles=float(rng.uniform(0.5, 1.5)),
                wobble_phase=float(rng.uniform(0, 2 * math.pi)),
            )
        )
    return Scene(width=width, height=height, frames=frames, background=bg, shapes=tuple(shapes))


def describe_scene(scene: Scene) -> str:
    parts = [
        f"{'an' if s.color_name[0] in 'aeiou' else 'a'} {s.color_name} {s.kind} moving {s.direction}"
        for s in scene.shapes
    ]
    return f"{' and '.join(parts).capitalize()} over the {scene.background.label}."


def camera_view(
    canvas: np.ndarray,
    out_w: int,
    out_h: int,
    zoom: np.ndarray,
    angle_deg: np.ndarray,
    pan: np.ndarray,
    base: float = 1.2,
) -> np.ndarray:
    """Frames seen through a virtual camera over ``canvas`` frames ``(T, Hc, Wc, 3)``.

    Per frame: ``zoom`` (1 = a view ``base * out_w`` canvas pixels wide), roll ``angle_deg`` and
    ``pan`` (view-centre offset in canvas pixels, ``(T, 2)``).
    """
    import cv2

    t, hc, wc, _ = canvas.shape
    out = np.empty((t, out_h, out_w, 3), np.uint8)
    for i in range(t):
        s = base / float(zoom[i])
        th = math.radians(float(angle_deg[i]))
        a = s * np.array([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]])
        centre = np.array([wc / 2.0 + pan[i][0], hc / 2.0 + pan[i][1]])
        b = centre - a @ np.array([out_w / 2.0, out_h / 2.0])
        m = np.hstack([a, b[:, None]])
        out[i] = cv2.warpAffine(
            canvas[i], m, (out_w, out_h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REFLECT
        )
    return out


def camera_params(frames: int, shot_size: str, angle: str, movement: str, wc: int) -> tuple:
    s = np.linspace(0.0, 1.0, frames)
    zoom = np.full(frames, SHOT_SIZES[shot_size])
    pan = np.zeros((frames, 2))
    amp = 0.16 * wc / SHOT_SIZES[shot_size]
    if movement == "pan left":
        pan[:, 0] = amp * (1 - 2 * s)
    elif movement == "pan right":
        pan[:, 0] = -amp * (1 - 2 * s)
    elif movement == "push in":
        zoom = zoom * (1.0 + 0.45 * s)
    elif movement == "pull out":
        zoom = zoom * (1.45 - 0.45 * s)
    return zoom, np.full(frames, CAMERA_ANGLES[angle]), pan


# ----------------------------------------------------------------------------- audio


def melody(
    rng: np.random.Generator,
    duration: float,
    sr: int = SR,
    base_hz: float | None = None,
    note_s: tuple[float, float] = (0.2, 0.45),
) -> np.ndarray:
    """A tone track: sine notes (fundamental + two harmonics, attack/decay envelopes) from a pentatonic
    scale, over a quiet drone. float32 mono, peak about 0.5."""
    n = int(round(duration * sr))
    base = base_hz or float(rng.uniform(180, 300))
    scale = [0, 2, 4, 7, 9, 12, 14]
    out = np.zeros(n, np.float64)
    t0 = 0
    while t0 < n:
        length = int(rng.uniform(*note_s) * sr)
        f = base * 2 ** (scale[int(rng.integers(len(scale)))] / 12)
        tt = np.arange(min(length, n - t0)) / sr
        env = np.minimum(1.0, tt / 0.01) * np.exp(-tt * rng.uniform(2.0, 5.0))
        note = sum(a * np.sin(2 * np.pi * f * h * tt) for h, a in ((1, 1.0), (2, 0.35), (3, 0.15)))
        out[t0 : t0 + len(tt)] += 0.32 * env * note
        t0 += length
    tt = np.arange(n) / sr
    out += 0.05 * np.sin(2 * np.pi * base / 2 * tt) * (1 + 0.3 * np.sin(2 * np.pi * 0.4 * tt))
    return out.astype(np.float32)


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


# ----------------------------------------------------------------------------- repair


def _defect_audio(defect: str, audio: np.ndarray, a: int, b: int, rng: np.random.Generator) -> np.ndarray:
    out = audio.copy()
    seg = audio[a:b].astype(np.float64)
    if defect == "audio_noise":
        rms = float(np.sqrt(np.mean(seg**2))) or 0.1
        out[a:b] = seg + rng.normal(0.0, rms * 1.2, len(seg))
    elif defect == "audio_echo":
        wet = seg.copy()
        for delay_s, gain in ((0.09, 0.65), (0.17, 0.5), (0.26, 0.38), (0.35, 0.25)):
            d = int(delay_s * SR)
            src = audio[max(0, a - d) : b - d].astype(np.float64)
            wet[len(seg) - len(src) :] += gain * src
        out[a:b] = wet
    elif defect == "audio_clipping":
        peak = float(np.max(np.abs(seg))) or 0.3
        out[a:b] = np.clip(seg * 6.0, -0.3 * peak, 0.3 * peak) * 2.5
    return np.clip(out, -1.0, 1.0).astype(np.float32)


def _repair_task(root: Path, seed: int, k: int) -> dict:
    import cv2

    rng = task_rng(seed, "repair", k)
    defect = REPAIR_DEFECTS[k % len(REPAIR_DEFECTS)]
    group = DEFECT_GROUP[defect]
    task_id = f"repair_{k:03d}"
    n = 4 * FPS
    wc, hc = 2 * W, 2 * H
    scene = random_scene(rng, wc, hc, n, n_shapes=3, travel=0.4)
    s = np.linspace(0.0, 1.0, n)
    direction = 1 if rng.random() < 0.5 else -1
    pan = np.stack([direction * 0.18 * wc * (2 * s - 1), 0.04 * hc * np.sin(2 * np.pi * s)], axis=1)
    src = camera_view(render_scene(scene), W, H, 1.0 + 0.3 * s, np.zeros(n), pan)
    audio = melody(rng, n / FPS)
    spf = SR // FPS  # audio samples per frame
    broken_v, broken_a = src.copy(), audio.copy()
    truth: dict[str, Any] = {"group": group, "defect": defect, "broken": "broken.mp4", "golden": "golden.mp4"}
    a = int(rng.integers(FPS, n - 2 * FPS))
    if group in ("visual", "audio"):
        b = a + FPS
        truth["window"] = [a / FPS, b / FPS]
        if defect == "colour_shift":
            gain = np.array([1.3, 0.95, 0.7]) if rng.random() < 0.5 else np.array([0.75, 1.0, 1.3])
            offset = np.array([14.0, 0.0, -12.0]) * np.sign(gain[0] - 1)
            broken_v[a:b] = np.clip(src[a:b].astype(np.float64) * gain + offset, 0, 255).astype(np.uint8)
            truth["params"] = {"gain": gain.tolist(), "offset": offset.tolist()}
        elif defect == "blur":
            sigma = float(rng.uniform(2.2, 3.0))
            while True:  # strong enough to stand out of codec noise on this scene (window PSNR <= 28 dB)
                for i in range(a, b):
                    broken_v[i] = cv2.GaussianBlur(src[i], (0, 0), sigma)
                mse = float(np.mean((broken_v[a:b].astype(np.float64) - src[a:b]) ** 2))
                if sigma >= 6.0 or 10 * np.log10(255.0**2 / max(mse, 1e-9)) <= 28.0:
                    break
                sigma += 0.5
            truth["params"] = {"sigma": sigma}
        else:
            broken_a = _defect_audio(defect, audio, a * spf, b * spf, rng)
    elif group == "timeline":
        seg = FPS // 2
        broken_v = np.concatenate([src[: a + seg], src[a : a + seg], src[a + seg :]])
        broken_a = np.concatenate(
            [audio[: (a + seg) * spf], audio[a * spf : (a + seg) * spf], audio[(a + seg) * spf :]]
        )
        truth["ranges"] = [
            {"range": [(a + seg) / FPS, (a + 2 * seg) / FPS], "equivalent": [[a / FPS, (a + seg) / FPS]]}
        ]
        truth["tolerance_s"] = 0.25
        truth["window"] = [a / FPS, (a + 2 * seg) / FPS]
        truth["window_golden"] = [a / FPS, (a + seg) / FPS]  # the same stretch in the golden's time
    else:  # shot swap: [a, b) and [b, c) exchanged
        b = a + int(rng.integers(8, 12))
        c = min(n - 2, b + int(rng.integers(8, 12)))
        broken_v = np.concatenate([src[:a], src[b:c], src[a:b], src[c:]])
        broken_a = np.concatenate(
            [audio[: a * spf], audio[b * spf : c * spf], audio[a * spf : b * spf], audio[c * spf :]]
        )
        truth["window"] = [a / FPS, c / FPS]
        truth["segments"] = [[a / FPS, b / FPS], [b / FPS, c / FPS]]
    write_media(root / INPUTS / "broken.mp4", broken_v, FPS, broken_a, SR)
    write_media(root / TRUTH / "golden.mp4", src, FPS, audio, SR)
    truth["reference"] = _repair_reference(root, truth)
    hint = {
        "visual": "something in the picture looks wrong for about a second",
        "audio": "the sound goes bad for a moment",
        "timeline": "the edit stutters at one point",
        "shot_swap": "the action jumps around in the middle",
    }[group]
    spec = {**DELIVERY_SPEC, "width": W, "height": H, "duration_s": n / FPS}
    instruction = (
        f"Client note: \"Before we deliver this clip, please fix it: {hint}.\"\n\n"
        "`inputs/broken.mp4` is the clip. Find the defect (what and when), fix it, and leave the rest untouched.\n\n"
        "Deliverables (in your output folder):\n"
        f"- `fixed.mp4`: MP4, H.264 video ({W}x{H}, {FPS} fps), AAC audio at {SR} Hz;\n"
        "- `report.md`: what the defect was, its time range, and what you did, with one `## Diagnosis` block "
        "per defect holding the lines `- type: <defect>`, `- start: <time>` and `- end: <time>` (times in "
        "broken.mp4, seconds or MM:SS.mmm);\n"
        "- if your fix removes material: `solution.json` with `{\"ranges\": [[start_s, end_s], ...]}`, the "
        "removed ranges in the time of broken.mp4.\n"
    )
    write_task(
        root,
        {
            "task_id": task_id,
            "family": "repair",
            "subtype": defect,
            "group": group,
            "inputs": {"broken": "broken.mp4"},
            "spec": spec,
        },
        instruction,
        truth,
    )
    return {"task_id": task_id, "family": "repair", "defect": defect}


def perfect_fix(broken, golden, truth: dict) -> tuple[np.ndarray, np.ndarray]:
    """What a flawless agent renders from ``broken``: the defect undone exactly, everything else kept
    (the broken input's own decoded frames and samples outside the defect)."""
    fps, sr = broken.fps, broken.sample_rate
    frames, audio = broken.frames.copy(), broken.audio.copy()
    group = truth["group"]
    if group in ("visual", "audio"):
        a, b = truth["window"]
        if group == "visual":
            fa, fb = int(round(a * fps)), int(round(b * fps))
            frames[fa:fb] = golden.frames[fa:fb]
        else:
            sa, sb = int(round(a * sr)), int(round(b * sr))
            audio[sa:sb] = golden.audio[sa:sb]
        return frames, audio
    if group == "timeline":
        ranges = [r["range"] if isinstance(r, dict) else r for r in truth["ranges"]]
        keep_f = np.ones(len(frames), bool)
        keep_a = np.ones(len(audio), bool)
        for s0, e0 in ranges:
            keep_f[int(round(s0 * fps)) : int(round(e0 * fps))] = False
            keep_a[int(round(s0 * sr)) : int(round(e0 * sr))] = False
        return frames[keep_f], audio[keep_a]
    (a, b), (_, c) = truth["segments"]
    # broken = pre + B + A + post with A = [a, b) and B = [b, c) of the source
    fa, fb, fc = (int(round(x * fps)) for x in (a, b, c))
    split = fa + (fc - fb)
    f2 = np.concatenate([frames[:fa], frames[split:fc], frames[fa:split], frames[fc:]])
    spf = sr / fps
    sa, ss, sc = int(round(fa * spf)), int(round(split * spf)), int(round(fc * spf))
    a2 = np.concatenate([audio[:sa], audio[ss:sc], audio[sa:ss], audio[sc:]])
    return f2, a2


def _repair_reference(root: Path, truth: dict) -> dict:
    """App. H.1: the golden reference point ``M_golden``: the measurements of a perfect fix (the defect
    undone exactly on the broken input's decoded content) delivered as h264/AAC with the task's
    settings, against the golden. A submission at least this good scores 1; so does the golden itself."""
    from vbench_ray.agentic.verifiers.repair import measure_references

    golden = read_media(root / TRUTH / truth["golden"])
    broken = read_media(root / INPUTS / truth["broken"])
    frames, audio = perfect_fix(broken, golden, truth)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "perfect_fix.mp4"
        write_media(path, frames, golden.fps, audio, golden.sample_rate)
        ref = measure_references(root / TRUTH / truth["golden"], path, truth)
    return {region: {m: round(float(v), 6) for m, v in values.items()} for region, values in ref.items()}


# ----------------------------------------------------------------------------- repurpose

RP_W, RP_H = 192, 108
REPURPOSE_FORMATS = (("vertical social cut", "9:16", 6.0), ("square teaser", "1:1", 8.0))


def _repurpose_task(root: Path, seed: int, k: int) -> dict:
    rng = task_rng(seed, "repurpose", k)
    task_id = f"repurpose_{k:03d}"
    kind, aspect, runtime = REPURPOSE_FORMATS[k % len(REPURPOSE_FORMATS)]
    beat_frames = 3 * FPS
    beats, frames, audio = [], [], []
    for i in range(5):
        scene = random_scene(rng, RP_W, RP_H, beat_frames, n_shapes=1 + i % 2, travel=0.6)
        frames.append(render_scene(scene))
        audio.append(melody(rng, beat_frames / FPS, base_hz=180.0 * 2 ** (i / 6)))
        beats.append(
            {
                "beat": i + 1,
                "start_s": i * 3.0,
                "end_s": (i + 1) * 3.0,
                "description": describe_scene(scene),
                "shapes": [s.label for s in scene.shapes],
            }
        )
    write_media(root / INPUTS / "source.mp4", np.concatenate(frames), FPS, np.concatenate(audio), SR)
    tol = 1.0
    brief = (
        f"# Brief: {kind}\n\n"
        "**Source**: `source.mp4`, a 15-second film in five short scenes:\n"
        + "".join(f"{b['beat']}. {b['description']}\n" for b in beats)
        + f"\n**Audience and platform**: a social feed, watched on phones.\n\n"
        f"**Deliverable**: a {runtime:g}-second {kind} that keeps the story's order and ends on the last scene. "
        "Tone: brisk and playful.\n\n"
        f"**Hard requirements**: runtime {runtime:g} s (+-{tol:g} s); aspect ratio {aspect}; MP4 container; "
        "audio included.\n"
    )
    (root / INPUTS).mkdir(parents=True, exist_ok=True)
    (root / INPUTS / "brief.md").write_text(brief, encoding="utf-8")
    first, last, third = beats[0], beats[4], beats[2]
    ar_w, ar_h = (float(x) for x in aspect.split(":"))
    lo_ar, hi_ar = ar_w / ar_h * 0.98, ar_w / ar_h * 1.02  # the aspect_ratio check's relative tolerance
    items = [
        # ids and texts the official pillar-0 dispatcher routes to its own checks (judge.py infer_format_check):
        # F-DUR -> duration ("X s +- Y s" read from the text), F-RES -> resolution (the aspect-ratio range),
        # F-CONTAINER -> container, AUDIO-PRESENT -> audio stream present; docs/agentic_bundle.md maps them
        {
            "id": "F-DUR",
            "pillar": "format",
            "weight": 2,
            "text": f"Runtime is {runtime:g} s \u00b1 {tol:g} s.",
            "check": {"type": "runtime", "target_s": runtime, "tolerance_s": tol},
        },
        {
            "id": "F-RES",
            "pillar": "format",
            "weight": 2,
            "text": f"Aspect ratio is {aspect}: width-to-height ratio between {lo_ar:.4f} and {hi_ar:.4f}, "
            "square pixels.",
            "check": {"type": "aspect_ratio", "target": aspect, "tolerance": 0.02},
        },
        {
            "id": "F-CONTAINER",
            "pillar": "format",
            "weight": 1,
            "text": "Delivered as an MP4 file (container mp4).",
            "check": {"type": "container", "name": "mp4"},
        },
        {
            "id": "AUDIO-PRESENT",
            "pillar": "format",
            "weight": 1,
            "text": "The deliverable has audible audio.",
            "check": {"type": "audio_present", "min_dbfs": -60},
        },
        {
            "id": "V1",
            "pillar": "visual",
            "weight": 2,
            "text": f"The deliverable shows the {first['shapes'][0]} from the first scene at least once.",
        },
        {
            "id": "V2",
            "pillar": "visual",
            "weight": 1,
            "text": "No shot is visibly stretched or squashed: shapes keep their proportions after reframing.",
        },
        {
            "id": "N1",
            "pillar": "narrative",
            "weight": 2,
            "text": f"The deliverable ends on material from the last scene ({last['description'][:-1].lower()}).",
        },
        {"id": "N2", "pillar": "narrative", "weight": 2, "text": "Scenes appear in the same order as in the source."},
        {
            "id": "S1",
            "pillar": "sound",
            "weight": 1,
            "text": "The audio plays throughout, without silent gaps longer than one second.",
        },
        {
            "id": "P1",
            "pillar": "penalty",
            "weight": -2,
            "text": "The deliverable contains black or blank frames lasting more than one second.",
        },
        {
            "id": "P2",
            "pillar": "penalty",
            "weight": -2,
            "narrative_essential": True,
            "text": f"The deliverable keeps the middle scene's {third['shapes'][0]}.",
        },
    ]
    spec = {
        "runtime_s": runtime,
        "runtime_tolerance_s": tol,
        "aspect_ratio": aspect,
        "container": "mp4",
        "audio": True,
        "kind": kind,
    }
    instruction = (
        "Read the client brief in `inputs/brief.md` and cut the deliverable it asks for from `inputs/source.mp4`.\n\n"
        "Deliverables (in your output folder):\n"
        "- `final.mp4`: the deliverable, meeting the brief's hard requirements;\n"
        "- `report.md`: your edit decisions (which parts of the source you used, and why).\n"
    )
    write_task(
        root,
        {
            "task_id": task_id,
            "family": "repurpose",
            "subtype": kind.replace(" ", "_"),
            "inputs": {"source": "source.mp4", "brief": "brief.md"},
            "spec": spec,
        },
        instruction,
        {"beats": beats},
        rubric={"items": items},
    )
    return {"task_id": task_id, "family": "repurpose", "kind": kind}


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
        records.append(_repair_task(tasks_dir / f"repair_{k:03d}", seed, k))
    for k in range(n_repurpose):
        records.append(_repurpose_task(tasks_dir / f"repurpose_{k:03d}", seed, k))
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
