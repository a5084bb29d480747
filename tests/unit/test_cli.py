"""The command line: synth, report, errors as messages (not tracebacks)."""

import json
from pathlib import Path

import pytest

from vbench_ray.cli import main


def test_synth_command_writes_the_official_layout(tmp_path, capsys):
    assert main(["synth", "cove", "--out", str(tmp_path / "d"), "--n", "3", "--seed", "1"]) == 0
    tasks = json.loads((tmp_path / "d" / "checklist.json").read_text())
    assert [t["id"] for t in tasks] == [1, 2, 3]
    assert all((tmp_path / "d" / t["videoA_path"]).exists() for t in tasks)
    assert all((tmp_path / "d" / "edited" / f"{t['id']}.mp4").exists() for t in tasks)
    assert "checklist" in capsys.readouterr().out


def test_config_errors_are_one_line_messages(tmp_path, capsys):
    code = main(["run", "configs/cove.yaml", "data.checklst=x"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown config key `data.checklst`") and "Traceback" not in err


def test_data_errors_are_one_line_messages(tmp_path, capsys):
    code = main(
        [
            "run",
            "configs/cove.yaml",
            f"data.checklist={tmp_path}/none.json",
            f"data.source_dir={tmp_path}",
            f"data.edited_dir={tmp_path}",
            f"output.dir={tmp_path}/run",
            "wandb.mode=disabled",
            "metrics.enabled=[SSIM]",
        ]
    )  # (no judge: an unset judge.model is caught before the data is read)
    assert code == 2
    assert "data.checklist not found" in capsys.readouterr().err


def test_verify_agentic_writes_reward_json(tmp_path, capsys):
    from vbench_ray.agentic import synth_agentic

    info = synth_agentic(tmp_path / "tasks", seed=0, n_assembly=0, n_sequencing=1, n_repair=0, n_repurpose=0)
    task = next(p for p in (tmp_path / "tasks").rglob("task.json")).parent
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "solution.json").write_text('{"order": ["not-a-clip"]}')
    assert main(["verify", "agentic", "--task", str(task), "--submission", str(sub)]) == 0
    reward = json.loads((sub / "reward.json").read_text())
    assert reward["reward"] == 0 and reward["details"]["status"] == "invalid"
    assert "unknown clip" in reward["details"]["reason"] and info["n_tasks"] == 1


# ----------------------------------------------------------------------------- discovery (issue 26, items 1 and 5)


def _help(argv: list[str], capsys) -> str:
    import pytest

    with pytest.raises(SystemExit) as exit_:
        main(argv + ["--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def _subparsers():
    import argparse

    from vbench_ray.cli import build_parser

    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_list_prints_one_line_per_entry_with_section_scale_and_needs(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    for heading in ("benchmarks (4):", "metrics (32):", "judges (4):", "editors (4):"):  # 15 frame metrics + 17
        assert heading in out
    assert {
        "cove",
        "vidic",
        "nrv",
        "agentic",
        "SSIM",
        "AES",
        "BG_LPIPS",
        "vllm",
        "http",
        "hf",
        "replay",
        "precomputed",
        "identity",
        "command",
        "diffusers",
    } <= set(lines)
    assert "CoVEBench App. F.3" in lines["SSIM"] and "scale [0,1]" in lines["SSIM"]
    assert "needs: CPU only" in lines["SSIM"]
    assert "needs: weights (metrics.AES.encoder, metrics.AES.weights), GPU optional" in lines["AES"]
    assert "needs: weights for some settings (metrics.MF.cotracker_weights)" in lines["MF"]
    assert "GPU" in lines["vllm"] and "judge.model" in lines["vllm"] and "NRVBench §4" in lines["nrv"]
    # the metrics a benchmark scores with its judge or verifiers are listed too
    assert "CoVEBench §3.1, App. F.1 [cove]" in lines["UAS"] and "scale percent" in lines["UAS"]
    assert "NRVBench §4.2, Eq. 3 [nrv]" in lines["S_phy"] and "ViDiC §3.3.2" in lines["Avg"]
    assert main(["list", "judges"]) == 0
    only = capsys.readouterr().out.splitlines()
    assert only[0] == "judges (4):" and len(only) == 5


def test_a_toy_of_each_registers_and_is_listed(monkeypatch, capsys):
    """A new metric, benchmark, editor and judge backend: registering each is all `vbench-ray list` needs."""
    from vbench_ray.benchmarks import BENCHMARKS, Benchmark
    from vbench_ray.editors import EDITORS, Editor
    from vbench_ray.judges.backends import BACKENDS
    from vbench_ray.metrics import METRICS, FrameMetric

    toy_metric = type(
        "ToyMetric",
        (FrameMetric,),
        {"name": "ToyMetric", "paper": "Toy §9", "scale": "[0,7]", "weights_from": {"weights": "toy/toy-weights"}},
    )
    toy_bench = type("ToyBench", (Benchmark,), {"name": "toybench", "paper": "ToyBench §2", "needs": "a toy judge"})
    toy_editor = type("ToyEditor", (Editor,), {"name": "toyedit", "paper": "toy editing", "needs": "GPU"})
    for registry, name, obj in (
        (METRICS, "ToyMetric", toy_metric),
        (BENCHMARKS, "toybench", toy_bench),
        (EDITORS, "toyedit", toy_editor),
        (BACKENDS, "toyjudge", "vbench_ray.judges.backends.replay:ReplayBackend"),
    ):
        monkeypatch.setitem(registry, name, obj)  # the registration, undone after the test
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "Toy §9" in lines["ToyMetric"] and "scale [0,7]" in lines["ToyMetric"]
    assert "needs: weights (metrics.ToyMetric.weights)" in lines["ToyMetric"]
    assert "ToyBench §2" in lines["toybench"] and "needs: a toy judge" in lines["toybench"]
    assert "toy editing" in lines["toyedit"] and "needs: GPU" in lines["toyedit"]
    assert "toyjudge" in lines


def test_a_toy_benchmark_is_one_module_its_preflight_and_synth_hooks_run(tmp_path, monkeypatch, capsys):
    """A benchmark defined here, with a metric defined here, registered without touching any other module:
    `vbench-ray synth` writes its data through ``Benchmark.synth``, and preflight reports its own problem
    (``Benchmark.check_config``) and its judge under the key ``Benchmark.judge_key`` gives, with the generic ones."""
    from omegaconf import OmegaConf

    from vbench_ray import preflight
    from vbench_ray.benchmarks import BENCHMARKS, Benchmark
    from vbench_ray.benchmarks.base import JudgePhase
    from vbench_ray.config import ConfigError
    from vbench_ray.metrics import METRICS, FrameMetric

    class ToyCount(FrameMetric):
        name = "ToyCount"
        paper = "Toy §1"

        @classmethod
        def check_weights(cls, cfg) -> list[str]:
            return [] if cfg.get("weights") else ["`metrics.ToyCount.weights` is not set"]

    class ToyBench(Benchmark):
        name = "toybench"
        metric_names = ("ToyCount",)

        def check_config(self) -> list[str]:
            answers = Path(self.cfg.data.answers)
            return [] if answers.exists() else [f"`data.answers` = {str(answers)!r} does not exist"]

        def judge_phases(self):
            return [JudgePhase("grade", self.cfg.grader, build=lambda rows, results: [])]

        def judge_key(self, phase: str):
            return "grader"

        @classmethod
        def synth(cls, out: Path, n: int, seed: int) -> dict:
            out.mkdir(parents=True, exist_ok=True)
            (out / "answers.jsonl").write_text("".join(json.dumps({"id": i, "seed": seed}) + "\n" for i in range(n)))
            return {"answers": out / "answers.jsonl", "n": n, "meta": {"not": "printed"}}

    monkeypatch.setitem(METRICS, "ToyCount", ToyCount)  # the registrations, undone after the test
    monkeypatch.setitem(BENCHMARKS, "toybench", ToyBench)

    assert main(["synth", "toybench", "--out", str(tmp_path / "data"), "--n", "3", "--seed", "5"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"answers": str(tmp_path / "data" / "answers.jsonl"), "n": "3"}
    assert [json.loads(line) for line in Path(printed["answers"]).read_text().splitlines()] == [
        {"id": i, "seed": 5} for i in range(3)
    ]

    cfg = OmegaConf.create(
        {
            "benchmark": "toybench",
            "output": {"dir": str(tmp_path / "run")},
            "data": {"answers": printed["answers"]},
            "grader": {"backend": "replay", "replay_path": printed["answers"]},
            "metrics": {"enabled": ["ToyCount"], "ToyCount": {"weights": "w.bin"}},
        }
    )
    preflight.check(cfg)  # the synthetic data, its metric's weights named, a known judge backend: nothing to say
    cfg.data.answers = str(tmp_path / "nowhere.jsonl")
    cfg.grader.backend = "nosuch"
    cfg.metrics.ToyCount.weights = None
    with pytest.raises(ConfigError) as err:
        preflight.check(cfg)
    problems = [line[4:] for line in str(err.value).splitlines()[1:]]
    assert problems[0] == "`metrics.ToyCount.weights` is not set"
    assert problems[1].startswith("`grader.backend`: unknown judge backend 'nosuch'")
    assert problems[2] == f"`data.answers` = {str(tmp_path / 'nowhere.jsonl')!r} does not exist"
    assert len(problems) == 3
    assert main(["synth", "nosuchbench", "--out", str(tmp_path / "x")]) == 2
    assert "unknown benchmark 'nosuchbench'; available: " in capsys.readouterr().err


def test_config_prints_the_composed_config_with_comments(tmp_path, capsys):
    from omegaconf import OmegaConf

    from vbench_ray.configure import load_config

    assert main(["config", "cove", "run.limit=3"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "  checklist: '???'  # the official checklist.json" in lines  # the benchmark's YAML
    # base.yaml's
    assert "  bootstrap_samples: 1000  # resamples for the 95% percentile bootstrap CIs in summary.json" in lines
    assert "  limit: 3  # evaluate only the first N cases (smoke runs)" in lines  # the override, base.yaml's comment
    judge = lines[lines.index("judge:") :]
    assert any(line.startswith("  backend: vllm  # vllm (a Ray Serve LLM") for line in judge)  # included files
    # a key no YAML comments takes its dataclass field's comment
    assert any(line.startswith("    grounding_dino: null  # local Grounding DINO dir") for line in lines)
    # and it is the config a run gets: read back, it composes to the same values
    saved = tmp_path / "cove_full.yaml"
    saved.write_text(out)
    again = load_config(saved, require_all=False)
    assert OmegaConf.to_container(again) == OmegaConf.to_container(
        load_config("configs/cove.yaml", ["run.limit=3"], require_all=False)
    )
    # a file an override puts at a node (editor=vace: configs/editors/vace.yaml) brings its comments there
    assert main(["config", "cove", "editor=vace"]) == 0
    assert "  weights: null  # the local Wan2.1-VACE-14B-diffusers folder" in capsys.readouterr().out
    assert main(["config", "cvoe"]) == 2
    assert "unknown benchmark 'cvoe'; available: agentic, cove, nrv, vidic" in capsys.readouterr().err


def test_top_level_help_lists_every_command_and_every_option_has_help(capsys):
    commands = _subparsers()
    top = _help([], capsys)
    for name in commands:
        assert f"    vbench-ray {name}" in top, name  # a line each in the overview
        assert f"    {name} " in top, name  # and in argparse's list
    for name, parser in commands.items():
        missing = [a.dest for a in parser._actions if not a.help and a.dest != "help"]
        assert not missing, f"`vbench-ray {name}`: no help text for {missing}"
    run = _help(["run"], capsys)
    assert "vbench-ray config BENCHMARK" in run and "run.limit" in run and "metrics.enabled" in run


def test_weights_check_needs_no_data_and_reports_every_missing_weight(capsys):
    """No data.* and no output.dir; the metrics', the editor's and the judge's missing weights in one report,
    each with its key and where the official weights are published."""
    code = main(["weights", "check", "configs/cove.yaml", "metrics.enabled=[SSIM,AES,TQ,UAS]", "editor=vace"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 5 problems with the weights and models this config needs")
    expected = {  # key -> where its official weights are published
        "metrics.AES.encoder": "google/siglip-so400m-patch14-384",
        "metrics.AES.weights": "https://github.com/discus0434/aesthetic-predictor-v2-5",
        "metrics.TQ.weights": "https://github.com/NJU-LINK/T2AV-Compass",
        "editor.weights": "Wan-AI/Wan2.1-VACE-14B-diffusers",
        "judge.model": "Qwen/Qwen3.5-122B-A10B",
    }
    problems = [line for line in err.splitlines() if line.startswith("  - ")]
    assert len(problems) == 5
    for key, source in expected.items():
        assert any(f"`{key}`" in p and source in p for p in problems), (key, problems)
    assert "data." not in err and "output.dir" not in err


def test_weights_check_without_data_passes_when_nothing_is_missing(capsys):
    assert main(["weights", "check", "cove", "metrics.enabled=[SSIM,MSM]"]) == 0
    assert "weights ok: no enabled metric or editor needs weights" in capsys.readouterr().out


def test_weights_check_says_where_every_official_weight_is_published(capsys):
    """Every model-backed metric of CoVEBench and NRVBench, the editor and every judge: each missing one is named by
    its key with where its official weights (or the paper's judge) are published."""
    cases = {
        (
            "cove",
            "metrics.enabled=[SSIM,MSM,MF,SRC,AES,TQ,UAS,VQR]",
            "metrics.MSM.flow=raft",
            "metrics.MF.tracker=cotracker",
            "editor=vace",
        ): 11,  # MSM 1, MF 1, SRC 3, AES 2, TQ 1, editor, judge, vqr
        ("nrv", "metrics.enabled=[NRVE_Acc,BG_LPIPS,StructDist,CLIP_S,CLIP_E,NIQE]"): 6,  # 5 metrics and the judge
        ("vidic",): 2,  # the model under test and the judge
    }
    for argv, n in cases.items():
        assert main(["weights", "check", *argv]) == 2
        problems = [line for line in capsys.readouterr().err.splitlines() if line.startswith("  - ")]
        assert len(problems) == n, problems
        assert all("; official weights: " in p or "; the paper's model: " in p for p in problems), problems
