"""NRVE-Acc by hand (NRVBench §4, Eq. 1-3, App. E.5): the geometric mean, per-instance-then-average,
normalisation, the MCQ mapping, answer parsing, the invalid-output rule and the one deterministic retry."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from vbench_ray.benchmarks import nrv_scoring as S
from vbench_ray.judges.base import JudgeBackend, JudgeResponse
from vbench_ray.judges.log import JudgeLog
from vbench_ray.judges.parsing import parse
from vbench_ray.judges.stage import JudgeResult, JudgeStage

EPS = 1e-6
CFG = S.NRVScoreConfig()


def _case(case_id="m:0001", variant="base", answer="B", partial=()):
    ann = {
        "id": "0001",
        "category": "CTS",
        "difficulty": "L1",
        "instruction": "Make the flag flap.",
        "target_prompt": "A flag flaps.",
        "source_prompt": "A flag hangs.",
        "mcq": {
            "question": "How?",
            "options": {"A": "gently", "B": "strongly", "C": "half"},
            "answer": answer,
            "partial": list(partial),
        },
        "physics": {"criteria": ["fold_continuity"], "question": "Continuous sheet?"},
        "temporal": {"question": "Consistent folds?"},
    }
    return {
        "case_id": case_id,
        "variant": variant,
        "method": "m",
        "instance_id": "0001",
        "category": "CTS",
        "difficulty": "L1",
        "annotations": json.dumps(ann),
        "edited_path": "/tmp/e.mp4",
        "variant_params": None,
    }


def _ok(value):
    return SimpleNamespace(status="ok", value=value)


# ----------------------------------------------------------------------------- Eq. 1


def test_nrve_acc_is_the_weighted_geometric_mean_by_hand():
    s = {"instr": 1.0, "phy": 0.75, "temp": 0.5}
    expected = 100 * (1 + EPS) ** (1 / 3) * (0.75 + EPS) ** (1 / 3) * (0.5 + EPS) ** (1 / 3)
    assert S.nrve_acc(s) == pytest.approx(expected, rel=1e-12)
    assert S.nrve_acc(s) == pytest.approx(100 * 0.375 ** (1 / 3), rel=1e-5)  # = 72.11
    # a failed component drags the instance to ~(1e-6)^(1/3) = 1% of the rest: the geometric-mean rule
    assert S.nrve_acc({"instr": 0.0, "phy": 1.0, "temp": 1.0}) == pytest.approx(
        100 * EPS ** (1 / 3) * (1 + EPS) ** (2 / 3)
    )
    assert S.nrve_acc({"instr": 0.0, "phy": 1.0, "temp": 1.0}) == pytest.approx(1.0, rel=1e-5)
    assert S.nrve_acc({"instr": 0.0, "phy": 0.0, "temp": 0.0}) == pytest.approx(100 * EPS)
    # other weights: all on instr
    assert S.nrve_acc(s, {"instr": 1.0, "phy": 0.0, "temp": 0.0}) == pytest.approx(100 * (1 + EPS))
    weights = S.weights_of(S.NRVScoreConfig(w_instr=0.5, w_phy=0.25, w_temp=0.25))
    assert S.nrve_acc(s, weights) == pytest.approx(100 * (1 + EPS) ** 0.5 * (0.75 + EPS) ** 0.25 * (0.5 + EPS) ** 0.25)
    with pytest.raises(ValueError, match="sum to 1"):
        S.weights_of(S.NRVScoreConfig(w_instr=0.5, w_phy=0.5, w_temp=0.5))


def test_instances_are_scored_before_averaging_not_the_components():
    """Table 2's caption: the final NRVE-Acc is not the geometric mean of the component averages."""
    judged = []
    for cid, (instr, phy, temp) in {"a": (1.0, 1.0, 1.0), "b": (0.0, 1.0, 1.0)}.items():
        for comp, score in zip(S.COMPONENTS, (instr, phy, temp)):
            judged.append(
                {
                    "case_id": cid,
                    "variant": "base",
                    "judge": "j",
                    "method": "m",
                    "instance_id": cid,
                    "category": "CTS",
                    "difficulty": "L1",
                    "component": comp,
                    "score": score,
                    "valid": True,
                }
            )
    inst = S.instance_scores(judged, CFG)
    per_instance = [100 * (1 + EPS), 100 * EPS ** (1 / 3) * (1 + EPS) ** (2 / 3)]
    assert [i["NRVE_Acc"] for i in inst] == pytest.approx(per_instance)
    cross = S.cross_judge_instances(inst)
    mean = sum(c["NRVE_Acc"] for c in cross) / 2
    assert mean == pytest.approx(50.50, abs=0.01)
    geometric_of_averages = 100 * (0.5 * 1 * 1) ** (1 / 3)  # 79.37: what the paper says it is NOT
    assert abs(mean - geometric_of_averages) > 25
    assert [c["S_instr"] for c in cross] == [100.0, 0.0]  # components reported in percent


