"""Cost of CoVEBench's model metrics (AES, TQ, SRC, VQR) at their real sizes, random weights (never accuracy).

Issue 11 asks, per model: frames/s per GPU in its pool, peak GPU memory, the same work done the official way,
their ratio (goal: the pools >= 3x faster) and whether the four model metrics of a 626-task CoVEBench run fit in
10 minutes on one H100. What runs here:

* **pool**: the project's path. Each video is decoded once (OpenCV here: decord and PyAV may be missing on a GPU
  machine; in a run the decode stage does this on every CPU of the cluster, beside the GPU), its frames are packed
  into an Arrow column as the decode stage packs them (``frames_for_<M>``), and the metric's pool stage runs on
  batches of ``metrics.<M>.pool_batch`` rows exactly as an actor of its pool does (the stage runner, then
  ``MetricPool`` -> ``compute_many``: frames of several cases per forward pass, bf16 where the model was trained
  so), without Ray. One pool actor, in this process, after one warm-up batch; a run puts ``1 / gpu_fraction``
  actors of a pool on a GPU, so a pool bound by its actor's CPU work goes faster there than measured here.
* **official**: ANCHORS.md section 1 and the official scripts (``metrics/vq/aes/eval_aes.py``,
  ``metrics/vq/dover/eval_dover.py`` -> DOVER's ``evaluate_a_set_of_videos.py``, ``metrics/vf/src/eval_src.py``,
  ``metrics/vq/vqr/eval_vqr.py``): one script per metric = a separate Python process that loads its model(s)
  once, then for one video at a time decodes it (OpenCV, reading up to the last frame needed, as ``eval_aes.py``)
  and scores it: AES one pass over the video's frames (batch 32, bf16); TQ one pass over its 3 clips (float32);
  SRC Grounding DINO one prompt at a time, SAM2 one frame at a time, DINOv2 one crop pair at a time; VQR
  ``generate`` on 4 frames at a time (``--batch-size 4``). Same model code as the pool (ours), so the ratio is the
  way of running it. It is a lower bound on the official cost: DOVER also runs its aesthetic branch, SRC writes
  frames and masks to disk (ffmpeg, PNG) and propagates with SAM2's video predictor (memory attention per frame).
* **projection**: a 626-task run, per metric: official = process start + load + 626 x (decode + score) of one
  video; pool = load + 626 x max(GPU time per video, decode time per video / --decode-workers), as the stream
  overlaps the CPU decode stage with the GPU pools. The four pools share one GPU in a run (fractional GPUs), so
  their GPU times add up: the sum is what must fit in 10 minutes.
* **VQR**: a Qwen2.5-VL-7B-architecture model (the published config values, random bf16 weights made on the GPU,
  nothing downloaded) driven through the project's hf judge worker (``HFJudgeWorker``: the published prompt,
  its chat template and processor, batched ``generate``), requests/s at the official ``max_new_tokens`` 512 and at
  a short answer. Random weights never emit the end token, so 512 is an upper bound; an answer-only reply
  (``<answer>3.75</answer>``) is ~10 tokens. The project's default VQR backend is vLLM, not measured here.

Random-weight Grounding DINO and SAM2 would reject most boxes and masks, so SRC runs with every box and mask
accepted (``box_threshold=min_score=0``, ``max_box_area=1``, ``min_mask_pixels=1``): the full work is timed.

Usage:

    python tests/perf/model_metrics.py --device cuda --videos 16            # on an H100 / H200
    python tests/perf/model_metrics.py --device cpu --tiny --videos 2       # smoke test, toy models, CPU

It needs torch, transformers, OpenCV, Pillow, pyarrow and omegaconf; not Ray, PyAV or decord.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

TASKS = 626  # CoVEBench instructions
TINY_TQ = dict(arch="tiny", clip_len=8, num_clips=2, frame_interval=1, fsize=8, aligned=8)
# every box and mask accepted: random weights would otherwise stop SRC before SAM2 and DINOv2 (module docstring)
SRC_ACCEPT_ALL = dict(box_threshold=0.0, text_threshold=0.0, min_score=0.0, max_box_area=1.0, min_mask_pixels=1)
ENTITIES = ["young woman on the left", "red car", "small dog"]


# ----------------------------------------------------------------------------- models (random weights)

def build_models(d: Path, tiny: bool, device: str, only: list[str]) -> dict[str, dict]:
    """``{metric: its metrics.<M> config as a dict}`` with random weights written under ``d``."""
    import torch

    from vbench_ray.metrics.aes import AESConfig, build_head, save_tiny_aes
    from vbench_ray.metrics.src import SRCConfig, save_random_src
    from vbench_ray.metrics.tq import TQConfig, build_dover_technical, official_state_dict, save_tiny_dover

    cfgs = {}
    d.mkdir(parents=True, exist_ok=True)
    if "AES" in only:
        if tiny:
            aes = save_tiny_aes(d / "aes")
        else:  # siglip-so400m-patch14-384's vision tower + the v2.5 head
            from transformers import SiglipVisionConfig, SiglipVisionModel

            torch.manual_seed(0)
            SiglipVisionModel(SiglipVisionConfig(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                                                 num_attention_heads=16, image_size=384, patch_size=14)
                              ).save_pretrained(d / "siglip")
            torch.save(build_head(1152).state_dict(), d / "aes_head.pth")
            aes = {"encoder": str(d / "siglip"), "weights": str(d / "aes_head.pth")}
        cfgs["AES"] = asdict(AESConfig(**aes, device=device, keyframes=True))
    if "TQ" in only:
        if tiny:
            cfgs["TQ"] = asdict(TQConfig(weights=str(save_tiny_dover(d / "dover.pth")), device=device, **TINY_TQ))
        else:  # DOVER++'s technical branch (Video Swin-T), official key names
            torch.manual_seed(0)
            torch.save({"state_dict": official_state_dict(build_dover_technical("swin_t"))}, d / "dover.pth")
            cfgs["TQ"] = asdict(TQConfig(weights=str(d / "dover.pth"), device=device))
    if "SRC" in only:
        paths = save_random_src(d / "src", "tiny" if tiny else "real")
        cfgs["SRC"] = asdict(SRCConfig(**paths, device=device, **SRC_ACCEPT_ALL, **({"max_frames": 4} if tiny else {})))
    return cfgs


# ----------------------------------------------------------------------------- videos

def write_videos(d: Path, n: int, width: int, height: int, frames: int, fps: float) -> list[tuple[str, str]]:
    """``n`` (source, edited) mp4 pairs (OpenCV mp4v): a textured background with moving squares; the edit
    recolours one square."""
    import cv2

    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    out = []
    for k in range(n):
        bg = cv2.GaussianBlur(rng.integers(0, 255, (height, width, 3), dtype=np.uint8), (0, 0), 3.0)
        pair = []
        for kind, colour in (("source", (40, 40, 220)), ("edited", (40, 200, 40))):
            path = d / f"{k}_{kind}.mp4"
            writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
            s = max(8, height // 6)
            for t in range(frames):
                f = np.roll(bg, 2 * t, axis=1).copy()
                x = (8 + 4 * t) % max(1, width - s)
                f[height // 4:height // 4 + s, x:x + s] = colour
                f[height // 2:height // 2 + s, width // 2:width // 2 + s] = (230, 230, 230)
                writer.write(f)
            writer.release()
            pair.append(str(path))
        out.append((pair[0], pair[1]))
    return out


def video_info(path: str, keyframe_every: int):
    """The ``VideoInfo`` the metrics sample from (OpenCV's count and rate; keyframes every ``keyframe_every``)."""
    import cv2

    from vbench_ray.video.io import VideoInfo

    cap = cv2.VideoCapture(path)
    n, fps = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), float(cap.get(cv2.CAP_PROP_FPS) or 24.0)
    w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
    cap.release()
    return VideoInfo(path, n, fps, h, w, "opencv", keyframes=tuple(range(0, n, max(1, keyframe_every))))


