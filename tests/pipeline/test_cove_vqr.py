"""CoVEBench VQR (VisualQuality-R1 through the judge machinery): the answer parser, its frames from the shared
decode stage (each video opened once per case), the request layout, the score arithmetic with a replay judge,
and end-to-end runs: VQR beside SSIM and the checklist judge (``summary.judge`` per phase), and VQR alone."""

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers.common import REPO
from helpers.configs import cove_cfg
from vbench_ray.benchmarks import cove_vqr as vqr
from vbench_ray.benchmarks.cove import CoveBench
from vbench_ray.judges.parsing import parse
from vbench_ray.judges.stage import JudgeResult
from vbench_ray.runner import run
from vbench_ray.metrics.stage import FrameMetricsStage

COVE = REPO / "configs" / "cove.yaml"
EXPECTED = {"low": 1.0, "high": 5.0}


VQR_ONLY = "metrics.enabled=[VQR]"


# ----------------------------------------------------------------------------- parser


@pytest.mark.parametrize(
    "text, score",
    [
        ("<think>Sharp, little noise, slight blur at the edges.</think><answer>3.75</answer>", 3.75),
        ("<answer>4</answer>", 4.0),
        ("<think>a 2 would be too harsh <answer>2</answer></think> <answer> 4.10 </answer>", 4.10),  # last span wins
        ("<answer>The score is 1.00</answer>", 1.0),
        ("<answer>5.00</answer>", 5.0),
        ("<think>ok</think> 2.5", 2.5),  # no tags: the text after </think>
    ],
)
def test_parser_reads_the_last_answer_span(text, score):
    parsed = parse(vqr.PARSER, text, EXPECTED)
    assert parsed.ok and parsed.value["score"] == pytest.approx(score)


@pytest.mark.parametrize(
    "text, error",
    [
        ("<think>bad</think><answer>7.5</answer>", "outside the scale 1 to 5"),
        ("<answer>0.5</answer>", "outside the scale"),
        ("<answer>-3</answer>", "outside the scale"),
        ("<think>looks fine</think><answer>good</answer>", "no score inside <answer>"),
        ("<think>I cannot rate this picture.</think>", "no score in the answer"),
        ("", "no score"),
    ],
)
def test_parser_rejects_off_scale_and_missing_scores(text, error):
    parsed = parse(vqr.PARSER, text, EXPECTED)
    assert not parsed.ok and error in parsed.error and parsed.value is None
    assert parse(vqr.PARSER, None, EXPECTED).ok is False


# ----------------------------------------------------------------------------- frames from the decode stage


def frames_in(cases, run_dir: Path) -> list[dict]:
    """The cases with their VQR frames written by the decode stage (as the stream does, into ``run_dir``)."""
    stage = FrameMetricsStage({}, sinks=[vqr.VQRFrames(str(run_dir.resolve()))])
    return [{**c, **stage(c)} for c in cases]


