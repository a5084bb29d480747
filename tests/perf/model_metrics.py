"""Cost of CoVEBench's model metrics (AES, TQ, SRC, VQR) at their real sizes, random weights (never accuracy).

What it measures, per model: frames/s per GPU in its pool, peak GPU memory, the same work done the official way,
their ratio (goal: the pools >= 3x faster) and whether the four model metrics of a 626-task CoVEBench run fit in
10 minutes on one H100. What runs here:

* **pool**: the project's path. Each video is decoded once (OpenCV here: decord and PyAV may be missing on a GPU
  machine; in a run the decode stage does this on every CPU of the cluster, beside the GPU), its frames are packed
  into an Arrow column as the decode stage packs them (``frames_for_<M>``), and the metric's pool stage runs on
  batches of ``metrics.<M>.pool_batch`` rows exactly as an actor of its pool does (the stage runner, then
  ``MetricPool`` -> ``compute_many``: frames of several cases per forward pass, bf16 where the model was trained
  so), without Ray. One pool actor, in this process, after one warm-up batch; a run puts ``1 / gpu_fraction``
  actors of a pool on a GPU, so a pool bound by its actor's CPU work goes faster there than measured here.
  SRC also reports where a case's time goes (``phase_seconds``: ``ground`` Grounding DINO, ``segment`` SAM2,
  ``pairs`` masks -> crops on the CPU, ``embed`` DINOv2; ms per case, each phase ending on its device-to-host read).
* **actors** (``--actors 1,3``): for each N > 1, the pool path in N processes sharing the GPU at once, as a pool
  with ``gpu_fraction`` 1/N puts N actors on a GPU: each process decodes every N-th video, loads the model, warms
  up, waits until all are ready, then times its batches (the machine's cores split between them, as Ray's
  ``OMP_NUM_THREADS``); combined throughput per GPU = all the videos / (last end - first start), next to the one
  actor's.
* **official**: NJU-LINK/CoVEBench 4fe1c2f's scripts (``metrics/vq/aes/eval_aes.py``,
  ``metrics/vq/dover/eval_dover.py`` -> DOVER's ``evaluate_a_set_of_videos.py``, ``metrics/vf/src/eval_src.py``,
  ``metrics/vq/vqr/eval_vqr.py``): one script per metric = a separate Python process that loads its model(s)
  once, then for one video at a time decodes it (OpenCV, reading up to the last frame needed, as ``eval_aes.py``)
  and scores it: AES one pass over the video's frames (batch 32, bf16); TQ one pass over its 3 clips (float32);
  SRC (``official_src``, its own loop here, so that it never borrows the pool's speed-ups) Grounding DINO one
  (frame, entity) prompt per call with its processor on the CPU, SAM2 one frame per call, the crops by numpy's
  broadcast multiply, DINOv2 one crop pair per call with its processor on the CPU, float32 encoder weights; VQR
  ``generate`` on 4 frames at a time (``--batch-size 4``). Same models as the pool (ours), so the ratio is the
  way of running it. It is a lower bound on the official cost: DOVER also runs its aesthetic branch, SRC writes
  frames and masks to disk (ffmpeg, PNG), decodes a label per kept box and propagates with SAM2's video
  predictor (memory attention per frame).
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
    python tests/perf/model_metrics.py --only SRC --videos 24 --actors 1,3  # SRC: one actor and three at once
    python tests/perf/model_metrics.py --only SRC --actors 1,3 --variant SRC.bf16_encoders=true  # + a config variant
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
    from vbench_ray.metrics.src import SRCConfig
    from vbench_ray.metrics.src_random import save_random_src
    from vbench_ray.metrics.tq import TQConfig
    from vbench_ray.metrics.tq_net import build_dover_technical, official_state_dict, save_tiny_dover

    cfgs = {}
    d.mkdir(parents=True, exist_ok=True)
    if "AES" in only:
        if tiny:
            aes = save_tiny_aes(d / "aes")
        else:  # siglip-so400m-patch14-384's vision tower + the v2.5 head
            from transformers import SiglipVisionConfig, SiglipVisionModel

            torch.manual_seed(0)
            SiglipVisionModel(
                SiglipVisionConfig(
                    hidden_size=1152,
                    intermediate_size=4304,
                    num_hidden_layers=27,
                    num_attention_heads=16,
                    image_size=384,
                    patch_size=14,
                )
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
                f[height // 4 : height // 4 + s, x : x + s] = colour
                f[height // 2 : height // 2 + s, width // 2 : width // 2 + s] = (230, 230, 230)
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
    source = (
        read_frames(src_path, metric.sampling().indices(video_info(src_path, keyframe_every)))
        if metric.needs_source
        else None
    )
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


def _pool_table(name: str, cfg: dict, pairs, keyframe_every: int):
    """The rows the decode stage hands the metric's pool: ``(table, frames, decode seconds per video)``."""
    import pyarrow as pa
    from omegaconf import OmegaConf

    from vbench_ray.metrics.base import build_metric
    from vbench_ray.metrics.pool import pack, payload_column

    on_cpu = build_metric(name, OmegaConf.create(cfg))  # the decode worker's copy: no model, pool_inputs only
    t0 = time.perf_counter()
    items = [metric_inputs(name, cfg, p, keyframe_every) for p in pairs]
    frames = sum(frames_of(i) for i in items)
    # what the decode stage packs: the metric's pool inputs (TQ: its fragment mosaics, cut on the CPU)
    items = [on_cpu.pool_inputs(e, s, dict(kw or {})) for e, s, kw in items]
    decode = (time.perf_counter() - t0) / len(pairs)
    table = pa.Table.from_pylist(
        [{"case_id": str(k), payload_column(name): pack(*item)} for k, item in enumerate(items)],
        schema=pa.schema([("case_id", pa.string()), (payload_column(name), pa.large_binary())]),
    )
    return table, frames, decode


