"""Issue 24: ViDiC's ``judge.parse=official`` gives the official numbers on messy judge replies.

The oracle transcribes the official chain: NJU-LINK/ViDiC-1K b7aeefd ``judge/judge.py``
(``parse_judge_response``: a case-sensitive ```json fence, then the whole reply as JSON, then the regex
``answer\\s*[:：]\\s*(yes|no|unsure)``, else ``"error"``; a JSON answer is taken as it is) and 23d5004
``utils/calculate.py`` (``answer.lower() == correct_answer.lower()``, pooled over all questions, and over
Similarities / Differences). Replies whose answer is not a string are left out: the official ``.lower()``
raises on them. The project's side is its real judge stage, parser, question rows and accuracies.
"""

from __future__ import annotations

import json
import re
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vbench_ray.benchmarks import vidic_scoring as scoring
from vbench_ray.judges.stage import JudgeResult


def official_answer(text: str) -> str:
    m = re.search(r"```json\s*(.*?)\s*```", text, re.DOTALL)
    for candidate in ([m.group(1)] if m else []) + [text]:
        try:
            return json.loads(candidate).get("answer", "error")
        except Exception:  # noqa: BLE001 - the official parser's bare except: not JSON, or not an object
            pass
    found = re.search(r"answer\s*[:：]\s*(yes|no|unsure)", text, re.I)
    return found.group(1).lower() if found else "error"


def official_scores(items: list[dict]) -> dict:
    right = {"Similarities": [0, 0], "Differences": [0, 0]}
    for item in items:
        for section in right:
            for q in item["structured_analysis"].get(section, []):
                right[section][1] += 1
                right[section][0] += q.get("answer", "").lower() == q.get("correct_answer", "").lower()
    pct = (lambda c, t: 100.0 * c / t if t else None)
    total = [sum(v[0] for v in right.values()), sum(v[1] for v in right.values())]
    return {"Sim": pct(*right["Similarities"]), "Diff": pct(*right["Differences"]), "Avg": pct(*total)}


ANSWERS = ("yes", "no", "Yes", "NO", "Yes.", "unsure", "maybe", "", " yes")
CLASSES = ("subject", "style", "background", "camera", "motion", "position", "playback technique")


@st.composite
def replies(draw):
    answer = draw(st.sampled_from(ANSWERS))
    obj = {"answer": answer, "explanation": "because"} if draw(st.integers(0, 9)) else {"explanation": "none"}
    body = json.dumps(obj)
    shape = draw(st.integers(0, 9))
    word = draw(st.sampled_from(("yes", "no", "unsure", "YES")))
    return [f"```json\n{body}\n```", f"```JSON\n{body}\n```", body, f"Result: {body} done",
            f"answer: {word}\nexplanation: x", f"Answer：{word}", f"<think>answer: {word}</think>{body}",
            f"[{body}]", "no idea", f"```json\n{body[:-1]}\n```\nanswer: {word}"][shape]


@st.composite
def checklists(draw):
    items = []
    for i in range(draw(st.integers(1, 3))):
        analysis = {}
        for section in ("Similarities", "Differences"):
            analysis[section] = [{"class": draw(st.sampled_from(CLASSES)), "question": f"q{i}{section}{k}?",
                                  "correct_answer": draw(st.sampled_from(("yes", "no", "Yes", "No")))}
                                 for k in range(draw(st.integers(0, 3)))]
        items.append({"index": i, "video1_path": f"data/{i}_a.mp4", "video2_path": f"data/{i}_b.mp4",
                      "structured_analysis": analysis})
    texts = {(i, section, k): draw(replies()) for i, item in enumerate(items)
             for section, qs in item["structured_analysis"].items() for k in range(len(qs))}
    return items, texts


class Scripted:
    name = model_label = "scripted"

    def __init__(self, texts):
        self.texts = texts

    def generate(self, requests):
        from vbench_ray.judges.base import JudgeResponse

        out = []
        for r in requests:
            section = "Similarities" if r.group.startswith("sim") else "Differences"
            out.append(JudgeResponse(r.request_id, text=self.texts[(int(r.case_id), section,
                                                                     int(r.group.lstrip("simdf")))]))
        yield out


@settings(max_examples=60, deadline=None)
@given(checklists())
def test_official_parse_matches_the_official_code(data):
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    items, texts = data
    cases = [{"case_id": str(i), "variant": "base", "annotations": json.dumps(item)} for i, item in enumerate(items)]
    results = {scoring.describe_id(c): JudgeResult(scoring.describe_id(c), "ok", "A is red, B is blue.") for c in cases}
    with tempfile.TemporaryDirectory() as tmp:
        results.update(JudgeStage(Scripted(texts), JudgeLog(tmp), max_retries=3).run(
            scoring.judge_requests(cases, results, "official")))
    rows = [r for c in cases for r in scoring.judgment_rows(c, results, "official")]
    got = {k: v["value"] for k, v in scoring.section_metrics(rows, 0, 20, 0.95).items()}
    judged = json.loads(json.dumps(items))
    for i, item in enumerate(judged):
        for section, qs in item["structured_analysis"].items():
            for k, q in enumerate(qs):
                q["answer"] = official_answer(texts[(i, section, k)])
    want = official_scores(judged)
    for key in ("Sim", "Diff", "Avg"):
        assert (got[key] is None) == (want[key] is None), (key, got, want)
        assert got[key] is None or abs(got[key] - want[key]) <= 1e-9, (key, got, want)
