"""`vbench-ray compare` and seeds: a seed that changes what is scored makes runs that differ in it mixed (refused
unless --allow-mixed, then tagged on the metrics it moves): a metric's own seed (TQ's clip and fragment offsets), a
judge's seed where it samples (temperature > 0: the checklist judge, a `judges` entry, CoVEBench's VQR judge, ViDiC's
model under test, an LLM agent), `run.seed` where it draws the scored videos or answers (NRVBench's seeded controls,
the random and heuristic AgenticVBench baselines), the editor's where an editor makes the videos from it. A seed that
cannot change a value stays a runtime setting: a judge's at temperature 0, `run.seed` where it seeds only the
bootstrap CIs. Beyond seeds: every judge-like section decodes by one rule (top_p, top_k and seed only where it
samples), a metric's declared runtime keys do not count but its dtype does (AES's `auto` as it resolved on its device),
a judge backend's dtype and engine settings count but how it is served does not, and a judge served by another backend
is a note, not a refusal."""

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
        "judge": {
            "model": "/models/judge-x",
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": None,
            "max_tokens": 100,
            "seed": 0,
        },
        "vqr": {"model": "/models/vqr", "temperature": 1.0, "top_p": 1.0, "top_k": 50, "max_tokens": 512, "seed": 0},
        "metrics": {
            "enabled": ["SSIM", "TQ"],
            "SSIM": {"frames": 10, "device": "cpu"},
            "TQ": {
                "clip_len": 32,
                "seed": 0,
                "dtype": "float32",
                "pool_batch": 4,
                "device": "cpu",
                "gpu_fraction": 0.1,
            },
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


# ----------------------------------------------------------------------------- sampling, judge-like sections


def test_top_p_top_k_and_seed_count_only_where_the_judge_samples(tmp_path):
    # temperature 0: vLLM resets top_p and top_k for greedy decoding, hf generates without do_sample
    greedy = pair(tmp_path / "greedy", cove_config(), cove_config(**{"judge.top_p": 0.5, "judge.top_k": 20}))
    assert mixed(greedy) == {}
    hot = {"judge.temperature": 0.7}
    sampled = pair(tmp_path / "sampled", cove_config(**hot), cove_config(**hot, **{"judge.top_k": 20}))
    with pytest.raises(CompareError, match=r"judge\.top_k: A=null, B=20"):
        compare(sampled, analyses=False)
    assert mixed(sampled) == {"judge.top_k": {"A": None, "B": 20}}
    # a `judges` entry samples with its own temperature, over `judge`'s top_k
    a = {**cove_config(**hot), "judges": [{"model": "/m/j2"}]}
    b = {**cove_config(**hot, **{"judge.top_k": 5}), "judges": [{"model": "/m/j2", "top_k": 7}]}
    assert mixed(pair(tmp_path / "entries", a, b)) == {
        "judge.top_k": {"A": None, "B": 5},
        "judges[0].top_k": {"A": None, "B": 7},
    }


def test_vqrs_judge_is_compared_as_the_judge_is_and_tags_vqr_alone(tmp_path):
    def vqr(**changes) -> dict:
        config = cove_config(**changes)
        config["metrics"]["enabled"] = ["SSIM", "VQR"]
        return config

    for change, expected in (
        ({"vqr.model": "/other/VisualQuality-R1-b"}, {"vqr": {"A": "vqr", "B": "VisualQuality-R1-b"}}),
        ({"vqr.top_k": 20}, {"vqr.top_k": {"A": 50, "B": 20}}),
        ({"vqr.max_tokens": 64}, {"vqr.max_tokens": {"A": 512, "B": 64}}),
        ({"vqr.temperature": 0.5}, {"vqr.temperature": {"A": 1.0, "B": 0.5}}),
    ):
        key = next(iter(expected))
        runs = pair(tmp_path / key, vqr(), vqr(**change), metrics=("SSIM", "VQR"))
        board = compare(runs, allow_mixed=True, n_resamples=20, n_permutations=50, analyses=False)
        assert board["mixed_options"] == expected, change
        rows = {r["label"]: r for r in board["rows"]}
        assert rows["B"]["metrics"]["VQR"]["options"] == {key: expected[key]["B"]}
        assert rows["B"]["metrics"]["SSIM"]["options"] == {}
    # greedy VQR: its top_k picks nothing
    greedy = pair(tmp_path / "greedy", vqr(**{"vqr.temperature": 0.0}), vqr(**{"vqr.temperature": 0.0, "vqr.top_k": 1}))
    assert mixed(greedy) == {}


def vidic(**model) -> dict:
    return {
        "benchmark": "vidic",
        "run": {"seed": 0},
        "stats": {"confidence": 0.95},
        "judge": {"model": "/m/judge", "temperature": 0.0, "seed": 0},
        "model": {
            "model": "/m/qwen",
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": None,
            "seed": 0,
            "max_tokens": 2048,
            "video": {},
        }
        | model,
    }


def test_vidics_model_under_test_decodes_by_the_judges_rules(tmp_path):
    runs = pair(tmp_path / "sampled", vidic(), vidic(top_k=20, max_tokens=512), metrics=("Avg",))
    assert mixed(runs) == {"model.max_tokens": {"A": 2048, "B": 512}, "model.top_k": {"A": None, "B": 20}}
    greedy = pair(tmp_path / "greedy", vidic(temperature=0.0), vidic(temperature=0.0, top_p=0.5), metrics=("Avg",))
    assert mixed(greedy) == {}
    # the model under test is what the leaderboard compares: its identity is no option
    assert mixed(pair(tmp_path / "models", vidic(), vidic(model="/m/other"), metrics=("Avg",))) == {}


def test_the_editors_seed_counts_where_the_editor_draws_from_it(tmp_path):
    def edited(name: str, seed: int) -> dict:
        return cove_config() | {"editor": {"name": name, "seed": seed, "num_gpus": 1.0}}

    runs = pair(tmp_path / "command", edited("command", 0), edited("command", 1))
    with pytest.raises(CompareError, match=r"editor\.seed: A=0, B=1"):
        compare(runs, analyses=False)
    # precomputed videos (made elsewhere) and the identity control (a copy of the source) draw nothing
    for name in ("precomputed", "identity"):
        assert mixed(pair(tmp_path / name, edited(name, 0), edited("command", 1))) == {}
        assert mixed(pair(tmp_path / f"{name}2", edited(name, 0), edited(name, 1))) == {}


def test_an_llm_agents_decoding_and_seed_count_where_it_made_the_submissions(tmp_path):
    def agentic(agent: dict, data_agent=None) -> dict:
        return {
            "benchmark": "agentic",
            "run": {"seed": 0},
            "stats": {"confidence": 0.95},
            "data": {"agent": data_agent},
            "agent": {"model": "qwen", "temperature": None, "top_p": None, "max_tokens": None, "seed": None} | agent,
        }

    # a null temperature is the provider's default, which samples: the seed picks the rollouts
    runs = pair(tmp_path / "default", agentic({"seed": 1}), agentic({"seed": 2}), metrics=("overall",))
    with pytest.raises(CompareError, match=r"agent\.seed: A=1, B=2"):
        compare(runs, analyses=False)
    greedy = pair(
        tmp_path / "greedy",
        agentic({"temperature": 0.0, "seed": 1}),
        agentic({"temperature": 0.0, "seed": 2}),
        metrics=("overall",),
    )
    assert mixed(greedy) == {}
    hot = pair(tmp_path / "hot", agentic({"max_tokens": 100}), agentic({"max_tokens": 200}), metrics=("overall",))
    assert mixed(hot) == {"agent.max_tokens": {"A": 100, "B": 200}}
    # a baseline agent made them: the LLM agent's settings are unused; another model is what is compared
    oracle = pair(
        tmp_path / "oracle", agentic({"seed": 1}, "oracle"), agentic({"seed": 2}, "oracle"), metrics=("overall",)
    )
    assert mixed(oracle) == {}
    assert mixed(pair(tmp_path / "models", agentic({}), agentic({"model": "gpt"}), metrics=("overall",))) == {}


# ----------------------------------------------------------------------------- runtime keys, dtype, backend


def test_a_metrics_declared_runtime_keys_do_not_count_but_its_dtype_does(tmp_path):
    # TQ and SRC declare pool_batch runtime (their cases score the same in pool calls of 1 and 4); MF does not
    config = cove_config()
    config["metrics"]["SRC"] = {"pool_batch": 4, "device": "cpu"}
    config["metrics"]["MF"] = {"pool_batch": 8, "device": "cpu"}
    changed = copy.deepcopy(config)
    changed["metrics"]["TQ"]["pool_batch"] = 1
    changed["metrics"]["SRC"]["pool_batch"] = 1
    changed["metrics"]["MF"]["pool_batch"] = 1
    assert mixed(pair(tmp_path / "pool", config, changed, metrics=("SSIM", "TQ", "SRC", "MF"))) == {
        "metrics.MF.pool_batch": {"A": 8, "B": 1}
    }
    # weights in bfloat16 score other values than in float32
    runs = pair(tmp_path / "dtype", cove_config(), cove_config(**{"metrics.TQ.dtype": "bfloat16"}))
    with pytest.raises(CompareError, match=r"metrics\.TQ\.dtype: A=\"float32\", B=\"bfloat16\""):
        compare(runs, analyses=False)


def test_a_runtime_key_a_metric_config_lacks_is_refused_at_registration():
    from dataclasses import dataclass

    from vbench_ray.metrics.base import METRICS, FrameMetric, register_metric

    @dataclass
    class ToyConfig:
        frames: int = 4

    class Toy(FrameMetric):
        name = "toy_runtime_keys"
        config_class = ToyConfig
        runtime_keys = frozenset({"pool_batch"})

    try:
        with pytest.raises(TypeError, match=r"Toy\.runtime_keys names keys its config_class lacks: \['pool_batch'\]"):
            register_metric(Toy)
    finally:
        if Toy.name in METRICS:
            del METRICS[Toy.name]


def test_a_judge_served_by_another_backend_is_a_note_not_a_refusal(tmp_path):
    runs = pair(tmp_path / "hf", cove_config(**{"judge.backend": "vllm"}), cove_config(**{"judge.backend": "hf"}))
    board = compare(runs, n_resamples=20, n_permutations=50, analyses=False)
    assert board["mixed_options"] == {}
    assert [c for c in board["checks"] if "backend" in c] == [
        "judge.backend differs (A=vllm, B=hf): the same model served by another backend decodes with other kernels "
        "and video loaders, so its answers can differ (compared anyway)"
    ]
    # a replayed judge log answers as the backend that wrote it did
    replayed = pair(
        tmp_path / "replay", cove_config(**{"judge.backend": "vllm"}), cove_config(**{"judge.backend": "replay"})
    )
    assert compare(replayed, n_resamples=20, n_permutations=50, analyses=False)["checks"] == []


def test_a_judge_backends_dtype_and_engine_settings_count_but_how_it_is_served_does_not(tmp_path):
    """The judge backend's section is runtime but for the keys its config class says change what the model
    computes (``SCORING_KEYS``): hf's dtype (bfloat16 weights give other logits than float32), the engine_kwargs
    vLLM gets as they are (their dtype), the http backend's send_sampling (off: the server's defaults decode)."""
    hf = {"device": "cpu", "dtype": "bfloat16", "batch_size": 4, "workers": 1}
    vllm = {"tensor_parallel_size": 1, "replicas": 1, "batch_size": 16, "max_model_len": 32768, "engine_kwargs": {}}
    http = {"base_url": "http://127.0.0.1:8000/v1", "send_sampling": True, "concurrency": 4, "timeout_s": 600.0}

    def judge(backend: str, **section) -> dict:
        sections = {"hf": {**hf}, "vllm": copy.deepcopy(vllm), "http": {**http}}
        sections[backend].update(section)
        return cove_config(**{"judge.backend": backend, **{f"judge.{name}": s for name, s in sections.items()}})

    runs = pair(tmp_path / "hf_dtype", judge("hf"), judge("hf", dtype="float32"))
    with pytest.raises(CompareError, match=r"judge\.hf\.dtype: A=\"bfloat16\", B=\"float32\""):
        compare(runs, analyses=False)
    assert mixed(runs) == {"judge.hf.dtype": {"A": "bfloat16", "B": "float32"}}
    # where and in what batches it runs: accepted as it was
    hf_runtime = judge("hf", device="cuda", batch_size=1, workers=2)
    assert (
        compare(pair(tmp_path / "hf_rt", judge("hf"), hf_runtime), n_resamples=20, analyses=False)["mixed_options"]
        == {}
    )
    # another backend's section does not apply: a vllm run's unused hf dtype
    assert mixed(pair(tmp_path / "unused", judge("vllm"), judge("vllm"))) == {}
    unused = judge("vllm")
    unused["judge"]["hf"]["dtype"] = "float32"
    assert mixed(pair(tmp_path / "unused2", judge("vllm"), unused)) == {}

    half = judge("vllm", engine_kwargs={"dtype": "float16", "max_num_seqs": 8})
    with pytest.raises(CompareError, match=r"judge\.vllm\.engine_kwargs: A=\{\}, B=\{\"dtype\": \"float16\"\}"):
        compare(pair(tmp_path / "vllm_dtype", judge("vllm"), half), analyses=False)
    vllm_runtime = judge("vllm", tensor_parallel_size=2, replicas=4, batch_size=64, engine_kwargs={"max_num_seqs": 8})
    assert mixed(pair(tmp_path / "vllm_rt", judge("vllm"), vllm_runtime)) == {}

    no_sampling = judge("http", send_sampling=False)
    assert mixed(pair(tmp_path / "http", judge("http"), no_sampling)) == {
        "judge.http.send_sampling": {"A": True, "B": False}
    }
    http_runtime = judge("http", base_url="http://10.0.0.2:9000/v1", concurrency=16, timeout_s=60.0)
    assert mixed(pair(tmp_path / "http_rt", judge("http"), http_runtime)) == {}


def test_aes_dtype_auto_is_recorded_as_it_resolved_on_its_device(tmp_path):
    """AES's ``dtype: auto`` is float32 on the CPU and bfloat16 on CUDA: two runs whose config.yaml both say
    ``auto`` scored with other weights' precision, so compare records the resolved dtype (``device`` stays no
    scoring option); ``auto`` on the CPU is the same run as an explicit float32 there."""

    def aes(**section) -> dict:
        config = cove_config()
        config["metrics"]["AES"] = {"dtype": "auto", "device": "cpu", "frames": 10, "pool_batch": 8, **section}
        return config

    cpu_gpu = pair(tmp_path / "auto", aes(), aes(device="cuda"), metrics=("SSIM", "AES"))
    with pytest.raises(CompareError, match=r"metrics\.AES\.dtype: A=\"float32\", B=\"bfloat16\""):
        compare(cpu_gpu, analyses=False)
    board = compare(cpu_gpu, allow_mixed=True, n_resamples=20, n_permutations=50, analyses=False)
    assert board["mixed_options"] == {"metrics.AES.dtype": {"A": "float32", "B": "bfloat16"}}
    rows = {r["label"]: r for r in board["rows"]}
    assert rows["A"]["metrics"]["AES"]["options"] == {"metrics.AES.dtype": "float32"}  # auto on the CPU
    assert rows["B"]["metrics"]["SSIM"]["options"] == {}
    assert mixed(pair(tmp_path / "explicit", aes(), aes(dtype="float32"), metrics=("SSIM", "AES"))) == {}
    gpus = pair(tmp_path / "gpus", aes(device="cuda"), aes(device="cuda:1", pool_batch=2), metrics=("SSIM", "AES"))
    assert mixed(gpus) == {}
