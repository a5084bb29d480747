"""A deterministic synthetic mini CoVEBench in the official layout.

``synth_cove(out_dir)`` writes::

    out_dir/data/{k}.mp4          source videos (procedural scenes, h264)
    out_dir/edited/{id}.mp4       one edited video per task, named by task id
    out_dir/checklist.json        tasks in the official checklist schema (NJU-LINK/CoVEBench data/checklist.json)
    out_dir/synth_manifest.json   seed, parameters, and per task the edits made and both scene specs

Every edit is made in the renderer (:mod:`vbench_ray.synth.scenes`): the edited video is the source
scene rendered again with a parameter changed, so each checklist ``expected_answer`` is true of the
video actually written. Seven edit types (recolour, remove, add, background, motion reversal, style,
zoom) cycle over task ids, so any ``n >= 7`` covers all of them; every 8th task combines several
edits, as the real benchmark's compositional instructions do. Source files are named by a
derangement of the task ids (task 1's source is never ``data/1.mp4``), as in the real data where
task 1's source is ``data/6.mp4``.

Same seed, same parameters -> byte-identical ``checklist.json`` and ``synth_manifest.json`` and
identical decoded frames (the mp4 bytes depend on the encoder build). The content of task ``k``
depends only on ``(seed, k, frames, size)``; ``n`` only decides how many tasks there are and the
source file names.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..video.encode import write_video
from .scenes import (
    BACKGROUND_KINDS,
    BACKGROUND_PALETTES,
    SHAPE_COLORS,
    SHAPE_KINDS,
    Background,
    Scene,
    Shape,
    render_scene,
    replace,
    scene_to_dict,
)

log = logging.getLogger(__name__)

__all__ = ["EDIT_TYPES", "EDIT_CATEGORIES", "COMPOSITE_EDITS", "synth_cove", "task_edit_types"]

GENERATOR_VERSION = 1

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

_STYLE_TEXT = {
    "invert": "inverted, photo-negative colours",
    "sepia": "a warm brown sepia tone",
    "posterize": "posterized colours reduced to a few flat tones",
    "grayscale": "black-and-white (grayscale) colours",
}

_BANDS = (0.24, 0.5, 0.76)
_MIN_CONTRAST = 90.0  # RGB distance between a shape colour and both ends of the background palette

EA, PL, SP = "Execution Accuracy", "Physical Logic", "Semantic Preservation"


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


def _band_name(y_frac: float) -> str:
    return "upper" if y_frac < 0.4 else ("middle" if y_frac < 0.6 else "lower")


def _shape_index(scene: Scene, kind: str) -> int | None:
    for i, s in enumerate(scene.shapes):
        if s.kind == kind:
            return i
    return None


# ---------------------------------------------------------------------------------------- the edits


def _apply_edit(
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
            "band": _band_name(band),
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
        cmap = str(rng.choice(sorted(_STYLE_TEXT)))
        return replace(scene, colormap=cmap), {"colormap": cmap, "text": _STYLE_TEXT[cmap]}
    if edit == "zoom":
        z = _r(rng.uniform(1.4, 1.7))
        return replace(scene, zoom_end=z), {"zoom_end": z}
    raise ValueError(f"unknown edit type {edit!r}; expected one of {EDIT_TYPES}")


# ------------------------------------------------------------------------------------------- text


def describe_scene(scene: Scene) -> str:
    n = len(scene.shapes)
    count = {1: "one shape", 2: "two shapes", 3: "three shapes"}.get(n, f"{n} shapes")
    camera = "A camera that slowly zooms in toward the centre" if scene.zoom_end != 1.0 else "A static camera"
    parts = [f"{camera} films {count} moving over a {scene.background.label} background."]
    for s in scene.shapes:
        band = _band_name(((s.start[1] + s.end[1]) / 2.0) / scene.height)
        name = s.label if scene.colormap == "none" else s.kind  # a colour map changes every colour
        parts.append(f"A {name} moves smoothly from {s.direction} across the {band} part of the frame.")
    if scene.colormap != "none":
        parts.append(f"The whole video is rendered with {_STYLE_TEXT[scene.colormap]}.")
    return " ".join(parts)


def _instruction_clause(edit: str, p: dict[str, Any]) -> str:
    if edit == "recolour":
        return f"Change the colour of the {p['kind']} from {p['from']} to {p['to']}."
    if edit == "remove":
        return f"Remove the {p['color']} {p['kind']} from the video."
    if edit == "add":
        return (
            f"Add a {p['color']} {p['kind']} that moves from {p['direction']} across the {p['band']} part of the frame."
        )
    if edit == "background":
        return f"Replace the {p['from']} background with a {p['to']}."
    if edit == "motion_reversal":
        return (
            f"Reverse the motion of the {p['kind']} so that it moves from {p['to_direction']} "
            f"instead of from {p['from_direction']}."
        )
    if edit == "style":
        return f"Render the whole video with {p['text']}."
    if edit == "zoom":
        return "Make the camera slowly and steadily zoom in toward the centre of the frame."
    raise ValueError(edit)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


class _Q:
    """Builds questions for one task; ids run Q1..Qn across the whole task."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.count = 0

    def _next(self) -> str:
        self.count += 1
        return f"Q{self.count}"

    def ab(self, question: str, correct: str, wrong: str, dim: str = EA) -> dict[str, Any]:
        if self.rng.random() < 0.5:
            options, answer = {"A": correct, "B": wrong}, "A"
        else:
            options, answer = {"A": wrong, "B": correct}, "B"
        return {
            "id": self._next(),
            "type": "AB-MCQ",
            "dimension": dim,
            "question": question,
            "options": options,
            "expected_answer": answer,
        }

    def ab_both(self, question: str, a: str, b: str, dim: str = EA) -> dict[str, Any]:
        if self.rng.random() < 0.5:
            a, b = b, a
        return {
            "id": self._next(),
            "type": "AB-MCQ",
            "dimension": dim,
            "question": question,
            "options": {"A": a, "B": b},
            "expected_answer": "A and B",
        }

    def single(self, question: str, yes: bool, dim: str = EA) -> dict[str, Any]:
        return {
            "id": self._next(),
            "type": "Single-TF",
            "dimension": dim,
            "question": question,
            "expected_answer": "Yes" if yes else "No",
        }

    def dual(self, question: str, yes: bool, dim: str = EA) -> dict[str, Any]:
        return {
            "id": self._next(),
            "type": "Dual-TF",
            "dimension": dim,
            "question": question,
            "expected_answer": "Yes" if yes else "No",
        }

    def score(self, question: str) -> dict[str, Any]:
        return {"id": self._next(), "type": "Score-MCQ", "dimension": SP, "question": question, "expected_answer": "5"}


