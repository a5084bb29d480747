"""One ``RunPlan`` per run (stages, judge phases and schema built once from the config and passed on), and
``vbench-ray run --dry-run`` printing it: stages with their pools and resources, cases, judge engines and requests,
nothing computed or written."""

from __future__ import annotations

import inspect
import json

from helpers.common import REPO, cove_overrides
from vbench_ray.cli import main

COVE = REPO / "configs" / "cove.yaml"
HTTP_JUDGE = ("judge.backend=http", "judge.model=j", "judge.http.base_url=http://127.0.0.1:9/v1")


def test_dry_run_prints_the_plan_and_computes_nothing(ray_local, cove_data, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "run",
        str(COVE),
        *cove_overrides(cove_data, out, "metrics.enabled=[SSIM,MSM,MF,UAS]", *HTTP_JUDGE),
        "--dry-run",
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not out.exists()  # nothing written: no run directory, no lock, no config.yaml
    # one checklist request per question type of each case (CoVEBench's prompts ask one type at a time)
    tasks = json.loads(open(cove_data["checklist"]).read())
    n_requests = sum(len({q["type"] for g in t["evaluation_groups"] for q in g["questions"]}) for t in tasks)
    assert lines[0] == f"plan of a cove run into {out} (nothing computed)"
    assert lines[1].startswith("Ray: started (or connected to) only to read the cluster's size")
    assert lines[2:] == [
        "cluster: 4 CPUs, 1 GPUs",  # the tests' Ray (conftest.ray_local)
        f"cases: {len(tasks)}, 0 already done, {len(tasks)} to compute",
        "stages (2):",
        "  frames                 cpu   tasks, 1 CPU each",
        "  judge_checklist        judge tasks (up to 2 at once), 0.25 CPU each",
        "judge engines: 1, holding 0 CPUs, 0 GPUs outside the stream",
        "  http     j: 0 CPUs, 0 GPUs",
        "judge phases (1):",
        f"  checklist    http: {n_requests} requests (each re-asked at most judge.max_retries=3 times)",
    ]


def test_a_run_binds_its_benchmark_once_and_builds_its_plan_once(ray_local, cove_data, tmp_path, monkeypatch):
    """Outside preflight (which checks each judge config), a run binds the benchmark to its config once, builds one
    ``RunPlan`` from it and asks it for its stages and judge phases once (they were built three times: for the
    schema, Ray's start and the stream); the plan's benchmark is the one that scores and summarizes, and the plan
    keeps the pools it planned for the stream."""
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.configure import load_config
    from vbench_ray.run_plan import RunPlan
    from vbench_ray.runner import run

    calls = {"__init__": 0, "stages": 0, "judge_phases": 0, "summarize": 0}
    benches: dict[str, list] = {"planned": [], "summarized": []}
    plans: list[RunPlan] = []

    def counted(name):
        original = getattr(CoveBench, name)

        def wrapper(self, *args, **kwargs):
            if not any(frame.filename.endswith("preflight.py") for frame in inspect.stack()):
                calls[name] += 1
                if name == "summarize":
                    benches["summarized"].append(self)
            return original(self, *args, **kwargs)

        return wrapper

    for name in calls:
        monkeypatch.setattr(CoveBench, name, counted(name))
    build = RunPlan.build.__func__

    def build_once(cls, *args):
        plan = build(cls, *args)
        plans.append(plan)
        benches["planned"].append(plan.bench)
        return plan

    monkeypatch.setattr(RunPlan, "build", classmethod(build_once))
    replay = tmp_path / "answers.jsonl"
    replay.write_text("")
    cfg = load_config(
        COVE,
        cove_overrides(
            cove_data,
            tmp_path / "run",
            "metrics.enabled=[SSIM,UAS]",
            "judge.backend=replay",
            f"judge.replay_path={replay}",
            "run.limit=2",
        ),
    )
    run(cfg)
    assert calls == {"__init__": 1, "stages": 1, "judge_phases": 1, "summarize": 1}
    assert len(benches["planned"]) == 1 and benches["summarized"] == benches["planned"]
    # the stream's pools: the decode stage's tasks and the checklist phase's judge tasks (replay streams too)
    assert list(plans[0].pool_plans) == ["frames", "judge_checklist"]
    assert plans[0].pool_plans["frames"].num_cpus == 1 and plans[0].pool_plans["judge_checklist"].num_cpus == 0.25


def test_dry_run_of_a_phase_replayed_from_a_file_the_run_writes(ray_local, tmp_path, capsys):
    """ViDiC scoring given responses: the describe phase replays a file the run writes before its stream
    (``JudgePhase.prepare``); the dry run writes nothing, so it names that engine from the config alone."""
    from vbench_ray.synth.vidic import synth_vidic

    data = synth_vidic(tmp_path / "vidic", n=2, seed=0)
    out = tmp_path / "run"
    argv = [
        "run",
        str(REPO / "configs" / "vidic.yaml"),
        f"data.checklist={data['checklist']}",
        f"data.video_root={data['video_root']}",
        f"data.responses={data['responses']}",
        f"output.dir={out}",
        "wandb.mode=disabled",
        *HTTP_JUDGE,
        "--dry-run",
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert not out.exists()
    assert "cases: 2, 0 already done, 2 to compute" in text
    assert "  replay   " in text and "  http     j: 0 CPUs, 0 GPUs" in text
    assert "  describe     replay: 2 requests" in text and "  judge        http: built from the answers" in text
