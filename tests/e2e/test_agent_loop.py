"""The agent loop and Ray rollouts.

* A scripted policy (a deterministic fake model behind a real stdlib HTTP server speaking the OpenAI
  chat-completions protocol) solves a synthetic Sequencing task through the real tools: it lists the clips with
  ``shell``, looks at each clip's first and last frames with ``view_frames`` (decoding the images it is sent),
  orders the clips by visual continuity, renders ``solution.mp4`` with ffmpeg in the sandbox, writes
  ``solution.json`` and submits. It also sends a malformed and an unknown tool call, which the harness survives.
  The verifier scores it > 0.9; a second ``run_rollouts`` re-runs nothing.
* Models that never call a tool, or are too slow, end by ``max_turns`` / ``wall_timeout`` and score 0, counted.
* (slow) A real vLLM OpenAI server serving the tiny random Qwen2-VL (the session's shared server, with the
  hermes tool-call parser): the harness survives its nonsense.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from vbench_ray.agents.sandbox import check_support

REASON = check_support()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"agent sandbox unavailable here: {REASON}")
KEY_ENV = "VBR_TEST_AGENT_KEY"


# --------------------------------------------------------------------------------------------------------------
# a scripted policy behind a real OpenAI-compatible HTTP server
# --------------------------------------------------------------------------------------------------------------


def _call(cid: str, name: str, args) -> dict:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
    }


def _decode(url: str) -> np.ndarray:
    import cv2

    data = base64.b64decode(url.split(",", 1)[1])
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def sequencing_policy(messages: list[dict]) -> dict:
    """The assistant message for the next turn, from the conversation so far (stateless, deterministic)."""
    from vbench_ray.agentic.baselines import best_path, continuity_costs

    turn = sum(1 for m in messages if m["role"] == "assistant")
    tool_text = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    clips = re.findall(r"^(\S+\.mp4)$", tool_text.get("ls", ""), flags=re.M)
    if turn == 0:
        return {
            "role": "assistant",
            "content": "Listing the clips.",
            "tool_calls": [_call("ls", "shell", {"command": "ls inputs/clips"})],
        }
    if turn == 1:
        calls = [
            _call(f"v{i}", "view_frames", {"path": f"inputs/clips/{c}", "times": [0, -0.2, -0.01], "width": 128})
            for i, c in enumerate(clips)
        ]
        calls += [_call("bad", "view_frames", "{not json"), _call("nope", "teleport", {})]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if turn == 2:
        urls = [
            p["image_url"]["url"]
            for m in messages
            if m["role"] == "user" and isinstance(m["content"], list)
            for p in m["content"]
            if p.get("type") == "image_url"
        ]
        assert len(urls) == 3 * len(clips), (len(urls), len(clips))
        frames = [np.stack([_decode(u) for u in urls[3 * i : 3 * i + 3]]) for i in range(len(clips))]
        order = [clips[i] for i in best_path(continuity_costs(frames))]
        listing = "".join(f"file '/sandbox/inputs/clips/{c}'\\n" for c in order)
        cmd = (
            f"printf \"{listing}\" > list.txt && ffmpeg -hide_banner -loglevel error -f concat -safe 0 "
            "-i list.txt -c copy -y outputs/solution.mp4 && ffprobe outputs/solution.mp4 | grep duration"
        )
        # solution.json as the official harness writes it: each clip's place in solution.mp4 and in the clip
        # (the verifier's default checks the frames there), from the clips' durations
        script = (
            "import itertools, json\n"
            "rows = [line.split() for line in open('durations.txt')]\n"
            "ends = list(itertools.accumulate(float(d) for _, d in rows))\n"
            "json.dump({'segments': [{'source': c, 'output': [ends[i] - float(d), ends[i]],\n"
            "                         'source_range': [0, float(d)]} for i, (c, d) in enumerate(rows)]},\n"
            "          open('outputs/solution.json', 'w'))\n"
        )
        durations = (
            "for c in " + " ".join(order) + "; do echo \"$c $(ffprobe -v error -show_entries "
            "format=duration -of csv=p=0 inputs/clips/$c)\"; done > durations.txt && python3 segments.py"
        )
        return {
            "role": "assistant",
            "content": "Rendering.",
            "tool_calls": [
                _call("render", "shell", {"command": cmd}),
                _call("write", "write_file", {"path": "segments.py", "content": script}),
                _call("segments", "shell", {"command": durations}),
            ],
        }
    return {"role": "assistant", "content": "Done.", "tool_calls": [_call("submit", "submit", {"note": "ordered"})]}


class ScriptedServer:
    def __init__(self):
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with srv.lock:
                    srv.requests.append(body)
                    srv.auth.append(self.headers.get("Authorization", ""))
                model = body.get("model")
                if model == "slow":
                    time.sleep(3)
                if model == "idle":
                    message = {"role": "assistant", "content": "I like turtles."}
                else:
                    message = sequencing_policy(body["messages"])
                payload = {
                    "id": "x",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 100 + len(body["messages"]), "completion_tokens": 20},
                }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture(scope="module")
def scripted():
    srv = ScriptedServer()
    yield srv
    srv.server.shutdown()


@pytest.fixture(scope="module")
def seq_tasks(tmp_path_factory):
    from vbench_ray.agentic.synth import synth_agentic

    info = synth_agentic(
        tmp_path_factory.mktemp("agent_tasks"),
        seed=3,
        n_assembly=0,
        n_sequencing=1,
        n_repair=0,
        n_repurpose=0,
        sequencing_clips=(7, 9),
    )
    return Path(info["tasks_dir"])


@pytest.fixture
def api_key(monkeypatch):
    key = "sk-" + secrets.token_hex(16)
    monkeypatch.setenv(KEY_ENV, key)
    return key


@pytest.mark.ray
def test_scripted_policy_solves_sequencing_and_resume_reruns_nothing(ray_local, scripted, seq_tasks, api_key, tmp_path):
    from vbench_ray.agents import AgentConfig, run_rollouts

    cfg = AgentConfig(
        base_url=scripted.base_url, model="scripted", api_key_env=KEY_ENV, max_turns=8, wall_s=120, tool_timeout_s=60
    )
    out = tmp_path / "run"
    t0 = time.perf_counter()
    summary = run_rollouts(seq_tasks, out, cfg, k=2)
    print(f"2 scripted rollouts on Ray: {time.perf_counter() - t0:.1f} s")
    assert summary["ran"] == 2 and summary["skipped"] == 0 and summary["n_rollouts"] == 2
    for r in summary["rollouts"]:
        assert r["status"] == "ok" and r["reward"] > 0.9 and r["stop_reason"] == "submit", r
    assert summary["by_family"]["sequencing"]["mean"] > 0.9 and summary["counts"]["sequencing"]["ok"] == 2
    task_id = next(iter(summary["by_task"]))
    for rep in ("0", "1"):
        sub = out / "submissions" / task_id / rep
        assert {"solution.json", "solution.mp4", "reward.json"} <= {p.name for p in sub.iterdir()}
        assert json.loads((sub / "reward.json").read_text())["reward"] > 0.9
        traj = json.loads((out / "trajectories" / task_id / f"{rep}.json").read_text())
        assert traj["done"] and traj["n_turns"] == 4 and traj["usage"]["completion_tokens"] == 80
        names = [c["name"] for t in traj["turns"] for c in t["tool_calls"]]
        assert {"shell", "view_frames", "write_file", "submit", "teleport"} <= set(names)
        bad = [c for t in traj["turns"] for c in t["tool_calls"] if not c["ok"]]
        assert {c["id"] for c in bad} == {"bad", "nope"}
    assert not (out / "sandboxes" / task_id / "0").exists()
    an = summary["analytics"]
    assert an["by_model"]["scripted"]["n_rollouts"] == 2 and an["by_family"]["sequencing"]["top_tool"] == "view_frames"
    assert 0 < an["overall"]["top_tool_share"] < 1 and an["overall"]["turns"]["median"] == 4
    # the key went to the server, never to disk
    assert set(scripted.auth) == {f"Bearer {api_key}"}
    assert all(api_key.encode() not in p.read_bytes() for p in out.rglob("*") if p.is_file())
    # resume: nothing is re-run, the server sees no new request
    n_requests = len(scripted.requests)
    again = run_rollouts(seq_tasks, out, cfg, k=2)
    assert again["ran"] == 0 and again["skipped"] == 2 and len(scripted.requests) == n_requests
    assert again["by_family"] == summary["by_family"]
    # a third rep is the only one that runs when k grows
    more = run_rollouts(seq_tasks, out, cfg, k=3)
    assert more["ran"] == 1 and more["skipped"] == 2 and more["by_family"]["sequencing"]["mean"] > 0.9


@pytest.mark.ray
def test_no_submit_and_timeouts_score_zero_and_are_counted(ray_local, scripted, seq_tasks, tmp_path):
    from vbench_ray.agents import AgentConfig, run_rollouts

    idle = AgentConfig(base_url=scripted.base_url, model="idle", max_turns=3, wall_s=60)
    summary = run_rollouts(seq_tasks, tmp_path / "idle", idle, k=1)
    (r,) = summary["rollouts"]
    assert r["stop_reason"] == "max_turns" and r["n_turns"] == 3
    assert r["status"] == "missing" and r["reward"] == 0.0
    assert summary["counts"]["sequencing"]["missing"] == 1 and summary["by_family"]["sequencing"]["mean"] == 0.0

    slow = AgentConfig(base_url=scripted.base_url, model="slow", max_turns=50, wall_s=2, max_retries=0)
    t0 = time.perf_counter()
    summary = run_rollouts(seq_tasks, tmp_path / "slow", slow, k=1)
    (r,) = summary["rollouts"]
    assert r["stop_reason"] == "wall_timeout" and r["reward"] == 0.0 and r["status"] == "missing"
    assert time.perf_counter() - t0 < 30

    down = AgentConfig(
        base_url="http://127.0.0.1:9/v1", model="x", max_turns=5, wall_s=30, max_retries=1, retry_wait_s=0.1
    )
    summary = run_rollouts(seq_tasks, tmp_path / "down", down, k=1)
    (r,) = summary["rollouts"]
    assert r["stop_reason"] == "model_error" and r["reward"] == 0.0 and "after 2 attempt" in r["error"]


# --------------------------------------------------------------------------------------------------------------
# slow: a real vLLM OpenAI server (tiny random Qwen2-VL, tool-call parser on): the session's shared server,
# conftest.tiny_vllm_server, which serves the model as "tiny-agent" too
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_vllm_server_nonsense_model_is_survived(tiny_vllm_server, seq_tasks, tmp_path):
    from vbench_ray.agentic.bundle import DELIVERABLES, load_task
    from vbench_ray.agentic.verify import verify_rollout
    from vbench_ray.agents import AgentConfig, Sandbox, run_agent
    from vbench_ray.agents.analytics import trajectory_analytics
    from vbench_ray.agents.tools import Tools

    task_dir = next(p for p in seq_tasks.iterdir() if p.is_dir())
    task = load_task(task_dir, with_truth=False)
    box = Sandbox(tmp_path / "rollout", key="tiny").prepare(task_dir / "inputs", task.instruction)
    cfg = AgentConfig(
        base_url=tiny_vllm_server["base_url"],
        model="tiny-agent",
        max_turns=3,
        wall_s=90,
        max_tokens=24,
        temperature=1.0,
        seed=0,
        request_timeout_s=60,
        max_retries=0,
    )
    t0 = time.perf_counter()
    traj = run_agent(task.instruction, Tools(box, deliverables=DELIVERABLES["sequencing"]), cfg)
    print(
        f"tiny-model rollout: {time.perf_counter() - t0:.1f} s, stop={traj['stop_reason']}, "
        f"turns={traj['n_turns']}, usage={traj['usage']}, error={traj['error']}"
    )
    assert traj["stop_reason"] in ("max_turns", "submit", "wall_timeout")
    assert traj["n_turns"] >= 1 and traj["usage"]["completion_tokens"] > 0 and traj["usage"]["prompt_tokens"] > 0
    json.dumps(traj)  # JSON-ready
    box.collect(DELIVERABLES["sequencing"], tmp_path / "sub")
    verdict = verify_rollout(load_task(task_dir), tmp_path / "sub")
    assert verdict["reward"] == 0.0 and verdict["status"] in ("missing", "invalid")
    traj["family"] = "sequencing"
    assert trajectory_analytics([traj])["by_model"]["tiny-agent"]["n_rollouts"] == 1
    box.cleanup()


@pytest.mark.ray
def test_agentic_job_with_agent_model_runs_rollouts_then_scores(ray_local, scripted, seq_tasks, api_key, tmp_path):
    """`vbench-ray run configs/agentic.yaml agent.base_url=... agent.model=...`: rollouts, verification,
    per-family scores with CIs and the trajectory analytics, all from one config."""
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    cfg = load_config(
        Path(__file__).resolve().parents[2] / "configs" / "agentic.yaml",
        [
            f"data.tasks_dir={seq_tasks}",
            f"output.dir={tmp_path / 'run'}",
            "data.reps=2",
            "wandb.mode=disabled",
            f"agent.base_url={scripted.base_url}",
            "agent.model=scripted",
            f"agent.api_key_env={KEY_ENV}",
            "agent.max_turns=8",
            "agent.wall_s=120",
            "agent.tool_timeout_s=60",
            "repurpose.judge_enabled=false",
        ],
    )
    s = run(cfg).summary
    assert s["metrics"]["sequencing"]["value"] > 0.9 and s["metrics"]["sequencing"]["n"] == 1
    assert s["agent"]["model"] == "scripted" and s["agent"]["analytics"]["overall"]["top_tool_share"] > 0
    assert (tmp_path / "run" / "agent" / "trajectories").is_dir()
    table = next(t for t in s["report_tables"] if t["title"].startswith("Agent trajectories"))
    assert table["rows"][0][:2] == ["overall", "2"] and any(r[0] == "family sequencing" for r in table["rows"])
