"""`vbench-ray compare` and seeds: a seed that changes what is scored makes runs that differ in it mixed (refused
unless --allow-mixed, then tagged on the metrics it moves): a metric's own seed (TQ's clip and fragment offsets), a
judge's seed where it samples (temperature > 0: the checklist judge, a `judges` entry, CoVEBench's VQR judge, ViDiC's
model under test), `run.seed` where it draws the scored videos or answers (NRVBench's seeded controls, the random and
heuristic AgenticVBench baselines). A seed that cannot change a value stays a runtime setting: a judge's at
temperature 0, `run.seed` where it seeds only the bootstrap CIs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from vbench_ray.compare import CompareError, compare

CASES = ["1", "2", "3"]
VALUES = {"A": [0.9, 0.8, 0.7], "B": [0.6, 0.5, 0.4]}


def seed_run(root: Path, name: str, config: dict, metrics=("SSIM", "TQ"), variant: str = "base") -> Path:
    """A finished run folder: ``config`` as config.yaml, one value per case of each metric in cases/ (rows of
    ``variant``), summary.json with each metric's mean."""
    run = root / name
    (run / "cases").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    values = VALUES["A" if name.startswith("A") else "B"]
    frame = {"case_id": CASES, "variant": variant, **{m: values for m in metrics}}
    pd.DataFrame(frame).to_parquet(run / "cases" / "part-00000.parquet")
    summary = {
        "benchmark": config["benchmark"],
        "run_name": name,
        "n_cases": len(CASES),
        "metrics": {
            m: {"value": sum(values) / len(values), "ci95": [0, 1], "n": len(CASES), "higher_is_better": True}
            for m in metrics
        },
    }
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def cove_config(**changes) -> dict:
    config = {
        "benchmark": "cove",
        "run": {"seed": 0},
        "stats": {"confidence": 0.95},
        "score": {"aggregation": "pooled"},
        "judge": {"model": "/models/judge-x", "temperature": 0.0, "top_p": 1.0, "max_tokens": 100, "seed": 0},
        "vqr": {"model": "/models/vqr", "temperature": 1.0, "top_k": 50, "seed": 0},
        "metrics": {
            "enabled": ["SSIM", "TQ"],
            "SSIM": {"frames": 10, "device": "cpu"},
            "TQ": {"clip_len": 32, "seed": 0, "device": "cpu", "gpu_fraction": 0.1},
        },
    }
    for key, value in changes.items():
        node = config
        *path, last = key.split(".")
        for part in path:
            node = node[part]
        node[last] = value
    return config


def pair(tmp_path: Path, a: dict, b: dict, **kw) -> list[Path]:
    return [seed_run(tmp_path, "A", a, **kw), seed_run(tmp_path, "B", b, **kw)]


def mixed(runs: list[Path], **kw) -> dict:
    return compare(runs, allow_mixed=True, n_resamples=20, n_permutations=50, analyses=False, **kw)["mixed_options"]


def test_a_metrics_own_seed_is_mixed_and_tags_that_metric_alone(tmp_path):
    runs = pair(tmp_path, cove_config(), cove_config(**{"metrics.TQ.seed": 1}))
    with pytest.raises(CompareError, match=r"metrics\.TQ\.seed: A=0, B=1"):
        compare(runs, analyses=False)
    board = compare(runs, allow_mixed=True, n_resamples=20, n_permutations=50, analyses=False)
    assert board["mixed_options"] == {"metrics.TQ.seed": {"A": 0, "B": 1}}
    rows = {r["label"]: r for r in board["rows"]}
    assert rows["B"]["metrics"]["TQ"]["options"] == {"metrics.TQ.seed": 1}
    assert rows["B"]["metrics"]["SSIM"]["options"] == {}
    # where TQ ran is still no scoring option
    assert mixed(pair(tmp_path / "device", cove_config(), cove_config(**{"metrics.TQ.device": "cuda"}))) == {}


def test_the_judges_seed_is_mixed_only_where_it_samples(tmp_path):
    greedy = pair(tmp_path / "greedy", cove_config(), cove_config(**{"judge.seed": 7}))
    assert mixed(greedy) == {}  # temperature 0: greedy decoding, the seed picks nothing
    sampled = pair(
        tmp_path / "sampled",
        cove_config(**{"judge.temperature": 0.7}),
        cove_config(**{"judge.temperature": 0.7, "judge.seed": 7}),
    )
    with pytest.raises(CompareError, match=r"judge\.seed: A=0, B=7"):
        compare(sampled, analyses=False)
    assert mixed(sampled) == {"judge.seed": {"A": 0, "B": 7}}


