"""A judge backend is one registry entry (``judges.backends.BACKENDS``): its class names its engine factory, its
config section and its preflight checks, so a new backend is its module plus a registration; nothing else
dispatches on its name (``engines.make_engine``, ``preflight``, the config's allowed ``judge.backend`` values)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from omegaconf import OmegaConf

from helpers.common import REPO, cove_overrides
from vbench_ray.config import bounded
from vbench_ray.judges.backends import BACKENDS
from vbench_ray.judges.base import JudgeBackend, JudgeConfig, JudgeResponse, judge_choices
from vbench_ray.judges.engines import Engine, make_engine
from vbench_ray.registry import UnknownName


class ToyEngine(Engine):
    name = "toy"

    def __init__(self, cfg, run_dir):
        super().__init__(cfg)
        self.run_dir = run_dir

    def generate(self, requests):
        yield [JudgeResponse(r.request_id, text="[]") for r in requests]


def toy_engine(cfg, backend_cls, run_dir=None):
    assert issubclass(backend_cls, ToyBackend)
    return ToyEngine(cfg, run_dir)


class ToyBackend(JudgeBackend):
    name = "toy"
    engine = f"{__name__}:toy_engine"

    @classmethod
    def problems(cls, node, key):
        return [] if node.model else [f"`{key}.model` is not set: the toy backend needs a name"]


def cfg(**values):
    return OmegaConf.merge(OmegaConf.structured(JudgeConfig()), values)


def test_a_toy_backend_registered_alone_is_dispatched_everywhere(monkeypatch, tmp_path):
    from vbench_ray.preflight import _judge_problems

    monkeypatch.setitem(BACKENDS, "toy", ToyBackend)
    engine = make_engine(cfg(backend="toy", model="m"), str(tmp_path))
    assert isinstance(engine, ToyEngine) and engine.run_dir == str(tmp_path)
    assert "toy" in judge_choices()["judge.backend"]
    assert _judge_problems(cfg(backend="toy"), "judges[1]") == [
        "`judges[1].model` is not set: the toy backend needs a name"
    ]
    assert _judge_problems(cfg(backend="toy", model="m"), "judge") == []


def test_an_unknown_backend_is_named_with_the_registered_ones():
    from vbench_ray.preflight import _judge_problems

    assert "nope" not in judge_choices()["judge.backend"]
    with pytest.raises(UnknownName, match=r"unknown judge backend 'nope'; available: hf, http, replay, vllm"):
        make_engine(cfg(backend="nope"))
    assert _judge_problems(cfg(backend="nope"), "judge") == [
        "`judge.backend`: unknown judge backend 'nope'; available: hf, http, replay, vllm"
    ]


def test_each_backend_names_its_config_section_and_engine():
    from vbench_ray.registry import load_target

    fields = {f.name: f.type for f in dataclasses.fields(JudgeConfig)}
    sections = {name: cls.__name__ for name, cls in BACKENDS.config_classes().items()}
    assert sections == {"vllm": "VLLMJudgeConfig", "http": "HTTPJudgeConfig", "hf": "HFJudgeConfig"}  # replay: none
    assert all(fields[name] is cls for name, cls in BACKENDS.config_classes().items())
    for name in BACKENDS:
        assert callable(load_target(BACKENDS[name].engine)), name


class ToyFileBackend(ToyBackend):
    """A toy that reads its answers from a file (no model, no Ray), samples frames per engine (a request's video
    override needs an engine of its own) and serves the stream with three replicas."""

    asks_a_model = False
    video_per_request = False

    @classmethod
    def stream_replicas(cls, cfg):
        return 3


def test_what_the_run_asks_of_a_backend_is_on_its_class(monkeypatch):
    from vbench_ray.benchmarks.base import JudgePhase
    from vbench_ray.judges.base import JudgeRequest
    from vbench_ray.judges.engines import EngineSet
    from vbench_ray.run_plan import RunPlan
    from vbench_ray.runner import _by_video_override

    monkeypatch.setitem(BACKENDS, "toy", ToyFileBackend)
    judge = cfg(backend="toy", model="m")
    phase = JudgePhase("p", judge, lambda rows, results: [])
    plan = RunPlan(OmegaConf.create({"ray": {"judge_batch_size": 2}}), None, [], [phase], None)
    assert plan.needs_ray is False  # nothing per case, and the judge asks no model
    assert ToyFileBackend(judge).identity() is None  # answers from a file: any judge's
    requests = [JudgeRequest(f"r{i}", [], video={"fps": fps}) for i, fps in enumerate((1.0, 2.0, 1.0))]
    groups = _by_video_override(judge, requests)
    assert [(g.video.fps, [r.request_id for r in rs]) for g, rs in groups] == [(1.0, ["r0", "r2"]), (2.0, ["r1"])]
    monkeypatch.setattr(ToyFileBackend, "asks_a_model", True)  # a judge stage is planned only where Ray runs
    (stage,) = plan.judge_stages(EngineSet(None))
    assert (stage.name, stage.workers, stage.min_workers) == ("judge_p", 6, 1)  # two actors per replica


@dataclasses.dataclass
class ToyScoreConfig:
    score: int = bounded(5, ge=1, le=10)  # every Score-MCQ question's answer
    answer: str = "Yes"  # every other question's answer


class ToyScoreEngine(Engine):
    """Answers each question of a request from the judge's own section, ``judge.toy``."""

    name = "toy"

    def generate(self, requests):
        toy = self.cfg.toy
        for r in requests:
            key, value = ("final_score", toy.score) if r.group == "Score-MCQ" else ("final_answer", toy.answer)
            items = [{"id": i, "reasoning": "toy", key: value} for i in r.expected["ids"]]
            yield [JudgeResponse(r.request_id, text="```json\n" + json.dumps(items) + "\n```", model="toy")]


