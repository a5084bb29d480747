"""A judge backend is one registry entry (``judges.backends.BACKENDS``): its class names its engine factory, its
config section and its preflight checks, so a new backend is its module plus a registration; nothing else
dispatches on its name (``engines.make_engine``, ``preflight``, the config's allowed ``judge.backend`` values)."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from vbench_ray.judges.backends import BACKENDS
from vbench_ray.judges.base import JUDGE_CHOICES, JudgeBackend, JudgeConfig, JudgeResponse
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
    assert "toy" in JUDGE_CHOICES["judge.backend"] and "toy" in list(JUDGE_CHOICES["judge.backend"])
    assert _judge_problems(cfg(backend="toy"), "judges[1]") == [
        "`judges[1].model` is not set: the toy backend needs a name"
    ]
    assert _judge_problems(cfg(backend="toy", model="m"), "judge") == []


def test_an_unknown_backend_is_named_with_the_registered_ones():
    from vbench_ray.preflight import _judge_problems

    assert "nope" not in JUDGE_CHOICES["judge.backend"]
    with pytest.raises(UnknownName, match=r"unknown judge backend 'nope'; available: hf, http, replay, vllm"):
        make_engine(cfg(backend="nope"))
    assert _judge_problems(cfg(backend="nope"), "judge") == [
        "`judge.backend`: unknown judge backend 'nope'; available: hf, http, replay, vllm"
    ]


def test_each_backend_names_its_config_section_and_engine():
    from vbench_ray.registry import load_target

    fields = {f.name for f in dataclasses.fields(JudgeConfig)}
    sections = {name: BACKENDS[name].config_section for name in BACKENDS}
    assert sections == {"vllm": "vllm", "http": "http", "hf": "hf", "replay": None}
    assert all(s is None or s in fields for s in sections.values())
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