@pytest.fixture(scope="module")
def framed(cove_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("vqr_frames")
    cases = CoveBench(cove_cfg(cove_data, out / "run", VQR_ONLY)).load_cases()
    return frames_in([c for c in cases if not c.get("error_load")], out)


class CountingReader:
    """``VideoReader`` counting how often each video is opened."""

    opened: dict[str, int] = {}

    def __new__(cls, path, backend="auto"):
        from vbench_ray.video.io import VideoReader

        cls.opened[str(path)] = cls.opened.get(str(path), 0) + 1
        return VideoReader(path, backend)


def test_the_decode_stage_hands_vqr_its_frames_from_one_decode(cove_data, tmp_path, monkeypatch):
    """VQR's 10 frames join the union SSIM decodes: each video is opened once per case, no frame is decoded
    twice, and the JPEGs are the edited video's uniform frames encoded as the official script does."""
    import io

    from PIL import Image

    from vbench_ray.metrics import stage as frames_mod
    from vbench_ray.video.io import VideoReader, uniform_indices

    monkeypatch.setattr(frames_mod, "VideoReader", CountingReader)
    CountingReader.opened = {}
    case = next(
        c for c in CoveBench(cove_cfg(cove_data, tmp_path / "run", VQR_ONLY)).load_cases() if not c.get("error_load")
    )
    case = {**case, "excluded_SSIM": None}
    stage = FrameMetricsStage({"SSIM": {"frames": 10, "size": 224}}, sinks=[vqr.VQRFrames(str(tmp_path))])
    out = stage(case)
    n_e = VideoReader(case["edited_path"]).info.num_frames
    n_s = VideoReader(case["source_path"]).info.num_frames
    assert CountingReader.opened == {case["edited_path"]: 1, case["source_path"]: 1}
    assert out["videos_opened"] == 2 and out["SSIM"] > 0 and "error_VQR" not in out
    # SSIM's edited frames and VQR's are the same 10 uniform indices: decoded once
    assert out["frames_decoded"] == min(n_e, 10) + min(n_s, 10)
    paths = [Path(p) for p in json.loads(out["vqr_frames"])]
    indices = uniform_indices(n_e, vqr.FRAMES)
    assert [p.name for p in paths] == [f"frame_{i:06d}.jpg" for i in indices]
    for path, frame in zip(paths, VideoReader(case["edited_path"]).read(indices)):
        jpeg = io.BytesIO()
        Image.fromarray(frame).save(jpeg, format="JPEG", quality=vqr.JPEG_QUALITY)
        assert path.read_bytes() == jpeg.getvalue()  # the requests, hence VQR's scores, are those of a lone decode
    # every frame metric excluded: VQR alone opens the edited video, never the source
    CountingReader.opened = {}
    out = stage({**case, "excluded_SSIM": "category:Background"})
    assert CountingReader.opened == {case["edited_path"]: 1} and out["videos_opened"] == 1
    assert out["frames_decoded"] == min(n_e, 10) and "SSIM" not in out and json.loads(out["vqr_frames"])
    # frames that cannot be written are VQR's failure only
    broken = FrameMetricsStage({"SSIM": {"frames": 10, "size": 224}}, sinks=[vqr.VQRFrames(str(case["edited_path"]))])
    out = broken(case)
    assert out["error_VQR"] and out.get("vqr_frames") is None and out["SSIM"] > 0


# ----------------------------------------------------------------------------- requests


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
    results = {
        r.request_id: JudgeResult(r.request_id, "ok", {"score": s, "answer": str(s)}, 1)
        for r, s in zip(requests, scores)
    }
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
                lines += [
                    {"request_id": r.request_id, "text": bad},
                    {"request_id": r.request_id, "attempt_hash": again.prompt_hash(), "text": good},
                ]
            else:
                lines.append({"request_id": r.request_id, "text": good})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return scores


def test_end_to_end_vqr_beside_ssim_and_the_checklist_judge(cove_data, framed, tmp_path, monkeypatch):
    """VQR with SSIM and the checklist metrics: the decode stage opens each video once per case and writes VQR's
    frames (no second decode stage), VQR's scores are the replayed ones, and ``summary.judge`` reports each judge
    phase on its own."""
    from helpers.cove_answers import perfect_answers
    from vbench_ray.video.io import VideoReader

    answers, checklist_answers = tmp_path / "answers.jsonl", tmp_path / "checklist.jsonl"
    out = tmp_path / "run"
    framed = frames_in(framed, out)
    first = vqr.build_requests(framed[0])[0].request_id
    score_of = lambda case_id, k: 1.0 + (int(case_id) % 4) + 0.25 * (k % 2)  # noqa: E731
    expected = replay_answers(framed, answers, score_of, broken={first})
    checklist_ids = perfect_answers(cove_data, checklist_answers)
    written = {p: Path(p).read_bytes() for c in framed for p in json.loads(c["vqr_frames"])}
    shutil.rmtree(out / vqr.FRAME_DIR)  # the run's decode stage writes them again, at the same paths
    probed = []  # the load-time probe of edited videos no frame metric opens: VQR's frames open them all
    monkeypatch.setattr("vbench_ray.video.io.probe", lambda path, *a: probed.append(path))
    result = run(
        cove_cfg(
            cove_data,
            out,
            VQR_ONLY,
            "metrics.enabled=[SSIM,UAS,IFS,VRS,SEM,VQR]",
            "vqr.backend=replay",
            f"vqr.replay_path={answers}",
            "vqr.max_retries=1",
            "judge.backend=replay",
            f"judge.replay_path={checklist_answers}",
        )
    )
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
    assert set(result.summary["metrics"]) == {"SSIM", "UAS", "IFS", "VRS", "SEM", "VQR"}
    assert result.summary["metrics"]["UAS"]["value"] == pytest.approx(100.0)  # the checklist judge unaffected
    cats = {c: v["VQR"] for c, v in result.summary["by_category"].items()}
    assert cats and all(v["n"] >= 1 for v in cats.values())
    one = next(iter(cats))
    members = [c for c in framed if one in (c["categories"] or [])]
    assert cats[one]["value"] == pytest.approx(sum(per_case[(c["case_id"], "base")] for c in members) / len(members))
    # the off-scale answer was re-asked; every raw answer is in the judge log
    log = [json.loads(line) for line in (out / "judge_log.jsonl").read_text().splitlines()]
    mine = [r for r in log if r["request_id"] == first]
    assert [(r["attempt"], r["parse_status"]) for r in mine] == [(0, "invalid"), (1, "ok")]
    assert "outside the scale" in mine[0]["parse_error"] and "<answer>8.3</answer>" in mine[0]["text"]
    n_frames = sum(len(s) for s in expected.values())
    assert len(log) == n_frames + 1 + len(checklist_ids)
    frames = sorted((out / "vqr_frames" / "base").glob("*/frame_*.jpg"))
    assert len(frames) == n_frames and {str(p): p.read_bytes() for p in frames} == written
    # summary.judge: one block per phase, each with its own requests, re-asks and model
    judge = result.summary["judge"]
    assert set(judge) == {"checklist", "vqr"}
    assert (judge["vqr"]["n_requests"], judge["vqr"]["n_ok"], judge["vqr"]["n_invalid"], judge["vqr"]["n_reasked"]) == (
        n_frames,
        n_frames,
        0,
        1,
    )
    assert judge["vqr"]["n_responses_logged"] == n_frames + 1 and judge["vqr"]["backend"] == "replay"
    assert (judge["checklist"]["n_requests"], judge["checklist"]["n_ok"], judge["checklist"]["n_reasked"]) == (
        len(checklist_ids),
        len(checklist_ids),
        0,
    )
    assert judge["vqr"]["model"] == "VisualQuality-R1-7B" and judge["checklist"]["model"] == "replay"
    assert probed == []
    # one decode stage: each case's videos opened once (the source only for SSIM), VQR's frames among its decodes
    rows = {r["case_id"]: r for r in pq.read_table(out / "cases").to_pylist()}
    assert not any(name.endswith("vqr_frames") and name != "vqr_frames" for name in rows[framed[0]["case_id"]])
    for case in framed:
        row = rows[case["case_id"]]
        ssim = not row["excluded_SSIM"]
        n_source = min(VideoReader(case["source_path"]).info.num_frames, 10) if ssim else 0
        assert row["videos_opened"] == 1 + ssim and json.loads(row["vqr_frames"]) == json.loads(case["vqr_frames"])
        assert row["frames_decoded"] == len(expected[case["case_id"]]) + n_source


def test_a_never_valid_frame_fails_its_case_and_the_metric_becomes_unavailable(cove_data, framed, tmp_path):
    answers = tmp_path / "answers.jsonl"
    broken = {r.request_id for r in vqr.build_requests(framed[0])[:1]}
    replay_answers(framed, answers, lambda c, k: 3.0, broken=broken)
    lines = [json.loads(x) for x in answers.read_text().splitlines()]
    answers.write_text(
        "".join(json.dumps(x) + "\n" for x in lines if not (x["request_id"] in broken and "8.3" not in x["text"]))
    )
    result = run(
        cove_cfg(
            cove_data,
            tmp_path / "run",
            VQR_ONLY,
            "vqr.backend=replay",
            f"vqr.replay_path={answers}",
            "vqr.max_retries=0",
        )
    )
    m = result.summary["metrics"]["VQR"]
    assert m["n_failed"] == 1 and m["n_invalid"] == 1
    assert result.summary["judge"]["n_invalid"] == 1 and result.summary["judge"]["n_reasked"] == 0  # one phase: flat
    rows = pq.read_table(tmp_path / "run" / "cases").to_pylist()
    assert {r["videos_opened"] for r in rows} == {1}  # VQR alone: the edited video only, once
    n_frames = sum(len(vqr.build_requests(c)) for c in framed)
    if 1 / n_frames > 0.05:
        assert m["value"] is None and "VQR frame answers" in m["unavailable"]
    else:
        assert m["value"] == pytest.approx(3.0) and m["n"] == len(framed) - 1