def _phases(metric, cases: int) -> dict | None:
    """ms per case of each phase a metric times itself (SRC's ``phase_seconds``), or None."""
    seconds = getattr(metric, "phase_seconds", None)
    if not seconds or not cases:
        return None
    return {k: v / cases * 1e3 for k, v in seconds.items()}


def _reset_phases(metric) -> None:
    if isinstance(getattr(metric, "phase_seconds", None), dict):
        metric.phase_seconds.clear()
        metric.phase_cases = 0


def run_pool(name: str, cfg: dict, pairs, keyframe_every: int, profile: bool = False, before_timing=None) -> dict:
    """The metric's pool stage as the stream runs it, minus Ray: packed rows in an Arrow table, sliced into
    batches of ``pool_batch`` cases, each through the stage's runner (``to_pylist``, ``MetricPool``, the output
    columns); one warm-up batch first. ``profile`` prints where the timed batches spent their time (cProfile,
    wall clock: CUDA waits show where they block). ``before_timing()`` runs between the warm-up and the timed
    batches (the actors' barrier). SRC also reports its phases (ms per case)."""
    from types import SimpleNamespace

    import torch
    from omegaconf import OmegaConf

    from vbench_ray.metrics.base import build_metric
    from vbench_ray.metrics.pool import metric_pool_stages
    from vbench_ray.pipeline import _BatchRunner

    device = cfg["device"]
    table, frames, decode = _pool_table(name, cfg, pairs, keyframe_every)
    stage = metric_pool_stages(
        [build_metric(name, OmegaConf.create(cfg))], {name: cfg}, SimpleNamespace(batch_size=1, pools={}, workers=None)
    )[0]
    if _cuda(device):
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    runner = _BatchRunner(stage)  # MetricPool: the model loads here
    _sync(device)
    load = time.perf_counter() - t0
    metric = getattr(runner.call, "metric", None)
    batch = stage.batch_size
    runner(table.slice(0, batch))  # warm-up: kernels picked, caches filled (once per actor in a run)
    _sync(device)
    _reset_phases(metric)
    if before_timing is not None:
        before_timing()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.time()
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
    phases = _phases(metric, getattr(metric, "phase_cases", 0))
    del runner, metric
    if _cuda(device):
        torch.cuda.empty_cache()
    return {
        "load_s": load,
        "seconds": seconds,
        "per_video_s": seconds / table.num_rows,
        "decode_per_video_s": decode,
        "frames": frames,
        "videos": table.num_rows,
        "peak_mib": peak,
        "pool_batch": batch,
        "started": started,
        "ended": started + seconds,
        "phases_ms_per_case": phases,
    }


# ----------------------------------------------------------------------------- N pool actors on one GPU


def pool_actor_main(job_path: str) -> None:
    """One of ``--actors N`` processes: the pool path on its share of the videos; it waits at the barrier (all
    actors loaded and warmed up) before its timed batches, so that the N actors' timed work overlaps."""
    job = json.loads(Path(job_path).read_text())
    barrier = Path(job["barrier"])

    def wait_for_go() -> None:
        (barrier / f"ready_{job['index']}").touch()
        deadline = time.time() + 900
        while not (barrier / "go").exists():
            if time.time() > deadline:
                raise TimeoutError("the other actors never got ready")
            time.sleep(0.005)

    out = run_pool(
        job["name"], job["cfg"], [tuple(p) for p in job["pairs"]], job["keyframe_every"], before_timing=wait_for_go
    )
    print("POOL " + json.dumps(out, default=float), flush=True)


