"""Messy CoVEBench checklists and judge replies, for the side-by-side tests (issue 24).

``messy_set(rng, n_tasks)`` makes tasks whose questions carry unknown dimensions, gold answers under other
keys, unknown question types and routing keywords, and for every (task, question type) request the replies
to its first ask and re-asks: answers out of the allowed set, ``"Yes."``, scores 7.5 / 11 / ``true`` /
"nan", ids with spaces, items without ``reasoning``, fenced or prose-wrapped JSON, think blocks, two arrays,
truncated text. ``rng`` is a ``random.Random`` (Hypothesis' ``st.randoms()`` draws one it can shrink).
``run_project`` judges them with the project's real judge stage, parse and scoring.
"""

from __future__ import annotations

import json
import tempfile
from types import SimpleNamespace

ABSENT = object()
TYPES = ("AB-MCQ", "Single-TF", "Dual-TF", "Score-MCQ")
DIMS = (
    "Execution Accuracy",
    "Physical Logic",
    "Semantic Preservation",
    "physical logic ",
    "physical_logic",
    "semantic preservation",
    "Vibes",
    "Instruction compliance",
    None,
    ABSENT,
)
TF_ANSWERS = ("Yes", "No", "yes", " No ", "Yes.", "True", "false", "Unclear", 1, True, "", None)
AB_ANSWERS = ("A", "B", "A and B", "a", "Option A", "C", "both", " B", None)
SCORE_ANSWERS = (8, "7", 9, 2, 7.5, "11", 11, True, "nan", "8/10", "", 10, 0, "1_0", [5], {"v": 3}, None)
LEVEL1 = ("Subject", "Physics", "Background", "Artifacts", "Camera")


def _question(rng, qid: str) -> dict:
    qtype = rng.choice(TYPES) if rng.random() > 0.05 else "Ranking"
    q = {"id": qid, "type": qtype, "question": f"question {qid}?"}
    dim = rng.choice(DIMS) if qtype != "Score-MCQ" or rng.random() < 0.2 else "Semantic Preservation"
    if dim is not ABSENT:
        q["dimension"] = dim
    if qtype == "Score-MCQ":
        q["expected_answer"] = "5"
        return q
    gold = rng.choice(("A", "B", "A and B")) if qtype == "AB-MCQ" else rng.choice(("Yes", "No"))
    if qtype == "AB-MCQ":
        q["options"] = {"A": "red", "B": "blue"}
    where = rng.random()
    if where < 0.7:
        q["expected_answer"] = gold
    elif where < 0.8:
        q["correct_answer"] = gold
    elif where < 0.85:
        q["expected_answer"], q["label"] = "", gold
    elif where < 0.9 and qtype == "AB-MCQ":
        q["options"]["answer"] = gold
    if rng.random() < 0.1:
        q["tags"] = [rng.choice(("physics check", "unchanged area", "edit_success"))]
    return q


def _reply(rng, questions: list[dict]) -> str:
    kind = rng.random()
    if kind < 0.03:
        return "I cannot tell."
    if kind < 0.05:
        return '[{"id": "' + questions[0]["id"] + '", "reasoning": "cut'  # truncated
    items = []
    for q in questions:
        if rng.random() < 0.05:
            continue  # an answer left out
        pool = SCORE_ANSWERS if q["type"] == "Score-MCQ" else AB_ANSWERS if q["type"] == "AB-MCQ" else TF_ANSWERS
        item = {}
        r = rng.random()
        item["id"] = f" {q['id']} " if r < 0.05 else (q["id"].lower() if r < 0.07 else q["id"])
        if rng.random() > 0.07:
            item["reasoning"] = "looked at it"
        key = rng.choice(("final_answer", "final_answer", "final_score", "answer", "score"))
        gold = (
            q.get("expected_answer")
            or q.get("correct_answer")
            or q.get("label")
            or (q.get("options") or {}).get("answer")
        )
        right = rng.randint(6, 10) if q["type"] == "Score-MCQ" else gold
        item[key] = right if right is not None and rng.random() < 0.6 else rng.choice(pool)
        items.append(item)
        if rng.random() < 0.04:
            items.append({**item, key: rng.choice(pool)})  # a repeated id: the last one wins
    if rng.random() < 0.05:
        items.append({"id": "Q99", "reasoning": "r", "final_answer": "Yes"})  # an id nobody asked
    body = json.dumps(items) if rng.random() < 0.95 else json.dumps(items[0] if items else {})
    wrap = rng.random()
    if wrap < 0.15:
        return f"```json\n{body}\n```"
    if wrap < 0.25:
        return f"<think>list [the] options</think>\nHere you go: {body} Done."
    if wrap < 0.3:
        return f"{body}\nand also [1]"  # two arrays: the official span is not JSON
    if wrap < 0.35:
        return f"<think>{body}</think>"  # nothing after the think block
    return body