def toy_score_engine(cfg, backend_cls, run_dir=None):
    return ToyScoreEngine(cfg)


class ToyScoreBackend(JudgeBackend):
    name = "toy"
    config_class = ToyScoreConfig  # its section, judge.toy
    engine = f"{__name__}:toy_score_engine"
    asks_a_model = False  # answers in the driver: the run needs no Ray


def test_a_toy_backend_with_its_own_config_section_judges_a_cove_run(monkeypatch, cove_data, tmp_path):
    """A backend defined here, with its own settings: registering it is all it takes for ``judge.toy.*`` to be a
    config key (YAML, overrides, `vbench-ray config` with its field's comment, "did you mean", range checks) that
    reaches its engine in a CoVEBench run. SEM over Score-MCQ questions only, each answered ``judge.toy.score`` = 7:
    7 x 10 = 70.0 (App. F.3: SEM is the mean score x 10)."""
    from vbench_ray.config import ConfigError, check_bounds
    from vbench_ray.config_show import show_config
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    cove = REPO / "configs" / "cove.yaml"
    over = cove_overrides(cove_data, tmp_path / "run", "metrics.enabled=[SEM]", "score.sem_questions=score_mcq")
    with monkeypatch.context() as m:
        m.setitem(BACKENDS, "toy", ToyScoreBackend)
        shown = show_config(cove, ["judge.backend=toy", "judge.toy.score=7"])
        assert "\n  toy:\n    score: 7  # every Score-MCQ question's answer\n    answer: 'Yes'  #" in shown
        with pytest.raises(ConfigError, match=r"did you mean `judge\.toy\.score`\?"):
            load_config(cove, [*over, "judge.backend=toy", "judge.toy.scor=7"])
        wide = load_config(cove, [*over, "judge.backend=toy", "judge.toy.score=11"])
        assert "`judge.toy.score` = 11: expected an integer >= 1 and <= 10" in check_bounds(wide)

        result = run(load_config(cove, [*over, "judge.backend=toy", "judge.toy.score=7"]))
        assert result.summary["metrics"]["SEM"]["value"] == pytest.approx(70.0)
        assert result.summary["judge"]["n_requests"] == result.summary["judge"]["n_ok"] > 0
    assert "toy" not in {f.name for f in dataclasses.fields(JudgeConfig)}  # unregistered: its section gone too
    with pytest.raises(ConfigError, match=r"unknown config key `judge\.toy`"):
        load_config(cove, [*over, "judge.toy.score=7"])


