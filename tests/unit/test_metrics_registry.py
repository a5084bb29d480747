"""One file per metric: a metric declares its config, inputs, resources and weight check on its class, and a
benchmark only names it. This test plays the part of a new metric's file (two metrics defined below: one CPU,
one model-backed) and shows everything else follows from the registry: the benchmark's ``metrics`` config
section and its allowed values, the YAML check (no YAML edit needed), preflight's weight check, the stage
layout (CPU decode stage vs a model pool of its own), the scores and the summary."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Optional

import numpy as np
import pyarrow as pa
import pytest
from omegaconf import OmegaConf

from helpers.common import REPO, assert_yaml_documents, cove_overrides
from vbench_ray.benchmarks import BENCHMARKS
from vbench_ray.benchmarks.cove import OBJECTIVE_METRICS, CoveBench, CoveConfig, cove_metrics_config
from vbench_ray.config import ConfigError
from vbench_ray.configure import load_config
from vbench_ray.metrics import METRICS, FrameMetric, register_metric
from vbench_ray.metrics.base import metric_choices, metrics_config, require_weights, weights_problem
from vbench_ray.pipeline import run_local
from vbench_ray.case_table import case_chunks

COVE = REPO / "configs" / "cove.yaml"


# ----------------------------------------------------------------------------- "the new metric's file"


@dataclass
class SharpnessConfig:
    frames: int = 4  # uniformly sampled frames of the edited video
    reduce: str = "mean"  # mean | max over frames


class Sharpness(FrameMetric):
    """A CPU metric: the variance of frame differences of the edited video, no source, no weights."""

    name = "Sharpness"
    config_class = SharpnessConfig
    choices = {"reduce": ("mean", "max")}
    needs_source = False
    scale = "px^2"

    def compute(self, edited, source=None) -> float:
        values = [float(np.var(edited[i].astype(float))) for i in range(len(edited))]
        return float(np.mean(values) if self.cfg.reduce == "mean" else np.max(values))


@dataclass
class ToyModelConfig:
    weights: Optional[str] = None  # a text file holding one number: the "model"
    device: str = "cpu"
    frames: int = 3


class ToyModel(FrameMetric):
    """A model-backed metric: loads its weights once per pool actor, runs in a model pool of its own."""

    name = "ToyModel"
    config_class = ToyModelConfig
    model_backed: ClassVar[bool] = True
    needs_source = True
    higher_is_better = False

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        return weights_problem(cfg.weights, "metrics.ToyModel.weights", "toy model")

    def setup(self) -> None:
        self.factor = float(require_weights(self.cfg.weights, "metrics.ToyModel.weights", "toy model").read_text())

    def compute(self, edited, source) -> float:
        return self.factor * float(np.abs(edited.astype(float) - source.astype(float)).mean())


NEW = ("Sharpness", "ToyModel")


@pytest.fixture
def registered(monkeypatch):
    """The registration line (``@register_metric`` + the import in vbench_ray/metrics/__init__.py), undone after."""
    for cls in (Sharpness, ToyModel):
        monkeypatch.setitem(METRICS, cls.name, cls)
        register_metric(cls)
    # ... and the name in a benchmark's metric list: CoVEBench with the two new metrics
    names = OBJECTIVE_METRICS + NEW
    # (off by default: `enabled`'s default, which the YAML documents, stays CoVEBench's)
    section = cove_metrics_config(names, prefix="CovePlus", module=__name__)
    config = dataclasses.make_dataclass(
        "CovePlusConfig", [("metrics", section, field(default_factory=section))], bases=(CoveConfig,)
    )
    bench = type(
        "CovePlus",
        (CoveBench,),
        {
            "name": "cove_plus",
            "metric_names": names,
            "config_class": config,
            "config_choices": {**CoveBench.config_choices, **metric_choices(names)},
        },
    )
    monkeypatch.setitem(BENCHMARKS, "cove_plus", bench)
    return bench


def test_a_metric_declares_its_contract_and_registration_checks_it():
    assert Sharpness().cfg == SharpnessConfig() and ToyModel().in_pool() and not Sharpness().in_pool()
    bad = type("Bad", (FrameMetric,), {"name": "Bad", "config_class": dict})
    with pytest.raises(TypeError, match="must be a dataclass"):
        register_metric(bad)
    bad = type("Bad", (FrameMetric,), {"name": "Bad", "config_class": SharpnessConfig, "choices": {"nope": ("a",)}})
    with pytest.raises(TypeError, match="lacks"):
        register_metric(bad)
    with pytest.raises(KeyError, match="unknown metric 'Nope'"):
        metrics_config("X", ["Nope"], module=__name__)
    assert "Bad" not in METRICS


def test_the_benchmark_config_is_generated_from_the_names(registered, cove_data, tmp_path):
    schema = OmegaConf.structured(registered.config_class)
    assert list(schema.metrics) == ["enabled", *OBJECTIVE_METRICS, *NEW, "exclude"]
    assert schema.metrics.Sharpness == OmegaConf.structured(SharpnessConfig)
    assert list(schema.metrics.exclude) == list(OBJECTIVE_METRICS + NEW)
    assert (
        list(schema.metrics.exclude.SSIM.categories) == ["Background"]
        and not schema.metrics.exclude.Sharpness.categories
    )
    # CoVEBench's own YAML, without a block for the new metrics, still documents this schema ...
    documented = OmegaConf.load(COVE)
    assert_yaml_documents(documented, schema, "metrics")
    # ... but a block that is in a YAML must match the metric's defaults
    documented.metrics.Sharpness = {"frames": 5, "reduce": "mean"}
    with pytest.raises(AssertionError):
        assert_yaml_documents(documented, schema, "metrics")

    overrides = cove_overrides(cove_data, tmp_path / "run", "benchmark=cove_plus")
    cfg = load_config(COVE, overrides + ["metrics.Sharpness.reduce=max"])
    assert cfg.metrics.Sharpness.frames == 4 and cfg.metrics.Sharpness.reduce == "max"
    with pytest.raises(ConfigError, match=r"metrics.Sharpness.reduce.*'median'"):
        load_config(COVE, overrides + ["metrics.Sharpness.reduce=median"])
    with pytest.raises(ConfigError, match=r"metrics.Sharpness.franes.*did you mean `metrics.Sharpness.frames`"):
        load_config(COVE, overrides + ["metrics.Sharpness.franes=2"])


def test_preflight_uses_the_metric_weight_check(registered, cove_data, tmp_path):
    from vbench_ray.preflight import check

    overrides = cove_overrides(
        cove_data, tmp_path / "run", "benchmark=cove_plus", "metrics.enabled=[SSIM,Sharpness,ToyModel]"
    )
    with pytest.raises(ConfigError, match=r"toy model: config key `metrics.ToyModel.weights` is not set"):
        check(load_config(COVE, overrides))
    weights = tmp_path / "toy.txt"
    weights.write_text("2.0")
    check(load_config(COVE, overrides + [f"metrics.ToyModel.weights={weights}"]))


def test_the_new_metrics_run_decoded_once_in_their_stages(registered, cove_data, tmp_path):
    weights = tmp_path / "toy.txt"
    weights.write_text("2.0")
    cfg = load_config(
        COVE,
        cove_overrides(
            cove_data,
            tmp_path / "run",
            "benchmark=cove_plus",
            "run.limit=3",
            "metrics.enabled=[SSIM,Sharpness,ToyModel]",
            f"metrics.ToyModel.weights={weights}",
        ),
    )
    bench = registered(cfg)
    stages = bench.stages()
    # the CPU metrics in the decode stage; the model-backed one in a pool of its own, named after it
    assert [(s.name, s.kind) for s in stages] == [("frames", "cpu"), ("ToyModel", "pool")]
    assert {"SSIM", "Sharpness", "frames_for_ToyModel"} <= set(stages[0].outputs) and "ToyModel" not in stages[
        0
    ].outputs
    rows = bench.load_cases()
    table = run_local(rows, stages, case_chunks(rows, bench.schema())[0].schema)  # the loader's columns
    done = [r for r in table.to_pylist() if r["SSIM"] is not None]
    assert done and all(r["Sharpness"] > 0 and r["ToyModel"] >= 0 for r in done)
    assert all("frames_for_ToyModel" not in r for r in done)  # the pool drops the frames it was handed
    summary = bench.summarize(pa.Table.from_pylist(done))
    assert summary["metrics"]["Sharpness"]["scale"] == "px^2"
    assert summary["metrics"]["ToyModel"]["higher_is_better"] is False
    assert set(summary["exclusions"]) == {"SSIM", "Sharpness", "ToyModel"}


def test_the_real_benchmarks_are_generated_the_same_way():
    """CoVEBench's and NRVBench's sections are made from their metric lists (their YAML documents each block)."""
    from vbench_ray.benchmarks.nrv import FRAME_METRICS, NRVBench, NRVConfig

    for bench, config in ((CoveBench, CoveConfig), (NRVBench, NRVConfig)):
        section = OmegaConf.structured(config).metrics
        for name in bench.metric_names:
            assert section[name] == OmegaConf.structured(METRICS[name].config_class), name
            for key, allowed in METRICS[name].choices.items():
                assert bench.config_choices[f"metrics.{name}.{key}"] == tuple(allowed)
    assert NRVBench.metric_names == FRAME_METRICS
    assert Path(COVE).is_file()


def test_the_driver_validates_configs_without_the_metrics_compute_libraries(cove_data, tmp_path):
    """The driver imports every metric module to validate a config, but not the libraries their compute needs
    (``FrameMetric.imports``: scikit-image, SciPy's solvers), which cost ~0.4 s before Ray can start; the decode
    stage declares them for its workers instead (``FrameMetricsStage.warm_modules``). Nor pandas, which only
    ``compare`` uses (the benchmarks' compare hooks import it where they use it)."""
    import subprocess
    import sys

    from vbench_ray.metrics.stage import FrameMetricsStage

    script = (
        "import sys\nfrom vbench_ray.configure import load_config\nimport vbench_ray.runner, vbench_ray.cli\n"
        f"cfg = load_config({str(REPO / 'configs' / 'cove.yaml')!r}, {cove_overrides(cove_data, tmp_path)!r})\n"
        "from vbench_ray import preflight\npreflight.check(cfg)\n"
        "print(sorted(m for m in ('skimage', 'skimage.metrics', 'scipy.optimize', 'scipy.special', 'scipy.ndimage',"
        " 'torch', 'decord', 'pandas') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    # ... and the decode stage names them for its workers: each metric's own, the reader of its backend
    assert FrameMetricsStage.warm_modules(
        {"metrics": {"SSIM": {}, "BG_SSIM": {}, "NIQE": {}, "MSM": {}}, "video_backend": "pyav"}
    ) == ["skimage.metrics:structural_similarity", "scipy.special", "av"]
    assert FrameMetricsStage.warm_modules({"metrics": {"MF": {}}, "video_backend": "auto"}) == [
        "scipy.optimize",
        "decord",
    ]


def test_a_gpu_config_is_checked_without_torch_in_the_driver(cove_data, tmp_path):
    """Preflight of the paper's GPU metrics (MSM with RAFT on CUDA) imports no torch in the driver: the GPU is
    counted as Ray counts it (``preflight.local_gpus``) and RAFT's variant is read from the checkpoint's pickle
    (``checkpoint_shapes``), each the same answer as with torch; a wrong file is still one message naming the key."""
    import subprocess
    import sys

    import torch

    from vbench_ray.metrics.base import checkpoint_shapes, read_state_dict

    stem = "feature_encoder.convnormrelu.0.weight"
    small, other = tmp_path / "raft_small.pth", tmp_path / "raft_other.pth"
    torch.save({stem: torch.zeros(32, 3, 7, 7), "feature_encoder.conv.weight": torch.zeros(256, 128, 1, 1)}, small)
    torch.save({"state_dict": {"backbone.conv.weight": torch.zeros(8, 3, 3, 3)}}, other)
    for path in (small, other):  # the shapes read without torch are torch's
        shapes = {k: v.shape for k, v in checkpoint_shapes(path, "k").items()}
        assert shapes == {k: tuple(v.shape) for k, v in read_state_dict(path, "k").items()}
    script = (
        "import sys\nfrom vbench_ray.configure import load_config\nimport vbench_ray.runner, vbench_ray.cli\n"
        "from vbench_ray import preflight\nfrom vbench_ray.config import ConfigError\n"
        "for path in sys.argv[1:]:\n"
        f"    over = {cove_overrides(cove_data, tmp_path)!r} + ['metrics.enabled=[SSIM,MSM]', 'metrics.MSM.flow=raft',"
        " 'metrics.MSM.device=cuda', 'metrics.MSM.raft_weights=' + path]\n"
        f"    cfg = load_config({str(REPO / 'configs' / 'cove.yaml')!r}, over)\n"
        "    try:\n        preflight.check(cfg)\n        print('ok')\n"
        "    except ConfigError as exc:\n        print('raft' if 'not a torchvision RAFT' in str(exc) else 'other')\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(small), str(other)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()[-3:]
    gpu = "ok" if torch.cuda.is_available() else "other"  # no GPU here: the one problem is the device's
    assert lines == [gpu, "raft", "False"]
