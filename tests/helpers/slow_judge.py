"""A slow OpenAI-compatible judge endpoint on a real local HTTP server: every answer an empty JSON array after a
fixed delay, each request's arrival time noted."""

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SlowJudge(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint that takes ``delay`` seconds per answer and notes when each request came."""

    daemon_threads = True

    def __init__(self, delay: float):
        self.delay = delay
        self.arrivals: list[float] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        self.server.arrivals.append(time.time())
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(self.server.delay)
        body = json.dumps(
            {
                "choices": [{"message": {"content": "[]"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass
