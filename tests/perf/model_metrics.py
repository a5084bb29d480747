"""Throughput of the AES and TQ models at their real sizes, random weights (no accuracy, only cost).

For each model: the load time, frames/s when the model is loaded once and fed case after case (what one pool
actor does), the same work done "the official way" (one process per metric that loads the model, then
one video at a time: here, load + the same loop, so the ratio is the share of the load in a short run) and peak
GPU memory. Usage (on a GPU machine):

    .venv/bin/python tests/perf/model_metrics.py --device cuda --videos 32
    .venv/bin/python tests/perf/model_metrics.py --tiny --videos 2     # CPU smoke test
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from vbench_ray.metrics.aes import AES, AESConfig, build_head
from vbench_ray.metrics.tq import TQ, TQConfig, official_state_dict, build_dover_technical, save_tiny_dover


def real_aes(d: Path) -> dict:
    from transformers import SiglipVisionConfig, SiglipVisionModel

    cfg = SiglipVisionConfig(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
                             image_size=384, patch_size=14)  # siglip-so400m-patch14-384
    SiglipVisionModel(cfg).save_pretrained(d / "siglip")
    torch.save(build_head(1152).state_dict(), d / "head.pth")
    return {"encoder": str(d / "siglip"), "weights": str(d / "head.pth")}


def real_tq(d: Path) -> str:
    torch.save({"state_dict": official_state_dict(build_dover_technical("swin_t"))}, d / "dover.pth")
    return str(d / "dover.pth")


def bench(name, make, frames, videos, device):
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    m = make()
    m.setup()
    load = time.perf_counter() - t0
    m.compute(frames)  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    for _ in range(videos):
        m.compute(frames)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    run = time.perf_counter() - t1
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else float("nan")
    fps = videos * len(frames) / run
    official = load + run  # one script: load, then the same videos one at a time
    print(f"{name:4s} load {load:6.1f}s  {fps:8.1f} frames/s in a pool actor  peak {peak:8.0f} MiB  "
          f"pool {run:6.1f}s vs one script {official:6.1f}s (x{official / run:.2f})")
    del m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--videos", type=int, default=16)
    ap.add_argument("--tiny", action="store_true", help="toy-size models (CPU smoke test)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if args.tiny:
            from vbench_ray.metrics.aes import save_tiny_aes

            aes_w, tq_w = save_tiny_aes(d / "aes"), str(save_tiny_dover(d / "dover.pth"))
            tq_kw = dict(arch="tiny", clip_len=8, num_clips=2, frame_interval=1, fsize=8, aligned=8)
        else:
            aes_w, tq_w, tq_kw = real_aes(d), real_tq(d), {}
        aes_frames = rng.integers(0, 255, (15, 480, 480, 3), dtype=np.uint8)  # 10 uniform + ~5 keyframes
        tq_cfg = TQConfig(weights=tq_w, device=args.device, **tq_kw)
        tq_frames = rng.integers(0, 255, (tq_cfg.clip_len * tq_cfg.num_clips, 480, 480, 3), dtype=np.uint8)
        bench("AES", lambda: AES(AESConfig(**aes_w, device=args.device)), aes_frames, args.videos, args.device)
        bench("TQ", lambda: TQ(tq_cfg), tq_frames, args.videos, args.device)


if __name__ == "__main__":
    main()
