"""Issue 30, items 2, 3 and 5, and issue 23, item 10: what an HTTP judge that fails costs, counted on a real local
server (stdlib, 127.0.0.1).

* a slow server (answers after ``SLOW_S``, ``judge.http.timeout_s`` shorter): each request is posted at most
  ``(judge.max_retries + 1) x (judge.http.max_retries + 1)`` times in the whole run, not again by the scoring pass;
* an endpoint that is not there: the run fails up front (rc 3, the endpoint's error), nothing is posted;
* an endpoint that goes away mid-run: the run stops early with rc 3, a few attempts spent, and a resume once it is
  back asks only what is missing; a request none of whose attempts connected spends none of its budget, and a
  server that closed one attempt and refused the retry counts as down (the race that made the run above flaky);
* a truncated body (``IncompleteRead``) is an HTTP-level retry, not a re-ask;
* a run with nothing left to compute starts no judge engine (hf replicas).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers.common import REPO, cove_overrides
from helpers.tiny.procs import free_port

COVE = REPO / "configs" / "cove.yaml"
SLOW_S = 1.5
ANSWER = json.dumps(
    {
        "choices": [{"message": {"content": "[]"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
).encode()


class Judge:
    """An OpenAI-compatible server counting posts per prompt. ``mode``: ok | slow | truncate-first (the first post
    of each prompt gets a body cut short) | die-on-first (the first post closes the server for good)."""

    def __init__(self, mode: str = "ok", port: int = 0):
        self.mode, self.posts, self.lock = mode, {}, threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                key = json.dumps(json.loads(body)["messages"], sort_keys=True)
                with judge.lock:
                    judge.posts[key] = judge.posts.get(key, 0) + 1
                    n = judge.posts[key]
                if judge.mode == "die-on-first":
                    threading.Thread(target=judge.close, daemon=True).start()
                    self.close_connection = True
                    return  # no answer: the client sees the connection close
                if judge.mode == "slow":
                    time.sleep(SLOW_S)
                data = ANSWER[:20] if judge.mode == "truncate-first" and n == 1 else ANSWER
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(ANSWER)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                if len(data) < len(ANSWER):
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.closed = False

    @property
    def total(self) -> int:
        return sum(self.posts.values())

    def close(self):
        if not self.closed:
            self.closed = True
            self.server.shutdown()
            self.server.server_close()


def _args(data, out, base_url, *extra):
    return [
        "run",
        str(COVE),
        *cove_overrides(
            data,
            out,
            "metrics.enabled=[SSIM,IFS]",
            "run.limit=2",
            "judge.backend=http",
            f"judge.http.base_url={base_url}",
            "judge.model=j",
            "judge.http.retry_wait_s=0.05",
            *extra,
        ),
    ]


def _log(out) -> list[dict]:
    path = out / "judge_log.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.ray
def test_slow_server_each_request_posted_within_one_budget(ray_local, cove_data, tmp_path, capsys):
    from vbench_ray.cli import main

    judge = Judge("slow")
    out = tmp_path / "run"
    try:
        code = main(
            _args(
                cove_data,
                out,
                judge.base_url,
                "judge.http.timeout_s=0.4",
                "judge.http.max_retries=1",
                "judge.max_retries=1",
            )
        )
    finally:
        judge.close()
    err = capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    n = summary["judge"]["n_requests"]
    print(f"slow server: {n} requests, {judge.total} posts, per prompt {sorted(set(judge.posts.values()))}")
    assert code == 3 and "metric IFS is unavailable" in err  # every answer timed out
    # 2 sends (judge.max_retries=1) x 2 posts (http.max_retries=1) per request, in the whole run (was 8: the
    # scoring pass after the stream sent each again with a budget of its own)
    assert n > 0 and judge.total == 4 * n and set(judge.posts.values()) == {4}
    assert len(_log(out)) == 2 * n  # two sends logged per request


@pytest.mark.ray
def test_an_endpoint_that_is_not_there_fails_up_front(ray_local, cove_data, tmp_path, capsys):
    from vbench_ray.cli import main

    out = tmp_path / "run"
    t0 = time.perf_counter()
    code = main(_args(cove_data, out, f"http://127.0.0.1:{free_port()}/v1"))
    wall = time.perf_counter() - t0
    err = capsys.readouterr().err
    print(f"unreachable judge: rc {code} after {wall:.1f} s")
    assert code == 3 and "cannot be reached: ConnectionRefusedError" in err and "run the same command again" in err
    assert not list((out / "cases").glob("*.parquet")) and not _log(out)  # nothing computed, nothing sent
    assert wall < 30


@pytest.mark.ray
def test_an_endpoint_gone_mid_run_stops_early_and_the_resume_asks_only_the_rest(ray_local, cove_data, tmp_path, capsys):
    from vbench_ray.cli import main

    judge = Judge("die-on-first")
    out = tmp_path / "run"
    args = _args(cove_data, out, judge.base_url, "judge.http.max_retries=1", "judge.max_retries=1")
    t0 = time.perf_counter()
    code = main(args)
    wall = time.perf_counter() - t0
    err = capsys.readouterr().err
    spent = _log(out)
    print(f"endpoint gone: rc {code} after {wall:.1f} s, {len(spent)} attempts logged")
    assert code == 3 and "cannot be reached: ConnectionRefusedError" in err
    assert len(list((out / "cases").glob("*.parquet"))) >= 1  # the rows computed are kept
    assert 1 <= judge.total <= 2 * 4  # the first posts in flight (2 judge tasks at once, 4 posts each) reached it
    # each judge process stops sending after DOWN_AFTER requests in a row could not connect
    from vbench_ray.judges.backends.http import DOWN_AFTER

    assert len(spent) <= 2 * (DOWN_AFTER + 4) * 2  # 2 judge tasks at once, 4 in flight each, 2 sends each
    back = Judge("ok", port=judge.port)
    try:
        code = main(args)
    finally:
        back.close()
    judged = json.loads((out / "summary.json").read_text())["judge"]
    n = judged["n_requests"]
    # every request answered now (this server's "[]" is an invalid checklist answer: re-asked once, then invalid);
    # each was sent only what was left of its budget of two sends: 2 n in all, less the attempts already spent
    assert judged["n_error"] == 0 and judged["n_ok"] + judged["n_invalid"] == n
    assert back.total == 2 * n - len(spent)


def test_a_truncated_body_is_an_http_retry_not_a_reask():
    from omegaconf import OmegaConf

    from vbench_ray.judges.base import JudgeConfig, JudgeRequest
    from vbench_ray.judges.engines import make_engine

    judge = Judge("truncate-first")
    try:
        cfg = OmegaConf.merge(
            OmegaConf.structured(JudgeConfig()),
            {
                "backend": "http",
                "model": "j",
                "http": {"base_url": judge.base_url, "max_retries": 1, "retry_wait_s": 0.05, "timeout_s": 5},
            },
        )
        request = JudgeRequest("r", [{"role": "user", "content": "q"}])
        ((response,),) = list(make_engine(cfg).start().generate([request]))
    finally:
        judge.close()
    assert response.error is None and response.text == "[]" and judge.total == 2
    # with no retry left, the cut body is a transport error that says so
    judge = Judge("truncate-first")
    try:
        cfg = OmegaConf.merge(cfg, {"http": {"base_url": judge.base_url, "max_retries": 0}})
        ((response,),) = list(make_engine(cfg).start().generate([request]))
    finally:
        judge.close()
    assert "IncompleteRead: the response was cut short (after 1 attempt(s))" in response.error
    assert "preparing the request" not in response.error


def _serve_one_post_then_vanish() -> tuple[str, list]:
    """A server that takes one connection, reads the post, stops listening, then closes that connection without an
    answer: the client's first attempt reached it, its retry is refused (in that order, whatever the timing)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list = []

    def serve():
        conn, _ = listener.accept()
        accepted.append(conn.recv(65536))
        listener.close()
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted


