"""The session's in-process Ray runtime (``ray_local``) uses a token of its own, and only that runtime's processes
get it: not this process's environment, not a process a test starts (tests/helpers/ray_auth.py says why)."""

import json
import os
import subprocess
import sys

from helpers.common import RAY_AUTH_VARS

SHOW_ENV = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {RAY_AUTH_VARS!r}}}))"

# connects to a GCS with whatever token set-up its environment has; prints "ok" or the error's class
CONNECT = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_get(b"dummy", None, timeout=30)
    print("ok")
except Exception as exc:
    print(type(exc).__name__)
"""


def test_only_the_runtimes_own_processes_get_the_private_token(ray_local, private_ray_token):
    ray = ray_local
    none = {k: None for k in RAY_AUTH_VARS}
    assert {k: os.environ.get(k) for k in RAY_AUTH_VARS} == none
    child = subprocess.run([sys.executable, "-c", SHOW_ENV], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(child.stdout) == none

    @ray.remote
    def worker_env():
        return {k: os.environ.get(k) for k in RAY_AUTH_VARS}

    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(private_ray_token), "RAY_AUTH_TOKEN": None}
    assert ray.get(worker_env.remote(), timeout=300) == token


def test_the_runtime_answers_its_token_only(ray_local, private_ray_token, tmp_path):
    """A process holding another token (as every Ray of the user holds ``~/.ray/auth_token``) is refused."""
    address = ray_local.get_runtime_context().gcs_address
    other = tmp_path / "other_token"
    other.write_text("0" * 64)

    def connect(token_path) -> str:
        env = {k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARS}
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_path))
        proc = subprocess.run(
            [sys.executable, "-c", CONNECT, address], env=env, capture_output=True, text=True, timeout=120
        )
        return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]

    assert connect(private_ray_token) == "ok"
    assert connect(other) == "AuthenticationError"