def test_a_judges_entrys_seed_is_mixed_where_that_judge_samples(tmp_path):
    def nrv(entries: list[dict]) -> dict:
        return {
            "benchmark": "nrv",
            "run": {"seed": 0},
            "stats": {"confidence": 0.95},
            "judge": {"model": "/m/qwen-7b", "temperature": 0.0, "seed": 0},
            "judges": entries,
            "controls": {"names": []},
        }

    a = [{"model": "/m/qwen-7b"}, {"model": "/m/qwen-32b", "seed": 1}]
    b = [{"model": "/m/qwen-7b", "seed": 5}, {"model": "/m/qwen-32b", "seed": 2}]
    assert mixed(pair(tmp_path / "greedy", nrv(a), nrv(b), metrics=("BG_SSIM",))) == {}
    # the second judge samples (its own temperature); the first keeps `judge`'s 0
    a[1]["temperature"] = b[1]["temperature"] = 0.5
    runs = pair(tmp_path / "sampled", nrv(a), nrv(b), metrics=("BG_SSIM",))
    assert mixed(runs) == {"judges[1].seed": {"A": 1, "B": 2}}
    # an entry without its own seed samples with `judge`'s
    del b[1]["seed"]
    runs = pair(tmp_path / "inherited", nrv(a), nrv(b), metrics=("BG_SSIM",))
    assert mixed(runs) == {"judges[1].seed": {"A": 1, "B": 0}}


def test_vqrs_seed_is_mixed_where_vqr_is_scored_and_tags_vqr_alone(tmp_path):
    a, b = cove_config(), cove_config(**{"vqr.seed": 3})
    for config in (a, b):
        config["metrics"]["enabled"] = ["SSIM", "VQR"]
    runs = pair(tmp_path / "on", a, b, metrics=("SSIM", "VQR"))
    with pytest.raises(CompareError, match=r"vqr\.seed: A=0, B=3"):
        compare(runs, analyses=False)
    board = compare(runs, allow_mixed=True, n_resamples=20, n_permutations=50, analyses=False)
    rows = {r["label"]: r for r in board["rows"]}
    assert rows["B"]["metrics"]["VQR"]["options"] == {"vqr.seed": 3}
    assert rows["B"]["metrics"]["SSIM"]["options"] == {}
    # VQR not scored, or its judge greedy: the seed changes nothing
    off = pair(tmp_path / "off", cove_config(), cove_config(**{"vqr.seed": 3}))
    assert mixed(off) == {}
    for config in (a, b):
        config["vqr"]["temperature"] = 0.0
    assert mixed(pair(tmp_path / "greedy", a, b, metrics=("SSIM", "VQR"))) == {}


def test_vidics_model_seed_is_mixed_where_the_model_samples(tmp_path):
    def vidic(temperature: float, seed: int) -> dict:
        return {
            "benchmark": "vidic",
            "run": {"seed": 0},
            "stats": {"confidence": 0.95},
            "judge": {"model": "/m/judge", "temperature": 0.0, "seed": 0},
            "model": {"model": "/m/qwen", "temperature": temperature, "top_p": 1.0, "seed": seed, "video": {}},
        }

    assert mixed(pair(tmp_path / "sampled", vidic(0.7, 0), vidic(0.7, 4), metrics=("Avg",))) == {
        "model.seed": {"A": 0, "B": 4}
    }
    assert mixed(pair(tmp_path / "greedy", vidic(0.0, 0), vidic(0.0, 4), metrics=("Avg",))) == {}


def test_run_seed_is_mixed_only_where_it_draws_what_is_scored(tmp_path):
    # CoVEBench: run.seed seeds the bootstrap CIs only
    cove = pair(tmp_path / "cove", cove_config(), cove_config(**{"run.seed": 9}))
    assert mixed(cove) == {}

    # NRVBench: a seeded control (a frame permutation) is drawn from run.seed; the real edits and the
    # unchanged and appearance controls draw nothing
    nrv = {"benchmark": "nrv", "run": {"seed": 0}, "stats": {"confidence": 0.95}, "controls": {"names": ["shuffled"]}}
    nrv9 = copy.deepcopy(nrv)
    nrv9["run"]["seed"] = 9
    for variant, expected in (
        ("base", {}),
        ("control:appearance", {}),
        ("control:shuffled", {"run.seed": {"A": 0, "B": 9}}),
    ):
        runs = pair(tmp_path / variant.replace(":", "_"), nrv, nrv9, metrics=("S_temp",), variant=variant)
        assert mixed(runs, variant=variant) == expected, variant

    # AgenticVBench: the random and heuristic baselines draw their picks from run.seed; the oracle does not
    def agentic(agent: str, seed: int) -> dict:
        return {"benchmark": "agentic", "run": {"seed": seed}, "stats": {"confidence": 0.95}, "data": {"agent": agent}}

    for agent, expected in (("random", {"run.seed": {"A": 0, "B": 9}}), ("heuristic", {"run.seed": {"A": 0, "B": 9}})):
        runs = pair(tmp_path / agent, agentic(agent, 0), agentic(agent, 9), metrics=("overall",))
        with pytest.raises(CompareError, match=r"run\.seed: A=0, B=9"):
            compare(runs, analyses=False)
        assert mixed(runs) == expected
    assert mixed(pair(tmp_path / "oracle", agentic("oracle", 0), agentic("oracle", 9), metrics=("overall",))) == {}