def read_frames(path: str, indices: list[int]) -> np.ndarray:
    """RGB frames at ``indices`` (repeats allowed), reading the video in order up to the last one (as eval_aes.py)."""
    import cv2

    want = set(indices)
    got: dict[int, np.ndarray] = {}
    cap = cv2.VideoCapture(path)
    i = 0
    while want and i <= max(want):
        ok, frame = cap.read()
        if not ok:
            break
        if i in want:
            got[i] = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        i += 1
    cap.release()
    return np.stack([got[j] for j in indices])


def metric_inputs(name: str, cfg: dict, pair: tuple[str, str], keyframe_every: int):
    """One case's ``(edited, source, kwargs)`` as the decode stage hands them to the metric."""
    from omegaconf import OmegaConf

    from vbench_ray.metrics.base import build_metric

    metric = build_metric(name, OmegaConf.create(cfg))
    src_path, edit_path = pair
    edited = read_frames(edit_path, metric.sampling().indices(video_info(edit_path, keyframe_every)))
    source = (read_frames(src_path, metric.sampling().indices(video_info(src_path, keyframe_every)))
              if metric.needs_source else None)
    return edited, source, ({"entities": ENTITIES[:2]} if name == "SRC" else {})


def frames_of(item) -> int:
    edited, source, _ = item
    return len(edited) + (len(source) if source is not None else 0)


