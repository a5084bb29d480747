"""NRVE-Acc's judge requests and the parsers of their answers (NRVBench paper, "Beyond Rigid"; no official code is
published). The formulas and the invalid-output rule (App. E.5) are in ``nrv_scoring``.

Request ids: ``nrv/{case_id}/{variant}/nrve/{group}`` with ``group`` one of ``instr``, ``phy``, ``temp``
(e.g. ``nrv/0074_dso14/base/nrve/phy``). With several judges (``judges:``) every group carries the judge's
label, ``.../nrve/phy@qwen7b``, so that ids stay unique in the one judge log of the run.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from vbench_ray.judges.base import JudgeRequest, request_id as judge_request_id
from vbench_ray.judges.parsing import Parsed, register_parser, strip_thinking

COMPONENTS = ("instr", "phy", "temp")
RATING_MIN, RATING_MAX = 1, 5
AMBIGUOUS = "AMBIGUOUS"
STAGE = "nrve"

# App. C: the physical criterion of each category, its valid behaviour and its common failure modes. The
# phy query is (q, mu, Gamma_mu) = (the instance's question, the category, these criteria) (§4.2).
CATEGORY_CRITERIA: dict[str, dict[str, Any]] = {
    "ASB": {
        "name": "articulated soft bodies",
        "criterion": "joint-aware deformation",
        "valid": "edited limbs or body parts move according to plausible articulation constraints, without "
        "excessive stretching, broken topology or rubber-like deformation, and the relative "
        "connectivity of body parts is maintained",
        "failures": [
            "duplicated limbs",
            "ghosting",
            "object popping",
            "identity drift",
            "unnatural rubber-like stretching",
        ],
    },
    "CTS": {
        "name": "cloth and thin shells",
        "criterion": "surface continuity",
        "valid": "the surface deforms smoothly while keeping its thin-shell, sheet-like topology, with "
        "coherent folds that move consistently over time",
        "failures": [
            "tearing",
            "sudden surface discontinuities",
            "texture jitter",
            "folds that move inconsistently across frames",
        ],
    },
    "DSO": {
        "name": "deformable solid objects",
        "criterion": "shape integrity under deformation",
        "valid": "the object stays volumetric and materially coherent while deforming plausibly, keeps its "
        "continuity and material identity, and does not melt like a fluid unless instructed",
        "failures": [
            "texture change without actual deformation",
            "collapsed geometry",
            "unrealistic volume loss",
            "material-regime mismatch",
        ],
    },
    "GSF": {
        "name": "gas, smoke and fire",
        "criterion": "coherent turbulent evolution",
        "valid": "the region evolves naturally over time with soft boundaries, diffusion-like motion and "
        "plausible topological change, rather than translating rigidly as a texture",
        "failures": [
            "frozen smoke",
            "rigid patch motion",
            "abrupt colour flicker",
            "inconsistent plume expansion",
            "frame-wise appearance changes without turbulent dynamics",
        ],
    },
    "HFF": {
        "name": "hair, fur and feather",
        "criterion": "strand-level coherence",
        "valid": "fine structures stay locally consistent and move coherently with the underlying body or "
        "external motion, preserving strand separation, density and texture fidelity",
        "failures": [
            "temporal flicker",
            "texture melting",
            "sudden disappearance of fine details",
            "strands merging into a solid block",
        ],
    },
    "LFS": {
        "name": "liquid free surfaces",
        "criterion": "fluid-surface coherence",
        "valid": "ripples and waves propagate smoothly and consistently over time, with plausible surface "
        "continuity, fluidity and local motion propagation",
        "failures": [
            "frozen-flow artifacts",
            "unrealistic ripple expansion",
            "inconsistent wave phase",
            "disappearing disturbances",
            "water behaving like a solid texture",
        ],
    },
}


# ----------------------------------------------------------------------------- parsers

_NUM = r"(\d+(?:\.\d+)?)"
_EXPLICIT_RATING = re.compile(r"\b(?:rating|score)\b[\"'*`]*\s*(?:is|of|=|:)?\s*[\"'*`(\[]*\s*" + _NUM, re.IGNORECASE)
_OUT_OF_FIVE = re.compile(_NUM + r"\s*(?:/|out\s+of)\s*5\b", re.IGNORECASE)
_BARE = re.compile(r"^[\s*\"'`(\[]*" + _NUM + r"[\s*\"'`)\].]*$")


def _as_rating(raw: str) -> int | None:
    value = float(raw)
    return int(value) if value.is_integer() and RATING_MIN <= value <= RATING_MAX else None


@register_parser("nrv_rating")
def parse_rating(text: str, expected: Any = None) -> Parsed:
    """The final explicitly stated 1-5 rating (App. E.5).

    Explicit statements are ``Rating: 4`` / ``score of 4`` / ``"rating": 4`` / ``4/5`` / ``4 out of 5``; the last
    one in the reply wins. A reply that is nothing but one number counts as explicit. A reply without an
    explicit rating (a refusal, free text) or whose final rating is not an integer from 1 to 5 is invalid.
    """
    body = strip_thinking(text or "")
    found = [(m.start(), m.group(1)) for m in _EXPLICIT_RATING.finditer(body)]
    found += [(m.start(), m.group(1)) for m in _OUT_OF_FIVE.finditer(body)]
    if not found:
        bare = _BARE.match(body)
        if bare:
            found = [(0, bare.group(1))]
    if not found:
        return Parsed(False, error="no explicit rating; end the reply with 'Rating: N', N an integer from 1 to 5")
    raw = max(found)[1]
    rating = _as_rating(raw)
    if rating is None:
        return Parsed(False, error=f"the final rating {raw} is not an integer from {RATING_MIN} to {RATING_MAX}")
    return Parsed(True, value={"rating": rating})


_LETTERS = r"([A-Za-z](?:\s*(?:,|/|&|\band\b|\bor\b)\s*[A-Za-z])*)\b"
_EXPLICIT_ANSWER = re.compile(
    r"\b(?:final\s+)?answer\b[\"'*`]*\s*(?:is|=|:)?\s*[\"'*`(\[]*\s*(?:option\s+)?"
    r"(AMBIGUOUS\b|" + _LETTERS + r")",
    re.IGNORECASE,
)
_LEADING_LETTER = re.compile(r"^[\s*\"'`(\[]*(?:option\s+)?([A-Za-z])\s*(?:$|[).:\]]\s*)", re.IGNORECASE)


@register_parser("nrv_mcq")
def parse_mcq(text: str, expected: dict) -> Parsed:
    """The final explicitly stated option of a multiple-choice answer.

    ``expected = {"options": ["A", "B", ...]}``. Explicit: ``Answer: B`` (the last one wins), ``Answer:
    AMBIGUOUS``, ``Answer: A and B``; else a reply that starts with an option letter (``B``, ``(B)``, ``B) ...``).
    ``value = {"choice": "B" | "A,B" | "AMBIGUOUS"}``. Letters that are not options make the answer invalid.
    """
    body = strip_thinking(text or "").strip()
    options = [str(o).upper() for o in (expected or {}).get("options", [])]
    matches = list(_EXPLICIT_ANSWER.finditer(body))
    if matches:
        raw = matches[-1].group(1)
    else:
        lead = _LEADING_LETTER.match(body)
        if not lead:
            return Parsed(
                False,
                error=f"no explicit answer; end the reply with 'Answer: <letter>' "
                f"(one of {', '.join(options)}) or 'Answer: AMBIGUOUS'",
            )
        raw = lead.group(1)
    if raw.upper() == AMBIGUOUS:
        return Parsed(True, value={"choice": AMBIGUOUS})
    letters = sorted({t.upper() for t in re.findall(r"[A-Za-z]+", raw) if t.lower() not in ("and", "or")})
    bad = [t for t in letters if len(t) != 1 or t not in options]
    if bad or not letters:
        return Parsed(False, error=f"answer {raw!r} is not one of the options {', '.join(options)} (or AMBIGUOUS)")
    return Parsed(True, value={"choice": ",".join(letters)})


# ----------------------------------------------------------------------------- requests


def system_prompt(component: str) -> str:
    return resources.files("vbench_ray.judges.prompts").joinpath("nrv", f"{component}.txt").read_text()


def request_id(case_id: str, variant: str, component: str, judge_label: str | None = None) -> str:
    """``nrv/{case}/{variant}/nrve/{group}``; ``group`` is ``instr|phy|temp``, plus ``@label`` with several judges."""
    return judge_request_id("nrv", case_id, variant, STAGE, group_of(component, judge_label))


def group_of(component: str, judge_label: str | None = None) -> str:
    """A request's group: the component, plus ``@label`` when several judges answer it."""
    return component if judge_label is None else f"{component}@{judge_label}"


