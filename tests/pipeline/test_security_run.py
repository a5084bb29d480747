"""A planted secret reaches no file of a run (Security 2-3 end to end): CoVEBench's judge metrics over HTTP against
a judge that echoes the key back, every file the run and the Ray session wrote grepped for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.common import REPO, cove_overrides
from helpers.planted_key import KEY, PLANTED_ENV, EchoingJudge, leaks
from vbench_ray.configure import load_config

COVE = REPO / "configs" / "cove.yaml"


@pytest.mark.ray
@pytest.mark.slow
def test_a_planted_secret_reaches_no_file_of_the_run(cove_data, tmp_path, ray_local, monkeypatch):
    """CoVE judge metrics over HTTP, the key in $VBR_PLANTED_SECRET named by judge.http.api_key_env, a server
    that echoes it in answers and errors, wandb offline and the report on. No file under the run directory
    (nor in the Ray session's logs) holds the key, upper- or lower-cased, or any 8 characters of it."""
    from vbench_ray.runner import run

    monkeypatch.setenv(PLANTED_ENV, KEY)
    server = EchoingJudge()
    out = tmp_path / "run"
    try:
        cfg = load_config(
            COVE,
            cove_overrides(
                cove_data,
                out,
                "metrics.enabled=[UAS,IFS,VRS,SEM]",
                "wandb.mode=offline",
                "report.enabled=true",
                "run.limit=3",
                "judge.backend=http",
                f"judge.http.base_url={server.base_url}",
                "judge.model=echo-judge",
                f"judge.http.api_key_env={PLANTED_ENV}",
                "judge.http.max_retries=0",
                "judge.max_retries=1",
            ),
        )
        run(cfg)
    finally:
        server.close()
    assert server.calls > 0 and set(server.auth) == {f"Bearer {KEY}"}  # the key was used ...
    written = [p for p in out.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"config.yaml", "summary.json", "report.html", "judge_log.jsonl", "judgments.parquet"} <= names, names
    assert any(p.suffix == ".wandb" for p in written), "no wandb offline run was written"
    log_text = (out / "judge_log.jsonl").read_text()
    assert "I cannot answer" in log_text and "invalid credentials" in log_text  # the echoes were logged ...
    import ray

    session_logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    scanned = written + [p for p in session_logs.rglob("*") if p.is_file()]
    pieces = {KEY[i : i + 8].lower().encode() for i in range(len(KEY) - 7)}
    leaked = [str(p) for p in scanned if any(piece in p.read_bytes().lower() for piece in pieces)]
    assert not leaked, leaked  # ... and redacted everywhere
    # nor any encoded form of it (issue 23, item 2): base64 at each offset, hex, the key's ends around a mask
    leaked = [str(p) for p in scanned if leaks(p.read_bytes().decode("utf-8", errors="replace"), KEY)]
    assert not leaked, leaked
