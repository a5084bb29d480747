"""Process helpers for tests that start vLLM engines, servers or Ray workers (TEST-ONLY).

Same rules as ``tests/e2e/test_tiny_models.py``: every process a test starts carries a unique ``VBR_TINY_TAG``
environment variable (for Ray workers: through ``runtime_env={"env_vars": ...}``, i.e. ``judge.env_vars``) and
is killed by pid afterwards, never by name and never with ``ray stop`` (other Ray runtimes may be running on
the machine).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

TAG_VAR = "VBR_TINY_TAG"
REPO = Path(__file__).resolve().parents[3]


def new_tag() -> str:
    return uuid.uuid4().hex


def tagged_pids(tag: str) -> list[int]:
    """Pids of live processes whose environment carries ``VBR_TINY_TAG=tag``."""
    needle = f"{TAG_VAR}={tag}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def kill_tagged(tag: str, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, every live process started with this tag."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        pids = tagged_pids(tag)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and tagged_pids(tag):
            time.sleep(0.2)


def _live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, only not yet reaped
    except (OSError, IndexError):
        return False


def session_pids(sid: int) -> list[int]:
    """Pids of live processes in session ``sid``: everything a child started with ``start_new_session=True``
    (it leads the session) started in turn, found by id. Ray's raylet puts its workers in process groups of
    their own, and its agents outlive a killed raylet, but all stay in the session (none calls setsid)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.getsid(int(entry)) == sid and _live(int(entry)):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def kill_session(sid: int, grace_s: float = 10.0) -> list[int]:
    """SIGTERM, then SIGKILL, every live process of session ``sid``, by pid (a test's clean-up, also on
    Ctrl-C). Returns the pids still alive after the SIGTERM grace period (those that needed SIGKILL)."""
    stubborn: list[int] = []
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        pids = session_pids(sid)
        if not pids:
            break
        if sig == signal.SIGKILL:
            stubborn = pids
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and session_pids(sid):
            time.sleep(0.2)
    return stubborn


# vLLM on the CPU runs its model worker in a process of its own beside the EngineCore process (the CPU platform
# turns the "uni" executor into "mp": vllm/platforms/cpu.py, check_and_update_config) unless V1 multiprocessing is
# off. With it off, the "uni" executor runs the worker inside the EngineCore process (``AsyncLLM``, used by the
# OpenAI server, Ray Data's engine stage and Serve LLM, starts its EngineCore process either way): one process
# start fewer per engine. Ray Data's engine stage asks for "uni" itself when an engine has one bundle; the OpenAI
# server needs ``--distributed-executor-backend uni``. Serve LLM sets "mp" on the CPU whatever this says.
SINGLE_WORKER_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def vllm_env(tmp: Path, tag: str, cache_root: Path | None = None, single_worker: bool = False) -> dict[str, str]:
    """Environment variables for a vLLM process on the CPU test machine (to merge into an env or runtime_env):
    ``tests/``, the repository and whatever ``PYTHONPATH`` this process has on ``PYTHONPATH``.

    ``cache_root``: ``VLLM_CACHE_ROOT`` (default ``tmp/vllm_cache``); the tests pass the session's one
    (``conftest.vllm_cache_root``), where vLLM keeps what it learnt inspecting a model class
    (``modelinfos/*.json``, about 19 s of a tiny engine's start), so that only a session's first engine of an
    architecture pays it. ``single_worker``: the worker inside the EngineCore process (``SINGLE_WORKER_ENV``)."""
    paths = [str(REPO / "tests"), str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {
        TAG_VAR: tag,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
        "VLLM_CACHE_ROOT": str(cache_root if cache_root is not None else tmp / "vllm_cache"),
        **(SINGLE_WORKER_ENV if single_worker else {}),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}:\n{log.read_text(errors='replace')[-6000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(1.0)
    raise AssertionError(f"server not healthy after {timeout}s:\n{log.read_text(errors='replace')[-6000:]}")


@contextmanager
def vllm_server(
    model: Path,
    tmp: Path,
    *,
    served_name: str | Sequence[str] = "tiny-judge",
    media_dir: Path | None = None,
    media_io_kwargs: dict | None = None,
    max_model_len: int = 4096,
    limit_mm: dict | None = None,
    extra_args: Sequence[str] = (),
    cache_root: Path | None = None,
    single_worker: bool = False,
    timeout: float = 240,
) -> Iterator[dict]:
    """A real ``vllm.entrypoints.openai.api_server`` for ``model`` on 127.0.0.1 (CPU).

    ``served_name``: one name or several (the server accepts any of them as a request's ``model``; its responses
    carry the first). ``limit_mm``: ``--limit-mm-per-prompt`` (default 2 images, 2 videos). ``extra_args`` go
    last on the command line (e.g. ``--enable-auto-tool-choice --tool-call-parser hermes``). ``cache_root``,
    ``single_worker``: as ``vllm_env`` says (``single_worker`` adds ``--distributed-executor-backend uni``).

    Yields ``{"base_url", "port", "health_s", "log", "tag"}``; the server's process group and every tagged
    straggler are killed on exit.
    """
    port, tag = free_port(), new_tag()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_MODE")}
    env.update(vllm_env(tmp, tag, cache_root=cache_root, single_worker=single_worker))
    log = tmp / f"vllm_server_{port}.log"
    names = [served_name] if isinstance(served_name, str) else list(served_name)
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        *names,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        "bfloat16",
        "--max-num-seqs",
        "8",
        "--seed",
        "0",
        "--limit-mm-per-prompt",
        json.dumps(limit_mm if limit_mm is not None else {"image": 2, "video": 2}),
    ]
    if media_dir is not None:
        cmd += ["--allowed-local-media-path", str(media_dir)]
    if media_io_kwargs:
        cmd += ["--media-io-kwargs", json.dumps(media_io_kwargs)]
    if single_worker:
        cmd += ["--distributed-executor-backend", "uni"]
    cmd += list(extra_args)
    with open(log, "w") as fh:
        server = subprocess.Popen(
            cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(tmp)
        )
    try:
        health_s = wait_healthy(server, f"http://127.0.0.1:{port}/health", log, timeout=timeout)
        yield {"base_url": f"http://127.0.0.1:{port}/v1", "port": port, "health_s": health_s, "log": log, "tag": tag}
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except OSError:
                pass
        kill_tagged(tag)
