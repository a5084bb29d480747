"""The judge log as the cache (issue 14, items 5 and 11): answers are reused only from the same judge, and
every answer is on disk as soon as it arrives, so a killed run pays for nothing twice."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from vbench_ray.judges.base import JudgeBackend, JudgeConfig, JudgeRequest, JudgeResponse
from vbench_ray.judges.log import JudgeLog
from vbench_ray.judges.stage import JudgeStage

ANSWER = '```json\n[{"question_id": "Q1", "answer": "A"}]\n```'


def requests(n: int = 5) -> list[JudgeRequest]:
    return [
        JudgeRequest(
            f"cove/{i}/base/checklist/AB-MCQ",
            [{"role": "user", "content": f"case {i}"}],
            parser="test_any",
            expected=["Q1"],
        )
        for i in range(n)
    ]


class Scripted(JudgeBackend):
    """Answers every request correctly, one response per batch, and counts what it was sent."""

    name = "http"

    def __init__(self, model: str, temperature: float = 0.0, crash_after: int | None = None, top_k: int | None = None):
        super().__init__(
            OmegaConf.merge(
                OmegaConf.structured(JudgeConfig),
                {"backend": "http", "model": model, "temperature": temperature, "top_k": top_k},
            )
        )
        self.sent: list[str] = []
        self.crash_after = crash_after

    def generate(self, reqs):
        for r in reqs:
            if self.crash_after is not None and len(self.sent) == self.crash_after:
                raise KeyboardInterrupt("killed")  # not an Exception: nothing in the stage may catch it
            self.sent.append(r.request_id)
            yield [JudgeResponse(r.request_id, text=ANSWER, model=self.cfg.model)]


@pytest.fixture
def parser_ok():
    from vbench_ray.judges import parsing

    # a parser of the test's own (every answer valid), so the test does not depend on a benchmark's prompts
    parsing.PARSERS["test_any"] = lambda text, expected: parsing.Parsed(True, value=text)
    yield
    del parsing.PARSERS["test_any"]


def test_a_different_judge_is_asked_again_the_same_judge_is_not(tmp_path, parser_ok):
    log = JudgeLog(tmp_path)
    a = Scripted("judge-a")
    assert set(JudgeStage(a, log, 0).run(requests())) and len(a.sent) == 5
    b = Scripted("judge-b")  # another model in the same run directory: its own answers, not judge-a's
    results = JudgeStage(b, JudgeLog(tmp_path), 0).run(requests())
    assert len(b.sent) == 5 and all(r.status == "ok" for r in results.values())
    hot = Scripted("judge-a", temperature=0.7)  # same model, other sampling: another judge too
    JudgeStage(hot, JudgeLog(tmp_path), 0).run(requests())
    assert len(hot.sent) == 5
    again = Scripted("judge-b")  # the same judge again: everything from the log
    JudgeStage(again, JudgeLog(tmp_path), 0).run(requests())
    assert again.sent == []
    records = [json.loads(x) for x in (tmp_path / "judge_log.jsonl").read_text().splitlines()]
    assert len(records) == 15 and len({r["judge"] for r in records}) == 3


def test_top_k_is_part_of_the_judge_identity_when_set(tmp_path, parser_ok):
    import hashlib

    # unset, the identity is what it was before judges had a top_k: existing judge logs keep answering
    before = {
        "backend": "http",
        "model": "judge-a",
        "name": None,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 4096,
        "seed": 0,
    }
    legacy = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    assert Scripted("judge-a").identity() == legacy
    assert len({Scripted("judge-a", top_k=k).identity() for k in (None, 40, 50)}) == 3
    JudgeStage(Scripted("judge-a"), JudgeLog(tmp_path), 0).run(requests())
    sampled = Scripted("judge-a", top_k=50)  # other sampling: asked again, not answered from the log
    JudgeStage(sampled, JudgeLog(tmp_path), 0).run(requests())
    assert len(sampled.sent) == 5
    again = Scripted("judge-a", top_k=50)
    JudgeStage(again, JudgeLog(tmp_path), 0).run(requests())
    assert again.sent == []


def test_logs_written_before_judge_identities_match_on_backend_and_model(tmp_path, parser_ok):
    log = JudgeLog(tmp_path)
    JudgeStage(Scripted("judge-a"), log, 0).run(requests(2))
    lines = [json.loads(x) for x in (tmp_path / "judge_log.jsonl").read_text().splitlines()]
    for r in lines:
        del r["judge"]  # an older log
    (tmp_path / "judge_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    same, other = Scripted("judge-a"), Scripted("judge-b")
    JudgeStage(same, JudgeLog(tmp_path), 0).run(requests(2))
    JudgeStage(other, JudgeLog(tmp_path), 0).run(requests(2))
    assert same.sent == [] and len(other.sent) == 2


def test_each_answer_is_logged_as_it_arrives_so_a_killed_run_pays_nothing_twice(tmp_path, parser_ok):
    killed = Scripted("judge-a", crash_after=3)
    with pytest.raises(KeyboardInterrupt):
        JudgeStage(killed, JudgeLog(tmp_path), 0).run(requests(8))
    assert len((tmp_path / "judge_log.jsonl").read_text().splitlines()) == 3  # the three answers that came back
    restarted = Scripted("judge-a")
    results = JudgeStage(restarted, JudgeLog(tmp_path), 0).run(requests(8))
    assert len(restarted.sent) == 5 and set(restarted.sent).isdisjoint(killed.sent)
    assert all(r.status == "ok" for r in results.values()) and len(results) == 8


def test_the_http_engine_hands_over_each_answer_as_it_arrives(tmp_path):
    """The http engine yields one response at a time (the stage logs each at once), not one batch per round."""
    import threading
    import time

    from helpers.slow_judge import SlowJudge
    from vbench_ray.judges.backends.http import HTTPBackend

    server = SlowJudge(delay=0.3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = OmegaConf.merge(
            OmegaConf.structured(JudgeConfig),
            {
                "backend": "http",
                "model": "slow",
                "http": {"base_url": f"http://127.0.0.1:{server.server_port}/v1", "concurrency": 1, "max_retries": 0},
            },
        )
        start, arrivals = time.monotonic(), []
        for batch in HTTPBackend(cfg).generate(requests(4)):
            arrivals += [time.monotonic() - start] * len(batch)
            assert len(batch) == 1 and batch[0].text == "[]"
    finally:
        server.shutdown()
    assert len(arrivals) == 4 and arrivals[0] < 0.9 * arrivals[-1] and arrivals[-1] >= 4 * 0.3