def test_rating_normalisation_e5_default_and_eq3_option():
    assert CFG.normalize == "e5"
    assert [S.normalize_rating(r, "e5") for r in (1, 2, 3, 4, 5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [S.normalize_rating(r, "eq3") for r in (1, 2, 3, 4, 5)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert S.lowest_score("phy", "e5") == 0.0 and S.lowest_score("temp", "eq3") == pytest.approx(0.2)
    assert S.lowest_score("instr", "eq3") == 0.0
    with pytest.raises(ValueError, match="normalize"):
        S.normalize_rating(3, "r/5")


def test_mcq_mapping_correct_partial_ambiguous_wrong():
    mcq = {"answer": "B", "options": {"A": "", "B": "", "C": ""}, "partial": ["C"]}
    assert S.instr_score("B", mcq) == 1.0
    assert S.instr_score("A", mcq) == 0.0
    assert S.instr_score("C", mcq) == 0.5  # an option the annotation marks as a partial edit
    assert S.instr_score(S.AMBIGUOUS, mcq) == 0.5
    assert S.instr_score("A,B", mcq) == 0.5  # could not settle, the right one among them
    assert S.instr_score("A,C", mcq) == 0.0
    assert S.instr_score(None, mcq) == 0.0


def test_cross_judge_mean_and_population_std_reproduce_table_2():
    tokenflow = {"Qwen-7B": 33.05, "Qwen-32B": 34.77, "Qwen-72B": 29.85, "Gemini": 22.95, "Kimi": 28.88}
    stats = S.cross_judge_stats(tokenflow)
    assert round(stats["mean"], 2) == 29.90 and round(stats["std"], 2) == 4.07 and stats["n_judges"] == 5
    vm = S.cross_judge_stats({"a": 34.71, "b": 34.91, "c": 30.53, "d": 25.55, "e": 28.76})
    assert (round(vm["mean"], 2), round(vm["std"], 2)) == (30.89, 3.58)


# ----------------------------------------------------------------------------- parsing (App. E.5)


@pytest.mark.parametrize(
    "text, rating",
    [
        ("Rating: 4", 4),
        ("The folds look continuous. There are 3 small seams.\nRating: 2", 2),
        ("I'd give it a score of 3/5 at first, but looking again... Final rating: 5", 5),
        ("4", 4),
        ('{"rating": 3, "reason": "ok"}', 3),
        ("**Rating:** 4", 4),
        ("<think>Rating: 1</think>Rating: 5", 5),
        ("Overall 4 out of 5.", 4),
        ("Rating: 4.0", 4),
    ],
)
def test_rating_parser_takes_the_final_explicit_rating(text, rating):
    parsed = parse("nrv_rating", text, {"min": 1, "max": 5})
    assert parsed.ok and parsed.value == {"rating": rating}


@pytest.mark.parametrize(
    "text", ["I cannot assess this video.", "Rating: 7", "Rating: 3.5", "", "It has 3 folds.", "Rating: 4\nRating: 0"]
)
def test_rating_parser_rejects_refusals_and_out_of_range(text):
    parsed = parse("nrv_rating", text, {"min": 1, "max": 5})
    assert not parsed.ok and parsed.error


@pytest.mark.parametrize(
    "text, choice",
    [
        ("Answer: B", "B"),
        ("The hand holds hair.\nAnswer: (b)", "B"),
        ("B) Strands of hair", "B"),
        ("B", "B"),
        ("Answer: A and B", "A,B"),
        ("Answer: AMBIGUOUS", "AMBIGUOUS"),
        ("First I thought Answer: A. Looking again, the final answer is B.", "B"),
        ("The answer is option A.", "A"),
    ],
)
def test_mcq_parser(text, choice):
    parsed = parse("nrv_mcq", text, {"options": ["A", "B"]})
    assert parsed.ok and parsed.value == {"choice": choice}


@pytest.mark.parametrize("text", ["I refuse to answer.", "Answer: C", "Because the hand holds hair.", ""])
def test_mcq_parser_rejects(text):
    assert not parse("nrv_mcq", text, {"options": ["A", "B"]}).ok


# ----------------------------------------------------------------------------- the invalid-output rule


@pytest.mark.parametrize("normalize, phy_low", [("e5", 0.0), ("eq3", 0.2)])
def test_invalid_or_missing_answers_get_the_lowest_score(normalize, phy_low):
    case = _case()
    rid = lambda c: S.request_id(case["case_id"], "base", c)  # noqa: E731
    results = {
        rid("instr"): _ok({"choice": "B"}),
        rid("phy"): JudgeResult(rid("phy"), "invalid", None, 2, "no explicit rating"),
        rid("temp"): _ok({"rating": 4}),
    }
    rows = S.judgment_rows(case, results, "j", False, normalize)
    by = {r["component"]: r for r in rows}
    assert by["instr"]["score"] == 1.0 and by["instr"]["valid"]
    assert by["phy"]["score"] == pytest.approx(phy_low) and not by["phy"]["valid"] and by["phy"]["status"] == "invalid"
    assert by["temp"]["score"] == pytest.approx(S.normalize_rating(4, normalize)) and by["temp"]["rating"] == 4
    inst = S.instance_scores(rows, S.NRVScoreConfig(normalize=normalize))[0]
    expected = (
        100 * (1 + EPS) ** (1 / 3) * (phy_low + EPS) ** (1 / 3) * (S.normalize_rating(4, normalize) + EPS) ** (1 / 3)
    )
    assert inst["NRVE_Acc"] == pytest.approx(expected) and inst["n_invalid"] == 1
    # a request never answered (missing result) is also the lowest score
    missing = S.judgment_rows(case, {}, "j", False, normalize)
    assert [r["status"] for r in missing] == ["missing"] * 3
    assert [r["score"] for r in missing] == pytest.approx([0.0, phy_low, phy_low])


class _Scripted(JudgeBackend):
    """Answers each request from a list of texts, one per attempt."""

    name = "scripted"

    def __init__(self, texts: dict[str, list[str]]):
        super().__init__(SimpleNamespace(name="scripted", model=None))
        self.texts, self.calls = texts, {}

    def generate(self, requests):
        out = []
        for r in requests:
            n = self.calls.get(r.request_id, 0)
            self.calls[r.request_id] = n + 1
            out.append(
                JudgeResponse(r.request_id, text=self.texts[r.request_id][min(n, len(self.texts[r.request_id]) - 1)])
            )
        yield out


def test_one_deterministic_retry_then_lowest(tmp_path):
    case = _case()
    media = {"roi": [str(tmp_path / "r0.png")], "flow": str(tmp_path / "f.png"), "frames": []}
    requests = S.build_requests(case, media)
    ids = {r.group: r.request_id for r in requests}
    backend = _Scripted(
        {
            ids["instr"]: ["I cannot tell.", "Answer: B"],  # fixed by the retry
            ids["phy"]: ["Sorry, no.", "Still no."],  # refuses twice: invalid
            ids["temp"]: ["Rating: 3"],
        }
    )
    results = JudgeStage(backend, JudgeLog(tmp_path), max_retries=1).run(requests)
    assert backend.calls == {ids["instr"]: 2, ids["phy"]: 2, ids["temp"]: 1}
    assert results[ids["instr"]].status == "ok" and results[ids["phy"]].status == "invalid"
    rows = {r["component"]: r for r in S.judgment_rows(case, results, "j", False, "e5")}
    assert (rows["instr"]["score"], rows["phy"]["score"], rows["temp"]["score"]) == (1.0, 0.0, 0.5)
    # the retry is deterministic: the same failure gives the same re-ask prompt
    log = [json.loads(line) for line in (tmp_path / "judge_log.jsonl").read_text().splitlines()]
    assert [r["attempt"] for r in log if r["request_id"] == ids["phy"]] == [0, 1]


# ----------------------------------------------------------------------------- requests


def test_request_layout_ids_media_and_criteria(tmp_path):
    case = _case(variant="control:shuffled")
    media = {
        "roi": [str(tmp_path / f"roi_{k}.png") for k in range(3)],
        "flow": str(tmp_path / "flow.png"),
        "frames": [str(tmp_path / f"f{k}.png") for k in range(3)],
    }
    requests = S.build_requests(case, media)
    assert [r.request_id for r in requests] == [f"nrv/m:0001/control:shuffled/nrve/{c}" for c in S.COMPONENTS]
    instr, phy, temp = requests
    parts = lambda r, t: [p for p in r.messages[1]["content"] if p["type"] == t]  # noqa: E731
    assert [p["video_url"]["url"] for p in parts(instr, "video_url")] == ["file:///tmp/e.mp4"]
    assert instr.parser == "nrv_mcq" and instr.expected == {"options": ["A", "B", "C"]}
    assert [p["image_url"]["url"] for p in parts(phy, "image_url")] == [f"file://{p}" for p in media["roi"]]
    phy_text = " ".join(p["text"] for p in parts(phy, "text"))
    assert "surface continuity" in phy_text and "fold continuity" in phy_text and "Continuous sheet?" in phy_text
    assert [p["image_url"]["url"] for p in parts(temp, "image_url")] == [f"file://{media['flow']}"]
    assert "Consistent folds?" in " ".join(p["text"] for p in parts(temp, "text"))
    assert all(r.messages[0]["role"] == "system" and "Rating" in r.messages[0]["content"] for r in (phy, temp))
    shown = S.build_requests(case, media, "qwen7b", show_frames=True)
    assert [r.request_id.rsplit("/", 1)[1] for r in shown] == ["instr@qwen7b", "phy@qwen7b", "temp@qwen7b"]
    assert len(parts(shown[2], "image_url")) == 4  # flow + first, middle, last frame (App. E.3)
    assert set(S.CATEGORY_CRITERIA) == set(S.CATEGORIES)
    assert math.isclose(sum(S.weights_of(CFG).values()), 1.0)