# ----------------------------------------------------------------------------- the pool path

def _cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def _sync(device: str) -> None:
    if _cuda(device):
        import torch

        torch.cuda.synchronize()


def run_pool(name: str, cfg: dict, pairs, keyframe_every: int, profile: bool = False) -> dict:
    """The metric's pool stage as the stream runs it, minus Ray: packed rows in an Arrow table, sliced into
    batches of ``pool_batch`` cases, each through the stage's runner (``to_pylist``, ``MetricPool``, the output
    columns); one warm-up batch first. ``profile`` prints where the timed batches spent their time (cProfile,
    wall clock: CUDA waits show where they block)."""
    from types import SimpleNamespace

    import pyarrow as pa
    import torch

    from vbench_ray.metrics.base import build_metric
    from vbench_ray.metrics.pool import metric_pool_stages, pack, payload_column
    from vbench_ray.pipeline import _BatchRunner
    from omegaconf import OmegaConf

    device = cfg["device"]
    on_cpu = build_metric(name, OmegaConf.create(cfg))  # the decode worker's copy: no model, pool_inputs only
    t0 = time.perf_counter()
    items = [metric_inputs(name, cfg, p, keyframe_every) for p in pairs]
    frames = sum(frames_of(i) for i in items)
    # what the decode stage packs: the metric's pool inputs (TQ: its fragment mosaics, cut on the CPU)
    items = [on_cpu.pool_inputs(e, s, dict(kw or {})) for e, s, kw in items]
    decode = (time.perf_counter() - t0) / len(pairs)
    table = pa.Table.from_pylist([{"case_id": str(k), payload_column(name): pack(*item)} for k, item in enumerate(items)],
                                 schema=pa.schema([("case_id", pa.string()), (payload_column(name), pa.large_binary())]))
    del items
    stage = metric_pool_stages([build_metric(name, OmegaConf.create(cfg))], {name: cfg},
                               SimpleNamespace(batch_size=1, pools={}, workers=None))[0]
    if _cuda(device):
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    runner = _BatchRunner(stage)  # MetricPool: the model loads here
    _sync(device)
    load = time.perf_counter() - t0
    batch = stage.batch_size
    runner(table.slice(0, batch))  # warm-up: kernels picked, caches filled (once per actor in a run)
    _sync(device)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.perf_counter()
    out = [runner(table.slice(start, batch)) for start in range(0, table.num_rows, batch)]
    _sync(device)
    seconds = time.perf_counter() - t0
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(12)
    errors = [e for t in out for e in t.column(f"error_{name}").to_pylist() if e]
    if errors:
        raise RuntimeError(f"{name}: {len(errors)} cases failed in the pool: {errors[0]}")
    peak = torch.cuda.max_memory_allocated() / 2**20 if _cuda(device) else float("nan")
    del runner
    if _cuda(device):
        torch.cuda.empty_cache()
    return {"load_s": load, "seconds": seconds, "per_video_s": seconds / table.num_rows, "decode_per_video_s": decode,
            "frames": frames, "videos": table.num_rows, "peak_mib": peak, "pool_batch": batch}


