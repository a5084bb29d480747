"""The scenes and edits of the synthetic CoVEBench (:mod:`vbench_ray.synth.cove`): which edit types each task
gets, its source scene (a background and one or two moving shapes, each in its own band of the frame) and the
edited scene, made by changing one parameter of the source per edit and rendered again by
:mod:`vbench_ray.synth.scenes`. A task's content depends only on ``(seed, task id, frames, size)``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .scenes import (
    BACKGROUND_KINDS,
    BACKGROUND_PALETTES,
    SHAPE_COLORS,
    SHAPE_KINDS,
    Background,
    Scene,
    Shape,
    replace,
)

EDIT_TYPES = ("recolour", "remove", "add", "background", "motion_reversal", "style", "zoom")

# (Level 1, Level 2, Level 3) of each edit type; Level 1 drives metric exclusions downstream.
EDIT_CATEGORIES: dict[str, tuple[str, str, str]] = {
    "recolour": ("Subject", "Subject Attribute Modification", "Color Change"),
    "remove": ("Subject", "Subject Removal", "Remove One Object"),
    "add": ("Subject", "Subject Addition", "Add One Object"),
    "background": ("Background", "Scene Change", "Background Replacement"),
    "motion_reversal": ("Motion", "Motion Change", "Motion Reversal"),
    "style": ("Style", "Global Style", "Color Mapping"),
    "zoom": ("Camera", "Camera Movement", "Zoom In"),
}

# Edits whose questions stay true when applied together. Style changes every colour, so it only
# combines with edits whose questions do not name colours; remove + add would make object-count
# wording ambiguous.
_COMPATIBLE: dict[str, frozenset[str]] = {
    "recolour": frozenset({"remove", "add", "background", "motion_reversal", "zoom"}),
    "remove": frozenset({"recolour", "background", "motion_reversal", "zoom"}),
    "add": frozenset({"recolour", "background", "motion_reversal", "zoom"}),
    "background": frozenset({"recolour", "remove", "add", "motion_reversal", "zoom"}),
    "motion_reversal": frozenset({"recolour", "remove", "add", "background", "style", "zoom"}),
    "style": frozenset({"motion_reversal", "zoom"}),
    "zoom": frozenset({"recolour", "remove", "add", "background", "motion_reversal", "style"}),
}

# Task ids 8, 16, 24, ... take these in turn.
COMPOSITE_EDITS: tuple[tuple[str, ...], ...] = (
    ("background", "recolour"),
    ("add", "zoom"),
    ("remove", "motion_reversal", "background"),
    ("style", "motion_reversal"),
    ("recolour", "zoom"),
)

STYLE_TEXT = {
    "invert": "inverted, photo-negative colours",
    "sepia": "a warm brown sepia tone",
    "posterize": "posterized colours reduced to a few flat tones",
    "grayscale": "black-and-white (grayscale) colours",
}

_BANDS = (0.24, 0.5, 0.76)
_MIN_CONTRAST = 90.0  # RGB distance between a shape colour and both ends of the background palette


# ------------------------------------------------------------------------------------ edit schedule


def task_edit_types(task_id: int, seed: int = 0) -> list[str]:
    """The edit types of task ``task_id`` (1-based). Deterministic in ``(task_id, seed)``."""
    if task_id < 1:
        raise ValueError(f"task ids start at 1, got {task_id}")
    p = (task_id - 1) % 8
    if p == 7:
        return list(COMPOSITE_EDITS[((task_id - 1) // 8) % len(COMPOSITE_EDITS)])
    edits = [EDIT_TYPES[p]]
    if task_id > 8:  # later rounds: about half the single edits get a compatible partner
        rng = np.random.default_rng([seed, task_id, 1])
        if rng.random() < 0.5:
            edits.append(str(rng.choice(sorted(_COMPATIBLE[edits[0]]))))
    return edits


# ----------------------------------------------------------------------------------- scene building


def _r(x: float, nd: int = 2) -> float:
    return round(float(x), nd)


def _contrast_ok(rgb: tuple[int, int, int], bg: Background) -> bool:
    c = np.asarray(rgb, float)
    return all(np.linalg.norm(c - np.asarray(e, float)) >= _MIN_CONTRAST for e in (bg.c0, bg.c1))


def _pick_color(rng: np.random.Generator, bg: Background, exclude: set[str]) -> str:
    names = [str(x) for x in rng.permutation(sorted(SHAPE_COLORS))]
    for name in names:
        if name not in exclude and _contrast_ok(SHAPE_COLORS[name], bg):
            return name
    for name in names:  # every colour clashes: fall back to any unused one
        if name not in exclude:
            return name
    raise ValueError("no shape colour left")


def _make_background(
    rng: np.random.Generator, exclude_kind: str | None = None, exclude_palette: str | None = None
) -> Background:
    kinds = [k for k in BACKGROUND_KINDS if k != exclude_kind]
    palettes = [p for p in sorted(BACKGROUND_PALETTES) if p != exclude_palette]
    kind = str(rng.choice(kinds))
    palette = str(rng.choice(palettes))
    c0, c1 = BACKGROUND_PALETTES[palette]
    angle = float(rng.choice([30.0, 45.0, 60.0, 120.0, 135.0, 150.0]))
    return Background(
        kind=kind,
        palette=palette,
        seed=int(rng.integers(0, 2**31 - 1)),
        angle=angle,
        period=_r(rng.uniform(11.0, 17.0)),
        c0=tuple(c0),
        c1=tuple(c1),
    )


def _make_shape(rng: np.random.Generator, width: int, height: int, kind: str, color: str, band: float) -> Shape:
    base = min(width, height)
    x0, x1 = rng.uniform(0.15, 0.25) * width, rng.uniform(0.75, 0.85) * width
    if rng.random() < 0.5:
        x0, x1 = x1, x0
    y0 = (band + rng.uniform(-0.03, 0.03)) * height
    y1 = (band + rng.uniform(-0.03, 0.03)) * height
    return Shape(
        kind=kind,
        color_name=color,
        color=tuple(SHAPE_COLORS[color]),
        radius=_r(base * rng.uniform(0.085, 0.1)),
        start=(_r(x0), _r(y0)),
        end=(_r(x1), _r(y1)),
        wobble=_r(height * rng.uniform(0.012, 0.025)),
        wobble_cycles=float(rng.choice([0.5, 1.0, 1.5])),
        wobble_phase=_r(rng.uniform(0.0, 6.28), 3),
    )


def _make_source(
    rng: np.random.Generator, width: int, height: int, frames: int, n_shapes: int
) -> tuple[Scene, list[float]]:
    """A source scene and the list of vertical bands still free (for an added shape)."""
    bg = _make_background(rng)
    bands = [float(b) for b in rng.permutation(_BANDS)]
    kinds = [str(k) for k in rng.permutation(SHAPE_KINDS)]
    shapes: list[Shape] = []
    used: set[str] = set()
    for i in range(n_shapes):
        color = _pick_color(rng, bg, used)
        used.add(color)
        shapes.append(_make_shape(rng, width, height, kinds[i], color, bands[i]))
    return Scene(width=width, height=height, frames=frames, background=bg, shapes=tuple(shapes)), bands[n_shapes:]


def band_name(y_frac: float) -> str:
    return "upper" if y_frac < 0.4 else ("middle" if y_frac < 0.6 else "lower")


def shape_index(scene: Scene, kind: str) -> int | None:
    for i, s in enumerate(scene.shapes):
        if s.kind == kind:
            return i
    return None


# ---------------------------------------------------------------------------------------- the edits


def apply_edit(
    scene: Scene, edit: str, rng: np.random.Generator, free_bands: list[float]
) -> tuple[Scene, dict[str, Any]]:
    shapes = list(scene.shapes)
    if edit == "recolour":
        target = shapes[0]
        new = _pick_color(rng, scene.background, {s.color_name for s in shapes})
        shapes[0] = replace(target, color_name=new, color=tuple(SHAPE_COLORS[new]))
        return replace(scene, shapes=tuple(shapes)), {
            "kind": target.kind,
            "from": target.color_name,
            "to": new,
            "from_rgb": list(target.color),
            "to_rgb": list(SHAPE_COLORS[new]),
        }
    if edit == "remove":
        if len(shapes) < 2:
            raise ValueError("remove needs a scene with at least two shapes")
        target = shapes.pop()  # never the primary shape (index 0)
        free_bands.append(target.start[1] / scene.height)
        return replace(scene, shapes=tuple(shapes)), {"kind": target.kind, "color": target.color_name}
    if edit == "add":
        kinds = [k for k in SHAPE_KINDS if k not in {s.kind for s in shapes}]
        kind = str(rng.choice(kinds))
        color = _pick_color(rng, scene.background, {s.color_name for s in shapes})
        band = free_bands.pop(0) if free_bands else float(rng.choice(_BANDS))
        new = _make_shape(rng, scene.width, scene.height, kind, color, band)
        return replace(scene, shapes=tuple(shapes + [new])), {
            "kind": kind,
            "color": color,
            "direction": new.direction,
            "band": band_name(band),
        }
    if edit == "background":
        old = scene.background
        new_bg = _make_background(rng, exclude_kind=old.kind, exclude_palette=old.palette)
        return replace(scene, background=new_bg), {
            "from": old.label,
            "to": new_bg.label,
            "from_kind": old.kind,
            "to_kind": new_bg.kind,
            "from_palette": old.palette,
            "to_palette": new_bg.palette,
        }
    if edit == "motion_reversal":
        target = shapes[0]
        shapes[0] = replace(target, reverse=not target.reverse)
        return replace(scene, shapes=tuple(shapes)), {
            "kind": target.kind,
            "from_direction": target.direction,
            "to_direction": shapes[0].direction,
        }
    if edit == "style":
        cmap = str(rng.choice(sorted(STYLE_TEXT)))
        return replace(scene, colormap=cmap), {"colormap": cmap, "text": STYLE_TEXT[cmap]}
    if edit == "zoom":
        z = _r(rng.uniform(1.4, 1.7))
        return replace(scene, zoom_end=z), {"zoom_end": z}
    raise ValueError(f"unknown edit type {edit!r}; expected one of {EDIT_TYPES}")


def build_task(task_id: int, seed: int, width: int, height: int, frames: int) -> dict[str, Any]:
    """Task ``task_id``: its edits as ``[(type, params)]``, the source and edited scenes, and its random generator
    (the checklist's questions draw from it next)."""
    rng = np.random.default_rng([seed, task_id])
    edits = task_edit_types(task_id, seed)
    n_shapes = 2 if ("remove" in edits or rng.random() < 0.5) else 1
    source, free_bands = _make_source(rng, width, height, frames, n_shapes)
    scene = source
    applied: list[tuple[str, dict[str, Any]]] = []
    for e in edits:
        scene, params = apply_edit(scene, e, rng, free_bands)
        applied.append((e, params))
    for e, params in applied:  # where each touched shape sits in both scenes (tests use this)
        if "kind" in params:
            params["source_index"] = shape_index(source, params["kind"])
            params["edited_index"] = shape_index(scene, params["kind"])
    return {"id": task_id, "edits": applied, "source": source, "edited": scene, "rng": rng}
