"""NRVE-Acc: judge requests, answer parsing and the per-instance score (NRVBench paper, "Beyond Rigid").

Spec, section by section (no official code is published; the paper is the only source):

* **Eq. 1** (§4): ``NRVE-Acc(V) = 100 * prod_k (S_k(V) + eps) ** w_k`` over ``k in {instr, phy, temp}``,
  ``sum_k w_k = 1``, default ``w_k = 1/3`` and ``eps = 1e-6``. Computed **per instance, then averaged over
  instances** (App. E.5; Table 2's caption: not the geometric mean of the component averages).
* **Eq. 2** (§4.1): ``S_instr`` maps the judge's answer to the instance's diagnostic multiple-choice question
  to 1.0 (correct), 0.5 (partially correct or ambiguous) and 0.0 (wrong). The judge sees the edited video.
* **Eq. 3** (§4.2): ``S_phy`` from a 1-5 rating of the mask-guided ROI of the edited video, queried with the
  material-conditioned ``q_phy = (q, mu, Gamma_mu)``: the instance's question, its category and the
  category's criteria (App. C, :data:`CATEGORY_CRITERIA`).
* **Eq. 4-5** (§4.3): ``S_temp`` from a 1-5 rating of ``Concat(Vis(Flow(I_0, I_m)), Vis(Flow(I_m, I_T-1)))``,
  ``m = floor(T / 2)`` (the image is made by the frame stage in ``nrv_media.py``).
* **Rating normalisation**: ``(r - 1) / 4`` (App. E.5, "we normalize these ratings by (r-1)/4"; the default,
  ``score.normalize=e5``) or ``r / 5`` as Eq. 3 and 5 print it (``score.normalize=eq3``). The two disagree in
  the paper; the appendix states the reporting convention, so it is the default.
* **Invalid output** (App. E.5): if a response has several numbers, the *final explicitly stated* rating is
  used; a refusal, a response without a valid option / rating, or one violating the output format after
  **one deterministic retry** (``judge.max_retries=1``) gets the **lowest score** of that component
  (``S_instr = 0``, rating 1, i.e. ``S = 0`` under ``e5`` and ``0.2`` under ``eq3``).

Request ids: ``nrv/{case_id}/{variant}/nrve/{group}`` with ``group`` one of ``instr``, ``phy``, ``temp``
(e.g. ``nrv/0074_dso14/base/nrve/phy``). With several judges (``judges:``) every group carries the judge's
label, ``.../nrve/phy@qwen7b``, so that ids stay unique in the one judge log of the run.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from vbench_ray.judges.base import JudgeRequest, request_id as judge_request_id
from vbench_ray.judges.parsing import Parsed, register_parser, strip_thinking

CATEGORIES = ("ASB", "CTS", "DSO", "GSF", "HFF", "LFS")
DIFFICULTIES = ("L1", "L2", "L3")
COMPONENTS = ("instr", "phy", "temp")
COMPONENT_METRIC = {"instr": "S_instr", "phy": "S_phy", "temp": "S_temp"}
NRVE_METRICS = ("NRVE_Acc", "S_instr", "S_phy", "S_temp")
NORMALIZATIONS = ("e5", "eq3")
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


@dataclass
class NRVScoreConfig:
    normalize: str = "e5"  # 1-5 ratings -> [0,1]: e5 = (r-1)/4 (App. E.5, default) | eq3 = r/5 (Eq. 3, 5)
    w_instr: float = 1.0 / 3.0  # Eq. 1 weights (sum to 1; paper: uniform 1/3)
    w_phy: float = 1.0 / 3.0
    w_temp: float = 1.0 / 3.0
    epsilon: float = 1e-6  # Eq. 1 numerical-stability epsilon


# ----------------------------------------------------------------------------- formulas


def normalize_rating(rating: float, mode: str = "e5") -> float:
    """A 1-5 rating in [0, 1]: ``(r - 1) / 4`` (App. E.5) or ``r / 5`` (Eq. 3, 5)."""
    if mode == "e5":
        return (float(rating) - RATING_MIN) / (RATING_MAX - RATING_MIN)
    if mode == "eq3":
        return float(rating) / RATING_MAX
    raise ValueError(f"score.normalize must be one of {NORMALIZATIONS}, got {mode!r}")


def lowest_score(component: str, mode: str = "e5") -> float:
    """The score of an invalid or refused answer (App. E.5): 0 for instr, the normalised rating 1 otherwise."""
    return 0.0 if component == "instr" else normalize_rating(RATING_MIN, mode)


def instr_score(choice: str | None, mcq: dict) -> float:
    """Eq. 2's ``m_instr``: 1.0 correct, 0.5 partially correct or ambiguous, 0.0 wrong or no valid answer.

    ``choice`` is the parsed answer: one option letter, several letters joined by commas (the judge could
    not settle on one), or ``AMBIGUOUS``. Partial credit (0.5) goes to ``AMBIGUOUS``, to a set of letters
    that contains the correct one, and to a letter the annotation lists under ``mcq.partial`` (an option
    describing a partially realised edit).
    """
    if not choice:
        return 0.0
    answer = str(mcq["answer"]).strip().upper()
    if choice == AMBIGUOUS:
        return 0.5
    letters = choice.split(",")
    if len(letters) > 1:
        return 0.5 if answer in letters else 0.0
    if letters[0] == answer:
        return 1.0
    partial = {str(p).strip().upper() for p in (mcq.get("partial") or [])}
    return 0.5 if letters[0] in partial else 0.0


def weights_of(score_cfg) -> dict[str, float]:
    weights = {"instr": float(score_cfg.w_instr), "phy": float(score_cfg.w_phy), "temp": float(score_cfg.w_temp)}
    if any(w < 0 for w in weights.values()) or not math.isclose(sum(weights.values()), 1.0, abs_tol=1e-6):
        raise ValueError(
            f"score.w_instr + score.w_phy + score.w_temp must be non-negative and sum to 1 (Eq. 1), got {weights}"
        )
    return weights


def nrve_acc(scores: dict[str, float], weights: dict[str, float] | None = None, epsilon: float = 1e-6) -> float:
    """Eq. 1: ``100 * prod_k (S_k + eps) ** w_k`` for one instance; ``scores`` are the normalised S_k in [0, 1]."""
    weights = weights or {k: 1.0 / 3.0 for k in COMPONENTS}
    value = 1.0
    for k in COMPONENTS:
        value *= (float(scores[k]) + epsilon) ** weights[k]
    return 100.0 * value


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


# ----------------------------------------------------------------------------- judged rows

JUDGMENT_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("variant", pa.string()),
        ("method", pa.string()),
        ("instance_id", pa.string()),
        ("category", pa.string()),
        ("difficulty", pa.string()),
        ("judge", pa.string()),
        ("component", pa.string()),
        ("request_id", pa.string()),
        ("status", pa.string()),
        ("answer", pa.string()),
        ("rating", pa.int64()),
        ("score", pa.float64()),
        ("valid", pa.bool_()),
        ("error", pa.string()),  # the judge's last error when the component has no usable answer
    ]
)


def judgment_rows(case: dict, results: dict, judge_label: str, suffix: bool, normalize: str) -> list[dict]:
    """One row per component for one (case, judge): the answer, its status and its normalised score.

    An answer that never parsed (``invalid``), a request never answered (``error``) or a missing result
    gets the component's lowest score (App. E.5) and ``valid = False``.
    """
    ann = json.loads(case["annotations"])
    rows = []
    for component in COMPONENTS:
        rid = request_id(case["case_id"], case["variant"], component, judge_label if suffix else None)
        result = results.get(rid)
        status = result.status if result is not None else "missing"
        value = result.value if status == "ok" else None
        answer, rating = None, None
        if value is None:
            score = lowest_score(component, normalize)
        elif component == "instr":
            answer = value["choice"]
            score = instr_score(answer, ann["mcq"])
        else:
            rating = int(value["rating"])
            answer = str(rating)
            score = normalize_rating(rating, normalize)
        rows.append(
            {
                "case_id": case["case_id"],
                "variant": case["variant"],
                "method": case.get("method"),
                "instance_id": case.get("instance_id"),
                "category": case.get("category"),
                "difficulty": case.get("difficulty"),
                "judge": judge_label,
                "component": component,
                "request_id": rid,
                "status": status,
                "answer": answer,
                "rating": rating,
                "score": float(score),
                "valid": value is not None,
                "error": result.error if result is not None and status != "ok" else None,
            }
        )
    return rows


def instance_scores(judged: list[dict], score_cfg) -> list[dict]:
    """Per (case, variant, judge): ``S_instr, S_phy, S_temp`` in [0, 1] and ``NRVE_Acc`` in [0, 100] (Eq. 1)."""
    weights = weights_of(score_cfg)
    groups: dict[tuple, dict] = {}
    for r in judged:
        key = (r["case_id"], r["variant"], r["judge"])
        g = groups.setdefault(
            key,
            {
                "case_id": r["case_id"],
                "variant": r["variant"],
                "judge": r["judge"],
                "method": r["method"],
                "instance_id": r["instance_id"],
                "category": r["category"],
                "difficulty": r["difficulty"],
                "n_invalid": 0,
            },
        )
        g[COMPONENT_METRIC[r["component"]]] = r["score"]
        g["n_invalid"] += not r["valid"]
    out = []
    for g in groups.values():
        if all(COMPONENT_METRIC[k] in g for k in COMPONENTS):
            g["NRVE_Acc"] = nrve_acc({k: g[COMPONENT_METRIC[k]] for k in COMPONENTS}, weights, score_cfg.epsilon)
            out.append(g)
    return sorted(out, key=lambda g: (g["case_id"], g["variant"], g["judge"]))


def cross_judge_instances(instances: list[dict]) -> list[dict]:
    """Per (case, variant): each score averaged over the judges that scored it (percent, like Table 2).

    With one judge this is that judge's scores, times 100 for the components.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in instances:
        groups.setdefault((r["case_id"], r["variant"]), []).append(r)
    out = []
    for (case_id, variant), members in sorted(groups.items()):
        first = members[0]
        row = {k: first[k] for k in ("case_id", "variant", "method", "instance_id", "category", "difficulty")}
        row["n_judges"] = len(members)
        row["n_invalid"] = sum(m["n_invalid"] for m in members)
        row["NRVE_Acc"] = float(np.mean([m["NRVE_Acc"] for m in members]))
        for k in COMPONENTS:
            row[COMPONENT_METRIC[k]] = 100.0 * float(np.mean([m[COMPONENT_METRIC[k]] for m in members]))
        out.append(row)
    return out


def percent_rows(instances: list[dict]) -> list[dict]:
    """One judge's instance rows with the components in percent (the summary's scale)."""
    return [{**r, **{COMPONENT_METRIC[k]: 100.0 * r[COMPONENT_METRIC[k]] for k in COMPONENTS}} for r in instances]


def cross_judge_stats(per_judge: dict[str, float | None]) -> dict:
    """Table 2's cross-judge columns: the mean and the (population, ddof=0) std of the judges' NRVE-Acc.

    ddof=0 reproduces Table 2 (e.g. TokenFlow: 33.05, 34.77, 29.85, 22.95, 28.88 -> 29.90, 4.07).
    """
    values = [v for v in per_judge.values() if v is not None]
    return {
        "per_judge": dict(per_judge),
        "n_judges": len(values),
        "mean": float(np.mean(values)) if values else None,
        "std": float(np.std(values, ddof=0)) if values else None,
    }