def run_pool_actors(name: str, cfg: dict, pairs, keyframe_every: int, n: int, d: Path) -> dict:
    """``n`` pool actors sharing the GPU at once (separate processes, as a pool with ``gpu_fraction`` 1/n puts n
    actors on a GPU), each with every n-th video; their timed batches start together. Combined throughput per
    GPU: all the videos over the span from the first actor's start to the last one's end."""
    barrier = d / f"barrier_{name}_{n}"
    barrier.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # Ray gives each actor OMP_NUM_THREADS = its CPUs; here the machine's cores are split between the actors
    env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // n))
    procs = []
    for i in range(n):
        share = pairs[i::n]
        if not share:
            continue
        job = d / f"actor_{name}_{n}_{i}.json"
        job.write_text(
            json.dumps(
                {
                    "name": name,
                    "cfg": {**cfg, "gpu_fraction": 1.0 / n},
                    "pairs": share,
                    "keyframe_every": keyframe_every,
                    "barrier": str(barrier),
                    "index": i,
                }
            )
        )
        log = open(d / f"actor_{name}_{n}_{i}.log", "w+")
        procs.append(
            (
                subprocess.Popen(
                    [sys.executable, __file__, "--pool-job", str(job)], stdout=log, stderr=subprocess.STDOUT, env=env
                ),
                log,
                i,
            )
        )
    t0 = time.time()
    while not all((barrier / f"ready_{i}").exists() for _, _, i in procs):
        dead = [(p, log) for p, log, _ in procs if p.poll() is not None]
        if dead or time.time() - t0 > 900:
            for p, _, _ in procs:
                if p.poll() is None:
                    p.kill()
            tail = ""
            if dead:
                dead[0][1].seek(0)
                tail = dead[0][1].read()[-2000:]
            raise RuntimeError(f"{name}: an actor of {n} failed before its timed batches: {tail}")
        time.sleep(0.05)
    (barrier / "go").touch()
    outs = []
    for p, log, _ in procs:
        p.wait()
        log.seek(0)
        text = log.read()
        line = [x for x in text.splitlines() if x.startswith("POOL ")]
        if p.returncode or not line:
            raise RuntimeError(f"{name}: an actor of {n} failed ({p.returncode}): {text[-2000:]}")
        outs.append(json.loads(line[-1][len("POOL ") :]))
    wall = max(o["ended"] for o in outs) - min(o["started"] for o in outs)
    videos, frames = sum(o["videos"] for o in outs), sum(o["frames"] for o in outs)
    phases = None
    if all(o.get("phases_ms_per_case") for o in outs):  # per case of each actor's own wall clock, averaged
        phases = {
            k: sum(o["phases_ms_per_case"][k] * o["videos"] for o in outs) / videos
            for k in outs[0]["phases_ms_per_case"]
        }
    return {
        "actors": len(outs),
        "seconds": wall,
        "videos": videos,
        "frames": frames,
        "per_video_s": wall / videos,
        "frames_per_s": frames / wall,
        "peak_mib": [o["peak_mib"] for o in outs],
        "load_s": max(o["load_s"] for o in outs),
        "decode_per_video_s": float(np.mean([o["decode_per_video_s"] for o in outs])),
        "actor_seconds": [o["seconds"] for o in outs],
        "phases_ms_per_case": phases,
    }


# ----------------------------------------------------------------------------- the official way (own process)

OFFICIAL_BATCH = {"AES": {"batch_size": 32}, "TQ": {"batch_size": 3}, "SRC": {"batch_size": 1}}


def _broadcast_crop(frame: np.ndarray, mask: np.ndarray, box) -> np.ndarray:
    """A masked crop as numpy computes it (uint8 x bool broadcast multiply): the official script's way, kept here so
    that the product's faster ``masked_crop`` does not speed up the official emulation."""
    x0, y0, x1, y1 = box
    return frame[y0:y1, x0:x1] * mask[y0:y1, x0:x1, None].astype(bool)


