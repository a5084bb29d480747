"""The ``http`` judge backend: config validation (fast); a misbehaving OpenAI-compatible server written here with the
stdlib (500 then success, 429/500 for ever, too slow, gibberish, not JSON, 400, a key-echoing 401); an endpoint with
nothing listening; and (slow) a real ``vllm.entrypoints.openai.api_server`` serving the tiny random Qwen2-VL on
127.0.0.1 (the session's shared server, ``conftest.tiny_vllm_server``), with ``file://`` and base64 media.

Every request loop is bounded: ``max_retries`` <= 2, ``retry_wait_s`` 0.2 s, ``timeout_s`` 1.5 s against the fake
server. The behaviour of a fake request is chosen by a marker in
its user text (``BEHAVIOR=<name>#<uid>``), so one batch mixes failures and shows they stay per request.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers.common import REPO, cove_overrides, moving_square_video
from helpers.tiny.procs import free_port
from vbench_ray.config import ConfigError
from vbench_ray.judges.base import JudgeConfig, JudgeRequest

KEY_ENV = "VBR_TEST_JUDGE_KEY"
SLOW_S = 4.0  # the fake server's "slow" answers take this long; the tests' timeout_s is 1.5


def judge_cfg(**overrides):
    """A read-only judge config (plain, so the optional ``http.retry_wait_s`` key can be given)."""
    cfg = OmegaConf.merge(OmegaConf.create(dataclasses.asdict(JudgeConfig())), OmegaConf.create(overrides))
    OmegaConf.set_readonly(cfg, True)
    return cfg


def http_cfg(base_url, **http):
    settings = {"base_url": base_url, "max_retries": 2, "retry_wait_s": 0.2, "timeout_s": 1.5, "concurrency": 1, **http}
    return judge_cfg(backend="http", model="fake-judge", max_tokens=32, http=settings)


def request(behavior: str, uid: str, *parts, rid: str | None = None) -> JudgeRequest:
    content = list(parts) + [{"type": "text", "text": f"Answer in JSON. BEHAVIOR={behavior}#{uid}"}]
    return JudgeRequest(
        rid or f"fake/{uid}/base/test/{behavior}",
        [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": content}],
        parser="checklist_items",
        expected={"ids": ["Q1"], "form": "TF"},
    )


def video_part(path) -> dict:
    return {"type": "video_url", "video_url": {"url": Path(path).resolve().as_uri()}}


def collect(backend, requests) -> dict:
    out = {}
    for batch in backend.generate(requests):
        for response in batch:
            assert response.request_id not in out, f"two responses for {response.request_id}"
            out[response.request_id] = response
    assert sorted(out) == sorted(r.request_id for r in requests)
    return out


# --------------------------------------------------------------------------------------------------------------
# a misbehaving OpenAI-compatible server (stdlib, a thread on 127.0.0.1)
# --------------------------------------------------------------------------------------------------------------


class FakeOpenAI:
    def __init__(self):
        self.calls: dict[str, int] = defaultdict(int)
        self.auth: list[str] = []
        self.bodies: dict[str, dict] = {}
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                text = json.dumps(body.get("messages", []))
                m = re.search(r"BEHAVIOR=(\w+)#(\w+)", text)
                behavior, uid = m.groups() if m else ("ok", "none")
                with fake.lock:
                    fake.calls[uid] += 1
                    n = fake.calls[uid]
                    fake.auth.append(self.headers.get("Authorization", ""))
                    fake.bodies[uid] = body
                try:
                    fake.answer(self, behavior, uid, n, body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @staticmethod
    def send(handler, status: int, payload, content_type="application/json", headers=None):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def completion(content: str) -> dict:
        return {
            "id": "cmpl-1",
            "object": "chat.completion",
            "model": "fake-judge",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }

    def answer(self, h, behavior: str, uid: str, n: int, body: dict):
        if behavior == "ok" or (behavior == "flaky" and n > 1):
            return self.send(h, 200, self.completion(f"answer to {uid}"))
        if behavior == "flaky":
            return self.send(h, 500, {"error": {"message": "transient failure", "type": "server_error"}})
        if behavior == "always429":
            return self.send(h, 429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "0.1"})
        if behavior == "always500":
            return self.send(h, 500, b"boom: internal error", content_type="text/plain")
        if behavior == "slow":
            time.sleep(SLOW_S)
            return self.send(h, 200, self.completion("too late"))
        if behavior == "gibberish":
            return self.send(h, 200, self.completion("qzx ]] !! {{ nonsense"))
        if behavior == "notjson":
            return self.send(h, 200, b"<html>oops</html>", content_type="text/html")
        if behavior == "badrequest":
            return self.send(h, 400, {"error": {"message": "bad request: unknown field"}})
        if behavior == "echoauth":  # a careless server that quotes the credentials it rejected
            return self.send(h, 401, {"error": {"message": f"invalid credentials {h.headers.get('Authorization')}"}})
        if behavior == "video":  # the base64 video, decoded: its digest proves it arrived intact
            urls = [
                p["video_url"]["url"]
                for m in body["messages"]
                if isinstance(m["content"], list)
                for p in m["content"]
                if p.get("type") == "video_url"
            ]
            prefix = "data:video/mp4;base64,"
            digests = [
                hashlib.sha256(base64.b64decode(u[len(prefix) :])).hexdigest()
                if u.startswith(prefix)
                else "not-a-data-url:" + u[:40]
                for u in urls
            ]
            return self.send(h, 200, self.completion(" ".join(digests)))
        return self.send(h, 404, {"error": {"message": f"unknown behaviour {behavior}"}})

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fake():
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture(scope="module")
def api_key():
    key = "sk-vbr-" + secrets.token_hex(16)
    old = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = key
    yield key
    if old is None:
        os.environ.pop(KEY_ENV, None)
    else:
        os.environ[KEY_ENV] = old


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict:
    from vbench_ray.video.encode import write_video

    root = tmp_path_factory.mktemp("http_media")
    square = write_video(root / "square.mp4", moving_square_video(t=32, h=112, w=112, step=3, seed=1), fps=8)
    return {"square": square, "missing": root / "missing.mp4", "dir": root}


# --------------------------------------------------------------------------------------------------------------
# fast: config validation
# --------------------------------------------------------------------------------------------------------------


def test_base_url_is_required():
    from vbench_ray.judges.backends.http import HTTPBackend

    with pytest.raises(ConfigError, match=r"judge\.http\.base_url is not set"):
        HTTPBackend(judge_cfg(backend="http"))
    with pytest.raises(ConfigError, match=r"judge\.http\.base_url must start with http"):
        HTTPBackend(judge_cfg(backend="http", http={"base_url": "127.0.0.1:8000/v1"}))
    with pytest.raises(ConfigError, match=r"judge\.http\.media must be one of"):
        HTTPBackend(judge_cfg(backend="http", http={"base_url": "http://x/v1", "media": "url"}))
    with pytest.raises(ConfigError, match=r"judge\.http\.timeout_s must be > 0"):
        HTTPBackend(judge_cfg(backend="http", http={"base_url": "http://x/v1", "timeout_s": 0}))


def test_api_key_env_must_name_a_set_variable(monkeypatch):
    from vbench_ray.judges.backends.http import HTTPBackend

    monkeypatch.delenv("VBR_NO_SUCH_KEY", raising=False)
    with pytest.raises(
        ConfigError,
        match=r"judge\.http\.api_key_env names the environment variable VBR_NO_SUCH_KEY, "
        r"which is not set",
    ):
        HTTPBackend(judge_cfg(backend="http", http={"base_url": "http://x/v1", "api_key_env": "VBR_NO_SUCH_KEY"}))


def test_settings_and_the_key_stays_in_the_headers(api_key):
    from vbench_ray.judges.backends.http import HTTPBackend

    cfg = judge_cfg(
        backend="http",
        model="m",
        http={
            "base_url": "https://api.example.com/v1/",
            "api_key_env": KEY_ENV,
            "qps": 2.5,
            "max_retries": 3,
            "timeout_s": 30,
            "concurrency": 4,
        },
    )
    backend = HTTPBackend(cfg)
    assert backend.url == "https://api.example.com/v1/chat/completions"
    assert backend.headers() == {"Authorization": f"Bearer {api_key}"}
    assert (backend.qps, backend.max_retries, backend.concurrency, backend.timeout_s) == (2.5, 3, 4, 30.0)
    assert backend.retry_wait_s == 1.0
    assert backend.payload_base() == {"model": "m", "temperature": 0.0, "top_p": 1.0, "max_tokens": 4096, "seed": 0}
    topk = HTTPBackend(judge_cfg(backend="http", model="m", top_k=50, http={"base_url": "http://x/v1"}))
    assert topk.payload_base()["top_k"] == 50  # judge.top_k set: in the body
    for text in (repr(backend), str(vars(cfg)), OmegaConf.to_yaml(cfg)):
        assert api_key not in text


def test_qps_spaces_the_posts_on_the_run_path(fake, api_key):
    """judge.http.qps through the engine a run uses: 4 posts at qps 5 with 4 in flight start 0.2 s apart (the first
    at once), so the last answer comes >= 0.6 s after the first; without qps they all go at once."""
    from vbench_ray.judges.engines import make_engine

    walls = {}
    for qps in (5.0, None):
        cfg = judge_cfg(
            backend="http",
            model="fake-judge",
            max_tokens=32,
            http={"base_url": fake.base_url, "max_retries": 0, "concurrency": 4, "qps": qps, "api_key_env": KEY_ENV},
        )  # the module's server checks every request's key
        engine = make_engine(cfg).start()
        t0 = time.perf_counter()
        out = collect(engine, [request("ok", f"qps{qps}{i}".replace(".", "")) for i in range(4)])
        walls[qps] = time.perf_counter() - t0
        assert all(r.error is None for r in out.values())
    assert walls[5.0] >= 0.6 and walls[None] < 0.5, walls


def test_media_helpers(tmp_path):
    from vbench_ray.judges.backends.media import (
        common_media_root,
        file_url_path,
        inline_local_media,
        local_media_paths,
        media_counts,
        media_problem,
    )

    (tmp_path / "a b").mkdir()
    video = tmp_path / "a b" / "clip.mp4"
    video.write_bytes(b"\x00\x01video")
    image = tmp_path / "img.png"
    image.write_bytes(b"\x89PNG")
    messages = [
        {"role": "system", "content": "judge"},
        {
            "role": "user",
            "content": [
                video_part(video),
                {"type": "image_url", "image_url": {"url": image.as_uri()}},
                {"type": "video_url", "video_url": {"url": "https://host/v.mp4"}},
                {"type": "text", "text": "ok?"},
            ],
        },
    ]
    assert "%20" in video.as_uri() and file_url_path(video.as_uri()) == video
    assert local_media_paths(messages) == [video, image]
    assert media_counts(messages) == {"video": 2, "image": 1}
    assert common_media_root([video, image]) == str(tmp_path) and common_media_root([]) is None
    assert media_problem(messages) is None
    inlined = inline_local_media(messages)
    parts = inlined[1]["content"]
    assert parts[0]["video_url"]["url"] == "data:video/mp4;base64," + base64.b64encode(b"\x00\x01video").decode()
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()
    assert parts[2]["video_url"]["url"] == "https://host/v.mp4" and messages[1]["content"][0] == video_part(video)
    video.unlink()
    assert media_problem(messages) == f"video file not found: {video}"


def test_top_k_reaches_the_server_only_when_set(fake, api_key):
    """judge.top_k in the body the server receives (vLLM's OpenAI server reads ``top_k``), through the engine the
    stream's judge tasks call; unset, or with send_sampling=false, the body has none (the server's default)."""
    from vbench_ray.judges.engines import make_engine

    for top_k, send, expected in ((50, True, 50), (None, True, None), (50, False, None)):
        uid = f"topk{top_k}{send}"
        cfg = judge_cfg(
            backend="http",
            model="fake-judge",
            max_tokens=32,
            top_k=top_k,
            http={
                "base_url": fake.base_url,
                "max_retries": 0,
                "send_sampling": send,
                "concurrency": 1,
                "api_key_env": KEY_ENV,
            },
        )  # the module's server checks every request's key
        ((response,),) = list(make_engine(cfg).start().generate([request("ok", uid)]))
        assert response.text == f"answer to {uid}"
        body = fake.bodies[uid]
        assert body.get("top_k") == expected and ("top_k" in body) == (expected is not None)
        assert ("temperature" in body) == send


def test_top_k_must_be_a_positive_integer():
    from vbench_ray.judges.engines import make_engine

    for bad in (0, -1):
        with pytest.raises(ConfigError, match=r"judge\.top_k must be a positive integer or null"):
            make_engine(judge_cfg(backend="http", model="m", top_k=bad, http={"base_url": "http://x/v1"})).start()


# --------------------------------------------------------------------------------------------------------------
# the misbehaving server, through the backend a benchmark builds by name (build_backend, HTTPBackend)
# --------------------------------------------------------------------------------------------------------------


def test_failures_stay_per_request_in_one_batch(fake, api_key, media):
    from vbench_ray.judges.backends.http import HTTPBackend

    behaviors = ["ok", "flaky", "always429", "always500", "slow", "gibberish", "notjson", "badrequest"]
    requests = [request(b, f"mix{i}") for i, b in enumerate(behaviors)]
    requests.append(request("video", "mixvideo", video_part(media["square"])))
    requests.append(request("ok", "mixmissing", video_part(media["missing"])))
    backend = HTTPBackend(http_cfg(fake.base_url, media="base64", api_key_env=KEY_ENV))
    t0 = time.perf_counter()
    out = collect(backend, requests)
    wall = time.perf_counter() - t0
    print(f"http judge, {len(requests)} mixed requests against the fake server: {wall:.1f} s")
    r = {req.request_id.split("/")[1]: out[req.request_id] for req in requests}

    assert r["mix0"].text == "answer to mix0" and r["mix0"].error is None
    assert (r["mix0"].prompt_tokens, r["mix0"].completion_tokens) == (11, 7) and r["mix0"].latency_s > 0
    assert r["mix0"].model == "fake-judge"
    assert r["mix1"].text == "answer to mix1" and fake.calls["mix1"] == 2  # 500, retried, then 200
    assert "HTTP 429" in r["mix2"].error and "after 3 attempt(s)" in r["mix2"].error and fake.calls["mix2"] == 3
    assert "HTTP 500: boom" in r["mix3"].error and fake.calls["mix3"] == 3
    assert "timeout" in r["mix4"].error and r["mix4"].text is None and fake.calls["mix4"] == 3
    assert r["mix5"].text == "qzx ]] !! {{ nonsense" and r["mix5"].error is None  # the parser judges it later
    assert "not JSON" in r["mix6"].error
    assert "HTTP 400" in r["mix7"].error and fake.calls["mix7"] == 1  # a client error is not retried
    digest = hashlib.sha256(media["square"].read_bytes()).hexdigest()
    assert r["mixvideo"].text == digest  # media=base64: the file arrived intact as a data URL
    assert "video file not found" in r["mixmissing"].error and fake.calls["mixmissing"] == 0
    assert set(fake.auth) == {f"Bearer {api_key}"}
    body = fake.bodies["mix0"]
    assert {k: body[k] for k in ("model", "temperature", "top_p", "max_tokens", "seed")} == {
        "model": "fake-judge",
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 32,
        "seed": 0,
    }
    # slow: 3 attempts x 1.5 s + 0.6 s of backoff, concurrently with the rest
    assert wall < 60


def test_endpoint_down_every_request_errors():
    from vbench_ray.judges.backends.http import HTTPBackend

    backend = HTTPBackend(http_cfg(f"http://127.0.0.1:{free_port()}/v1", max_retries=1))
    requests = [request("ok", f"down{i}") for i in range(3)]
    t0 = time.perf_counter()
    out = collect(backend, requests)
    for response in out.values():
        assert response.text is None and "Connection refused" in response.error, response
        assert "after 2 attempt(s)" in response.error
    assert time.perf_counter() - t0 < 60


def test_judge_stage_logs_every_attempt_and_never_the_key(fake, api_key, tmp_path, caplog):
    from vbench_ray.judges.backends import build_backend
    from vbench_ray.judges.log import LOG_NAME, JudgeLog
    from vbench_ray.judges.stage import JudgeStage

    caplog.set_level(logging.DEBUG)
    cfg = http_cfg(fake.base_url, api_key_env=KEY_ENV, max_retries=0)
    requests = [request("gibberish", "stage0"), request("echoauth", "stage1")]
    results = JudgeStage(build_backend(cfg), JudgeLog(tmp_path), max_retries=1).run(requests)
    assert results[requests[0].request_id].status == "invalid" and results[requests[0].request_id].attempts == 2
    assert results[requests[1].request_id].status == "error" and results[requests[1].request_id].attempts == 2
    log_text = (tmp_path / LOG_NAME).read_text()
    records = [json.loads(line) for line in log_text.splitlines()]
    assert len(records) == 4 and {r["backend"] for r in records} == {"http"}
    echoed = [r for r in records if r["request_id"] == requests[1].request_id]
    assert all("HTTP 401" in r["error"] and "Bearer ***" in r["error"] for r in echoed)  # scrubbed
    assert fake.auth[-1] == f"Bearer {api_key}"  # ... yet it was sent
    assert api_key not in log_text
    assert api_key not in caplog.text and api_key not in OmegaConf.to_yaml(cfg)


# --------------------------------------------------------------------------------------------------------------
# slow: a real vLLM OpenAI server serving the tiny Qwen2-VL (the session's shared one, conftest.tiny_vllm_server:
# allowed local media = the session's base temp, which holds the synthetic CoVEBench and the test video; the
# server samples videos at 2 fps, at most 8 frames)
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_requests(cove_data, media, tmp_path_factory) -> list[JudgeRequest]:
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.benchmarks.cove_checklist import build_requests
    from vbench_ray.configure import load_config

    cfg = load_config(REPO / "configs" / "cove.yaml", cove_overrides(cove_data, tmp_path_factory.mktemp("cove_out")))
    case = next(c for c in CoveBench(cfg).load_cases() if not c.get("error_load"))
    dual = next(r for r in build_requests(case) if r.group == "Dual-TF")  # source + edited video
    text_only = JudgeRequest(
        "probe/text-only", [{"role": "user", "content": [{"type": "text", "text": "Describe it."}]}]
    )
    square = JudgeRequest(
        "probe/square",
        [{"role": "user", "content": [video_part(media["square"]), {"type": "text", "text": "Describe it."}]}],
    )
    return [dual, text_only, square]


@pytest.mark.slow
def test_real_vllm_server_file_and_base64_media(ray_local, tiny_vllm_server, server_requests):
    """The product's HTTPBackend against a real vLLM OpenAI server: every request answered, token counts from the
    server's usage, videos sent as file:// URLs and as base64 data URLs reaching the model alike."""
    from vbench_ray.judges.backends.http import HTTPBackend

    results = {}
    for media_mode in ("file", "base64"):
        cfg = judge_cfg(
            backend="http",
            model="tiny-judge",
            max_tokens=8,
            http={
                "base_url": tiny_vllm_server["base_url"],
                "media": media_mode,
                "timeout_s": 120,
                "max_retries": 1,
                "concurrency": 1,
            },
        )
        t0 = time.perf_counter()
        results[media_mode] = collect(HTTPBackend(cfg), server_requests)
        print(f"http judge against vLLM, media={media_mode}: {time.perf_counter() - t0:.1f} s")
    for media_mode, out in results.items():
        for response in out.values():
            assert response.error is None, (media_mode, response)
            assert isinstance(response.text, str) and response.completion_tokens > 0 and response.prompt_tokens > 0
            assert response.model == "tiny-judge"
        # 32 frames at 8 fps, the server samples 2 fps -> 8 frames of 112x112 -> 64 video tokens
        video = out["probe/square"].prompt_tokens - out["probe/text-only"].prompt_tokens
        assert 64 <= video <= 64 + 4, (media_mode, video)
    # base64 data URLs decode to the same frames as the files
    assert {k: v.prompt_tokens for k, v in results["file"].items()} == {
        k: v.prompt_tokens for k, v in results["base64"].items()
    }
