"""NRVE-Acc: the per-instance score (NRVBench paper, "Beyond Rigid"); its judge requests and answer parsing are in
``nrv_requests``, re-exported here.

Spec, section by section (no official code is published; the paper is the only source):

* **Eq. 1** (§4): ``NRVE-Acc(V) = 100 * prod_k (S_k(V) + eps) ** w_k`` over ``k in {instr, phy, temp}``,
  ``sum_k w_k = 1``, default ``w_k = 1/3`` and ``eps = 1e-6``. Computed **per instance, then averaged over
  instances** (App. E.5; Table 2's caption: not the geometric mean of the component averages).
* **Eq. 2** (§4.1): ``S_instr`` maps the judge's answer to the instance's diagnostic multiple-choice question
  to 1.0 (correct), 0.5 (partially correct or ambiguous) and 0.0 (wrong). The judge sees the edited video.
* **Eq. 3** (§4.2): ``S_phy`` from a 1-5 rating of the mask-guided ROI of the edited video, queried with the
  material-conditioned ``q_phy = (q, mu, Gamma_mu)``: the instance's question, its category and the
  category's criteria (App. C, ``nrv_requests.CATEGORY_CRITERIA``).
* **Eq. 4-5** (§4.3): ``S_temp`` from a 1-5 rating of ``Concat(Vis(Flow(I_0, I_m)), Vis(Flow(I_m, I_T-1)))``,
  ``m = floor(T / 2)`` (the image is made by the frame stage in ``nrv_media.py``).
* **Rating normalisation**: ``(r - 1) / 4`` (App. E.5, "we normalize these ratings by (r-1)/4"; the default,
  ``score.normalize=e5``) or ``r / 5`` as Eq. 3 and 5 print it (``score.normalize=eq3``). The two disagree in
  the paper; the appendix states the reporting convention, so it is the default.
* **Invalid output** (App. E.5): if a response has several numbers, the *final explicitly stated* rating is
  used; a refusal, a response without a valid option / rating, or one violating the output format after
  **one deterministic retry** (``judge.max_retries=1``) gets the **lowest score** of that component
  (``S_instr = 0``, rating 1, i.e. ``S = 0`` under ``e5`` and ``0.2`` under ``eq3``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from vbench_ray.benchmarks.nrv_requests import (
    AMBIGUOUS,
    CATEGORY_CRITERIA,
    COMPONENTS,
    RATING_MAX,
    RATING_MIN,
    STAGE,
    build_requests,
    criteria_text,
    group_of,
    parse_mcq,
    parse_rating,
    request_id,
    system_prompt,
)

__all__ = [  # the score's public names, whichever of its two modules holds them
    "AMBIGUOUS",
    "CATEGORIES",
    "CATEGORY_CRITERIA",
    "COMPONENTS",
    "COMPONENT_METRIC",
    "DIFFICULTIES",
    "JUDGMENT_SCHEMA",
    "NORMALIZATIONS",
    "NRVE_METRICS",
    "NRVScoreConfig",
    "RATING_MAX",
    "RATING_MIN",
    "STAGE",
    "build_requests",
    "criteria_text",
    "cross_judge_instances",
    "cross_judge_stats",
    "group_of",
    "instance_scores",
    "instr_score",
    "judgment_rows",
    "lowest_score",
    "normalize_rating",
    "nrve_acc",
    "parse_mcq",
    "parse_rating",
    "percent_rows",
    "request_id",
    "system_prompt",
    "weights_of",
]

CATEGORIES = ("ASB", "CTS", "DSO", "GSF", "HFF", "LFS")
DIFFICULTIES = ("L1", "L2", "L3")
COMPONENT_METRIC = {"instr": "S_instr", "phy": "S_phy", "temp": "S_temp"}
NRVE_METRICS = ("NRVE_Acc", "S_instr", "S_phy", "S_temp")
NORMALIZATIONS = ("e5", "eq3")


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
