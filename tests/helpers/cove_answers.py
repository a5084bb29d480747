"""A scripted CoVEBench checklist judge: the replay answers of a perfect judge (optionally one broken request) and
the overrides that score the checklist metrics alone."""

import json
from pathlib import Path

from helpers.configs import cove_cfg
from vbench_ray.benchmarks.cove import CoveBench
from vbench_ray.benchmarks.cove_checklist import build_requests

JUDGE_ONLY = "metrics.enabled=[UAS,IFS,VRS,SEM]"


def perfect_answers(data, path: Path, break_one: str | None = None) -> list[str]:
    """A JSONL judge that answers every question with its expected answer (Score-MCQ: 10)."""
    cfg = cove_cfg(data, path.parent / "unused", JUDGE_ONLY)
    lines, ids = [], []
    for case in CoveBench(cfg).load_cases():
        task = json.loads(case["annotations"])
        expected = {q["id"]: q["expected_answer"] for g in task["evaluation_groups"] for q in g["questions"]}
        for request in build_requests(case):
            key = "final_score" if request.group == "Score-MCQ" else "final_answer"
            items = [
                {"id": i, "reasoning": "seen", key: 10 if key == "final_score" else expected[i]}
                for i in request.expected["ids"]
            ]
            text = "I refuse." if request.request_id == break_one else "```json\n" + json.dumps(items) + "\n```"
            lines.append(json.dumps({"request_id": request.request_id, "text": text}))
            ids.append(request.request_id)
    path.write_text("\n".join(lines) + "\n")
    return ids
