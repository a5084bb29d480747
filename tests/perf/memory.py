"""Bounded memory at benchmark scale: driver peak RSS, object-store peak and time to first row, by case count.

    .venv/bin/python tests/perf/memory.py                     # 1k, 10k, 100k cases, each run to the end
    .venv/bin/python tests/perf/memory.py 1000 10000          # chosen sizes
    .venv/bin/python tests/perf/memory.py --rows 2000 100000  # stop each run once 2000 rows are on disk

Each size is a synthetic CoVEBench checklist whose N tasks all point at the same few tiny videos (the edited
videos are hard links, `{id}.mp4`, so N cases cost N directory entries, not N videos), run with SSIM only on a
local Ray runtime, in a fresh process per size (so the peaks are that run's). Printed per size: cases, seconds
to load the cases, to the first row on disk, to the end of the stream (or to the `--rows` stop), rows/s from
the first row on, the driver's peak RSS (`ru_maxrss`), its RSS growth over the baseline after `import ray`, its
peak private memory (`RssAnon`: the heap; RSS also counts the object-store pages the driver itself wrote,
`RssShmem`, i.e. the input blocks it put), that shared part's peak, and the object store's peak use (sampled
every 0.2 s from the raylet: total minus available `object_store_memory`).

`--rows K` measures a size whose full run would take too long on a small machine (100k cases of SSIM on 2 cores
is about an hour): the run stops once K rows are on disk, with the peaks up to then (the case table, the blocks
in the object store, the stream running), which is where memory that grows with the case count shows.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def make_checklist(root: Path, n: int) -> dict:
    """N tasks over the 8 synthetic ones' videos; edited videos hard-linked per id."""
    from vbench_ray.synth.cove import synth_cove

    base = synth_cove(root / "base", n=8, seed=0)
    tasks = json.loads(Path(base["checklist"]).read_text())
    edited = root / "edited"
    edited.mkdir()
    out = []
    for i in range(n):
        t = dict(tasks[i % len(tasks)])
        t["id"] = f"{i:07d}"
        os.link(Path(base["edited_dir"]) / f"{tasks[i % len(tasks)]['id']}.mp4", edited / f"{t['id']}.mp4")
        out.append(t)
    checklist = root / "checklist.json"
    checklist.write_text(json.dumps(out))
    return {"checklist": checklist, "source_dir": Path(base["source_dir"]), "edited_dir": edited}