def _edit_group(q: _Q, edit: str, p: dict[str, Any], final: Scene) -> dict[str, Any]:
    primary = final.shapes[0].kind
    if edit == "recolour":
        k, old, new = p["kind"], p["from"], p["to"]
        target, desc = (
            f"Colour Change of the {_cap(k)}",
            f"Evaluation of whether the {k} changes from {old} to {new} while keeping its shape and motion.",
        )
        qs = [
            q.ab(f"In Video B, what colour is the {k}?", _cap(new), _cap(old)),
            q.single(f"In Video B, is the {k} still {old}?", False),
            q.single(f"In Video B, is the {k} {new} throughout the whole video?", True),
            q.dual(
                f"Comparing Video A and Video B, does the {k} have a different colour in Video B than in Video A?", True
            ),
            q.single(
                f"In Video B, does the {new} colour bleed outside the outline of the {k} or flicker between frames?",
                False,
                PL,
            ),
        ]
    elif edit == "remove":
        k, c = p["kind"], p["color"]
        target, desc = (
            f"Removal of the {_cap(c)} {_cap(k)}",
            f"Evaluation of whether the {c} {k} is completely removed and the area it crossed is filled "
            "with background.",
        )
        qs = [
            q.ab("Which of these objects can be seen in Video B?", f"The {primary}", f"The {k}"),
            q.single(f"Is the {c} {k} visible at any point in Video B?", False),
            q.single(f"Is there any ghost, outline or smear of the {k} left in Video B?", False),
            q.dual(f"Comparing Video A and Video B, is the {k} present in Video A but absent from Video B?", True),
            q.single(
                f"In Video B, does the background where the {k} used to move look clean and continuous?", True, PL
            ),
        ]
    elif edit == "add":
        k, c, d = p["kind"], p["color"], p["direction"]
        target, desc = (
            f"Addition of a {_cap(c)} {_cap(k)}",
            f"Evaluation of whether a {c} {k} is added and moves from {d} across the {p['band']} part of the frame.",
        )
        qs = [
            q.ab_both("Which of these objects can be seen in Video B?", f"The {primary}", f"The {k}"),
            q.single(f"Is there a {c} {k} in Video B?", True),
            q.single(f"In Video B, does the {k} move from {d}?", True),
            q.dual(f"Comparing Video A and Video B, does Video B contain a {k} that does not appear in Video A?", True),
            q.single(f"In Video B, does the {k} jump, flicker or disappear abruptly?", False, PL),
        ]
    elif edit == "background":
        old, new = p["from"], p["to"]
        target, desc = "Background Replacement", f"Evaluation of whether the {old} background is replaced with a {new}."
        qs = [
            q.ab("What does the background of Video B look like?", f"A {new}", f"A {old}"),
            q.single(f"Is the {old} still visible in the background of Video B?", False),
            q.dual("Comparing Video A and Video B, is the background of Video B different from that of Video A?", True),
            q.single(
                "In Video B, do the moving shapes have clean edges against the new background, "
                "without halos or smears?",
                True,
                PL,
            ),
        ]
    elif edit == "motion_reversal":
        k, old, new = p["kind"], p["from_direction"], p["to_direction"]
        target, desc = (
            f"Reversed Motion of the {_cap(k)}",
            f"Evaluation of whether the {k} now moves from {new} instead of from {old}.",
        )
        qs = [
            q.ab(f"In which direction does the {k} move in Video B?", f"From {new}", f"From {old}"),
            q.single(f"In Video B, does the {k} move from {old}?", False),
            q.dual(f"Comparing Video A and Video B, does the {k} move in opposite directions in the two videos?", True),
            q.single(f"In Video B, does the {k} move smoothly along a continuous path without jumping?", True, PL),
        ]
    elif edit == "style":
        text = p["text"]
        target, desc = "Global Colour Style", f"Evaluation of whether the whole video is rendered with {text}."
        qs = [
            q.ab("How are the colours of Video B rendered?", _cap(text), "Natural, unaltered colours"),
            q.single(f"Is Video B rendered with {text}?", True),
            q.dual("Comparing Video A and Video B, do the two videos share the same colour palette?", False),
            q.single("In Video B, is the colour style applied consistently to every frame, without flicker?", True, PL),
        ]
    elif edit == "zoom":
        target, desc = (
            "Camera Zoom In",
            "Evaluation of whether the camera slowly zooms in toward the centre of the frame.",
        )
        qs = [
            q.ab(
                "What does the camera do in Video B?",
                "It slowly zooms in toward the centre of the frame",
                "It stays static throughout the video",
            ),
            q.single("Does the camera zoom out in Video B?", False),
            q.dual(
                "Comparing Video A and Video B, do the objects look larger at the end of Video B "
                "than at the end of Video A?",
                True,
            ),
            q.single("In Video B, is the zoom smooth and continuous, without sudden jumps in framing?", True, PL),
        ]
    else:
        raise ValueError(f"unknown edit type {edit!r}")
    l1, l2, l3 = EDIT_CATEGORIES[edit]
    ea_ids = [x["id"] for x in qs if x["dimension"] == EA]
    return {
        "target_element": target,
        "description": desc,
        "questions": qs,
        "category": [{"Question IDs": ea_ids, "Level 1": l1, "Level 2": l2, "Level 3": l3}],
    }


