"""CoVEBench VQR (VisualQuality-R1 through the judge machinery): the answer parser, the request layout, the
score arithmetic with a replay judge, and an end-to-end run with ``metrics.enabled=[VQR]``."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import REPO, cove_overrides
from vbench_ray.benchmarks import cove_vqr as vqr
from vbench_ray.benchmarks.cove import CoveBench
from vbench_ray.configure import load_config
from vbench_ray.judges.parsing import parse
from vbench_ray.judges.stage import JudgeResult
from vbench_ray.runner import run

COVE = REPO / "configs" / "cove.yaml"
EXPECTED = {"low": 1.0, "high": 5.0}


def _cfg(data, out, *extra):
    return load_config(COVE, cove_overrides(data, out, "metrics.enabled=[VQR]", *extra))


# ----------------------------------------------------------------------------- parser

@pytest.mark.parametrize("text, score", [
    ("<think>Sharp, little noise, slight blur at the edges.</think><answer>3.75</answer>", 3.75),
    ("<answer>4</answer>", 4.0),
    ("<think>a 2 would be too harsh <answer>2</answer></think> <answer> 4.10 </answer>", 4.10),  # last span wins
    ("<answer>The score is 1.00</answer>", 1.0),
    ("<answer>5.00</answer>", 5.0),
    ("<think>ok</think> 2.5", 2.5),  # no tags: the text after </think>
])
def test_parser_reads_the_last_answer_span(text, score):
    parsed = parse(vqr.PARSER, text, EXPECTED)
    assert parsed.ok and parsed.value["score"] == pytest.approx(score)


@pytest.mark.parametrize("text, error", [
    ("<think>bad</think><answer>7.5</answer>", "outside the scale 1 to 5"),
    ("<answer>0.5</answer>", "outside the scale"),
    ("<answer>-3</answer>", "outside the scale"),
    ("<think>looks fine</think><answer>good</answer>", "no score inside <answer>"),
    ("<think>I cannot rate this picture.</think>", "no score in the answer"),
    ("", "no score"),
])
def test_parser_rejects_off_scale_and_missing_scores(text, error):
    parsed = parse(vqr.PARSER, text, EXPECTED)
    assert not parsed.ok and error in parsed.error and parsed.value is None
    assert parse(vqr.PARSER, None, EXPECTED).ok is False


# ----------------------------------------------------------------------------- requests

@pytest.fixture(scope="module")
def framed(cove_data, tmp_path_factory):
    """The synthetic cases with their VQR frames written by the frame stage (as the stream does)."""
    out = tmp_path_factory.mktemp("vqr_frames")
    cfg = _cfg(cove_data, out / "run")
    stage = vqr.VQRFrameStage(str(out), frames=vqr.FRAMES)
    cases = CoveBench().load_cases(cfg)
    return [{**c, **stage(c)} for c in cases if not c.get("error_load")]


def test_requests_one_per_uniform_frame_with_the_published_prompt(framed):
    from vbench_ray.video.io import VideoReader, uniform_indices

    case = framed[0]
    requests = vqr.build_requests(case)
    n = VideoReader(case["edited_path"]).info.num_frames
    indices = uniform_indices(n, 10)
    assert len(requests) == len(indices) == min(n, 10)
    assert [r.group for r in requests] == [f"frame_{i:06d}" for i in indices]
    assert [r.request_id for r in requests] == [f"cove/{case['case_id']}/base/vqr/frame_{i:06d}" for i in indices]
    for r in requests:
        (turn,) = r.messages
        image, text = turn["content"]
        assert turn["role"] == "user" and image["type"] == "image_url" and text["type"] == "text"
        path = Path(image["image_url"]["url"].removeprefix("file://"))
        assert path.is_file() and path.suffix == ".jpg" and path.stem == r.group
        assert text["text"].startswith("You are doing the image quality assessment task.")
        assert "a float between 1 and 5, rounded to two decimal places" in text["text"]
        assert text["text"].endswith("only one score in <answer> </answer> tags.")
        assert r.parser == vqr.PARSER and r.expected == EXPECTED
    assert vqr.build_requests({**case, "error_load": "broken"}) == []
    assert vqr.build_requests({**case, "vqr_frames": None}) == []  # the frame stage failed: nothing to ask


def test_case_score_is_the_mean_of_frame_scores_by_hand(framed):
    case = framed[0]
    requests = vqr.build_requests(case)
    scores = [1.0, 2.0, 3.5, 4.25, 5.0, 3.0, 3.0, 2.75, 4.0, 1.5][: len(requests)]
    results = {r.request_id: JudgeResult(r.request_id, "ok", {"score": s, "answer": str(s)}, 1)
               for r, s in zip(requests, scores)}
    rows = vqr.frame_rows(case, results)
    assert [r["score"] for r in rows] == scores and all(r["metric"] == "VQR" for r in rows)
    key = (case["case_id"], "base")
    assert vqr.case_scores(rows)[key] == pytest.approx(sum(scores) / len(scores))
    # a frame that never got a usable score: the case has no VQR (the official script fails the whole video)
    results[requests[0].request_id] = JudgeResult(requests[0].request_id, "invalid", None, 4, "score 9 is outside")
    rows = vqr.frame_rows(case, results)
    assert rows[0]["status"] == "invalid" and rows[0]["score"] is None and "outside" in rows[0]["error"]
    assert vqr.case_scores(rows)[key] is None


# ----------------------------------------------------------------------------- end to end

def frames_in(cases, run_dir: Path) -> list[dict]:
    """The cases with their VQR frames written where the run writes them (so the requests' messages match)."""
    stage = vqr.VQRFrameStage(str(run_dir.resolve()), frames=vqr.FRAMES)
    return [{**c, **stage(c)} for c in cases]


def replay_answers(framed, path: Path, score_of, broken: set[str] = frozenset()) -> dict[str, list[float]]:
    """A replay judge (JSONL of {"request_id", "text"}, plus "attempt_hash" for a re-ask's own answer): frame
    ``k`` of case ``c`` answers ``score_of(c, k)``; a request in ``broken`` answers off the scale, and its
    re-ask (the request with the judge stage's note, ``retry_request``) the right score."""
    from vbench_ray.judges.stage import retry_request

    lines, scores = [], {}
    for case in framed:
        for k, r in enumerate(vqr.build_requests(case)):
            s = score_of(case["case_id"], k)
            scores.setdefault(case["case_id"], []).append(s)
            good = f"<think>frame {k}</think><answer>{s:.2f}</answer>"
            if r.request_id in broken:
                bad = "<think>hmm</think><answer>8.3</answer>"
                again = retry_request(r, parse(vqr.PARSER, bad, EXPECTED).error)
                lines += [{"request_id": r.request_id, "text": bad},
                          {"request_id": r.request_id, "attempt_hash": again.prompt_hash(), "text": good}]
            else:
                lines.append({"request_id": r.request_id, "text": good})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return scores


def test_end_to_end_vqr_with_a_replay_judge(cove_data, framed, tmp_path):
    answers = tmp_path / "answers.jsonl"
    out = tmp_path / "run"
    framed = frames_in(framed, out)
    first = vqr.build_requests(framed[0])[0].request_id
    score_of = lambda case_id, k: 1.0 + (int(case_id) % 4) + 0.25 * (k % 2)  # noqa: E731
    expected = replay_answers(framed, answers, score_of, broken={first})
    result = run(_cfg(cove_data, out, "vqr.backend=replay", f"vqr.replay_path={answers}", "vqr.max_retries=1"))
    judged = [r for r in pq.read_table(out / "judgments.parquet").to_pylist() if r["metric"] == "VQR"]
    per_case = vqr.case_scores(judged)
    assert set(per_case) == {(c, "base") for c in expected}
    for case_id, scores in expected.items():
        assert per_case[(case_id, "base")] == pytest.approx(sum(scores) / len(scores))
    m = result.summary["metrics"]["VQR"]
    values = [sum(s) / len(s) for s in expected.values()]
    assert m["value"] == pytest.approx(sum(values) / len(values))
    assert m["n"] == len(values) and m["n_failed"] == 0 and m["n_invalid"] == 0 and m["scale"] == "1-5"
    assert m["higher_is_better"] is True and m["ci95"] is not None
    assert set(result.summary["metrics"]) == {"VQR"}  # no frame metric, no checklist metric
    cats = {c: v["VQR"] for c, v in result.summary["by_category"].items()}
    assert cats and all(v["n"] >= 1 for v in cats.values())
    one = next(iter(cats))
    members = [c for c in framed if one in (c["categories"] or [])]
    assert cats[one]["value"] == pytest.approx(
        sum(per_case[(c["case_id"], "base")] for c in members) / len(members))
    # the off-scale answer was re-asked; every raw answer is in the judge log
    log = [json.loads(line) for line in (out / "judge_log.jsonl").read_text().splitlines()]
    mine = [r for r in log if r["request_id"] == first]
    assert [(r["attempt"], r["parse_status"]) for r in mine] == [(0, "invalid"), (1, "ok")]
    assert "outside the scale" in mine[0]["parse_error"] and "<answer>8.3</answer>" in mine[0]["text"]
    assert len(log) == sum(len(s) for s in expected.values()) + 1
    assert result.summary["judge"]["n_reasked"] == 1
    frames = sorted((out / "vqr_frames" / "base").glob("*/frame_*.jpg"))
    assert len(frames) == sum(len(s) for s in expected.values())


def test_a_never_valid_frame_fails_its_case_and_the_metric_becomes_unavailable(cove_data, framed, tmp_path):
    answers = tmp_path / "answers.jsonl"
    broken = {r.request_id for r in vqr.build_requests(framed[0])[:1]}
    replay_answers(framed, answers, lambda c, k: 3.0, broken=broken)
    lines = [json.loads(x) for x in answers.read_text().splitlines()]
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines
                               if not (x["request_id"] in broken and "8.3" not in x["text"])))
    result = run(_cfg(cove_data, tmp_path / "run", "vqr.backend=replay", f"vqr.replay_path={answers}",
                      "vqr.max_retries=0"))
    m = result.summary["metrics"]["VQR"]
    assert m["n_failed"] == 1 and m["n_invalid"] == 1
    n_frames = sum(len(vqr.build_requests(c)) for c in framed)
    if 1 / n_frames > 0.05:
        assert m["value"] is None and "VQR frame answers" in m["unavailable"]
    else:
        assert m["value"] == pytest.approx(3.0) and m["n"] == len(framed) - 1