def _image(path: str) -> dict:
    return {"type": "image_url", "image_url": {"url": Path(path).resolve().as_uri()}}


def _video(path: str) -> dict:
    return {"type": "video_url", "video_url": {"url": Path(path).resolve().as_uri()}}


def criteria_text(category: str, instance_criteria: Iterable[str] = ()) -> str:
    """The material-conditioned part of the phy query: ``mu`` and ``Gamma_mu`` (§4.2, App. C)."""
    c = CATEGORY_CRITERIA[category]
    lines = [
        f"Material category: {category} ({c['name']}).",
        f"Key physical criterion: {c['criterion']}: {c['valid']}.",
        "Common failure modes: " + "; ".join(c["failures"]) + ".",
    ]
    extra = [str(x).replace("_", " ") for x in instance_criteria if str(x).strip()]
    if extra:
        lines.append("Instance-specific criteria: " + ", ".join(extra) + ".")
    return "\n".join(lines)


def build_requests(
    case: dict, media: dict, judge_label: str | None = None, show_frames: bool = False
) -> list[JudgeRequest]:
    """The three NRVE-Acc requests of one case (§4.1-4.3).

    ``media``: ``{"roi": [png, ...], "flow": png, "frames": [png, png, png]}`` written by the frame stage.
    instr sees the edited video and the MCQ (Eq. 2); phy the ROI frames with the category criteria (Eq. 3);
    temp the flow-evidence image (Eq. 5), plus the first, middle and last frames with ``show_frames``
    (App. E.3 mentions "sampled frames together with optical-flow motion cues").
    """
    ann = json.loads(case["annotations"])
    cid, variant = case["case_id"], case["variant"]
    params = json.loads(case.get("variant_params") or "{}")
    video = {"fps": params["fps"]} if "fps" in params else None
    mcq = ann["mcq"]
    letters = list(mcq["options"])
    options = "\n".join(f"{k}) {v}" for k, v in mcq["options"].items())
    instr_content = [
        {"type": "text", "text": "Edited video:"},
        _video(case["edited_path"]),
        {
            "type": "text",
            "text": f"Question: {mcq['question']}\nOptions:\n{options}\n\n"
            f"Reply with the letter of the option the video shows ({', '.join(letters)}). "
            "The last line must be 'Answer: <letter>' (or 'Answer: AMBIGUOUS').",
        },
    ]
    physics = ann.get("physics") or {}
    phy_question = physics.get("question") or (
        "Is the deformation of the edited region physically plausible for "
        f"{CATEGORY_CRITERIA[ann['category']]['name']}?"
    )
    phy_content = [{"type": "text", "text": f"{len(media['roi'])} frames of the edited region, in temporal order:"}]
    phy_content += [_image(p) for p in media["roi"]]
    phy_content.append(
        {
            "type": "text",
            "text": (
                f"Editing instruction: {ann['instruction']}\nTarget description: {ann['target_prompt']}\n"
                + criteria_text(ann["category"], physics.get("criteria") or ())
                + f"\nQuestion: {phy_question}\n\nRate the physical plausibility of the deformation from 1 to 5. "
                "The last line must be 'Rating: <1-5>'."
            ),
        }
    )
    temporal = ann["temporal"]
    questions = [temporal["question"]] + ([temporal["flicker_question"]] if temporal.get("flicker_question") else [])
    temp_content = [
        {
            "type": "text",
            "text": "Motion evidence (left: flow from the first to the middle frame; "
            "right: flow from the middle to the last frame):",
        },
        _image(media["flow"]),
    ]
    if show_frames:
        temp_content.append({"type": "text", "text": "The first, middle and last frames:"})
        temp_content += [_image(p) for p in media["frames"]]
    temp_content.append(
        {
            "type": "text",
            "text": (
                f"Material category: {ann['category']} ({CATEGORY_CRITERIA[ann['category']]['name']}).\n"
                + "\n".join(f"Question: {q}" for q in questions)
                + "\n\nRate the temporal coherence of the motion from 1 to 5. The last line must be 'Rating: <1-5>'."
            ),
        }
    )
    contents = {"instr": instr_content, "phy": phy_content, "temp": temp_content}
    out = []
    for component in COMPONENTS:
        out.append(
            JudgeRequest.build(
                "nrv",
                cid,
                variant,
                STAGE,
                group_of(component, judge_label),
                messages=[
                    {"role": "system", "content": system_prompt(component)},
                    {"role": "user", "content": contents[component]},
                ],
                parser="nrv_mcq" if component == "instr" else "nrv_rating",
                expected={"options": letters} if component == "instr" else {"min": RATING_MIN, "max": RATING_MAX},
                video=video if component == "instr" else None,
            )
        )
    return out