def messy_set(rng, n_tasks: int = 4) -> tuple[list[dict], dict]:
    """(tasks, replies): ``replies[(task id, question type)]`` = the texts of its attempts in order."""
    tasks, replies = [], {}
    for t in range(1, n_tasks + 1):
        groups, n = [], 0
        for g in range(rng.randint(1, 3)):
            questions = []
            for _ in range(rng.randint(1, 4)):
                n += 1
                questions.append(_question(rng, f"Q{n}"))
            group = {"target_element": f"element {g}", "questions": questions}
            if rng.random() < 0.5:
                group["category"] = [{"Question IDs": [questions[0]["id"]], "Level 1": rng.choice(LEVEL1)}]
            groups.append(group)
        task = {
            "id": t,
            "editing_instruction": f"edit {t}",
            "videoA_path": f"data/{t}.mp4",
            "category": [{"Level 1": rng.choice(LEVEL1)}],
            "evaluation_groups": groups,
        }
        tasks.append(task)
        for qtype in TYPES:
            asked = [q for grp in groups for q in grp["questions"] if q["type"] == qtype]
            if asked:
                replies[(t, qtype)] = [_reply(rng, asked) for _ in range(rng.randint(1, 4))]
    return tasks, replies


class ScriptedJudge:
    """A judge backend answering each attempt of a request with its recorded reply (the last one repeats)."""

    name = "scripted"
    model_label = "scripted"

    def __init__(self, replies: dict):
        self.replies = replies

    def generate(self, requests):
        from vbench_ray.judges.base import JudgeResponse

        out = []
        for r in requests:
            texts = self.replies[(int(r.case_id), r.group)]
            out.append(JudgeResponse(r.request_id, text=texts[min(r.attempt, len(texts) - 1)]))
        yield out


def case_of(task: dict) -> dict:
    return {
        "case_id": str(task["id"]),
        "variant": "base",
        "annotations": json.dumps(task),
        "categories": [],
        "instruction": task.get("editing_instruction", "edit"),
        "source_path": f"/data/src{task['id']}.mp4",
        "edited_path": f"/data/ed{task['id']}.mp4",
    }


def run_project(tasks: list[dict], replies: dict, parse: str = "official", validity: str = "request") -> list[dict]:
    """Judgment rows of the project: requests, the real judge stage (3 re-asks), parse, scoring."""
    from vbench_ray.benchmarks import cove_checklist as ck
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    cases = [case_of(t) for t in tasks]
    with tempfile.TemporaryDirectory() as tmp:
        stage = JudgeStage(ScriptedJudge(replies), JudgeLog(tmp), max_retries=3)
        results = stage.run([r for c in cases for r in ck.build_requests(c, parse, validity)])
    return [row for c in cases for row in ck.judgment_rows(c, results, parse, validity=validity)]


def project_values(rows: list[dict], aggregation: str, uas_unit: str, sem_questions: str = "routed") -> dict:
    from vbench_ray.benchmarks import cove_checklist as ck

    cfg = SimpleNamespace(aggregation=aggregation, uas_unit=uas_unit, sem_questions=sem_questions)
    return {
        m: ck.aggregate(rows, m, cfg, seed=0, n_resamples=20, confidence=0.95)["value"] for m in ck.CHECKLIST_METRICS
    }
