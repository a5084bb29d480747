"""AgenticVBench bundles, synthetic tasks, baselines, config, and the benchmark's loader, verify stage
and summary run in-process (no Ray): missing, invalid and failed rollouts are scored 0 and counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from omegaconf import OmegaConf

from helpers.common import REPO
from helpers.configs import agentic_cfg
from vbench_ray.agentic.baselines import sequencing_oracle, solve
from vbench_ray.agentic.bundle import BundleError, find_reps, list_tasks, load_task
from vbench_ray.agentic.media import read_media
from vbench_ray.agentic.synth import CINEMATIC_VARIABLES, synth_agentic
from vbench_ray.agentic.verifiers import sequencing
from vbench_ray.agentic.verify import verify_cli
from vbench_ray.benchmarks import DataError
from vbench_ray.benchmarks.agentic import AgenticBench, AgenticConfig
from vbench_ray.config import ConfigError, read_yaml
from vbench_ray.configure import load_config
from vbench_ray.pipeline import run_local

AGENTIC = REPO / "configs" / "agentic.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small synthetic set: 1 assembly, 2 sequencing, 3 repair (colour, blur, repeated frames), 1 repurpose."""
    return synth_agentic(
        tmp_path_factory.mktemp("agentic"),
        seed=1,
        n_assembly=1,
        n_sequencing=2,
        n_repair=3,
        n_repurpose=1,
        sequencing_clips=(7, 12),
    )


def _task(data, task_id):
    return load_task(Path(data["tasks_dir"]) / task_id)


# ----------------------------------------------------------------------------- config


def test_yaml_documents_the_agentic_defaults():
    documented = read_yaml(AGENTIC)  # with its `include`s resolved (judge: configs/judges/)
    schema = OmegaConf.structured(AgenticConfig)
    for section in ("data", "sequencing", "repair", "repurpose", "judge"):
        assert OmegaConf.to_container(documented[section]) == OmegaConf.to_container(schema[section]), section
    assert set(OmegaConf.load(AGENTIC)) - {"extends"} == set(schema) - {
        "output",
        "run",
        "ray",
        "video",
        "stats",
        "wandb",
        "report",
    }


def test_config_choices_and_required_keys():
    cfg = load_config(AGENTIC, ["data.tasks_dir=/t", "data.agent=random", "output.dir=/tmp/x", "data.reps=2"])
    assert cfg.benchmark == "agentic" and cfg.repair.in_weight == 0.9 and cfg.judge.max_tokens == 1024
    for bad in (
        "data.agent=gpt",
        "repurpose.invert_negative=sometimes",
        "sequencing.score=sum",
        "repair.range_score=x",
    ):
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            load_config(AGENTIC, ["data.tasks_dir=/t", "output.dir=/tmp/x", bad])
    with pytest.raises(ConfigError, match="data.tasks_dir"):
        load_config(AGENTIC, ["output.dir=/tmp/x"])


# ----------------------------------------------------------------------------- bundles


def test_bundle_validation_names_file_and_field(data, tmp_path):
    src = Path(data["tasks_dir"]) / "assembly_000"
    task = tmp_path / "t"
    shutil.copytree(src, task)
    meta = json.loads((task / "task.json").read_text())
    (task / "task.json").write_text(json.dumps({**meta, "family": "editing"}))
    with pytest.raises(BundleError, match=r"task.json.family: unknown family 'editing'"):
        load_task(task)
    (task / "task.json").write_text(json.dumps(meta))
    truth = json.loads((task / "truth" / "truth.json").read_text())
    truth["slots"][0]["golden"] = "nope.mp4"
    (task / "truth" / "truth.json").write_text(json.dumps(truth))
    with pytest.raises(BundleError, match=r"truth.json.slots\[0\].golden"):
        load_task(task)
    assert load_task(task, with_truth=False).public  # an agent's view does not read truth/
    with pytest.raises(BundleError, match="escapes"):
        load_task(src).input("../truth/truth.json")
    with pytest.raises(BundleError, match="not available to agents"):
        load_task(src, with_truth=False).truth_file("truth.json")
    rp = tmp_path / "r"
    shutil.copytree(Path(data["tasks_dir"]) / "repurpose_000", rp)
    rubric = json.loads((rp / "truth" / "rubric.json").read_text())
    del rubric["items"][0]["check"]
    (rp / "truth" / "rubric.json").write_text(json.dumps(rubric))
    with pytest.raises(BundleError, match=r"rubric.json.items\[0\].check"):
        load_task(rp)


def test_find_reps_layouts(tmp_path):
    (tmp_path / "t1" / "0").mkdir(parents=True)
    (tmp_path / "t1" / "10").mkdir()
    (tmp_path / "t1" / "2").mkdir()
    (tmp_path / "t2").mkdir()
    (tmp_path / "t2" / "solution.json").write_text("{}")
    assert [r for r, _ in find_reps(tmp_path, "t1")] == ["0", "2", "10"]
    assert find_reps(tmp_path, "t2") == [("0", tmp_path / "t2")]
    assert find_reps(tmp_path, "t3") == []