def _preservation_group(q: _Q, source: Scene, edits: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    types = {e for e, _ in edits}
    by_type = {e: p for e, p in edits}
    removed = by_type.get("remove", {}).get("kind")
    recoloured = by_type.get("recolour", {}).get("kind")
    reversed_ = by_type.get("motion_reversal", {}).get("kind")
    qs = []
    for s in source.shapes:
        if s.kind == removed:
            continue
        attrs = []
        if s.kind != recoloured and "style" not in types:
            attrs.append("colour")
        attrs += ["shape", "size"]
        if s.kind != reversed_:
            attrs.append("motion path")
        what = attrs[0] if len(attrs) == 1 else ", ".join(attrs[:-1]) + " and " + attrs[-1]
        name = s.label if "style" not in types and s.kind != recoloured else s.kind
        qs.append(q.score(f"Comparing Video A and Video B, how well are the {what} of the {name} preserved?"))
    if "background" not in types:
        if "style" in types:
            qs.append(
                q.score("Comparing Video A and Video B, how well is the pattern of the background texture preserved?")
            )
        else:
            qs.append(
                q.score(
                    f"Comparing Video A and Video B, how well is the {source.background.label} background preserved?"
                )
            )
    if "zoom" not in types:
        qs.append(q.score("Comparing Video A and Video B, how well is the static camera framing preserved?"))
    return {
        "target_element": "Semantic Preservation of Unedited Elements",
        "description": "Evaluation of whether the elements the instruction does not mention are preserved "
        "from Video A to Video B.",
        "questions": qs,
    }


# --------------------------------------------------------------------------------------------- main


def _source_numbers(n: int, seed: int) -> dict[int, int]:
    """Task id -> source file number, with no task reading ``data/{its own id}.mp4``."""
    if n == 1:
        return {1: 2}
    order = [int(x) + 1 for x in np.random.default_rng([seed, 0]).permutation(n)]
    return {order[i]: order[(i + 1) % n] for i in range(n)}  # one cycle: a derangement


def _build_task(task_id: int, seed: int, width: int, height: int, frames: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, task_id])
    edits = task_edit_types(task_id, seed)
    n_shapes = 2 if ("remove" in edits or rng.random() < 0.5) else 1
    source, free_bands = _make_source(rng, width, height, frames, n_shapes)
    scene = source
    applied: list[tuple[str, dict[str, Any]]] = []
    for e in edits:
        scene, params = _apply_edit(scene, e, rng, free_bands)
        applied.append((e, params))
    for e, params in applied:  # where each touched shape sits in both scenes (tests use this)
        if "kind" in params:
            params["source_index"] = _shape_index(source, params["kind"])
            params["edited_index"] = _shape_index(scene, params["kind"])
    return {"id": task_id, "edits": applied, "source": source, "edited": scene, "rng": rng}