def test_a_request_that_reached_no_server_spends_nothing_and_a_server_gone_counts_as_down():
    """The race the mid-run test above met under load: the request whose first attempt the dying server closed
    (reached, then refused on its retry) must not clear the down count the other requests build; and a request none
    of whose attempts connected reached no server, so it comes back unsent (its budget whole for a resume)."""
    from omegaconf import OmegaConf

    from vbench_ray.judges.backends.http import DOWN_AFTER, HTTPBackend, endpoint_down
    from vbench_ray.judges.base import JudgeConfig, JudgeRequest

    base_url, accepted = _serve_one_post_then_vanish()
    cfg = OmegaConf.merge(
        OmegaConf.structured(JudgeConfig()),
        {"backend": "http", "model": "j", "http": {"base_url": base_url, "max_retries": 1, "retry_wait_s": 0.05}},
    )
    backend = HTTPBackend(cfg)

    def ask(i: int):
        ((response,),) = list(backend.generate([JudgeRequest(f"r{i}", [{"role": "user", "content": f"q{i}"}])]))
        return response

    first = ask(0)
    assert len(accepted) == 1 and first.sent  # the server had it (and closed the connection): an attempt spent
    assert first.error.endswith("Connection refused> (after 2 attempt(s))")
    assert not endpoint_down(backend.url)  # one request in a row ended refused
    refused = [ask(i) for i in range(1, DOWN_AFTER)]
    for r in refused:
        assert not r.sent and r.error.endswith("Connection refused> (after 2 attempt(s))")
    # DOWN_AFTER requests in a row ended refused, the first one included: the endpoint is down for this process
    assert "Connection refused" in endpoint_down(backend.url)
    last = ask(DOWN_AFTER)
    assert not last.sent and "not sent: the endpoint is down" in last.error and len(accepted) == 1


