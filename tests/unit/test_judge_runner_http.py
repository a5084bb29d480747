"""The HTTP judge as a benchmark run uses it (``engines.make_engine``, what ``EngineSet`` and so the runner call),
against a real local server (stdlib, 127.0.0.1), with transport retries on (issue 29, item 4's planted bugs):

* a non-retryable status (400, 404, 422) is posted once, whatever ``judge.http.max_retries`` allows;
* a retryable one (503) is posted again and the answer that follows is used;
* an answer that echoes the API key (as sent, upper-cased, base64 of the whole header, a masked ``...`` form)
  reaches the parser with every echo redacted.

No Ray: the engine posts from the calling process.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from omegaconf import OmegaConf

KEY = "sk-teeth-0123456789abcdefXYZ"
KEY_ENV = "VBR_TEST_RUNNER_JUDGE_KEY"


def _answer(text: str) -> bytes:
    return json.dumps(
        {
            "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    ).encode()


class Server:
    """Answers by the prompt's text: ``status:N`` always N; ``flaky`` 503 once then 200; ``echo`` 200 with the
    request's Authorization header echoed in the answer in several shapes. Counts posts per prompt."""

    def __init__(self):
        self.posts: dict[str, int] = {}
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, code: int, body: bytes, headers=()):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                prompt = payload["messages"][-1]["content"]
                with owner.lock:
                    owner.posts[prompt] = n = owner.posts.get(prompt, 0) + 1
                if prompt.startswith("status:"):
                    self._send(int(prompt.split(":")[1]), b'{"error": {"message": "no"}}')
                elif prompt == "flaky" and n == 1:
                    self._send(503, b'{"error": {"message": "busy"}}', [("Retry-After", "0")])
                elif prompt == "echo":
                    auth = self.headers.get("Authorization", "")
                    key = auth.removeprefix("Bearer ")
                    text = (
                        f"[] key {key} upper {key.upper()} header-b64 "
                        f"{base64.b64encode(auth.encode()).decode()} masked {key[:6]}...{key[-4:]}"
                    )
                    self._send(200, _answer(text))
                else:
                    self._send(200, _answer("[]"))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def _engine(base_url: str, max_retries: int = 2):
    from vbench_ray.judges.base import JudgeConfig
    from vbench_ray.judges.engines import make_engine

    cfg = OmegaConf.merge(
        OmegaConf.structured(JudgeConfig()),
        {
            "backend": "http",
            "model": "j",
            "http": {
                "base_url": base_url,
                "max_retries": max_retries,
                "retry_wait_s": 0.01,
                "timeout_s": 5,
                "api_key_env": KEY_ENV,
            },
        },
    )
    return make_engine(cfg).start()


def _ask(engine, prompt: str):
    from vbench_ray.judges.base import JudgeRequest

    ((response,),) = list(engine.generate([JudgeRequest(f"r/{prompt}", [{"role": "user", "content": prompt}])]))
    return response


@pytest.mark.parametrize("status", [400, 404, 422])
def test_a_non_retryable_status_is_posted_once(server, monkeypatch, status):
    monkeypatch.setenv(KEY_ENV, KEY)
    response = _ask(_engine(server.base_url, max_retries=2), f"status:{status}")
    assert server.posts[f"status:{status}"] == 1
    assert response.text is None and f"HTTP {status}" in response.error
    assert "(after 1 attempt(s))" in response.error


def test_a_retryable_status_is_posted_again(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    response = _ask(_engine(server.base_url, max_retries=2), "flaky")
    assert server.posts["flaky"] == 2 and response.error is None and response.text == "[]"


def test_an_answer_echoing_the_key_is_redacted(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    response = _ask(_engine(server.base_url), "echo")
    assert response.error is None and response.text.startswith("[] key ")
    text = response.text.lower()
    header_b64 = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    for leak in (KEY.lower(), KEY[8:16].lower(), KEY[-8:].lower(), header_b64[12:24].lower(), "0123456789abcdef"):
        assert leak not in text, (leak, response.text)
    assert response.text.count("***") >= 4  # each of the four echoes
