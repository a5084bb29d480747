"""The ``hf`` judge backend and the tiny random-weight LLaVA judge, with real transformers and real videos.

The tiny judge's answers are noise (random weights): these tests check plumbing only — one response per
request, token counts, frames reaching the model, per-request failures, and the judge stage's re-asks and
log — never what the judge says.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from helpers.common import REPO, moving_square_video
from vbench_ray.benchmarks.cove import CoveBench
from vbench_ray.benchmarks.cove_checklist import build_requests
from vbench_ray.configure import load_config
from vbench_ray.judges.backends import build_backend
from vbench_ray.judges.backends.hf import HFBackend, HFJudgeWorker
from vbench_ray.judges.log import JudgeLog
from vbench_ray.judges.stage import JudgeStage, judge_stats
from vbench_ray.judges.tiny import build_tiny_judge
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoReader, fps_indices

COVE = REPO / "configs" / "cove.yaml"
TOKENS_PER_FRAME = 16  # tiny judge: 56x56 input, patch 14, CLS dropped


@pytest.fixture(scope="module")
def cove2(tmp_path_factory) -> dict:
    from vbench_ray.synth.cove import synth_cove

    return synth_cove(tmp_path_factory.mktemp("cove2"), n=2, seed=0)


def _hf_judge_cfg(data: dict, model: Path, out: Path, *extra: str):
    return load_config(
        COVE,
        [
            f"data.checklist={data['checklist']}",
            f"data.source_dir={data['source_dir']}",
            f"data.edited_dir={data['edited_dir']}",
            f"output.dir={out}",
            "wandb.mode=disabled",
            "judge.backend=hf",
            f"judge.model={model}",
            "judge.max_tokens=32",
            "judge.hf.batch_size=4",
            *extra,
        ],
    )


def _requests(cfg) -> list:
    return [req for case in CoveBench(cfg).load_cases() for req in build_requests(case)]


def _videos_of(request) -> list[str]:
    return [
        p["video_url"]["url"][len("file://") :]
        for m in request.messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if p.get("type") == "video_url"
    ]


# --------------------------------------------------------------------------------------------------------------
# the tiny judge
# --------------------------------------------------------------------------------------------------------------


def _digest(directory: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def test_tiny_judge_is_deterministic_cached_and_loads(tiny_judge_dir, tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    again = build_tiny_judge(tmp_path / "again")
    assert _digest(again) == _digest(tiny_judge_dir)  # same seed -> byte-identical checkpoint
    size = sum(p.stat().st_size for p in tiny_judge_dir.iterdir())
    assert 100_000 < size < 5_000_000
    stamp = (tiny_judge_dir / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_judge(tiny_judge_dir) == tiny_judge_dir  # cached: not rebuilt
    assert (tiny_judge_dir / "model.safetensors").stat().st_mtime_ns == stamp
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary build left behind

    processor = AutoProcessor.from_pretrained(tiny_judge_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_judge_dir)
    assert type(model).__name__ == "LlavaForConditionalGeneration"
    assert type(processor.image_processor).__name__.startswith("CLIPImageProcessor")
    text = processor.apply_chat_template(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Frames:"},
                    {"type": "image"},
                    {"type": "image"},
                    {"type": "text", "text": "Ok?"},
                ],
            }
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text.count("<image>") == 2 and text.endswith("<|im_start|>assistant\n")
    image = np.zeros((40, 60, 3), np.uint8)
    enc = processor(text=[text], images=[image, image], return_tensors="pt", add_special_tokens=False)
    assert int((enc["input_ids"] == model.config.image_token_id).sum()) == 2 * TOKENS_PER_FRAME
    out = model.generate(**enc, max_new_tokens=4, do_sample=False)
    assert enc["input_ids"].shape[1] < out.shape[1] <= enc["input_ids"].shape[1] + 4


def test_backend_construction_is_cheap_and_names_the_key(tmp_path):
    from vbench_ray.judges.base import JudgeConfig

    with pytest.raises(ValueError, match="judge.model"):
        HFBackend(JudgeConfig(backend="hf"))
    with pytest.raises(ValueError, match="judge.model not found"):
        HFBackend(JudgeConfig(backend="hf", model=str(tmp_path / "nope")))
    with pytest.raises(ValueError, match="judge.model"):
        HFBackend(JudgeConfig(backend="hf", model=str(tmp_path)))  # a directory without config.json


# --------------------------------------------------------------------------------------------------------------
# the worker, in-process: media handling
# --------------------------------------------------------------------------------------------------------------


def test_worker_turns_videos_into_frames_in_order(tiny_judge_dir, cove2, tmp_path):
    cfg = _hf_judge_cfg(
        cove2, tiny_judge_dir, tmp_path / "run", "judge.video.max_frames=3", "judge.video.max_pixels=2000"
    )
    requests = {r.group: r for r in _requests(cfg) if r.case_id == "1"}
    worker = HFJudgeWorker(HFBackend(cfg.judge).worker_cfg)

    dual = requests["Dual-TF"]  # source video, then edited video
    text, images = worker.prepare(dual.messages)
    counts = []
    for path in _videos_of(dual):
        info = VideoReader(path).info
        counts.append(len(fps_indices(info.num_frames, info.fps, cfg.judge.video.fps, 3)))
    assert counts == [3, 3]
    assert len(images) == sum(counts) and text.count("<image>") == sum(counts)
    a, b = text.index("Video A (Original Source):"), text.index("Video B (Edited/Generated):")
    assert a < text.index("<image>")
    assert text[a:b].count("<image>") == counts[0] and text[b:].count("<image>") == counts[1]
    assert all(w * h <= 2000 for w, h in (im.size for im in images))
    _, one = worker.prepare(dual.messages, {"max_frames": 1})  # a request's own judge.video overrides
    assert len(one) == 2

    # an image part as a data: URL, and a plain-string message
    png = io.BytesIO()
    from PIL import Image

    Image.fromarray(moving_square_video(t=1, h=48, w=64)[0]).save(png, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    text, images = worker.prepare(
        [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What?"}],
            },
        ]
    )
    assert len(images) == 1 and "Be brief." in text and text.count("<image>") == 1

    # the pixels reach the model: the same prompt over another video gets another answer
    other = tmp_path / "other.mp4"
    write_video(other, moving_square_video(t=24, h=96, w=128, step=3, seed=5), fps=8)
    swapped = json.loads(
        json.dumps(requests["AB-MCQ"].messages).replace(
            Path(_videos_of(requests["AB-MCQ"])[0]).as_uri(), other.as_uri()
        )
    )
    rows = pa.Table.from_pylist(
        [
            {"request_id": "a", "messages": json.dumps(requests["AB-MCQ"].messages)},
            {"request_id": "b", "messages": json.dumps(swapped)},
        ]
    )
    out = {r["request_id"]: r for r in worker(rows).to_pylist()}
    assert out["a"]["prompt_tokens"] == out["b"]["prompt_tokens"]
    assert out["a"]["text"] != out["b"]["text"]


def test_worker_samples_with_top_k(tiny_judge_dir):
    """judge.top_k reaches ``generate``: top_k=1 sampling is greedy decoding whatever the temperature; unset, no
    top_k is passed (the checkpoint's generation_config decides), and greedy decoding passes none."""
    from vbench_ray.judges.base import JudgeConfig

    base = HFBackend(JudgeConfig(backend="hf", model=str(tiny_judge_dir), temperature=1.0, max_tokens=12)).worker_cfg
    worker = HFJudgeWorker({**base, "top_k": 1})
    calls = []
    generate = worker.model.generate
    worker.model.generate = lambda **kw: calls.append(kw) or generate(**kw)
    prepared = [worker.prepare([{"role": "user", "content": "Rate this picture from 1 to 5."}])]
    ((top1, _, _),) = worker._generate(prepared)
    assert calls[-1]["top_k"] == 1 and calls[-1]["do_sample"] is True and calls[-1]["temperature"] == 1.0
    worker.cfg = {**base, "temperature": 0.0}
    ((greedy, _, _),) = worker._generate(prepared)
    assert calls[-1]["do_sample"] is False and calls[-1]["top_k"] is None
    assert top1 == greedy  # the one likeliest token at every step
    worker.cfg = base  # top_k unset
    ((sampled, _, _),) = worker._generate(prepared)
    assert "top_k" not in calls[-1] and calls[-1]["do_sample"] is True
    assert sampled != greedy  # random weights at temperature 1: sampling from more than one token shows


# --------------------------------------------------------------------------------------------------------------
# the backend on local Ray
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.slow
def test_backend_answers_every_request_with_token_counts(ray_local, tiny_judge_dir, cove2, tmp_path):
    cfg = _hf_judge_cfg(cove2, tiny_judge_dir, tmp_path / "run", "judge.video.max_frames=2")
    requests = _requests(cfg)
    assert len(requests) == 8  # 2 tasks x 4 question types
    backend = build_backend(cfg.judge)
    assert isinstance(backend, HFBackend)
    batches = list(backend.generate(requests))
    responses = {r.request_id: r for batch in batches for r in batch}
    assert sorted(responses) == sorted(r.request_id for r in requests)
    assert sum(len(b) for b in batches) == len(requests)
    for r in responses.values():
        assert r.error is None and isinstance(r.text, str)
        assert 1 <= r.completion_tokens <= 32
        assert r.prompt_tokens > 2 * TOKENS_PER_FRAME
        assert r.latency_s > 0 and r.model == "tiny-llava"

    # more frames -> more prompt tokens, exactly 16 per extra frame per video; a missing video fails alone
    cfg4 = _hf_judge_cfg(cove2, tiny_judge_dir, tmp_path / "run", "judge.video.max_frames=4")
    requests4 = _requests(cfg4)
    broken = replace(
        requests4[0],
        request_id="cove/broken",
        messages=json.loads(
            json.dumps(requests4[0].messages).replace(
                Path(_videos_of(requests4[0])[0]).as_uri(), (tmp_path / "gone.mp4").as_uri()
            )
        ),
    )
    responses4 = {r.request_id: r for batch in build_backend(cfg4.judge).generate(requests4 + [broken]) for r in batch}
    assert len(responses4) == len(requests4) + 1
    assert responses4["cove/broken"].text is None and "video not found" in responses4["cove/broken"].error
    assert "gone.mp4" in responses4["cove/broken"].error
    for request in requests4:
        extra = 0
        for path in _videos_of(request):
            info = VideoReader(path).info
            n2, n4 = (len(fps_indices(info.num_frames, info.fps, 2.0, k)) for k in (2, 4))
            extra += (n4 - n2) * TOKENS_PER_FRAME
        assert extra > 0
        assert responses4[request.request_id].error is None
        assert responses4[request.request_id].prompt_tokens - responses[request.request_id].prompt_tokens == extra


@pytest.mark.ray
@pytest.mark.slow
def test_judge_stage_reasks_gibberish_then_gives_up(ray_local, tiny_judge_dir, cove2, tmp_path):
    cfg = _hf_judge_cfg(
        cove2,
        tiny_judge_dir,
        tmp_path / "run",
        "judge.video.max_frames=2",
        "judge.max_retries=1",
        "judge.max_tokens=16",
    )
    requests = [r for r in _requests(cfg) if r.case_id == "1"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    judge_log = JudgeLog(run_dir)
    results = JudgeStage(build_backend(cfg.judge), judge_log, max_retries=1).run(requests)
    assert {r.status for r in results.values()} == {"invalid"}  # random weights never write the JSON asked for
    assert all(r.attempts == 2 for r in results.values())

    records = [json.loads(line) for line in (run_dir / "judge_log.jsonl").read_text().splitlines()]
    assert len(records) == 2 * len(requests)
    for request in requests:
        mine = sorted((r for r in records if r["request_id"] == request.request_id), key=lambda r: r["attempt"])
        assert [r["attempt"] for r in mine] == [0, 1]
        assert all(r["parse_status"] == "invalid" and r["parse_error"] and r["backend"] == "hf" for r in mine)
        assert all(r["prompt_tokens"] and r["completion_tokens"] for r in mine)
        assert mine[0]["attempt_hash"] != mine[1]["attempt_hash"]  # the re-ask quotes what was wrong
        assert mine[1]["prompt_tokens"] > mine[0]["prompt_tokens"]
    stats = judge_stats(results, requests, JudgeLog(run_dir))
    assert stats["n_invalid"] == len(requests) and stats["n_responses_logged"] == 2 * len(requests)
    assert stats["completion_tokens"] > 0