def official_src(metric, edited: np.ndarray, source: np.ndarray, entities, phases: dict) -> float:
    """``metrics/vf/src/eval_src.py``'s loop for one case with the models ``metric.setup()`` loaded (the same
    weights and autocast as the pool), everything one at a time with the processors on the CPU: Grounding DINO one
    (probe frame, entity) prompt per call (its processor on a PIL image; the top box chosen as ``top_detections``
    does, which is what the official post-processing + argmax pick, without its label decoding); SAM2 one frame per
    call (its image model; the official video predictor's memory attention is not timed); the crops as numpy
    multiplies them; DINOv2 one crop pair per call with its processor on the CPU. Adds each phase's seconds to
    ``phases``. Random weights: every box and mask is accepted (``SRC_ACCEPT_ALL``), so the rules never stop it."""
    import torch.nn.functional as F
    from PIL import Image

    from vbench_ray.metrics.src import SRCUndefined
    from vbench_ray.metrics.src_scoring import cosine_to_unit, expanded_box, top_detections

    torch, cfg, device = metric.torch, metric.cfg, metric.device
    k = min(len(source), len(edited))
    videos = {"source": source[:k], "edited": edited[:k]}
    t0 = time.perf_counter()
    boxes = {}
    for which, frames in videos.items():
        h, w = frames.shape[1:3]
        boxes[which] = []
        for entity in entities:
            prompt = entity.strip().lower().rstrip(".") + "."
            top, top_box = 0.0, None
            for frame in frames[: int(cfg.probe_frames)]:
                inputs = metric.gd_processor(images=Image.fromarray(frame), text=prompt, return_tensors="pt").to(device)
                with torch.inference_mode(), metric._autocast():
                    out = metric.gd_model(**inputs)
                scores, found = top_detections(out.logits, out.pred_boxes, (h, w), float(cfg.box_threshold))
                if scores[0] > top:
                    top, top_box = float(scores[0]), [float(v) for v in found[0]]
            if (
                top_box is not None
                and top >= cfg.min_score
                and (top_box[2] - top_box[0]) * (top_box[3] - top_box[1]) / (h * w) <= cfg.max_box_area
            ):
                boxes[which].append(top_box)
        if not boxes[which]:
            raise SRCUndefined(f"no entity found in the {which} video")
    t1 = time.perf_counter()
    s = metric.sam_size
    mean = torch.tensor(metric.sam_mean, device=device).view(1, 3, 1, 1)
    std = torch.tensor(metric.sam_std, device=device).view(1, 3, 1, 1)
    masks = {}
    for which, frames in videos.items():
        h, w = frames.shape[1:3]
        prompt = (torch.tensor(boxes[which]) * torch.tensor([s / w, s / h, s / w, s / h])).to(device)[None]
        masks[which] = []
        for t in range(len(frames)):
            x = (metric._sam_input(frames[t : t + 1], s) - mean) / std
            with torch.inference_mode(), metric._autocast():
                emb = metric.sam.get_image_embeddings(x)
                pred = metric.sam(image_embeddings=emb, input_boxes=prompt, multimask_output=False).pred_masks
                logits = F.interpolate(pred[:, :, 0].float(), size=(h, w), mode="bilinear", align_corners=False)
            masks[which].append((logits > 0).any(dim=1)[0].cpu().numpy())
    t2 = time.perf_counter()
    per_frame, embed_s = [], 0.0
    minimum = max(1, int(cfg.min_mask_pixels))
    for t in range(k):
        sm, em = masks["source"][t], masks["edited"][t]
        if np.count_nonzero(sm) < minimum:
            continue
        if np.count_nonzero(em) < minimum:
            per_frame.append(0.0)
            continue
        a = _broadcast_crop(videos["source"][t], sm, expanded_box(sm, float(cfg.bbox_expand)))
        b = _broadcast_crop(videos["edited"][t], em, expanded_box(em, float(cfg.bbox_expand)))
        e0 = time.perf_counter()
        inputs = metric.dino_processor(images=[a, b], return_tensors="pt").to(device)
        with torch.inference_mode():
            f = metric.dino(**inputs).last_hidden_state[:, 0].float()
        f = (f / (f.norm(dim=1, keepdim=True) + 1e-6)).cpu().numpy()
        embed_s += time.perf_counter() - e0
        per_frame.append(float(cosine_to_unit(float((f[0] * f[1]).sum()))))
    t3 = time.perf_counter()
    for key, v in (("ground", t1 - t0), ("segment", t2 - t1), ("pairs", t3 - t2 - embed_s), ("embed", embed_s)):
        phases[key] = phases.get(key, 0.0) + v
    if not per_frame:
        raise SRCUndefined("no sampled source frame has a mask")
    return float(np.mean(per_frame))


