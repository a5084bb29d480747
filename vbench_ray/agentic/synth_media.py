"""What the synthetic AgenticVBench tasks (:mod:`vbench_ray.agentic.synth`) are made of: the frame size, rate and
sample rate, the cinematic variables of Assembly (§2.4: shot size, camera angle, camera movement), each task's
random generator, random scenes of :mod:`vbench_ray.synth.scenes`, a virtual camera over them and a tone track."""

from __future__ import annotations

import math

import numpy as np

from vbench_ray.synth.scenes import (
    BACKGROUND_KINDS,
    BACKGROUND_PALETTES,
    SHAPE_COLORS,
    SHAPE_KINDS,
    Background,
    Scene,
    Shape,
)

W, H = 128, 96  # output frame size (assembly, sequencing, repair)
FPS = 12
SR = 16000
FAMILY_INDEX = {"assembly": 1, "sequencing": 2, "repair": 3, "repurpose": 4}

SHOT_SIZES = {"wide": 1.0, "medium": 1.5, "close-up": 2.2}
CAMERA_ANGLES = {"level": 0.0, "dutch left": 14.0, "dutch right": -14.0}
CAMERA_MOVEMENTS = ("static", "pan left", "pan right", "push in", "pull out")
CINEMATIC_VARIABLES = ("shot_size", "camera_angle", "camera_movement")


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