# ----------------------------------------------------------------------------- the official way (own process)

OFFICIAL_BATCH = {"AES": {"batch_size": 32}, "TQ": {"batch_size": 3}, "SRC": {"batch_size": 1}}


def official_main(job_path: str) -> None:
    """One script per metric: load once, then one video at a time, decoded and scored (module docstring)."""
    started = time.time()
    job = json.loads(Path(job_path).read_text())
    import torch  # noqa: F401  (the imports a script pays for)
    import transformers  # noqa: F401

    from vbench_ray.metrics import METRICS

    name, cfg = job["name"], {**job["cfg"], **OFFICIAL_BATCH[job["name"]]}
    cls = METRICS[name]
    metric = cls(cls.config_class(**cfg))
    imported = time.time()
    metric.setup()
    _sync(cfg["device"])
    loaded = time.time()
    decode = score = 0.0
    per_video = []
    for pair in job["pairs"]:
        t0 = time.perf_counter()
        edited, source, kwargs = metric_inputs(name, cfg, tuple(pair), job["keyframe_every"])
        t1 = time.perf_counter()
        metric.compute(edited, source, **kwargs)
        _sync(cfg["device"])
        t2 = time.perf_counter()
        decode, score = decode + (t1 - t0), score + (t2 - t1)
        per_video.append(t2 - t0)
    print("OFFICIAL " + json.dumps({"start_to_import_s": imported - job["launched"], "load_s": loaded - imported,
                                    "decode_s": decode, "score_s": score, "per_video_s": per_video,
                                    "in_process_s": time.time() - started}))


def run_official(name: str, cfg: dict, pairs, keyframe_every: int, d: Path) -> dict:
    job = d / f"official_{name}.json"
    launched = time.time()
    job.write_text(json.dumps({"name": name, "cfg": cfg, "pairs": pairs, "keyframe_every": keyframe_every,
                               "launched": launched}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__, "--official-job", str(job)], capture_output=True, text=True,
                          env=env)
    wall = time.time() - launched
    line = [x for x in proc.stdout.splitlines() if x.startswith("OFFICIAL ")]
    if proc.returncode or not line:
        raise RuntimeError(f"official {name} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(line[-1][len("OFFICIAL "):])
    n = len(pairs)
    steady = out["per_video_s"][1:] or out["per_video_s"]  # the first video pays the warm-up, as ours does
    out.update(wall_s=wall, videos=n, steady_per_video_s=float(np.mean(steady)),
               startup_s=out["start_to_import_s"])
    return out


# ----------------------------------------------------------------------------- VQR (a 7B VLM)

QWEN25_VL_7B = dict(  # Qwen/Qwen2.5-VL-7B-Instruct config.json (VisualQuality-R1-7B is its fine-tune)
    text=dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
              num_key_value_heads=4, max_position_embeddings=128000, rms_norm_eps=1e-6, rope_theta=1000000.0,
              vocab_size=152064, hidden_act="silu", tie_word_embeddings=False,
              rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]}),
    vision=dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, in_chans=3, out_hidden_size=3584,
                patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2, hidden_act="silu"),
    ids=dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
             vision_end_token_id=151653, bos_token_id=151643, eos_token_id=151645),
    regular_tokens=151643)
QWEN_TINY = dict(
    text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=1000000.0, vocab_size=512,
              hidden_act="silu", tie_word_embeddings=False,
              rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}),
    vision=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, in_chans=3, out_hidden_size=64,
                patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                fullatt_block_indexes=[1], tokens_per_second=2, hidden_act="silu"),
    ids=dict(image_token_id=499, video_token_id=500, vision_start_token_id=496, vision_end_token_id=497,
             bos_token_id=487, eos_token_id=489),
    regular_tokens=487)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]  # Qwen2's ids 151643..151656, in order