def official_main(job_path: str) -> None:
    """One script per metric: load once, then one video at a time, decoded and scored (module docstring)."""
    started = time.time()
    job = json.loads(Path(job_path).read_text())
    import torch  # noqa: F401  (the imports a script pays for)
    import transformers  # noqa: F401

    from vbench_ray.metrics import METRICS

    name, cfg = job["name"], {**job["cfg"], **OFFICIAL_BATCH[job["name"]]}
    if name == "SRC":  # the official numerics: bf16 autocast (as its SAM2 runs), float32 weights
        cfg["bf16_encoders"] = False
    cls = METRICS[name]
    metric = cls(cls.config_class(**cfg))
    imported = time.time()
    metric.setup()
    _sync(cfg["device"])
    loaded = time.time()
    decode = score = 0.0
    per_video = []
    phases: dict = {}
    for n, pair in enumerate(job["pairs"]):
        t0 = time.perf_counter()
        edited, source, kwargs = metric_inputs(name, cfg, tuple(pair), job["keyframe_every"])
        t1 = time.perf_counter()
        if name == "SRC":
            official_src(metric, edited, source, kwargs["entities"], phases if n else {})  # phases: steady state
        else:
            metric.compute(edited, source, **kwargs)
        _sync(cfg["device"])
        t2 = time.perf_counter()
        decode, score = decode + (t1 - t0), score + (t2 - t1)
        per_video.append(t2 - t0)
    steady = max(1, len(job["pairs"]) - 1)
    print(
        "OFFICIAL "
        + json.dumps(
            {
                "start_to_import_s": imported - job["launched"],
                "load_s": loaded - imported,
                "decode_s": decode,
                "score_s": score,
                "per_video_s": per_video,
                "in_process_s": time.time() - started,
                "phases_ms_per_case": {k: v / steady * 1e3 for k, v in phases.items()} or None,
            }
        )
    )


def run_official(name: str, cfg: dict, pairs, keyframe_every: int, d: Path) -> dict:
    job = d / f"official_{name}.json"
    launched = time.time()
    job.write_text(
        json.dumps({"name": name, "cfg": cfg, "pairs": pairs, "keyframe_every": keyframe_every, "launched": launched})
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, __file__, "--official-job", str(job)], capture_output=True, text=True, env=env
    )
    wall = time.time() - launched
    line = [x for x in proc.stdout.splitlines() if x.startswith("OFFICIAL ")]
    if proc.returncode or not line:
        raise RuntimeError(f"official {name} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(line[-1][len("OFFICIAL ") :])
    n = len(pairs)
    steady = out["per_video_s"][1:] or out["per_video_s"]  # the first video pays the warm-up, as ours does
    out.update(wall_s=wall, videos=n, steady_per_video_s=float(np.mean(steady)), startup_s=out["start_to_import_s"])
    return out


# ----------------------------------------------------------------------------- VQR (a 7B VLM)

QWEN25_VL_7B = dict(  # Qwen/Qwen2.5-VL-7B-Instruct config.json (VisualQuality-R1-7B is its fine-tune)
    text=dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        max_position_embeddings=128000,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        vocab_size=152064,
        hidden_act="silu",
        tie_word_embeddings=False,
        rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
    ),
    vision=dict(
        depth=32,
        hidden_size=1280,
        intermediate_size=3420,
        num_heads=16,
        in_chans=3,
        out_hidden_size=3584,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=112,
        fullatt_block_indexes=[7, 15, 23, 31],
        tokens_per_second=2,
        hidden_act="silu",
    ),
    ids=dict(
        image_token_id=151655,
        video_token_id=151656,
        vision_start_token_id=151652,
        vision_end_token_id=151653,
        bos_token_id=151643,
        eos_token_id=151645,
    ),
    regular_tokens=151643,
)
QWEN_TINY = dict(
    text=dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        vocab_size=512,
        hidden_act="silu",
        tie_word_embeddings=False,
        rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
    ),
    vision=dict(
        depth=2,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        in_chans=3,
        out_hidden_size=64,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=112,
        fullatt_block_indexes=[1],
        tokens_per_second=2,
        hidden_act="silu",
    ),
    ids=dict(
        image_token_id=499,
        video_token_id=500,
        vision_start_token_id=496,
        vision_end_token_id=497,
        bos_token_id=487,
        eos_token_id=489,
    ),
    regular_tokens=487,
)
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]  # Qwen2's ids 151643..151656, in order
CHAT_TEMPLATE = (  # Qwen2-VL's ChatML with its default system turn and one vision block per image
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% elif c['type'] == 'text' %}"
    "{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


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
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        unk_token="w0",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=SPECIALS[1:],
    )
    images = getattr(t, "Qwen2VLImageProcessorPil", None) or t.Qwen2VLImageProcessor
    proc = Qwen2_5_VLProcessor(
        image_processor=images(
            min_pixels=3136, max_pixels=12845056, patch_size=14, temporal_patch_size=2, merge_size=2
        ),
        tokenizer=tok,
        video_processor=t.Qwen2VLVideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    )
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


