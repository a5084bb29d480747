"""One stream of pools (issue: streaming pipeline): rows reach the sink while cases are still being decoded,
judges receive rows while decoding runs, a judge model loads once per replica whatever the rounds and
phases, and a GPU metric gets a pool of its own while decode workers ask for no GPU."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.common import REPO, cove_overrides
from helpers.slow_judge import SlowJudge
from vbench_ray.configure import load_config
from vbench_ray.pipeline import Stage, build_dataset
from vbench_ray.pool_plan import StagePlan, plan_stages
from vbench_ray.runner import run

COVE = REPO / "configs" / "cove.yaml"
VIDIC = REPO / "configs" / "vidic.yaml"


WAIT_S = 240.0  # how long the last case's edit waits for the sink's first shard (a bound, not a margin)

# An editor command that copies its source and notes each call in CALLS; its LAST-th call (the stream's last
# case, with one editor replica) first waits until the sink has written a shard under SINK, or WAIT_S, and writes
# which of the two happened to GATE. An order of events: that case cannot be decoded, let alone judged, before its
# edit ends.
GATED_COPY = """
import os, shutil, sys, time
source, output = sys.argv[1:3]
with open(os.environ["CALLS"], "a") as f:
    f.write(os.path.basename(output) + "\\n")
if len(open(os.environ["CALLS"]).read().split()) == int(os.environ["LAST"]):
    sink, deadline, seen = os.environ["SINK"], time.monotonic() + float(os.environ["WAIT_S"]), False
    while not seen and time.monotonic() < deadline:
        seen = os.path.isdir(sink) and any(n.startswith("part-") for n in os.listdir(sink))
        time.sleep(0.05)
    with open(os.environ["GATE"], "w") as f:
        f.write("seen" if seen else "timeout")