CHAT_TEMPLATE = (  # Qwen2-VL's ChatML with its default system turn and one vision block per image
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% elif c['type'] == 'text' %}"
    "{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def save_qwen_processor(d: Path, spec: dict) -> Path:
    """A Qwen2.5-VL processor with the published image processing and a word-level tokenizer holding the
    published vocabulary size and special-token ids (Qwen's BPE merges are not needed to time the model)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2_5_VLProcessor
    import transformers as t

    n = spec["regular_tokens"]
    vocab = {f"w{i}": i for i in range(n)}
    vocab.update({tok: n + i for i, tok in enumerate(SPECIALS)})
    raw = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="w0", pad_token="<|endoftext|>",
                                  eos_token="<|im_end|>", additional_special_tokens=SPECIALS[1:])
    images = getattr(t, "Qwen2VLImageProcessorPil", None) or t.Qwen2VLImageProcessor
    proc = Qwen2_5_VLProcessor(image_processor=images(min_pixels=3136, max_pixels=12845056, patch_size=14,
                                                      temporal_patch_size=2, merge_size=2),
                               tokenizer=tok, video_processor=t.Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)
    proc.save_pretrained(d)
    return d


def build_qwen(spec: dict, device: str):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ends = {k: spec["ids"][k] for k in ("bos_token_id", "eos_token_id")}
    cfg = Qwen2_5_VLConfig(text_config={**spec["text"], **ends}, vision_config=spec["vision"], **spec["ids"])
    dtype = torch.bfloat16 if _cuda(device) else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(cfg, dtype=dtype)
    return model.eval()


def run_vqr(d: Path, pairs, tiny: bool, device: str, requests: int, batch: int, long_requests: int,
            short_tokens: int) -> dict:
    """Requests/s of VQR's frames through the project's hf judge worker and the official batching."""
    import pyarrow as pa
    import torch
    from PIL import Image

    from vbench_ray.benchmarks import cove_vqr as vqr
    from vbench_ray.judges.backends.hf import HFJudgeWorker
    from vbench_ray.video.io import uniform_indices

    spec = QWEN_TINY if tiny else QWEN25_VL_7B
    proc_dir = save_qwen_processor(d / "qwen_processor", spec)
    t0 = time.perf_counter()
    model = build_qwen(spec, device)
    _sync(device)
    built = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    # the frames as the vqr_frames stage writes them: 10 uniform frames per edited video, JPEG quality 95
    frames: list[str] = []
    for k, (_, edited) in enumerate(pairs):
        idx = uniform_indices(video_info(edited, 10 ** 9).num_frames, vqr.FRAMES)
        for i, f in zip(idx, read_frames(edited, idx)):
            path = d / "vqr_frames" / f"{k}_{i:06d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(f).save(path, format="JPEG", quality=vqr.JPEG_QUALITY)
            frames.append(str(path))

    class Prebuilt(HFJudgeWorker):  # the real worker; only its from_pretrained is replaced (random weights)
        def _load_model(self, path):
            return model

    def worker(max_tokens: int, bs: int) -> HFJudgeWorker:
        return Prebuilt({"model_path": str(proc_dir), "label": "VisualQuality-R1-7B (random)",
                         "hf": {"device": device, "dtype": "bfloat16" if _cuda(device) else "float32",
                                "batch_size": bs, "workers": 1},
                         "video": {"fps": 2.0, "max_frames": 32, "max_pixels": 12845056},
                         "max_tokens": max_tokens, "temperature": 1.0, "top_p": 1.0, "top_k": 50, "seed": 0})

    def timed(w: HFJudgeWorker, paths: list[str], bs: int) -> tuple[float, int, list]:
        rows = [{"request_id": f"r{i}", "messages": json.dumps(vqr.messages(p)), "video": "{}"}
                for i, p in enumerate(paths)]
        _sync(device)
        t0 = time.perf_counter()
        out = []
        for start in range(0, len(rows), bs):
            out += w(pa.Table.from_pylist(rows[start:start + bs])).to_pylist()
        _sync(device)
        bad = [o["error"] for o in out if o["error"]]
        if bad:
            raise RuntimeError(f"VQR: {len(bad)} requests failed: {bad[0]}")
        return time.perf_counter() - t0, sum(o["completion_tokens"] for o in out), out

    def pick(n: int) -> list[str]:
        return [frames[i % len(frames)] for i in range(n)]

    result = {"params_b": params / 1e9, "build_s": built, "frames": len(frames), "batch": batch}
    if _cuda(device):
        torch.cuda.reset_peak_memory_stats()
    for label, tokens, n in (("short", short_tokens, requests), ("long", 512, long_requests)):
        w = worker(tokens, batch)
        timed(w, pick(min(batch, 2)), batch)  # warm-up
        ours, ours_tokens, sample = timed(w, pick(n), batch)
        official, official_tokens, _ = timed(worker(tokens, 4), pick(min(n, 8)), 4)  # eval_vqr.py --batch-size 4
        result[label] = {"max_tokens": tokens, "requests": n, "pool_rps": n / ours, "pool_tokens": ours_tokens,
                         "official_rps": min(n, 8) / official, "official_tokens": official_tokens,
                         "prompt_tokens": sample[0]["prompt_tokens"]}
    result["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20 if _cuda(device) else float("nan")
    return result


# ----------------------------------------------------------------------------- report

def project(pool: dict, official: dict, workers: int, tasks: int = TASKS) -> dict:
    gpu = pool["per_video_s"]
    stream = max(gpu, pool["decode_per_video_s"] / workers)  # decode overlaps the pool on the CPUs
    official_video = official["steady_per_video_s"]
    return {"pool_s": pool["load_s"] + tasks * stream, "pool_gpu_s": tasks * gpu,
            "official_s": official["startup_s"] + official["load_s"] + tasks * official_video,
            "ratio": (official["startup_s"] + official["load_s"] + tasks * official_video)
            / (pool["load_s"] + tasks * stream),
            "model_ratio": official["score_s"] / max(1, official["videos"]) / gpu}


def _torchvision_for_qwen() -> None:
    """Qwen2.5-VL's processor imports torchvision. A CPU machine of this project has none (STACK.md): for the tiny
    smoke run only, the tests' stand-in (tests/tiny/torchvision_stub, plain torch) takes its place."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        sys.path.insert(0, str(REPO / "tests" / "tiny" / "torchvision_stub"))
        print("no torchvision: VQR's processor uses the tests' stand-in (tests/tiny/torchvision_stub)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="cuda (default when available) | cpu")
    ap.add_argument("--tiny", action="store_true", help="toy-size models and videos (CPU smoke test)")
    ap.add_argument("--videos", type=int, default=16, help="(source, edited) pairs per metric")
    ap.add_argument("--src-videos", type=int, default=None, help="pairs for SRC (default: --videos)")
    ap.add_argument("--size", default="1280x720", help="video WIDTHxHEIGHT")
    ap.add_argument("--frames", type=int, default=121, help="frames per video (CoVEBench clips: about 5 s)")
    ap.add_argument("--fps", type=float, default=24.0)
    ap.add_argument("--keyframe-every", type=int, default=250, help="keyframe interval (x264's default keyint)")
    ap.add_argument("--decode-workers", type=int, default=max(1, (os.cpu_count() or 2) - 4),
                    help="CPU decode workers beside the pools in a run (projection)")
    ap.add_argument("--only", default="AES,TQ,SRC,VQR")
    ap.add_argument("--vqr-requests", type=int, default=32)
    ap.add_argument("--vqr-long-requests", type=int, default=16)
    ap.add_argument("--vqr-batch", type=int, default=16, help="judge.hf.batch_size of the VQR worker")
    ap.add_argument("--vqr-short-tokens", type=int, default=16)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--profile", default="", help="metrics whose pool calls are profiled, e.g. SRC,TQ")
    ap.add_argument("--official-job", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.official_job:
        return official_main(args.official_job)
    if args.tiny and "VQR" in args.only:
        _torchvision_for_qwen()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    only = [m.strip() for m in args.only.split(",") if m.strip()]
    width, height = (96, 64) if args.tiny else map(int, args.size.lower().split("x"))
    n_frames = 24 if args.tiny else args.frames
    print(f"device {device} ({torch.cuda.get_device_name() if _cuda(device) else 'cpu'}), "
          f"{'tiny' if args.tiny else 'real-size'} models, {args.videos} videos of {width}x{height}x{n_frames}",
          flush=True)
    results: dict = {"device": device, "tiny": args.tiny, "videos": args.videos, "size": [width, height],
                     "frames": n_frames, "decode_workers": args.decode_workers, "metrics": {}}
    with tempfile.TemporaryDirectory(prefix="vbr-perf-") as tmp:
        d = Path(tmp)
        t0 = time.perf_counter()
        pairs = write_videos(d / "videos", max(args.videos, args.src_videos or 0), width, height, n_frames, args.fps)
        cfgs = build_models(d / "models", args.tiny, device, only)
        print(f"videos and random models written in {time.perf_counter() - t0:.0f} s", flush=True)
        for name, cfg in cfgs.items():
            use = pairs[:(args.src_videos or args.videos) if name == "SRC" else args.videos]
            try:
                pool = run_pool(name, cfg, use, args.keyframe_every, name in args.profile.split(","))
                official = run_official(name, cfg, use, args.keyframe_every, d)
            except Exception as exc:  # one model's failure must not hide the others' numbers
                print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
                results["metrics"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            proj = project(pool, official, args.decode_workers)
            results["metrics"][name] = {"pool": pool, "official": official, "projection": proj}
            fps = pool["frames"] / pool["seconds"]
            print(f"{name:4s} pool: {fps:8.1f} frames/s/GPU ({pool['frames'] / pool['videos']:.0f} frames/video, "
                  f"pool_batch {pool['pool_batch']}), {pool['per_video_s'] * 1e3:7.1f} ms/video, load "
                  f"{pool['load_s']:.1f} s, peak {pool['peak_mib']:.0f} MiB | official: "
                  f"{official['steady_per_video_s'] * 1e3:7.1f} ms/video (decode {official['decode_s'] / len(use) * 1e3:.0f} "
                  f"+ score {official['score_s'] / len(use) * 1e3:.0f}), start {official['startup_s']:.1f} s + load "
                  f"{official['load_s']:.1f} s, wall {official['wall_s']:.1f} s for {len(use)} videos", flush=True)
            print(f"     {TASKS} tasks: pool {proj['pool_s']:7.1f} s (GPU {proj['pool_gpu_s']:.1f} s) vs official "
                  f"{proj['official_s']:7.1f} s: x{proj['ratio']:.2f} (model work alone x{proj['model_ratio']:.2f})",
                  flush=True)
        if "VQR" in only:
            try:
                v = run_vqr(d, pairs[:args.videos], args.tiny, device, args.vqr_requests, args.vqr_batch,
                            args.vqr_long_requests, args.vqr_short_tokens)
                results["metrics"]["VQR"] = v
                for label in ("short", "long"):
                    r = v[label]
                    print(f"VQR  {label:5s} ({r['max_tokens']} new tokens, prompt {r['prompt_tokens']} tokens): hf "
                          f"worker batch {v['batch']}: {r['pool_rps']:.2f} req/s vs official batch 4: "
                          f"{r['official_rps']:.2f} req/s (x{r['pool_rps'] / r['official_rps']:.2f}); {TASKS} tasks x "
                          f"10 frames: {TASKS * 10 / r['pool_rps']:.0f} s vs {TASKS * 10 / r['official_rps']:.0f} s",
                          flush=True)
                print(f"     {v['params_b']:.2f} B parameters, built in {v['build_s']:.0f} s, peak {v['peak_mib']:.0f} MiB",
                      flush=True)
            except Exception as exc:
                print(f"VQR: FAILED {type(exc).__name__}: {exc}", flush=True)
                results["metrics"]["VQR"] = {"error": f"{type(exc).__name__}: {exc}"}
    done = {k: v["projection"] for k, v in results["metrics"].items() if "projection" in v}
    if done:
        gpu = sum(p["pool_gpu_s"] for p in done.values())
        parts = ", ".join(f"{k} {p['pool_gpu_s']:.0f}" for k, p in done.items())
        print(f"AES+TQ+SRC on one GPU for {TASKS} tasks: {gpu:.0f} s of pool GPU time ({parts})", flush=True)
        results["gpu_s_626"] = gpu
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=float))


if __name__ == "__main__":
    main()