def test_a_backend_whose_section_would_shadow_a_judge_key_is_refused_and_not_registered():
    """A backend named like a key every judge has (``judge.video``) cannot have its section there: its registration
    fails naming the key, and leaves the registry and ``JudgeConfig`` as they were."""
    shadow = type("VideoBackend", (ToyScoreBackend,), {"name": "video"})
    before = [f.name for f in dataclasses.fields(JudgeConfig)]
    with pytest.raises(ValueError, match=r"judge backend 'video': its config section judge\.video must be"):
        BACKENDS["video"] = shadow
    assert "video" not in BACKENDS and [f.name for f in dataclasses.fields(JudgeConfig)] == before
    assert OmegaConf.structured(JudgeConfig).video.fps == 2.0


def test_compare_leaves_out_a_registered_backends_section_as_a_runtime_setting(monkeypatch):
    """How a judge is served (its backend's section) does not change a score, so runs that differ there compare;
    a backend registered later (the toy, ``judge.toy``) counts as such too, while the judge's scoring keys stay."""
    from vbench_ray.compare_base import flatten_options

    judge = {"model": "/w/judge-7b", "temperature": 0.0, "toy": {"score": 7}, "http": {"base_url": "http://x"}}
    with monkeypatch.context() as m:
        m.setitem(BACKENDS, "toy", ToyScoreBackend)
        assert flatten_options("judge", judge, {}) == {"judge.model": "judge-7b", "judge.temperature": 0.0}
    assert flatten_options("judge", judge, {})["judge.toy.score"] == 7  # unregistered: an unknown key, compared


@dataclasses.dataclass
class ToyModeConfig:
    mode: str = "fast"  # how the toy answers

    CHOICES = {"mode": ("fast", "careful")}  # allowed values, checked when a config is loaded


class ToyModeBackend(ToyBackend):
    config_class = ToyModeConfig  # its section, judge.toy


def test_a_backend_registered_after_the_benchmarks_is_checked_in_every_judge_block(monkeypatch, tmp_path):
    """The benchmarks are imported (and their configs' allowed values declared) before the toy is registered: its
    name and its section's allowed values are still those every judge block is checked against when a config
    loads (CoVEBench's ``judge`` and ``vqr``, ViDiC's ``model``, NRVBench's ``judge`` and ``judges`` entries)."""
    from vbench_ray.benchmarks import bench_for
    from vbench_ray.config import ConfigError
    from vbench_ray.configure import load_config

    import vbench_ray.benchmarks  # noqa: F401  (every benchmark imported first)

    monkeypatch.setitem(BACKENDS, "toy", ToyModeBackend)
    for bench, block in (("cove", "judge"), ("cove", "vqr"), ("vidic", "model"), ("nrv", "judge")):
        path = REPO / "configs" / f"{bench}.yaml"
        cfg = load_config(path, [f"{block}.backend=toy", f"{block}.toy.mode=careful"], require_all=False)
        assert (cfg[block].backend, cfg[block].toy.mode) == ("toy", "careful")
        with pytest.raises(ConfigError, match=rf"`{block}\.toy\.mode` = 'slow' is not one of \['fast', 'careful'\]"):
            load_config(path, [f"{block}.backend=toy", f"{block}.toy.mode=slow"], require_all=False)
    nrv = REPO / "configs" / "nrv.yaml"
    entries = "judges=[{name: a, backend: toy, toy: {mode: careful}}, {name: b, backend: toy, toy: {mode: slow}}]"
    cfg = load_config(nrv, ["metrics.enabled=[NRVE_Acc]", entries], require_all=False)
    with pytest.raises(ConfigError, match=r"judges\[1\]\.toy\.mode = 'slow' is not one of \['fast', 'careful'\]"):
        bench_for(cfg).judge_specs()