shutil.copyfile(source, output)
"""


@pytest.mark.ray
@pytest.mark.slow
def test_rows_reach_the_sink_and_the_judge_while_cases_are_still_decoded(ray_local, cove_data, tmp_path):
    """The last case is edited (hence decoded, judged and written) only once the sink holds a row judged before
    it: in a stream that waited for every case to be decoded before judging, its edit would wait in vain."""
    import yaml

    script, gate, out = tmp_path / "gated_copy.py", tmp_path / "gate.txt", tmp_path / "run"
    script.write_text(GATED_COPY)
    env = {"CALLS": str(tmp_path / "calls.txt"), "LAST": "8", "SINK": str(out / "cases"), "GATE": str(gate)}
    editor = tmp_path / "gated_copy.yaml"
    editor.write_text(
        yaml.safe_dump(
            {
                "name": "command",
                "model": "gated-copy",
                "command": f"{sys.executable} {script} {{source}} {{output}}",
                "env": {**env, "WAIT_S": str(WAIT_S)},
                "replicas": 1,
                "timeout_s": WAIT_S + 60,
                "frame_rules": {},
            }
        )
    )
    server = SlowJudge(delay=0.15)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        args = cove_overrides(
            cove_data,
            out,
            "metrics.enabled=[SSIM,MSM,MF,IFS]",
            f"editor.include={editor}",
            "ray.workers=1",
            "ray.batch_size=1",
            # a judge batch of one, a shard per row: the first case is judged and written on its own
            "ray.shard_rows=1",
            "ray.shard_seconds=0",
            "ray.judge_batch_size=1",
            "judge.backend=http",
            f"judge.http.base_url=http://127.0.0.1:{server.server_port}/v1",
            "judge.model=slow",
            "judge.max_retries=0",
            "judge.http.max_retries=0",
        )
        result = run(load_config(COVE, [a for a in args if not a.startswith("data.edited_dir")]))
    finally:
        server.shutdown()
    rows = pq.read_table(out / "cases").to_pylist()
    assert len(rows) == 8 and result.n_computed == 8 and all(r["error_edit"] is None for r in rows)
    assert gate.read_text() == "seen"  # the last case's edit ended after the sink had a judged row
    # hence, in each row's own records: a case judged before the last one was decoded
    assert min(r["at_judge_checklist"] for r in rows) < max(r["at_frames"] for r in rows)
    assert len(list((out / "cases").glob("part-*.parquet"))) > 1  # shards written as rows came, not at the end
    # every request was answered in the stream: the pass after it asked the endpoint nothing more
    assert len(server.arrivals) == result.summary["judge"]["n_requests"] > 0
    assert "judge_state" not in pq.read_schema(next((out / "cases").glob("part-*.parquet"))).names


@pytest.fixture(scope="module")
def vidic_data(tmp_path_factory):
    from vbench_ray.synth.vidic import synth_vidic

    return synth_vidic(tmp_path_factory.mktemp("vidic"), n=4, seed=0)


@pytest.mark.ray
@pytest.mark.slow
def test_a_judge_model_loads_once_per_replica_across_rounds_and_phases(ray_local, tiny_judge_dir, vidic_data, tmp_path):
    out = tmp_path / "run"
    hf = ["backend=hf", f"model={tiny_judge_dir}", "max_tokens=16", "hf.batch_size=4", "max_retries=2"]
    cfg = load_config(
        VIDIC,
        [
            f"data.checklist={vidic_data['checklist']}",
            f"data.video_root={vidic_data['video_root']}",
            f"output.dir={out}",
            "wandb.mode=disabled",
            "report.enabled=false",
            "run.limit=3",
            "error_analysis.enabled=true",
            "stats.bootstrap_samples=50",
            *[f"model.{a}" for a in hf],
            *[f"judge.{a}" for a in hf],
            "judge.parse=lenient",
        ],
    )
    summary = run(cfg).summary
    judge = summary["judge"]
    # the random model's answers are gibberish: the judge phase re-asked (several rounds) ...
    assert judge["judge"]["n_requests"] > 0 and judge["judge"]["n_reasked"] > 0
    attempts = [json.loads(x)["attempt"] for x in (out / "judge_log.jsonl").read_text().splitlines()]
    assert max(attempts) == 2  # three rounds: the first answer and two re-asks
    # ... yet each judge config loaded its model once: model under test (describe) and judge (judge + error)
    loads = [json.loads(x) for x in (out / "engines.jsonl").read_text().splitlines()]
    assert len(loads) == 2, loads
    assert len({(x["pid"], x["node"]) for x in loads}) == 2


@pytest.mark.ray
def test_a_stream_that_cannot_run_is_refused_before_its_judge_loads(ray_local, tiny_judge_dir, cove_data, tmp_path):
    """Four hf judge replicas hold the session Ray's 4 CPUs, leaving none for a decode task and the judge stage's
    actor: ``pool_plan`` refuses the run, and it does so before a replica has loaded the model (with the engines
    started first, as before, the replicas loaded and then the run was refused: ``engines.jsonl`` had a line)."""
    from vbench_ray.config import ConfigError

    out = tmp_path / "run"
    cfg = load_config(
        COVE,
        cove_overrides(
            cove_data,
            out,
            "metrics.enabled=[SSIM,UAS]",
            "judge.backend=hf",
            f"judge.model={tiny_judge_dir}",
            "judge.hf.workers=4",
        ),
    )
    with pytest.raises(ConfigError, match="the judge engines hold 4"):
        run(cfg)
    assert not (out / "engines.jsonl").exists(), (out / "engines.jsonl").read_text()
    assert not list(out.glob("cases/*.parquet"))  # and no case computed


def test_a_gpu_metric_gets_its_own_pool_and_decoding_asks_for_no_gpu(cove_data, tmp_path):
    from vbench_ray.benchmarks.cove import CoveBench

    cfg = load_config(
        COVE,
        cove_overrides(
            cove_data,
            tmp_path / "run",
            "metrics.MSM.flow=raft",
            "metrics.MSM.device=cuda",
            "metrics.MSM.raft_weights=/nonexistent",
        ),
    )
    stages = {s.name: s for s in CoveBench(cfg).stages()}
    assert stages["frames"].kind == "cpu" and stages["frames"].num_gpus == 0
    assert stages["MSM"].kind == "pool" and stages["MSM"].num_gpus == 0.1
    assert "frames_for_MSM" in stages["frames"].outputs and "MSM" not in stages["frames"].outputs
    assert "frames_for_MSM" not in CoveBench(cfg).schema().names  # the frames never reach the case table
    # pool sizes come from the cluster: a lone GPU pool starts with every GPU slot it fits on (8 / 0.1), so its
    # actors reach every GPU; its 80 actors share the 15 CPUs a decode task leaves (tests/pipeline/test_pool_plan.py
    # has the arithmetic of several pools)
    plans = plan_stages(list(stages.values()), {"CPU": 16, "GPU": 8})
    assert plans["MSM"] == StagePlan(num_cpus=15 / 80, min_size=80, max_size=80, num_gpus=0.1)
    assert plans["frames"] == StagePlan(num_cpus=1.0) and stages["frames"].kind == "cpu"


class _Resources:
    """Records the resources Ray gave the worker that ran the row."""

    def __init__(self, column: str):
        self.column = column

    def __call__(self, row):
        import ray

        return {self.column: json.dumps(ray.get_runtime_context().get_assigned_resources())}


@pytest.mark.ray
def test_pool_runs_on_the_fake_gpu_while_decode_tasks_hold_none(ray_local):
    rows = [{"case_id": str(i), "variant": "base"} for i in range(4)]
    schema = pa.schema([("case_id", pa.string()), ("variant", pa.string())])
    stages = [
        Stage("decode", _Resources, {"decode_res": "str"}, init_kwargs={"column": "decode_res"}),
        Stage(
            "model", _Resources, {"model_res": "str"}, kind="pool", num_gpus=0.5, init_kwargs={"column": "model_res"}
        ),
    ]
    table = pa.concat_tables(list(build_dataset(rows, stages, schema, 4).iter_batches(batch_format="pyarrow")))
    for r in table.to_pylist():
        decode, model = json.loads(r["decode_res"]), json.loads(r["model_res"])
        assert decode.get("GPU", 0) == 0 and decode.get("CPU") == 1
        assert model.get("GPU") == 0.5


@pytest.mark.ray
def test_an_editor_pool_edits_first_in_the_stream_and_its_videos_are_evaluated(ray_local, cove_data, tmp_path):
    """The editor seam: ``identity`` copies each source, so the edited video is the source (SSIM exactly 1)."""
    import filecmp

    out = tmp_path / "run"
    args = [
        a
        for a in cove_overrides(
            cove_data, out, "metrics.enabled=[SSIM]", "editor.name=identity", "metrics.exclude.SSIM.categories=[]"
        )
        if not a.startswith("data.edited_dir")
    ]
    summary = run(load_config(COVE, args)).summary
    rows = pq.read_table(out / "cases").to_pylist()
    assert len(rows) == 8 and all(r["error_load"] is None and r["error_edit"] is None for r in rows)
    for r in rows:
        assert Path(r["edited_path"]) == out / "edited" / "base" / f"{r['case_id']}.mp4"
        assert filecmp.cmp(r["edited_path"], r["source_path"], shallow=False)
        assert r["edit_seconds_per_frame"] > 0 and r["at_edit"] <= r["at_frames"]
    assert summary["metrics"]["SSIM"]["value"] == pytest.approx(1.0) and summary["metrics"]["SSIM"]["n"] == 8
