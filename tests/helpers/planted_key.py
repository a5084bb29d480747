"""A planted API key and what careless servers make of it: its echoes in encoded forms, the check that finds any
of it in a text, and an OpenAI-compatible judge that echoes it back (the security tests)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PLANTED_ENV = "VBR_PLANTED_SECRET"
# hand-written, not generated: the fragments the tests cut from it are cut by hand
KEY = "sk-live-Q7w9ZpL2xR4mN8vB6tY1"


def echoes(key: str) -> dict[str, str]:
    """The key as careless servers echo it (issue 23, item 2), each inside an encoded header or a sentence."""
    import base64
    import urllib.parse

    header = f"Authorization: Bearer {key}".encode()
    return {
        "base64": base64.b64encode(header).decode(),
        "base64, one byte on": base64.b64encode(b"x" + header).decode(),
        "base64url": base64.urlsafe_b64encode(b"Bearer  " + key.encode()).decode(),
        "hex": key.encode().hex(),
        "HEX": key.encode().hex().upper(),
        "URL-encoded": urllib.parse.quote(f"Bearer {key}/é", safe=""),
        "prefix...suffix": f"{key[:6]}...{key[-4:]}",
        "prefix…suffix": f"{key[:8]}…{key[-3:]}",
        "masked prefix": f"{key[:5]}****{key[-2:]}",
    }


def leaks(text: str, key: str) -> list[str]:
    """What of ``key`` is still in ``text``: an 8-character piece of the key or of any encoding of it, or the
    ends of the key around a mask."""
    import base64

    raw = key.encode()
    forms = [key, raw.hex()]
    for pad in (b"", b"x", b"xx"):  # the key's bytes at each offset of a base64 quantum
        enc = base64.b64encode(pad + raw).decode()
        inner = enc[len(pad) * 4 // 3 + 1 : len(enc) - 4] if pad else enc[:-4]
        forms += [inner, inner.replace("+", "-").replace("/", "_")]
    low = text.lower()
    found = [f[i : i + 8] for f in forms for i in range(len(f) - 7) if f[i : i + 8].lower() in low]
    return found + [m for m in (f"{key[:6]}...", f"{key[:8]}…", f"{key[:5]}****") if m.lower() in low]


class EchoingJudge:
    """An OpenAI-compatible server that echoes the Authorization header back: in 200 answers (upper-cased, its
    last 12 characters, and every encoded shape of ``echoes``) and in 401 errors (verbatim and base64)."""

    def __init__(self):
        self.calls = 0
        self.auth: list[str] = []
        judge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                auth = self.headers.get("Authorization", "")
                judge.calls += 1
                judge.auth.append(auth)
                key = auth.removeprefix("Bearer ")
                if judge.calls % 3 == 0:
                    status, body = 401, {"error": {"message": f"invalid credentials {auth} {echoes(key)['base64']}"}}
                else:
                    encoded = "; ".join(f"{shape}: {echo}" for shape, echo in echoes(key).items())
                    text = f"I cannot answer. Your key {key.upper()} (ends with {key[-12:]}) was noted. {encoded}"
                    status, body = (
                        200,
                        {
                            "choices": [
                                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                            ],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 5},
                        },
                    )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
