"""The text of a synthetic CoVEBench task (:mod:`vbench_ray.synth.cove`): the scene descriptions, the editing
instruction and the checklist's evaluation groups in the official schema (NJU-LINK/CoVEBench data/checklist.json:
AB-MCQ, Single-TF and Dual-TF questions per edit, Score-MCQ preservation questions), each ``expected_answer``
true of the scenes the videos are rendered from."""

from __future__ import annotations

from typing import Any

import numpy as np

from .cove_edits import EDIT_CATEGORIES, STYLE_TEXT, band_name
from .scenes import Scene

EA, PL, SP = "Execution Accuracy", "Physical Logic", "Semantic Preservation"


def describe_scene(scene: Scene) -> str:
    n = len(scene.shapes)
    count = {1: "one shape", 2: "two shapes", 3: "three shapes"}.get(n, f"{n} shapes")
    camera = "A camera that slowly zooms in toward the centre" if scene.zoom_end != 1.0 else "A static camera"
    parts = [f"{camera} films {count} moving over a {scene.background.label} background."]
    for s in scene.shapes:
        band = band_name(((s.start[1] + s.end[1]) / 2.0) / scene.height)
        name = s.label if scene.colormap == "none" else s.kind  # a colour map changes every colour
        parts.append(f"A {name} moves smoothly from {s.direction} across the {band} part of the frame.")
    if scene.colormap != "none":
        parts.append(f"The whole video is rendered with {STYLE_TEXT[scene.colormap]}.")
    return " ".join(parts)


def instruction_clause(edit: str, p: dict[str, Any]) -> str:
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


class Questions:
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


def edit_group(q: Questions, edit: str, p: dict[str, Any], final: Scene) -> dict[str, Any]:
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


def preservation_group(q: Questions, source: Scene, edits: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
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
