"""CoVEBench Table 5's VACE row on this machine: a Wan2.1-VACE-14B-architecture pipeline with random weights.

The pipeline is diffusers' ``WanVACEPipeline`` at the real size (the transformer, UMT5-XXL encoder and Wan VAE
configs below, from the published ``config.json`` values), its weights random and made directly on the GPU in
bf16 (the VAE in fp32, as ``configs/editors/vace.yaml``): the same arithmetic as the real model, no download.
It runs through the editor code path of a run: ``EditorPool`` (the pool's actor: the source resampled by the
frame rules, the edit timed, ``torch.cuda.max_memory_allocated`` reset per case) around ``DiffusersEditor``
(vace.yaml's steps, guidance, negative prompt, seed), with only ``load_pipeline`` replaced (random weights
instead of a model folder). The profile is Table 5's: 480×480, 41 frames (``editor.profile=table5``), 50 steps.

    python tests/perf/editor_vace.py                      # one GPU: s/f and peak MB beside the paper's row
    python tests/perf/editor_vace.py --replicas 2         # + 1 and 2 pool actors on 2 GPUs through Ray: throughput
    python tests/perf/editor_vace.py --tiny               # CPU smoke test (the tests' tiny pipeline)

Options: ``--steps`` (50), ``--frames`` (41), ``--size`` (480), ``--cases`` (timed edits per replica, after one
warm-up edit each; default 1). Without a CUDA GPU it runs the ``--tiny`` profile on the CPU (so ``make perf``
stays cheap).
The paper's number comes from VACE's official code and weights on an H200; what differs is printed with the table.

Needs: torch, transformers, tokenizers, accelerate, pyarrow, PyYAML, opencv-python-headless, and diffusers 0.42.1,
ftfy, omegaconf, av (PyAV: writes and reads the mp4s); ``--replicas``: ray. On the H100/H200 image, which has the
first group, these wheels were carried (cp312, manylinux): diffusers-0.42.1, ftfy-6.3.1, wcwidth-0.9.4,
importlib_metadata-10.2.0, lazy_importer-0.1.0, omegaconf-2.4.0, av-18.1.0 (43 MB together); Ray adds its own.
Measured there (one H100 80GB, 50 steps, one warm-up then one timed case): 2.387 s/f, 49,790.9 MB peak.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

# CoVEBench Table 5, VACE: one H200, 480×480, 41 frames, the official code's defaults
PAPER = {"seconds_per_frame": 12.827, "peak_mb": 113090.9, "gpu": "NVIDIA H200"}

# Wan2.1-VACE-14B (diffusers' conversion of Wan-AI/Wan2.1-VACE-14B: transformer/config.json), UMT5-XXL
# (google/umt5-xxl config.json, the encoder half: text_encoder/config.json), Wan2.1's VAE (vae/config.json)
REAL = {
    "transformer": dict(
        patch_size=[1, 2, 2],
        num_attention_heads=40,
        attention_head_dim=128,
        in_channels=16,
        out_channels=16,
        text_dim=4096,
        freq_dim=256,
        ffn_dim=13824,
        num_layers=40,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        eps=1e-6,
        image_dim=None,
        added_kv_proj_dim=None,
        rope_max_seq_len=1024,
        pos_embed_seq_len=None,
        vace_layers=[0, 5, 10, 15, 20, 25, 30, 35],
        vace_in_channels=96,
    ),
    "text_encoder": dict(
        d_model=4096,
        d_ff=10240,
        d_kv=64,
        num_heads=64,
        num_layers=24,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.1,
        layer_norm_epsilon=1e-6,
        tie_word_embeddings=False,
    ),
    "text_vocab_size": 256384,  # the embedding table's rows (the tokenizer here is a small one: ids stay below)
    "vae": dict(
        base_dim=96,
        z_dim=16,
        dim_mult=[1, 2, 4, 4],
        num_res_blocks=2,
        attn_scales=[],
        temperal_downsample=[False, True, True],
        dropout=0.0,
    ),
    # Wan's flow-matching UniPC (diffusers' example: flow_shift 3.0 for 480p); the shift does not change the cost
    "scheduler": dict(
        num_train_timesteps=1000,
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=3.0,
        solver_order=2,
    ),
    "tokenizer_vocab": 300,
}

from vbench_ray.editors.base import EditorPool, register_editor  # noqa: E402
from vbench_ray.editors.diffusers_editor import DiffusersEditor  # noqa: E402


class RandomWanVACE(DiffusersEditor):
    """The diffusers editor with random weights of ``editor.perf_sizes`` (real | tiny) instead of a model folder."""

    name = "wan_vace_random"

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        return []  # no folder to check: the weights are made here

    def load_pipeline(self):
        import torch

        from helpers.tiny.wan_vace import TINY, build_wan_vace_pipeline

        sizes = REAL if self.cfg.perf_sizes == "real" else TINY
        main, vae = self.torch_dtypes()
        device = self.cfg.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        start = time.perf_counter()
        pipe = build_wan_vace_pipeline(
            sizes, device=device, dtype=main, vae_dtype=vae, vocab_size=sizes.get("text_vocab_size")
        )
        self.build_seconds = time.perf_counter() - start
        return pipe


class PerfPool(EditorPool):
    """``EditorPool`` whose actor first registers the random-weight editor (a Ray actor is a fresh process)."""

    def __init__(self, cfg: dict, output_dir: str, inputs_dir: str | None = None):
        register_editor(RandomWanVACE)
        start = time.perf_counter()
        super().__init__(cfg, output_dir, inputs_dir)
        self.setup_seconds = time.perf_counter() - start

    def edit_row(self, row: dict) -> dict:  # (a Ray actor's method; the pool calls __call__)
        return self(row)

    def info(self) -> dict:
        import torch

        on_gpu = str(getattr(self.editor, "device", "")).startswith("cuda")
        return {"setup_seconds": self.setup_seconds, "gpu": torch.cuda.get_device_name() if on_gpu else "cpu"}


def synthetic_source(path: Path, frames: int = 64, height: int = 360, width: int = 640, fps: float = 16.0) -> Path:
    """A moving textured gradient with a bright square (the editor's input; its content does not change the cost)."""
    import numpy as np

    from vbench_ray.video.encode import write_video

    y, x = np.mgrid[0:height, 0:width]
    video = np.empty((frames, height, width, 3), np.uint8)
    for t in range(frames):
        video[t, ..., 0] = (x + 3 * t) % 256
        video[t, ..., 1] = (y + 2 * t) % 256
        video[t, ..., 2] = ((x + y) // 2) % 256
        x0 = 20 + 6 * t % (width - 80)
        video[t, 40:100, x0 : x0 + 60] = (250, 40, 40)
    return write_video(path, video, fps=fps)


def editor_cfg(args, tiny: bool) -> dict:
    """configs/editors/vace.yaml with the random-weight editor, Table 5's frame profile and the options."""
    import yaml

    cfg = yaml.safe_load((REPO / "configs" / "editors" / "vace.yaml").read_text())
    cfg.update(
        name=RandomWanVACE.name,
        model="VACE (Wan2.1-VACE-14B architecture, random weights)",
        perf_sizes="tiny" if tiny else "real",
        weights=None,
        pipeline=None,
        steps=args.steps,
        layout="flat",
        profile=None,
        timeout_s=None,
        frame_rules={
            "resolution": [args.size, args.size],
            "resolution_mode": "exact",
            "fixed_frames": args.frames,
            "frame_constraint": "4k+1",
            "size_multiple": 16,
        },
    )
    if tiny:  # the CPU smoke profile: float32, few text tokens
        cfg.update(
            dtype="fp32",
            vae_dtype="fp32",
            device="cpu",
            model="VACE (tiny random pipeline)",
            call_kwargs={"max_sequence_length": 16},
        )
    return cfg


def rows(source: Path, n: int, tag: str) -> list[dict]:
    return [
        {
            "case_id": f"{tag}{i}",
            "variant": "base",
            "source_path": str(source),
            "annotations": None,
            "instruction": "Replace the red square with a blue ball and make the background a snowy forest.",
        }
        for i in range(n)
    ]


def summarize(results: list[dict]) -> dict:
    """``results[0]`` is a warm-up case (kernel selection, allocator growth); the others are timed."""
    failed = [r for r in results if r.get("error_edit")]
    if failed:
        raise SystemExit(f"{len(failed)} edit(s) failed: {failed[0]['error_edit']}")
    timed = results[1:] if len(results) > 1 else results  # --cases 0: the warm-up case alone (an upper bound)
    peaks = [r["edit_peak_mb"] for r in results if r.get("edit_peak_mb") is not None]
    return {
        "seconds_per_frame": sum(r["edit_seconds_per_frame"] for r in timed) / len(timed),
        "warmup_seconds_per_frame": results[0]["edit_seconds_per_frame"],
        "peak_mb": max(peaks) if peaks else None,
        "frames": results[0]["edit_frames"],
        "cases_timed": len(results) - 1,
    }


def one_replica_in_process(cfg: dict, source: Path, cases: int, work: Path) -> dict:
    pool = PerfPool(cfg, str(work / "out1"), str(work / "inputs"))
    results = [pool(row) for row in rows(source, 1, "w1-") + rows(source, cases, "r1-")]
    return {**summarize(results), **pool.info(), "build_seconds": getattr(pool.editor, "build_seconds", None)}


def replicas_through_ray(cfg: dict, source: Path, cases: int, work: Path, n: int, gpus_each: float) -> dict:
    """``n`` pool actors (one GPU each), each built, warmed up on one case, then timed on ``cases`` more together:
    throughput = edited videos per second over the wall time of the timed phase."""
    import ray

    actor = ray.remote(num_gpus=gpus_each)(PerfPool)
    pools = [actor.remote(cfg, str(work / f"out{n}-{i}"), str(work / f"inputs{n}-{i}")) for i in range(n)]
    infos = ray.get([p.info.remote() for p in pools])
    warm = ray.get([p.edit_row.remote(r) for p, r in zip(pools, rows(source, n, f"w{n}-"))])
    start = time.perf_counter()
    todo = rows(source, cases * n, f"r{n}-")
    refs = [pools[i % n].edit_row.remote(row) for i, row in enumerate(todo)]  # each actor takes its share in order
    results = ray.get(refs)
    wall = time.perf_counter() - start
    out = summarize(warm[:1] + results)
    for p in pools:
        ray.kill(p)
    return {
        **out,
        "replicas": n,
        "videos": len(todo),
        "wall_seconds": wall,
        "videos_per_second": len(todo) / wall,
        "frames_per_second": sum(r["edit_frames"] for r in results) / wall,
        "gpu": infos[0]["gpu"],
        "setup_seconds": max(i["setup_seconds"] for i in infos),
        "peak_mb_per_replica": [  # one GPU per replica: its edits' peak (warm-up included)
            max([r.get("edit_peak_mb") or 0.0 for r in [warm[i]] + results[i::n]]) for i in range(n)
        ],
    }


def fmt(x, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--frames", type=int, default=41)
    p.add_argument("--size", type=int, default=480)
    p.add_argument("--cases", type=int, default=1, help="timed edits per replica, after one warm-up edit each")
    p.add_argument("--replicas", type=int, default=1, help="N > 1: 1 and N pool actors through Ray, one GPU each")
    p.add_argument("--tiny", action="store_true", help="the tests' tiny pipeline on the CPU (smoke test)")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    args = p.parse_args(argv)

    import torch

    tiny = args.tiny
    if not tiny and not torch.cuda.is_available():
        print("no CUDA GPU: running the --tiny profile on the CPU (the real size needs a GPU)")
        tiny = True
    if tiny and (args.size, args.frames, args.steps) == (480, 41, 50):  # the CPU profile's defaults
        args.size, args.frames, args.steps = 64, 9, 2
    cfg = editor_cfg(args, tiny)
    work = Path(tempfile.mkdtemp(prefix="editor_vace_"))
    source = synthetic_source(work / "source.mp4", height=96 if tiny else 360, width=128 if tiny else 640)
    report: dict = {
        "profile": {
            "size": f"{args.size}x{args.size}",
            "frames": args.frames,
            "steps": args.steps,
            "sizes": "tiny" if tiny else "Wan2.1-VACE-14B",
            "dtype": cfg["dtype"],
            "vae_dtype": cfg["vae_dtype"],
            "guidance": cfg["guidance"],
        },
        "paper": PAPER,
    }
    if args.replicas <= 1:
        report["one"] = one_replica_in_process(cfg, source, args.cases, work)
    else:
        import ray

        path = os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
        ray.init(
            num_gpus=args.replicas if tiny else None,
            include_dashboard=False,
            log_to_driver=True,
            runtime_env={"env_vars": {"PYTHONPATH": path, "RAY_USAGE_STATS_ENABLED": "0"}},
        )
        gpus = 1.0 if tiny or ray.cluster_resources().get("GPU", 0) >= args.replicas else 0.0
        if gpus == 0.0:
            raise SystemExit(
                f"--replicas {args.replicas} needs {args.replicas} GPUs; Ray sees "
                f"{ray.cluster_resources().get('GPU', 0):g}"
            )
        report["one"] = replicas_through_ray(cfg, source, args.cases, work, 1, gpus)
        print("1 replica:", json.dumps(report["one"], default=str), flush=True)  # kept if the call ends early
        report["many"] = replicas_through_ray(cfg, source, args.cases, work, args.replicas, gpus)
        report["throughput_ratio"] = report["many"]["videos_per_second"] / report["one"]["videos_per_second"]
        ray.shutdown()

    one = report["one"]
    print(
        f"\nVACE editing cost: {report['profile']['sizes']}, {report['profile']['size']}, {one['frames']} frames, "
        f"{args.steps} steps, {cfg['dtype']} (VAE {cfg['vae_dtype']}), guidance {cfg['guidance']}"
    )
    print(f"{'':34s} {'s/f':>8s} {'peak MB':>11s}  GPU")
    print(
        f"{'CoVEBench Table 5 (paper)':34s} {PAPER['seconds_per_frame']:8.3f} {PAPER['peak_mb']:11,.1f}  "
        f"{PAPER['gpu']} (official VACE code, 50 steps)"
    )
    print(
        f"{'this run, 1 replica':34s} {one['seconds_per_frame']:8.3f} {fmt(one['peak_mb'], ',.1f'):>11s}  {one['gpu']}"
        f" (warm-up case {one['warmup_seconds_per_frame']:.3f} s/f; model made in {one.get('setup_seconds', 0):.0f} s)"
    )
    if "many" in report:
        many = report["many"]
        label = f"this run, {many['replicas']} replicas (Ray)"
        print(f"{label:34s} {many['seconds_per_frame']:8.3f} {fmt(many['peak_mb'], ',.1f'):>11s}  {many['gpu']}")
        print(f"peak MB per replica (one GPU each): {[round(x, 1) for x in many['peak_mb_per_replica']]}")
        print(
            f"throughput: 1 replica {one['videos_per_second'] * 60:.2f} videos/min, {many['replicas']} replicas "
            f"{many['videos_per_second'] * 60:.2f} videos/min: ratio {report['throughput_ratio']:.2f} "
            f"(ideal {many['replicas']})"
        )
    print(
        "differs from the paper: random weights (same arithmetic and memory, meaningless pixels); diffusers' "
        "WanVACEPipeline and PyTorch SDPA attention instead of VACE's own code; the GPU above; s/f averages the "
        "cases after each actor's warm-up"
    )
    print(json.dumps(report, default=str))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