def _status_mb() -> dict[str, float]:
    """This process's RSS and its private / shared-memory parts (Linux ``/proc/self/status``), in MB."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssShmem"):
                out[key] = int(line.split()[1]) / 1024
    return out


class _Stop(Exception):
    """Raised from the sink once ``--rows`` rows are written: ends the run where it is."""


def one(n: int, stop_rows: int | None = None) -> dict:
    """Run N cases in this process (to the end, or until ``stop_rows`` rows are on disk); the measurements."""
    import ray

    from vbench_ray import case_table, runner
    from vbench_ray.configure import load_config
    from vbench_ray.sinks import CaseSink

    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    root = Path(tempfile.mkdtemp(prefix=f"vbr-mem-{n}-"))
    t = time.perf_counter()
    data = make_checklist(root, n)
    make_s = time.perf_counter() - t
    cfg = load_config(
        REPO / "configs" / "cove.yaml",
        [
            f"data.checklist={data['checklist']}",
            f"data.source_dir={data['source_dir']}",
            f"data.edited_dir={data['edited_dir']}",
            f"output.dir={root / 'run'}",
            "metrics.enabled=[SSIM]",
            "wandb.mode=disabled",
            "report.enabled=false",
            "ray.num_cpus=4",
            "stats.bootstrap_samples=200",
        ],
    )
    peak = {"store": 0.0, "RssAnon": 0.0, "RssShmem": 0.0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            for k, v in _status_mb().items():
                peak[k] = max(peak.get(k, 0.0), v)
            if ray.is_initialized():
                try:
                    total = ray.cluster_resources().get("object_store_memory", 0.0)
                    free = ray.available_resources().get("object_store_memory", total)
                    peak["store"] = max(peak["store"], total - free)
                except Exception:
                    pass
            time.sleep(0.2)

    # when the cases were loaded and each write, measured here so that a stopped run reports them too
    marks: dict[str, float] = {}
    written = [0]
    chunks, write = case_table.case_chunks, CaseSink.write

    def timed_chunks(*args, **kwargs):
        out = chunks(*args, **kwargs)
        marks.setdefault("loaded", time.perf_counter() - t)
        return out

    def counting_write(self, batch):
        rows = write(self, batch)
        written[0] += rows
        marks.setdefault("first_row", time.perf_counter() - t)
        if stop_rows is not None and written[0] >= stop_rows:
            marks["stopped"] = time.perf_counter() - t
            raise _Stop
        return rows

    case_table.case_chunks, CaseSink.write = timed_chunks, counting_write
    threading.Thread(target=sample, daemon=True).start()
    t = time.perf_counter()
    summary = {}
    try:
        summary = runner.run(cfg).summary
    except _Stop:
        pass
    finally:
        case_table.case_chunks, CaseSink.write = chunks, write
    done.set()
    total_s = time.perf_counter() - t
    timing = summary.get("timing", {})
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    streamed = marks.get("stopped") or timing.get("stream_done") or total_s
    ray.shutdown()
    shutil.rmtree(root, ignore_errors=True)  # the checklist (320 MB at 100k), the links, the run directory
    return {
        "cases": n,
        "rows": written[0],
        "make_s": round(make_s, 1),
        "loaded_s": round(marks.get("loaded", 0), 2),
        "first_row_s": round(marks.get("first_row", float("nan")), 2),
        "stream_s": round(streamed, 1),
        "total_s": round(total_s, 1),
        "stopped": "stopped" in marks,
        "rows_per_s": round(written[0] / max(1e-9, streamed - marks.get("first_row", 0.0)), 1),
        "driver_peak_rss_mb": round(rss_kb / 1024),
        "rss_over_baseline_mb": round((rss_kb - baseline_kb) / 1024),
        "driver_private_peak_mb": round(peak["RssAnon"]),
        "driver_shm_peak_mb": round(peak["RssShmem"]),
        "object_store_peak_mb": round(peak["store"] / 2**20, 1),
    }


def main(sizes: list[int], stop_rows: int | None) -> None:
    print(
        f"{'cases':>7} {'rows':>7} {'load s':>7} {'1st row s':>9} {'stream s':>9} {'rows/s':>7} "
        f"{'driver RSS MB':>13} {'over base MB':>12} {'private MB':>10} {'shm MB':>7} {'store peak MB':>13}",
        flush=True,
    )
    for n in sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", str(n), str(stop_rows or 0)],
            capture_output=True,
            text=True,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode or not lines:
            print(f"{n:>7} failed: {proc.stderr[-1500:]}", flush=True)
            continue
        r = json.loads(lines[-1])
        stream = f"{r['stream_s']}{'*' if r['stopped'] else ''}"
        print(
            f"{r['cases']:>7} {r['rows']:>7} {r['loaded_s']:>7} {r['first_row_s']:>9} {stream:>9} "
            f"{r['rows_per_s']:>7} {r['driver_peak_rss_mb']:>13} {r['rss_over_baseline_mb']:>12} "
            f"{r['driver_private_peak_mb']:>10} {r['driver_shm_peak_mb']:>7} {r['object_store_peak_mb']:>13}",
            flush=True,
        )
    if stop_rows:
        print(f"* stopped once {stop_rows} rows were on disk (--rows)", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        import logging

        logging.basicConfig(level=logging.WARNING)
        print(json.dumps(one(int(sys.argv[2]), int(sys.argv[3]) or None)))
    else:
        args = sys.argv[1:]
        rows = None
        if "--rows" in args:
            i = args.index("--rows")
            rows = int(args[i + 1])
            del args[i : i + 2]
        main([int(a) for a in args] or [1000, 10000, 100000], rows)
