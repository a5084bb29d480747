"""ViDiC-1K runs on the replay backend: a scripted model under test and a scripted judge (answers by request id),
the overrides that replay them, and a two-pair checklist written by hand."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.common import REPO
from vbench_ray.benchmarks import vidic_questions

VIDIC = REPO / "configs" / "vidic.yaml"
DESCRIPTION = (
    "[Subject]\nSimilarities: both show one shape.\nDifferences: In Video A, it is red. In Video B, it is blue."
)


def replay(answers: Path, model: bool = True) -> list[str]:
    # these tiny runs break answers on purpose: keep the metrics past judge.max_invalid_fraction
    out = [
        "judge.backend=replay",
        f"judge.replay_path={answers}",
        "judge.max_retries=1",
        "judge.max_invalid_fraction=1",
    ]
    if model:
        out += ["model.backend=replay", f"model.replay_path={answers}", "model.max_retries=1"]
    return out


def json_answer(answer: str) -> str:
    return "```json\n" + json.dumps({"answer": answer, "explanation": "as described"}) + "\n```"


def script(checklist: Path, path: Path, describe=lambda item: DESCRIPTION, answer=None, extra=()) -> None:
    """A JSONL answering every describe request with ``describe(item)`` (None: no line) and every judge
    request with ``answer(index, tag, gold)`` (default: the gold answer in a ```json block)."""
    answer = answer or (lambda index, tag, gold: json_answer(gold))
    lines = []
    for item in json.loads(checklist.read_text()):
        base = f"vidic/{item['index']}/base"
        text = describe(item)
        if text is not None:
            lines.append({"request_id": f"{base}/describe/response", "text": text})
        for q in vidic_questions.parse_questions(item, "")[0]:
            text = answer(item["index"], q.tag, q.correct_answer)
            lines.append({"request_id": f"{base}/judge/{q.tag}", "text": text})
    lines += list(extra)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _q(cls, question, gold):
    return {"class": cls, "question": question, "correct_answer": gold, "answer": "", "explanation": ""}


def hand_checklist(root: Path) -> Path:
    """Two pairs (official spellings: lower-case classes), with empty stand-in videos."""
    items = [
        {
            "index": 0,
            "video1_path": "data/x/0_src.mp4",
            "video2_path": "data/x/0_tgt.mp4",
            "structured_analysis": {
                "Similarities": [
                    _q("style", "Is the style different?", "no"),
                    _q("camera", "Is the camera movement different?", "no"),
                ],
                "Differences": [
                    _q("subject", "Is the shape red in A but blue in B?", "yes"),
                    _q("motion", "Does the shape move the other way in B?", "yes"),
                    _q("position", "Is the shape higher in B?", "yes"),
                ],
            },
        },
        {
            "index": 1,
            "video1_path": "data/x/1_src.mp4",
            "video2_path": "data/x/1_tgt.mp4",
            "structured_analysis": {
                "Similarities": [_q("background", "Is the background different?", "No")],
                "Differences": [_q("Subject", "Are there two shapes in B?", "YES")],
            },
        },
    ]
    for item in items:
        for key in ("video1_path", "video2_path"):
            (root / item[key]).parent.mkdir(parents=True, exist_ok=True)
            (root / item[key]).write_bytes(b"")
    path = root / "checklist.json"
    path.write_text(json.dumps(items, indent=1))
    return path


def gold_items(data) -> list[dict]:
    return json.loads(Path(data["checklist"]).read_text())


def question_counts(items) -> tuple[int, int]:
    sim = sum(len(i["structured_analysis"]["Similarities"]) for i in items)
    diff = sum(len(i["structured_analysis"]["Differences"]) for i in items)
    return sim, diff
