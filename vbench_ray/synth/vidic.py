"""A deterministic synthetic mini ViDiC-1K in the official layout.

``synth_vidic(out_dir)`` writes::

    out_dir/data/<class>/<k>_src.mp4    Video A of pair k (video1_path)
    out_dir/data/<class>/<k>_tgt.mp4    Video B of pair k (video2_path)
    out_dir/checklist.json               the pairs in the official checklist schema
    out_dir/responses_oracle.json        a correct description per pair, in the official responses schema
    out_dir/synth_manifest.json          seed, parameters, per pair the difference made and both scene specs

Pair ``k`` (from 0) differs in one class, ``CLASSES[k % 7]``, made by re-rendering the scene with one
parameter changed (:mod:`vbench_ray.synth.scenes`) or by re-timing Video A's frames:

=====================  ====================================================================
subject                the shape's colour (even rounds) or a second identical shape (odd rounds)
style                  a global colour map (invert, sepia, posterize, grayscale)
background             another texture and palette
camera                 a slow zoom in (Video A's camera is static)
motion                 the shape travels its path the other way
position               the shape crosses another horizontal band of the frame
playback technique     Video B is Video A reversed (even rounds) or at double speed (odd rounds)
=====================  ====================================================================

Difference questions (gold ``yes``) state the difference made; similarity questions (gold ``no``) ask
"Is X different ...?" about classes the difference leaves untouched, so every gold answer is true of
the videos written. Same seed and parameters -> byte-identical JSON files and identical decoded frames;
pair ``k``'s content depends only on ``(seed, k, frames, size)``.
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

__all__ = ["CLASSES", "DIFFERENCE_KINDS", "pair_difference", "synth_vidic"]

GENERATOR_VERSION = 1

# The official checklist's class spellings, in Table 2's framework order.
CLASSES = ("subject", "style", "background", "camera", "motion", "position", "playback technique")

# Per class, the kinds of difference that alternate over rounds (round = k // 7).
DIFFERENCE_KINDS: dict[str, tuple[str, ...]] = {
    "subject": ("recolour", "count"),
    "style": ("colormap",),
    "background": ("background",),
    "camera": ("zoom",),
    "motion": ("reverse_motion",),
    "position": ("band",),
    "playback technique": ("reverse_playback", "fast_forward"),
}

# Classes whose similarity question stays true under each kind of difference.
_SAME: dict[str, tuple[str, ...]] = {
    "recolour": ("style", "background", "camera", "motion", "position", "playback technique"),
    "count": ("style", "background", "camera", "playback technique"),
    "colormap": ("camera", "motion", "position", "playback technique"),
    "background": ("subject", "style", "camera", "motion", "position", "playback technique"),
    "zoom": ("subject", "style", "motion", "playback technique"),
    "reverse_motion": ("subject", "style", "background", "camera", "position", "playback technique"),
    "band": ("subject", "style", "background", "camera", "motion", "playback technique"),
    "reverse_playback": ("subject", "style", "background", "camera", "position"),
    "fast_forward": ("subject", "style", "background", "camera", "motion", "position"),
}

_STYLE_TEXT = {
    "invert": "inverted, photo-negative colours",
    "sepia": "a brown sepia tone",
    "posterize": "posterized colours reduced to a few flat tones",
    "grayscale": "black-and-white (grayscale) colours",
}
_BANDS = {"upper": 0.28, "middle": 0.5, "lower": 0.72}
_MIN_CONTRAST = 90.0


def pair_difference(k: int) -> tuple[str, str]:
    """(class, kind of difference) of pair ``k`` (from 0)."""
    if k < 0:
        raise ValueError(f"pair numbers start at 0, got {k}")
    cls = CLASSES[k % len(CLASSES)]
    kinds = DIFFERENCE_KINDS[cls]
    return cls, kinds[(k // len(CLASSES)) % len(kinds)]


# ------------------------------------------------------------------------------------------- scenes


def _r(x: float, nd: int = 2) -> float:
    return round(float(x), nd)


def _background(rng: np.random.Generator, exclude: Background | None = None) -> Background:
    kinds = [k for k in BACKGROUND_KINDS if exclude is None or k != exclude.kind]
    palettes = [p for p in sorted(BACKGROUND_PALETTES) if exclude is None or p != exclude.palette]
    palette = str(rng.choice(palettes))
    c0, c1 = BACKGROUND_PALETTES[palette]
    return Background(
        kind=str(rng.choice(kinds)),
        palette=palette,
        seed=int(rng.integers(0, 2**31 - 1)),
        angle=float(rng.choice([30.0, 45.0, 60.0, 120.0, 135.0, 150.0])),
        period=_r(rng.uniform(11.0, 17.0)),
        c0=tuple(c0),
        c1=tuple(c1),
    )


def _contrasting(name: str, bg: Background) -> bool:
    c = np.asarray(SHAPE_COLORS[name], float)
    return all(np.linalg.norm(c - np.asarray(e, float)) >= _MIN_CONTRAST for e in (bg.c0, bg.c1))


def _colour(rng: np.random.Generator, bgs: list[Background], exclude: set[str]) -> str:
    names = [str(x) for x in rng.permutation(sorted(SHAPE_COLORS)) if x not in exclude]
    for name in names:
        if all(_contrasting(name, bg) for bg in bgs):
            return name
    return names[0]


def _shape(
    rng: np.random.Generator, width: int, height: int, kind: str, colour: str, band: str, left_to_right: bool
) -> Shape:
    x0, x1 = rng.uniform(0.15, 0.22) * width, rng.uniform(0.78, 0.85) * width
    if not left_to_right:
        x0, x1 = x1, x0
    y = _BANDS[band] * height
    return Shape(
        kind=kind,
        color_name=colour,
        color=tuple(SHAPE_COLORS[colour]),
        radius=_r(min(width, height) * rng.uniform(0.085, 0.1)),
        start=(_r(x0), _r(y)),
        end=(_r(x1), _r(y)),
        wobble=_r(height * rng.uniform(0.01, 0.02)),
        wobble_cycles=float(rng.choice([0.5, 1.0])),
        wobble_phase=_r(rng.uniform(0.0, 6.28), 3),
    )


def _band_of(shape: Shape, height: int) -> str:
    y = shape.start[1] / height
    return min(_BANDS, key=lambda b: abs(_BANDS[b] - y))


def _build_pair(k: int, seed: int, width: int, height: int, frames: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, k, 17])
    cls, kind = pair_difference(k)
    bg = _background(rng)
    alt_bg = _background(rng, exclude=bg)
    shape_kind = str(rng.choice(SHAPE_KINDS))
    colour = _colour(rng, [bg, alt_bg], set())
    band = str(rng.choice(sorted(_BANDS)))
    shape = _shape(rng, width, height, shape_kind, colour, band, bool(rng.random() < 0.5))
    a = Scene(width=width, height=height, frames=frames, background=bg, shapes=(shape,))
    b, playback = a, "normal"
    params: dict[str, Any] = {"shape": shape.label}
    if kind == "recolour":
        new = _colour(rng, [bg], {colour})
        b = replace(a, shapes=(replace(shape, color_name=new, color=tuple(SHAPE_COLORS[new])),))
        params.update({"from": colour, "to": new})
    elif kind == "count":
        other_band = str(rng.choice([x for x in sorted(_BANDS) if x != band]))
        twin = _shape(rng, width, height, shape_kind, colour, other_band, shape.direction == "left to right")
        b = replace(a, shapes=(shape, twin))
        params.update({"count_a": 1, "count_b": 2, "twin_band": other_band})
    elif kind == "colormap":
        cmap = str(rng.choice(sorted(_STYLE_TEXT)))
        b = replace(a, colormap=cmap)
        params.update({"colormap": cmap})
    elif kind == "background":
        b = replace(a, background=alt_bg)
        params.update({"from": bg.label, "to": alt_bg.label})
    elif kind == "zoom":
        b = replace(a, zoom_end=_r(rng.uniform(1.4, 1.7)))
        params.update({"zoom_end": b.zoom_end})
    elif kind == "reverse_motion":
        moved = replace(shape, reverse=True)
        b = replace(a, shapes=(moved,))
        params.update({"from_direction": shape.direction, "to_direction": moved.direction})
    elif kind == "band":
        new_band = str(rng.choice([x for x in sorted(_BANDS) if x != band]))
        y = _BANDS[new_band] * height
        b = replace(a, shapes=(replace(shape, start=(shape.start[0], _r(y)), end=(shape.end[0], _r(y))),))
        params.update({"from_band": band, "to_band": new_band})
    elif kind == "reverse_playback":
        playback = "reverse"
    elif kind == "fast_forward":
        playback = "fast_forward"
    else:  # pragma: no cover - DIFFERENCE_KINDS and this chain are kept in step
        raise ValueError(kind)
    params["playback_b"] = playback
    return {"k": k, "class": cls, "kind": kind, "a": a, "b": b, "playback": playback, "params": params, "rng": rng}


def _render_b(pair: dict[str, Any], frames_a: np.ndarray) -> np.ndarray:
    if pair["playback"] == "reverse":
        return frames_a[::-1].copy()
    if pair["playback"] == "fast_forward":
        return frames_a[::2].copy()  # the same motion in half the time, at the same frame rate
    return render_scene(pair["b"])


# ------------------------------------------------------------------------------------------- questions


def _similarity(cls: str, a: Scene) -> str:
    s = a.shapes[0]
    return {
        "subject": f"Is the {s.label} different in colour or shape between the Video A and Video B?",
        "style": "Is the visual style different between the Video A and Video B?",
        "background": "Is the background different between the Video A and Video B?",
        "camera": "Is the camera movement different between the Video A and Video B?",
        "motion": f"Is the direction in which the {s.kind} moves different in the two videos?",
        "position": f"Is the part of the frame that the {s.kind} moves across different in the two videos?",
        "playback technique": "Is the playback technique different between the Video A and Video B?",
    }[cls]


def _differences(pair: dict[str, Any]) -> list[tuple[str, str]]:
    """(class, question) of each difference question of a pair; all gold ``yes``."""
    a, p, kind = pair["a"], pair["params"], pair["kind"]
    s = a.shapes[0]
    if kind == "recolour":
        return [
            ("subject", f"Is the {s.kind} {p['from']} in the Video A but {p['to']} in the Video B?"),
            ("subject", f"Does the colour of the {s.kind} differ between the Video A and Video B?"),
        ]
    if kind == "count":
        return [
            ("subject", f"Does the Video A show one {s.label}, in contrast to the Video B which shows two?"),
            ("motion", f"Does the Video B contain a second moving {s.kind} that is absent from the Video A?"),
        ]
    if kind == "colormap":
        return [
            (
                "style",
                f"Is the Video B rendered with {_STYLE_TEXT[p['colormap']]}, unlike the natural colours "
                f"of the Video A?",
            )
        ]
    if kind == "background":
        return [("background", f"Is the background a {p['from']} in the Video A but a {p['to']} in the Video B?")]
    if kind == "zoom":
        return [("camera", "Does the camera slowly zoom in during the Video B, while it stays static in the Video A?")]
    if kind == "reverse_motion":
        return [
            (
                "motion",
                f"Does the {s.kind} move from {p['from_direction']} in the Video A but from "
                f"{p['to_direction']} in the Video B?",
            )
        ]
    if kind == "band":
        return [
            (
                "position",
                f"Does the {s.kind} move across the {p['from_band']} part of the frame in the Video A "
                f"but across the {p['to_band']} part in the Video B?",
            )
        ]
    if kind == "reverse_playback":
        return [
            ("playback technique", "Is the Video B played in reverse compared with the Video A?"),
            ("motion", f"Does the {s.kind} move in opposite directions in the two videos?"),
        ]
    if kind == "fast_forward":
        return [
            (
                "playback technique",
                "Is the Video B played in fast-forward compared with the normal speed of the Video A?",
            )
        ]
    raise ValueError(kind)


def _checklist_entry(pair: dict[str, Any], video1: str, video2: str) -> dict[str, Any]:
    rng = pair["rng"]
    same = list(_SAME[pair["kind"]])
    n_sim = int(rng.integers(1, min(3, len(same)) + 1))
    chosen = sorted((str(c) for c in rng.choice(same, size=n_sim, replace=False)), key=CLASSES.index)
    sims = [
        {"class": c, "question": _similarity(c, pair["a"]), "correct_answer": "no", "answer": "", "explanation": ""}
        for c in chosen
    ]
    diffs = [
        {"class": c, "question": q, "correct_answer": "yes", "answer": "", "explanation": ""}
        for c, q in _differences(pair)
    ]
    return {
        "index": pair["k"],
        "video1_path": video1,
        "video2_path": video2,
        "structured_analysis": {"Similarities": sims, "Differences": diffs},
    }


def oracle_description(pair: dict[str, Any]) -> str:
    """A correct comparison of the pair in the G.3 output format (what a perfect model would write)."""
    a, p, kind = pair["a"], pair["params"], pair["kind"]
    s = a.shapes[0]
    band = _band_of(s, a.height)
    same = {
        "Subject": f"Both videos show a {s.label}.",
        "Style": "Both videos are realistic, un-stylized renderings with natural colours.",
        "Background": f"Both videos have a {a.background.label} background.",
        "Camera": "The camera is static in both videos.",
        "Motion": f"In both videos the {s.kind} moves from {s.direction}.",
        "Position": f"In both videos the {s.kind} crosses the {band} part of the frame.",
        "Playback Technique": "Both videos play forward at normal speed.",
    }
    diff: dict[str, str] = {}
    if kind == "recolour":
        diff["Subject"] = f"In Video A, the {s.kind} is {p['from']}. In Video B, the {s.kind} is {p['to']}."
    elif kind == "count":
        diff["Subject"] = f"In Video A, there is one {s.label}. In Video B, there are two {s.label}s."
        diff["Motion"] = f"In Video A, one {s.kind} moves. In Video B, a second {s.kind} also moves."
    elif kind == "colormap":
        diff["Style"] = (
            f"In Video A, the colours are natural. In Video B, the video is rendered with {_STYLE_TEXT[p['colormap']]}."
        )
    elif kind == "background":
        diff["Background"] = f"In Video A, the background is a {p['from']}. In Video B, it is a {p['to']}."
    elif kind == "zoom":
        diff["Camera"] = "In Video A, the camera is static. In Video B, the camera slowly zooms in."
    elif kind == "reverse_motion":
        diff["Motion"] = (
            f"In Video A, the {s.kind} moves from {p['from_direction']}. In Video B, it moves from {p['to_direction']}."
        )
    elif kind == "band":
        diff["Position"] = (
            f"In Video A, the {s.kind} crosses the {p['from_band']} part of the frame. In Video B, "
            f"it crosses the {p['to_band']} part."
        )
    elif kind == "reverse_playback":
        diff["Playback Technique"] = "In Video A, playback is forward at normal speed. In Video B, it is reversed."
        diff["Motion"] = f"In Video A, the {s.kind} moves from {s.direction}. In Video B, it moves the opposite way."
    elif kind == "fast_forward":
        diff["Playback Technique"] = "In Video A, playback is at normal speed. In Video B, it is fast-forward."
    parts = []
    for name in ("Subject", "Style", "Background", "Camera", "Motion", "Position", "Playback Technique"):
        block = f"[{name}]\n"
        if name in diff:
            block += f"Similarities: none worth noting.\nDifferences: {diff[name]}"
        else:
            block += f"Similarities: {same[name]}\nDifferences: none."
        parts.append(block)
    return "\n\n".join(parts)


# ------------------------------------------------------------------------------------------- main


def _dump(obj: Any, path: Path) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def synth_vidic(
    out_dir: str | Path,
    n: int = 8,
    seed: int = 0,
    frames: int = 24,
    size: tuple[int, int] = (128, 96),
    fps: float = 8,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write a synthetic mini ViDiC-1K of ``n`` video pairs under ``out_dir``; see the module docstring.

    ``size`` is ``(width, height)``, both even. Existing files of the same names are overwritten.
    Returns ``{"checklist", "responses", "manifest", "video_root", "n", "seed", "classes": {index: class}}``
    (paths as strings; ``video_root`` is ``out_dir``, against which the checklist's paths resolve).
    """
    width, height = int(size[0]), int(size[1])
    if n < 1:
        raise ValueError(f"n (number of pairs) must be at least 1, got {n}")
    if frames < 4:
        raise ValueError(f"frames must be at least 4 (fast-forward halves them), got {frames}")
    if width % 2 or height % 2 or width < 32 or height < 32:
        raise ValueError(f"size must be even and at least 32x32 (width, height), got {width}x{height}")
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    t0 = time.perf_counter()
    out = Path(out_dir)
    checklist, responses, manifest_pairs, classes = [], [], [], {}
    for k in range(n):
        pair = _build_pair(k, seed, width, height, frames)
        slug = pair["class"].replace(" ", "_")
        video1, video2 = f"data/{slug}/{k}_src.mp4", f"data/{slug}/{k}_tgt.mp4"
        (out / video1).parent.mkdir(parents=True, exist_ok=True)
        frames_a = render_scene(pair["a"])
        write_video(out / video1, frames_a, fps)
        write_video(out / video2, _render_b(pair, frames_a), fps)
        checklist.append(_checklist_entry(pair, video1, video2))
        responses.append(
            {"index": k, "video1_path": video1, "video2_path": video2, "response": oracle_description(pair)}
        )
        classes[k] = pair["class"]
        manifest_pairs.append(
            {
                "index": k,
                "class": pair["class"],
                "difference": pair["kind"],
                "video1_path": video1,
                "video2_path": video2,
                "params": pair["params"],
                "scene_a": scene_to_dict(pair["a"]),
                "scene_b": scene_to_dict(pair["b"]),
                "playback_b": pair["playback"],
            }
        )
        if progress is not None:
            progress(k + 1, n)
    paths = {name: out / f"{name}.json" for name in ("checklist", "responses_oracle", "synth_manifest")}
    _dump(checklist, paths["checklist"])
    _dump(responses, paths["responses_oracle"])
    _dump(
        {
            "generator": "vbench_ray.synth.vidic",
            "version": GENERATOR_VERSION,
            "seed": seed,
            "params": {"n": n, "frames": frames, "width": width, "height": height, "fps": fps},
            "difference_kinds": {c: list(v) for c, v in DIFFERENCE_KINDS.items()},
            "pairs": manifest_pairs,
        },
        paths["synth_manifest"],
    )
    log.info("synthetic ViDiC-1K: %d pairs in %s (%.2f s)", n, out, time.perf_counter() - t0)
    return {
        "checklist": str(paths["checklist"]),
        "responses": str(paths["responses_oracle"]),
        "manifest": str(paths["synth_manifest"]),
        "video_root": str(out),
        "n": n,
        "seed": seed,
        "classes": classes,
    }