# ----------------------------------------------------------------------------- synthetic tasks


def test_synth_covers_all_families(data):
    assert data["by_family"] == {"assembly": 1, "sequencing": 2, "repair": 3, "repurpose": 1}
    assert [p.name for p in list_tasks(data["tasks_dir"])] == sorted(data["tasks"])
    asm = _task(data, "assembly_000")
    board = json.loads(asm.input("storyboard.json").read_text())
    for slot, truth in zip(board["slots"], asm.truth["slots"]):
        assert len(slot["candidates"]) == 3 and truth["golden"] in slot["candidates"]
        changed = [d["variable"] for d in truth["distractors"].values()]
        assert len(changed) == 2 and len(set(changed)) == 2 and set(changed) <= set(CINEMATIC_VARIABLES)
        for name, d in truth["distractors"].items():
            assert d["value"] != slot[d["variable"]]  # exactly one variable differs from the storyboard
    for k in range(2):
        seq = _task(data, f"sequencing_00{k}")
        order = seq.truth["order"]
        assert 7 <= len(order) <= 12 and sorted(order) == seq.meta["clips"] and order != sorted(order)
    assert [_task(data, f"repair_00{k}").subtype for k in range(3)] == ["colour_shift", "blur", "repeated_frames"]
    assert all(read_media(_task(data, f"repair_00{k}").input("broken.mp4")).info.has_audio for k in range(3))


def test_synth_is_deterministic(tmp_path):
    args = dict(seed=7, n_assembly=1, n_sequencing=1, n_repair=1, n_repurpose=0, n_slots=2, sequencing_clips=(7, 7))
    a, b = synth_agentic(tmp_path / "a", **args), synth_agentic(tmp_path / "b", **args)
    files = sorted(p.relative_to(a["tasks_dir"]) for p in Path(a["tasks_dir"]).rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b["tasks_dir"]) for p in Path(b["tasks_dir"]).rglob("*") if p.is_file())
    for rel in files:
        pa_, pb = Path(a["tasks_dir"]) / rel, Path(b["tasks_dir"]) / rel
        if rel.suffix in (".json", ".md"):
            assert pa_.read_bytes() == pb.read_bytes(), rel
    clip = sorted((Path(a["tasks_dir"]) / "sequencing_000" / "inputs" / "clips").iterdir())[0]
    same = Path(b["tasks_dir"]) / clip.relative_to(a["tasks_dir"])
    assert np.array_equal(read_media(clip).frames, read_media(same).frames)


# ----------------------------------------------------------------------------- baselines


def test_continuity_baseline_recovers_the_synthetic_order(data, tmp_path):
    for k in range(2):
        task = _task(data, f"sequencing_00{k}")
        solve("heuristic", task.root, tmp_path / str(k))
        got = json.loads((tmp_path / str(k) / "solution.json").read_text())["segments"]
        assert [s["source"] for s in got] == task.truth["order"]
        assert (tmp_path / str(k) / "solution.mp4").exists()


def test_random_baseline_is_at_chance(data, tmp_path):
    task = _task(data, "sequencing_000")
    scores = []
    for rep in range(6):
        solve("random", task.root, tmp_path / f"s{rep}", rep=str(rep))
        scores.append(sequencing.verify(task, tmp_path / f"s{rep}").reward)
    assert np.mean(scores) < 0.1
    asm = _task(data, "assembly_000")
    solve("random", asm.root, tmp_path / "a")
    picks = json.loads((tmp_path / "a" / "solution.json").read_text())["slots"]
    assert set(picks) == {s["slot"] for s in asm.truth["slots"]}


def test_heuristic_repair_undoes_the_visual_defects(data, tmp_path):
    rewards = {}
    for k in range(3):
        task = _task(data, f"repair_00{k}")
        solve("heuristic", task.root, tmp_path / str(k))
        rewards[task.subtype] = verify_cli(task.root, tmp_path / str(k))
    assert rewards["repeated_frames"]["reward"] == 1.0
    for defect in ("colour_shift", "blur"):
        d = rewards[defect]["details"]
        assert d["status"] == "ok" and d["s_in"] > 0.25 and d["s_out"] > 0.9, (defect, d)


# ----------------------------------------------------------------------------- the benchmark, in-process


FEW_RESAMPLES = "stats.bootstrap_samples=100"


def _run(bench):
    cases = bench.load_cases()
    keys = {k for c in cases for k in c}
    table = run_local(cases, bench.stages(), pa.schema([f for f in bench.schema() if f.name in keys]))
    return table, bench.summarize(table)