def _checklist_entry(task: dict[str, Any], videoA_path: str, seed: int) -> dict[str, Any]:
    source, final, applied = task["source"], task["edited"], task["edits"]
    q = _Q(task["rng"])
    groups = [_edit_group(q, e, p, final) for e, p in applied]
    groups.append(_preservation_group(q, source, applied))
    cats: list[dict[str, str]] = []
    for e, _ in applied:
        l1, l2, l3 = EDIT_CATEGORIES[e]
        c = {"Level 1": l1, "Level 2": l2, "Level 3": l3}
        if c not in cats:
            cats.append(c)
    names = " + ".join(e for e, _ in applied)
    instruction = " ".join(_instruction_clause(e, p) for e, p in applied) + " Keep all other elements unchanged."
    return {
        "id": task["id"],
        "summary_of_changes": (
            f"Synthetic task generated by vbench-ray (seed {seed}, generator v{GENERATOR_VERSION}): {names}, "
            f"each applied by re-rendering the source scene with the edited parameter; "
            f"{len(applied)} edit group(s) + 1 preservation group."
        ),
        "original_description": describe_scene(source),
        "editing_instruction": instruction,
        "target_video_description": describe_scene(final),
        "evaluation_groups": groups,
        "videoA_path": videoA_path,
        "category": cats,
    }


