"""Issue 30's fault table, the rows not measured by the tests: CoVEBench checklist runs through the real CLI
(``python -m vbench_ray.cli run``, ``judge.backend=http``) against a stdlib judge server on 127.0.0.1.

    .venv/bin/python tests/perf/judge_faults.py [--limit 5]

Faults, each compared with one clean run of the same settings against a well-behaved server:

* ``429 Retry-After``: every prompt's first post is answered 429 with ``Retry-After: 1``;
* ``20% bad bodies``: every fifth post is answered 200 with a malformed JSON body, a body cut short, or an HTML
  page (in turn);
* ``driver SIGKILL``: answers take ``SLOW_S``; the driver is killed (SIGKILL) once some answers are in and more are
  in flight, then the same command is run again against a well-behaved server (the resume).

Columns: ``rc`` (of the last command), ``faults`` (429s or bad bodies served; the kill: posts in flight),
``lost`` (case rows of the clean run missing from the faulted one), ``sent twice`` (prompts the server answered
with a good body more than once: paid twice; within the retry budget a faulted post is not counted), ``posts``
(all posts received / prompts), ``equal`` (the summary's UAS, IFS, VRS and SEM equal the clean run's). The server
answers every checklist question of a prompt in its type's form, the answer chosen from the question id, so every
number is defined and depends only on the prompt. Everything is local; each run is bounded (``RUN_TIMEOUT_S``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from helpers.common import cove_overrides, user_env  # noqa: E402

COVE = REPO / "configs" / "cove.yaml"
METRICS = ("UAS", "IFS", "VRS", "SEM")
SLOW_S = 2.5  # longer than the kill's grace: the posts in flight are not answered before their run dies
RUN_TIMEOUT_S = 150
LISTED = "Here are the questions to answer, as a JSON array:\n"


def _answer(messages: list) -> bytes:
    """A valid checklist answer to ``messages``: every listed question answered in its type's form (the system
    prompt names the type), the answer chosen from the question id only."""
    from vbench_ray.benchmarks.cove_checklist import TYPE_FORM, system_prompt

    form = next(f for t, f in TYPE_FORM.items() if system_prompt(t) == messages[0]["content"])
    listed = next(p["text"] for p in messages[1]["content"] if p.get("text", "").startswith(LISTED))
    items = []
    for question in json.loads(listed[len(LISTED) :]):
        n = int(hashlib.sha1(str(question["id"]).encode()).hexdigest(), 16)
        value = {"AB": "AB"[n % 2], "TF": ("Yes", "No")[n % 2], "SCORE": 1 + n % 10}[form]
        items.append({"id": question["id"], "reasoning": "r", "final_answer": value})
    return json.dumps(
        {
            "choices": [{"message": {"content": json.dumps(items)}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    ).encode()


class Judge:
    """An OpenAI-compatible server counting posts and good answers per prompt. ``mode``: ok | 429 | bad | slow."""

    def __init__(self, mode: str = "ok"):
        self.mode, self.posts, self.good, self.n, self.lock = mode, {}, {}, 0, threading.Lock()
        self.injected = 0  # faults served (429s, bad bodies; the kill: posts in flight)
        judge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json", length=None, **headers):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                for k, v in headers.items():
                    self.send_header(k.replace("_", "-"), v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                messages = json.loads(body)["messages"]
                key = json.dumps(messages, sort_keys=True)
                with judge.lock:
                    judge.posts[key] = judge.posts.get(key, 0) + 1
                    judge.n += 1
                    mode, first, n = judge.mode, judge.posts[key] == 1, judge.n
                    fault = (mode == "429" and first) or (mode == "bad" and n % 5 == 0)
                    judge.injected += fault
                if mode == "429" and fault:
                    return self._send(429, b'{"error": "rate limited"}', Retry_After="1")
                if mode == "bad" and fault:
                    kind = (n // 5) % 3
                    self.close_connection = True
                    if kind == 0:  # malformed JSON
                        return self._send(200, b'{"choices": [{"message": ')
                    if kind == 1:  # cut short: fewer bytes than Content-Length
                        full = _answer(messages)
                        return self._send(200, full[:20], length=len(full))
                    return self._send(200, b"<html><body><h1>Bad Gateway</h1></body></html>", "text/html")  # HTML
                if mode == "slow":
                    time.sleep(SLOW_S)
                self._send(200, _answer(messages))
                with judge.lock:
                    judge.good[key] = judge.good.get(key, 0) + 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _cmd(data: dict, out: Path, judge: Judge, limit: int) -> list[str]:
    args = cove_overrides(
        data,
        out,
        f"metrics.enabled=[{','.join(METRICS)}]",
        f"run.limit={limit}",
        "judge.backend=http",
        f"judge.http.base_url={judge.base_url}",
        "judge.model=j",
        "judge.max_retries=1",
        "judge.http.max_retries=2",
        "judge.http.retry_wait_s=0.05",
        "judge.http.timeout_s=20",
    )
    return [str(REPO / ".venv" / "bin" / "python"), "-m", "vbench_ray.cli", "run", str(COVE), *args]


def _popen(cmd: list[str], log: Path) -> subprocess.Popen:
    # a session of its own: the driver's Ray (GCS, raylet, workers) can be ended by its group id after a SIGKILL
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        env=user_env(PYTHONPATH=str(REPO)),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _end_group(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of the process group this script started for ``proc`` (its Ray, after the driver)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run(cmd: list[str], log: Path) -> int:
    proc = _popen(cmd, log)
    try:
        return proc.wait(RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124
    finally:
        _end_group(proc)
        proc.wait()


def _rows(out: Path) -> set:
    import pyarrow.parquet as pq

    rows = []
    for path in sorted((out / "cases").glob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    keys = [(r["benchmark"], r["case_id"], r["variant"]) for r in rows]
    return set(keys) if len(set(keys)) == len(keys) else set(keys) | {("<duplicate rows>",)}


def _metrics(out: Path) -> dict:
    path = out / "summary.json"
    if not path.exists():
        return {}
    summary = json.loads(path.read_text())["metrics"]
    return {m: (summary.get(m) or {}).get("value") for m in METRICS}


def _killed_then_resumed(data: dict, root: Path, limit: int) -> tuple[int, Judge, Path]:
    judge = Judge("slow")
    out = root / "kill"
    cmd = _cmd(data, out, judge, limit)
    proc = _popen(cmd, root / "kill.log")
    deadline = time.time() + RUN_TIMEOUT_S
    while time.time() < deadline and proc.poll() is None:
        with judge.lock:
            answered, posted = sum(judge.good.values()), judge.n
        if answered >= 2 and posted > answered:  # some answers in, more posted and not yet answered
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # the driver only, with requests in flight
    proc.wait()
    with judge.lock:
        at_kill = (sum(judge.good.values()), judge.n)
    judge.injected = at_kill[1] - at_kill[0]
    time.sleep(0.5)
    _end_group(proc)  # its orphaned Ray processes
    judge.mode = "ok"
    rc = _run(cmd, root / "resume.log")
    print(f"  driver killed with {at_kill[0]} of {at_kill[1]} posts answered; resumed: rc {rc}", flush=True)
    return rc, judge, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=5, help="cases per run (run.limit)")
    opts = parser.parse_args()
    from vbench_ray.synth.cove import synth_cove

    t0 = time.time()
    root = Path(tempfile.mkdtemp(prefix="vbr-judge-faults-"))
    data = synth_cove(root / "data", n=8, seed=0)
    results = {}
    for name, mode in (("clean", "ok"), ("429 Retry-After", "429"), ("20% bad bodies", "bad")):
        judge = Judge(mode)
        out = root / mode
        try:
            rc = _run(_cmd(data, out, judge, opts.limit), root / f"{mode}.log")
        finally:
            judge.close()
        results[name] = (rc, judge, out)
        print(f"  {name}: rc {rc} ({time.time() - t0:.0f} s)", flush=True)
    rc, judge, out = _killed_then_resumed(data, root, opts.limit)
    judge.close()
    results["driver SIGKILL + resume"] = (rc, judge, out)

    clean_rc, _, clean_out = results["clean"]
    clean_rows, clean_metrics = _rows(clean_out), _metrics(clean_out)
    if clean_rc != 0 or not clean_rows or any(v is None for v in clean_metrics.values()):
        print(f"the clean run failed (rc {clean_rc}, metrics {clean_metrics}); logs under {root}")
        return 1
    print(f"\nclean: {len(clean_rows)} case rows, {clean_metrics}")
    cols = f"{'rc':>3} {'faults':>6} {'lost':>5} {'sent twice':>11} {'posts/prompts':>14}"
    head = f"{'fault':<26} {'backend':<8} {cols}  equal to clean"
    print(head + "\n" + "-" * len(head))
    ok = True
    for name, (rc, judge, out) in results.items():
        if name == "clean":
            continue
        lost = len(clean_rows - _rows(out))
        twice = sum(1 for v in judge.good.values() if v > 1)
        equal = _metrics(out) == clean_metrics
        ok &= rc == 0 and lost == 0 and equal
        posts = f"{sum(judge.posts.values())}/{len(judge.posts)}"
        cols = f"{rc:>3} {judge.injected:>6} {lost:>5} {twice:>11} {posts:>14}"
        print(f"{name:<26} {'http':<8} {cols}  {'yes' if equal else 'NO'}")
    print(f"\n{time.time() - t0:.0f} s; runs under {root}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
