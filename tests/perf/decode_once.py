"""Decode once vs decode per metric, on the synthetic CoVEBench (docs/architecture.md, "Decode once").

    .venv/bin/python tests/perf/decode_once.py [--n 16] [--size 320x240] [--frames 48]

Prints, side by side, the seconds per case of the frame stage (each video opened once, the union of
the metrics' frame indices read once) and of a naive stage in which every metric opens and decodes its
own frames, with the ratio. No Ray: this isolates the decoding work the stage saves.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--frames", type=int, default=48)
    args = ap.parse_args()
    w, h = map(int, args.size.split("x"))

    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.configure import load_config
    from vbench_ray.metrics.base import build_metric
    from vbench_ray.synth.cove import synth_cove
    from vbench_ray.metrics.stage import FrameMetricsStage
    from vbench_ray.video.io import VideoReader

    with tempfile.TemporaryDirectory() as tmp:
        data = synth_cove(Path(tmp) / "d", n=args.n, seed=0, frames=args.frames, size=(w, h))
        cfg = load_config(
            Path(__file__).resolve().parents[2] / "configs" / "cove.yaml",
            [
                f"data.checklist={data['checklist']}",
                f"data.source_dir={data['source_dir']}",
                f"data.edited_dir={data['edited_dir']}",
                f"output.dir={tmp}/run",
                "metrics.exclude.SSIM.categories=[]",
                "metrics.exclude.MF.categories=[]",
            ],
        )
        rows = CoveBench(cfg).load_cases()
        metric_cfgs = {m: dict(getattr(cfg.metrics, m)) for m in cfg.metrics.enabled}
        stage = FrameMetricsStage(metric_cfgs)
        metrics = [build_metric(m, getattr(cfg.metrics, m)) for m in cfg.metrics.enabled]

        def naive(row):
            out = {}
            for m in metrics:  # every metric opens and decodes on its own
                e = VideoReader(row["edited_path"])
                s = VideoReader(row["source_path"]) if m.needs_source else None
                fe = e.read(m.sampling().indices(e.info))
                fs = s.read(m.sampling().indices(s.info)) if s else None
                out[m.name] = m.compute(fe, fs)
            return out

        timings = {}
        for name, fn in (("decode once", stage), ("per metric", naive)):
            fn(rows[0])  # warm up
            start = time.perf_counter()
            results = [fn(r) for r in rows]
            timings[name] = (time.perf_counter() - start) / len(rows)
            timings[name + " results"] = results
        for a, b in zip(timings["decode once results"], timings["per metric results"]):
            for m in cfg.metrics.enabled:
                assert np.isclose(a[m], b[m]), (m, a[m], b[m])
        opened = sum(r["videos_opened"] for r in timings["decode once results"])
        print(f"{args.n} cases, {w}x{h}, {args.frames} frames per video, metrics {list(cfg.metrics.enabled)}")
        print(f"{'':14}{'s/case':>10}{'videos opened':>16}")
        print(f"{'decode once':14}{timings['decode once']:>10.3f}{opened:>16}")
        print(f"{'per metric':14}{timings['per metric']:>10.3f}{args.n * 5:>16}")
        print(f"ratio per-metric / decode-once: {timings['per metric'] / timings['decode once']:.2f}x")


if __name__ == "__main__":
    main()