def _dump(obj: Any, path: Path) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def synth_cove(
    out_dir: str | Path,
    n: int = 8,
    seed: int = 0,
    frames: int = 24,
    size: tuple[int, int] = (128, 96),
    fps: float = 8,
    identity_edits: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write a synthetic mini CoVEBench of ``n`` tasks under ``out_dir``; see the module docstring.

    ``size`` is ``(width, height)``, both even (h264/yuv420p). With ``identity_edits`` every edited
    video is a re-encode of its decoded source (a negative control: SSIM near 1, checklist unchanged,
    so instruction-following questions should fail). Existing files of the same names are
    overwritten; other files in ``out_dir`` are left alone.

    Returns ``{"checklist", "manifest", "source_dir", "edited_dir", "n", "seed", "identity_edits",
    "edits": {task_id: [edit types]}}`` (paths as strings).
    """
    width, height = int(size[0]), int(size[1])
    if n < 1:
        raise ValueError(f"n (number of tasks) must be at least 1, got {n}")
    if frames < 2:
        raise ValueError(f"frames must be at least 2 (motion needs two frames), got {frames}")
    if width % 2 or height % 2 or width < 32 or height < 32:
        raise ValueError(f"size must be even and at least 32x32 (width, height), got {width}x{height}")
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    t0 = time.perf_counter()
    out = Path(out_dir)
    data_dir, edited_dir = out / "data", out / "edited"
    data_dir.mkdir(parents=True, exist_ok=True)
    edited_dir.mkdir(parents=True, exist_ok=True)

    src_num = _source_numbers(n, seed)
    checklist, manifest_tasks, edits_out = [], [], {}
    for task_id in range(1, n + 1):
        task = _build_task(task_id, seed, width, height, frames)
        videoA = f"data/{src_num[task_id]}.mp4"
        videoB = f"edited/{task_id}.mp4"
        src_frames = render_scene(task["source"])
        write_video(out / videoA, src_frames, fps)
        if identity_edits:
            from ..video.io import VideoReader

            vr = VideoReader(out / videoA)
            write_video(out / videoB, vr.read(range(vr.info.num_frames)), fps)
        else:
            write_video(out / videoB, render_scene(task["edited"]), fps)
        checklist.append(_checklist_entry(task, videoA, seed))
        edit_types = [e for e, _ in task["edits"]]
        edits_out[task_id] = edit_types
        manifest_tasks.append(
            {
                "id": task_id,
                "videoA_path": videoA,
                "videoB_path": videoB,
                "edit_types": edit_types,
                "edits": [{"type": e, **p} for e, p in task["edits"]],
                "source_scene": scene_to_dict(task["source"]),
                "edited_scene": scene_to_dict(task["source"] if identity_edits else task["edited"]),
                "intended_scene": scene_to_dict(task["edited"]),
            }
        )
        if progress is not None:
            progress(task_id, n)

    checklist_path, manifest_path = out / "checklist.json", out / "synth_manifest.json"
    _dump(checklist, checklist_path)
    _dump(
        {
            "generator": "vbench_ray.synth.cove",
            "version": GENERATOR_VERSION,
            "seed": seed,
            "params": {
                "n": n,
                "frames": frames,
                "width": width,
                "height": height,
                "fps": fps,
                "identity_edits": identity_edits,
            },
            "edit_categories": {k: list(v) for k, v in EDIT_CATEGORIES.items()},
            "tasks": manifest_tasks,
        },
        manifest_path,
    )
    log.info("synthetic CoVEBench: %d tasks in %s (%.2f s)", n, out, time.perf_counter() - t0)
    return {
        "checklist": str(checklist_path),
        "manifest": str(manifest_path),
        "source_dir": str(out),
        "edited_dir": str(edited_dir),
        "n": n,
        "seed": seed,
        "identity_edits": identity_edits,
        "edits": edits_out,
    }