def run_vqr(
    d: Path, pairs, tiny: bool, device: str, requests: int, batch: int, long_requests: int, short_tokens: int
) -> dict:
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
        idx = uniform_indices(video_info(edited, 10**9).num_frames, vqr.FRAMES)
        for i, f in zip(idx, read_frames(edited, idx)):
            path = d / "vqr_frames" / f"{k}_{i:06d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(f).save(path, format="JPEG", quality=vqr.JPEG_QUALITY)
            frames.append(str(path))

    class Prebuilt(HFJudgeWorker):  # the real worker; only its from_pretrained is replaced (random weights)
        def _load_model(self, path):
            return model

    def worker(max_tokens: int, bs: int) -> HFJudgeWorker:
        return Prebuilt(
            {
                "model_path": str(proc_dir),
                "label": "VisualQuality-R1-7B (random)",
                "hf": {
                    "device": device,
                    "dtype": "bfloat16" if _cuda(device) else "float32",
                    "batch_size": bs,
                    "workers": 1,
                },
                "video": {"fps": 2.0, "max_frames": 32, "max_pixels": 12845056},
                "max_tokens": max_tokens,
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": 50,
                "seed": 0,
            }
        )

    def timed(w: HFJudgeWorker, paths: list[str], bs: int) -> tuple[float, int, list]:
        rows = [
            {"request_id": f"r{i}", "messages": json.dumps(vqr.messages(p)), "video": "{}"} for i, p in enumerate(paths)
        ]
        _sync(device)
        t0 = time.perf_counter()
        out = []
        for start in range(0, len(rows), bs):
            out += w(pa.Table.from_pylist(rows[start : start + bs])).to_pylist()
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
        result[label] = {
            "max_tokens": tokens,
            "requests": n,
            "pool_rps": n / ours,
            "pool_tokens": ours_tokens,
            "official_rps": min(n, 8) / official,
            "official_tokens": official_tokens,
            "prompt_tokens": sample[0]["prompt_tokens"],
        }
    result["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20 if _cuda(device) else float("nan")
    return result


# ----------------------------------------------------------------------------- report


def project(pool: dict, official: dict, workers: int, tasks: int = TASKS) -> dict:
    gpu = pool["per_video_s"]
    stream = max(gpu, pool["decode_per_video_s"] / workers)  # decode overlaps the pool on the CPUs
    official_video = official["steady_per_video_s"]
    return {
        "pool_s": pool["load_s"] + tasks * stream,
        "pool_gpu_s": tasks * gpu,
        "official_s": official["startup_s"] + official["load_s"] + tasks * official_video,
        "ratio": (official["startup_s"] + official["load_s"] + tasks * official_video)
        / (pool["load_s"] + tasks * stream),
        "model_ratio": official["score_s"] / max(1, official["videos"]) / gpu,
    }


def _phase_text(phases: dict | None) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in phases.items()) if phases else "n/a"