def test_benchmark_counts_missing_invalid_and_failed(data, tmp_path):
    tasks = Path(data["tasks_dir"])
    subs = tmp_path / "subs"
    # sequencing_000: rep 0 perfect, rep 1 malformed, rep 2 absent -> (1 + 0 + 0) / 3
    seq = _task(data, "sequencing_000")
    sequencing_oracle(seq, subs / "sequencing_000" / "0", np.random.default_rng(0))  # segments + the clips shown
    (subs / "sequencing_000" / "1").mkdir()
    (subs / "sequencing_000" / "1" / "solution.json").write_text("{oops")
    # repair_002 (repeated frames): the broken input copied -> gated
    (subs / "repair_002" / "a").mkdir(parents=True)
    shutil.copyfile(tasks / "repair_002" / "inputs" / "broken.mp4", subs / "repair_002" / "a" / "fixed.mp4")
    cfg = agentic_cfg(
        data,
        tmp_path / "run",
        FEW_RESAMPLES,
        f"data.submissions_dir={subs}",
        "data.families=[sequencing,repair]",
        "repurpose.judge_enabled=false",
    )
    table, summary = _run(AgenticBench(cfg))
    rows = {r["case_id"]: r for r in table.to_pylist()}
    assert len(rows) == 5 * 3  # 2 sequencing + 3 repair tasks, K=3 each
    assert rows["sequencing_000:0"]["reward"] == 1.0 and rows["sequencing_000:0"]["status"] == "ok"
    assert rows["sequencing_000:1"]["status"] == "invalid" and "not valid JSON" in rows["sequencing_000:1"]["reason"]
    assert rows["sequencing_000:missing0"]["status"] == "missing"
    assert rows["repair_002:a"]["status"] == "invalid" and "verbatim" in rows["repair_002:a"]["reason"]
    assert summary["by_task"]["sequencing_000"]["mean"] == pytest.approx(1 / 3)
    assert summary["counts"]["sequencing"] == {
        **summary["counts"]["sequencing"],
        "tasks": 2,
        "rollouts": 6,
        "ok": 1,
        "invalid": 1,
        "missing": 4,
        "failed": 0,
    }
    assert summary["counts"]["repair"]["invalid"] == 1 and summary["counts"]["repair"]["missing"] == 8
    assert summary["metrics"]["sequencing"]["value"] == pytest.approx((1 / 3 + 0) / 2)
    assert summary["metrics"]["repair"]["value"] == 0.0 and summary["metrics"]["sequencing_strict"][
        "value"
    ] == pytest.approx(1 / 6)
    assert set(summary["metrics"]) >= {"sequencing", "repair", "overall"} and "assembly" not in summary["metrics"]


def test_benchmark_failed_verification_is_counted(data, tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(Path(data["tasks_dir"]) / "repair_000", tasks / "repair_000")
    (tasks / "repair_000" / "truth" / "golden.mp4").unlink()  # a broken bundle: verification raises
    subs = tmp_path / "subs"
    (subs / "repair_000" / "0").mkdir(parents=True)
    shutil.copyfile(
        Path(data["tasks_dir"]) / "repair_000" / "truth" / "golden.mp4", subs / "repair_000" / "0" / "fixed.mp4"
    )
    cfg = load_config(
        AGENTIC,
        [
            f"data.tasks_dir={tasks}",
            f"data.submissions_dir={subs}",
            f"output.dir={tmp_path / 'r'}",
            "data.reps=1",
            "stats.bootstrap_samples=100",
        ],
    )
    table, summary = _run(AgenticBench(cfg))
    row = table.to_pylist()[0]
    assert row["error_verify"] and "golden.mp4" in row["error_verify"]
    assert summary["counts"]["repair"]["failed"] == 1 and summary["metrics"]["repair"]["value"] == 0.0
    assert summary["failures"]["by_stage"] == {"verify": 1}


def test_benchmark_data_errors(data, tmp_path):
    bench = AgenticBench
    with pytest.raises(DataError, match="data.submissions_dir is not set"):
        bench(agentic_cfg(data, tmp_path / "r", FEW_RESAMPLES)).load_cases()
    with pytest.raises(DataError, match="not a directory"):
        bench(
            agentic_cfg(data, tmp_path / "r", FEW_RESAMPLES, f"data.submissions_dir={tmp_path / 'none'}")
        ).load_cases()
    with pytest.raises(DataError, match="unknown famil"):
        bench(
            agentic_cfg(data, tmp_path / "r", FEW_RESAMPLES, "data.agent=random", "data.families=[editing]")
        ).load_cases()
    with pytest.raises(DataError, match="repair.visual_metrics"):
        bench(
            agentic_cfg(data, tmp_path / "r", FEW_RESAMPLES, "data.agent=random", "repair.visual_metrics=[vmaf]")
        ).load_cases()