def test_probe_sends_nothing_and_names_the_endpoint():
    from omegaconf import OmegaConf

    from vbench_ray.judges.base import JudgeConfig, JudgeUnavailable
    from vbench_ray.judges.engines import make_engine

    port = free_port()
    cfg = OmegaConf.merge(
        OmegaConf.structured(JudgeConfig()),
        {"backend": "http", "model": "j", "http": {"base_url": f"http://127.0.0.1:{port}/v1"}},
    )
    with pytest.raises(JudgeUnavailable, match=rf"127\.0\.0\.1:{port}/v1/chat/completions cannot be reached"):
        make_engine(cfg).start()
    judge = Judge("ok")
    try:
        cfg = OmegaConf.merge(cfg, {"http": {"base_url": judge.base_url}})
        make_engine(cfg).start()
    finally:
        judge.close()
    assert judge.total == 0  # a connection only


GOOD = '[{"id": "Q1", "final_answer": "Yes"}]'


class FlakyReplica:
    """Stands in for ``engines.HFReplica`` (the model is not what is tested): its first call ever kills its own
    process mid-call (as the OOM killer or a lost node would), later calls answer."""

    def __init__(self, marker: str):
        self.marker = marker

    def ready(self) -> bool:
        return True

    def answer(self, table):
        import os
        import signal
        from pathlib import Path

        import pyarrow as pa

        if not Path(self.marker).exists():
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return pa.Table.from_pylist(
            [
                {
                    "request_id": rid,
                    "text": GOOD,
                    "error": None,
                    "latency_s": 0.1,
                    "prompt_tokens": 3,
                    "completion_tokens": 1,
                    "model": "flaky",
                }
                for rid in table.column("request_id").to_pylist()
            ]
        )


def _hf_engine(replicas):
    """The real ``HFEngine`` (its ``generate``), on the given replica actors."""
    from omegaconf import OmegaConf

    from vbench_ray.judges.base import JudgeConfig
    from vbench_ray.judges.engines import Engine, HFEngine

    engine = HFEngine.__new__(HFEngine)
    Engine.__init__(engine, OmegaConf.structured(JudgeConfig(backend="hf", model="flaky")))
    engine.worker_cfg, engine.replicas, engine.run_dir = {"hf": {"batch_size": 4}}, replicas, None
    return engine


@pytest.mark.ray
def test_a_replica_lost_mid_call_is_waited_for_and_its_requests_answered_within_a_budget_of_one(ray_local, tmp_path):
    """Issue 30 item 2 with a lost replica: ``max_retries=0`` (one send). The replica dies holding both requests;
    Ray restarts it (``max_restarts=-1``; no task retry here, as for a call whose node was removed); the engine waits
    until it answers again, and the sends lost with it spend nothing: each request is sent again and answered. A
    replica gone for good (killed) is a failed attempt that counts, said so."""
    import ray

    from vbench_ray.judges.base import JudgeRequest
    from vbench_ray.judges.log import JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    replica = (
        ray.remote(FlakyReplica)
        .options(num_cpus=0, max_restarts=-1, max_task_retries=0)
        .remote(str(tmp_path / "killed"))
    )
    requests = [
        JudgeRequest(
            rid, [{"role": "user", "content": rid}], parser="checklist_items", expected={"ids": ["Q1"], "form": "TF"}
        )
        for rid in ("a", "b")
    ]
    results = JudgeStage(_hf_engine([replica]), JudgeLog(tmp_path), max_retries=0).run(requests)
    assert (tmp_path / "killed").exists()
    assert {k: (v.status, v.attempts) for k, v in results.items()} == {"a": ("ok", 2), "b": ("ok", 2)}
    records = _log(tmp_path)
    assert [(r["request_id"], r["attempt"], r["engine_fault"], r["parse_status"]) for r in records] == [
        ("a", 0, True, "error"),
        ("b", 0, True, "error"),
        ("a", 1, False, "ok"),
        ("b", 1, False, "ok"),
    ]
    assert all("hf judge replica failed" in r["error"] for r in records[:2])

    gone = ray.remote(FlakyReplica).options(num_cpus=0, max_restarts=-1).remote(str(tmp_path / "killed"))
    ray.get(gone.ready.remote())
    ray.kill(gone)  # no restart: it will not come back
    results = JudgeStage(_hf_engine([gone]), JudgeLog(tmp_path / "gone"), max_retries=0).run(requests[:1])
    assert results["a"].status == "error" and results["a"].attempts == 1 and "not back within" in results["a"].error
    assert [r["engine_fault"] for r in _log(tmp_path / "gone")] == [False]