def report(
    name: str,
    cfg: dict,
    pool: dict,
    shared: dict,
    official: dict | None,
    n_videos: int,
    workers: int,
    results: dict,
    variant: str | None = None,
) -> None:
    """Prints a metric's lines of the table and puts its numbers in ``results`` (a ``--variant``'s under the
    metric's ``variants``)."""
    entry: dict = {"pool": pool, "config": cfg}
    fps = pool["frames"] / pool["seconds"]
    tag = f" [{variant}]" if variant else ""
    line = (
        f"{name:4s} pool{tag}: {fps:8.1f} frames/s/GPU ({pool['frames'] / pool['videos']:.0f} frames/video, "
        f"pool_batch {pool['pool_batch']}), {pool['per_video_s'] * 1e3:7.1f} ms/video, load "
        f"{pool['load_s']:.1f} s, peak {pool['peak_mib']:.0f} MiB"
    )
    if official is not None:
        line += (
            f" | official: {official['steady_per_video_s'] * 1e3:7.1f} ms/video (decode "
            f"{official['decode_s'] / n_videos * 1e3:.0f} + score {official['score_s'] / n_videos * 1e3:.0f}), "
            f"start {official['startup_s']:.1f} s + load {official['load_s']:.1f} s, wall "
            f"{official['wall_s']:.1f} s for {n_videos} videos"
        )
    print(line, flush=True)
    if pool.get("phases_ms_per_case") or (official or {}).get("phases_ms_per_case"):
        print(
            f"     phases, ms per case: pool {_phase_text(pool.get('phases_ms_per_case'))}"
            + (f" | official {_phase_text(official.get('phases_ms_per_case'))}" if official else ""),
            flush=True,
        )
    if official is not None:
        proj = project(pool, official, workers)
        entry.update(official=official, projection=proj)
        print(
            f"     {TASKS} tasks: pool {proj['pool_s']:7.1f} s (GPU {proj['pool_gpu_s']:.1f} s) vs official "
            f"{proj['official_s']:7.1f} s: x{proj['ratio']:.2f} (model work alone x{proj['model_ratio']:.2f})",
            flush=True,
        )
    if shared:
        entry["actors"] = {}
        for n, r in shared.items():
            r = dict(r, speedup_vs_one_actor=pool["per_video_s"] / r["per_video_s"])
            if official is not None:
                one = {
                    **pool,
                    "per_video_s": r["per_video_s"],
                    "load_s": r["load_s"],
                    "decode_per_video_s": r["decode_per_video_s"],
                }
                r["projection"] = project(one, official, workers)
            entry["actors"][str(n)] = r
            text = (
                f"     {r['actors']} actors on the GPU at once: {r['frames_per_s']:8.1f} frames/s/GPU, "
                f"{r['per_video_s'] * 1e3:7.1f} ms/video per GPU (x{r['speedup_vs_one_actor']:.2f} vs one actor), "
                f"peak {max(r['peak_mib']):.0f} MiB per actor"
            )
            if official is not None:
                text += (
                    f"; {TASKS} tasks: GPU {r['projection']['pool_gpu_s']:.1f} s, x{r['projection']['ratio']:.2f}"
                    f" vs official"
                )
            print(text, flush=True)
            if r.get("phases_ms_per_case"):
                print(
                    f"       phases, ms per case (each actor's wall clock): {_phase_text(r['phases_ms_per_case'])}",
                    flush=True,
                )
    if variant:
        results["metrics"].setdefault(name, {}).setdefault("variants", {})[variant] = entry
    else:
        results["metrics"][name] = {
            **entry,
            **{k: v for k, v in results["metrics"].get(name, {}).items() if k == "variants"},
        }


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
    ap.add_argument(
        "--decode-workers",
        type=int,
        default=max(1, (os.cpu_count() or 2) - 4),
        help="CPU decode workers beside the pools in a run (projection)",
    )
    ap.add_argument("--only", default="AES,TQ,SRC,VQR")
    ap.add_argument("--vqr-requests", type=int, default=32)
    ap.add_argument("--vqr-long-requests", type=int, default=16)
    ap.add_argument(
        "--vqr-batch", type=int, default=32, help="judge.hf.batch_size of the VQR worker (the VQR profile: 32)"
    )
    ap.add_argument("--vqr-short-tokens", type=int, default=16)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--profile", default="", help="metrics whose pool calls are profiled, e.g. SRC,TQ")
    ap.add_argument(
        "--actors",
        default="1",
        help="pool actors sharing the GPU at once, e.g. 1,3: each N > 1 runs the "
        "pool path in N processes together (each every N-th video), reported next to one actor",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="M.KEY=VALUE",
        help="a metric config value, e.g. SRC.bf16_encoders=true (repeatable)",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="M.KEY=VALUE[,M.KEY=VALUE]",
        help="after a metric's runs, its pool path (and --actors) again with these config values, on the "
        "same videos and models, e.g. SRC.bf16_encoders=true (repeatable; no official run)",
    )
    ap.add_argument("--skip-official", action="store_true", help="time the pool path only")
    ap.add_argument("--official-job", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--pool-job", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.official_job:
        return official_main(args.official_job)
    if args.pool_job:
        return pool_actor_main(args.pool_job)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    only = [m.strip() for m in args.only.split(",") if m.strip()]
    width, height = (96, 64) if args.tiny else map(int, args.size.lower().split("x"))
    n_frames = 24 if args.tiny else args.frames
    print(
        f"device {device} ({torch.cuda.get_device_name() if _cuda(device) else 'cpu'}), "
        f"{'tiny' if args.tiny else 'real-size'} models, {args.videos} videos of {width}x{height}x{n_frames}",
        flush=True,
    )
    results: dict = {
        "device": device,
        "tiny": args.tiny,
        "videos": args.videos,
        "size": [width, height],
        "frames": n_frames,
        "decode_workers": args.decode_workers,
        "metrics": {},
    }
    with tempfile.TemporaryDirectory(prefix="vbr-perf-") as tmp:
        d = Path(tmp)
        t0 = time.perf_counter()
        pairs = write_videos(d / "videos", max(args.videos, args.src_videos or 0), width, height, n_frames, args.fps)
        cfgs = build_models(d / "models", args.tiny, device, only)
        for item in args.set:  # --set M.KEY=VALUE: a YAML value, as on the project's command line
            for metric, key, value in _settings(item, cfgs):
                cfgs[metric][key] = value
        actors = sorted({int(n) for n in str(args.actors).split(",") if n.strip()} | {1})
        print(f"videos and random models written in {time.perf_counter() - t0:.0f} s", flush=True)
        for name, cfg in cfgs.items():
            use = pairs[: (args.src_videos or args.videos) if name == "SRC" else args.videos]
            try:
                pool = run_pool(name, cfg, use, args.keyframe_every, name in args.profile.split(","))
                shared = {n: run_pool_actors(name, cfg, use, args.keyframe_every, n, d) for n in actors if n > 1}
                official = None if args.skip_official else run_official(name, cfg, use, args.keyframe_every, d)
            except Exception as exc:  # one model's failure must not hide the others' numbers
                print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
                results["metrics"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            report(name, cfg, pool, shared, official, len(use), args.decode_workers, results)
            _write_json(args.json, results)
            for variant in args.variant:
                changes = {key: value for metric, key, value in _settings(variant, cfgs) if metric == name}
                if not changes:
                    continue
                vcfg = {**cfg, **changes}
                try:
                    vpool = run_pool(name, vcfg, use, args.keyframe_every)
                    vshared = {n: run_pool_actors(name, vcfg, use, args.keyframe_every, n, d) for n in actors if n > 1}
                except Exception as exc:
                    print(f"{name} [{variant}]: FAILED {type(exc).__name__}: {exc}", flush=True)
                    results["metrics"][name].setdefault("variants", {})[variant] = {
                        "error": f"{type(exc).__name__}: {exc}"
                    }
                    continue
                report(name, vcfg, vpool, vshared, None, len(use), args.decode_workers, results, variant)
                _write_json(args.json, results)
        if "VQR" in only:
            try:
                v = run_vqr(
                    d,
                    pairs[: args.videos],
                    args.tiny,
                    device,
                    args.vqr_requests,
                    args.vqr_batch,
                    args.vqr_long_requests,
                    args.vqr_short_tokens,
                )
                results["metrics"]["VQR"] = v
                for label in ("short", "long"):
                    r = v[label]
                    print(
                        f"VQR  {label:5s} ({r['max_tokens']} new tokens, prompt {r['prompt_tokens']} tokens): hf "
                        f"worker batch {v['batch']}: {r['pool_rps']:.2f} req/s vs official batch 4: "
                        f"{r['official_rps']:.2f} req/s (x{r['pool_rps'] / r['official_rps']:.2f}); {TASKS} tasks x "
                        f"10 frames: {TASKS * 10 / r['pool_rps']:.0f} s vs {TASKS * 10 / r['official_rps']:.0f} s",
                        flush=True,
                    )
                print(
                    f"     {v['params_b']:.2f} B parameters, built in {v['build_s']:.0f} s, "
                    f"peak {v['peak_mib']:.0f} MiB",
                    flush=True,
                )
            except Exception as exc:
                print(f"VQR: FAILED {type(exc).__name__}: {exc}", flush=True)
                results["metrics"]["VQR"] = {"error": f"{type(exc).__name__}: {exc}"}
    done = {k: v for k, v in results["metrics"].items() if "pool" in v}
    if done:
        one = {k: TASKS * v["pool"]["per_video_s"] for k, v in done.items()}
        best = {
            k: TASKS * min([v["pool"]["per_video_s"]] + [a["per_video_s"] for a in v.get("actors", {}).values()])
            for k, v in done.items()
        }
        parts = ", ".join(f"{k} {s:.0f}" for k, s in one.items())
        print(
            f"{'+'.join(done)} on one GPU for {TASKS} tasks: {sum(one.values()):.0f} s of pool GPU time ({parts})",
            flush=True,
        )
        results["gpu_s_626"] = sum(one.values())
        if best != one:
            parts = ", ".join(f"{k} {s:.0f}" for k, s in best.items())
            print(f"  with the best --actors count per metric: {sum(best.values()):.0f} s ({parts})", flush=True)
            results["gpu_s_626_best_actors"] = sum(best.values())
    _write_json(args.json, results)


def _settings(text: str, cfgs: dict) -> list[tuple[str, str, object]]:
    """``M.KEY=VALUE[,M.KEY=VALUE]`` -> ``(metric, key, value)`` (values parsed as YAML), for the metrics built."""
    import yaml

    out = []
    for item in text.split(","):
        target, value = item.split("=", 1)
        metric, key = target.strip().split(".", 1)
        if metric in cfgs:
            if key not in cfgs[metric]:
                raise SystemExit(f"{text}: metrics.{metric} has no key {key!r}")
            out.append((metric, key, yaml.safe_load(value)))
    return out


def _write_json(path: str | None, results: dict) -> None:
    """The results so far (written after each metric, so that a run cut short keeps what it measured)."""
    if path:
        Path(path).write_text(json.dumps(results, indent=2, default=float))


if __name__ == "__main__":
    main()
