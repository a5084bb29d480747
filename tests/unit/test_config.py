"""Config loading: defaults, YAML extends, overrides, unknown keys, required keys, choices."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers.common import assert_yaml_documents
from vbench_ray.config import BaseConfig, ConfigError, read_yaml
from vbench_ray.configure import load_config

REPO = Path(__file__).resolve().parents[2]
COVE = REPO / "configs" / "cove.yaml"
REQUIRED = ["data.checklist=/c.json", "data.source_dir=/src", "data.edited_dir=/ed", "output.dir=/tmp/x"]


def test_base_yaml_documents_the_schema_defaults():
    """configs/base.yaml and the dataclass defaults must not drift apart."""
    documented = OmegaConf.load(REPO / "configs" / "base.yaml")
    schema = OmegaConf.structured(BaseConfig)
    for section in documented:
        assert OmegaConf.to_container(documented[section]) == OmegaConf.to_container(schema[section]), section
    assert set(documented) == set(schema) - {"benchmark"}


def test_cove_yaml_documents_the_cove_defaults():
    from vbench_ray.benchmarks.cove import CoveConfig

    documented = read_yaml(COVE)  # with its `include`s resolved (judge: configs/judges/)
    schema = OmegaConf.structured(CoveConfig)
    for section in ("data", "metrics", "judge", "score"):
        assert_yaml_documents(documented, schema, section)  # a metric's block may be absent (its class's defaults)


def test_load_with_overrides_and_extends():
    cfg = load_config(COVE, REQUIRED + ["run.seed=7", "metrics.MF.alpha=0.25", "ray.workers=3"])
    assert cfg.benchmark == "cove"
    assert cfg.run.seed == 7
    assert cfg.metrics.MF.alpha == 0.25
    assert cfg.ray.workers == 3
    assert cfg.wandb.mode == "offline"  # from base.yaml via extends
    assert cfg.data.checklist == "/c.json"
    assert list(cfg.metrics.exclude.SSIM.categories) == ["Background"]


def test_unknown_key_is_rejected_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown config key `data.checklst`.*did you mean `data.checklist`"):
        load_config(COVE, REQUIRED + ["data.checklst=/x"])
    with pytest.raises(ConfigError, match=r"unknown config key `bogus`"):
        load_config(COVE, REQUIRED + ["bogus=1"])


def test_unknown_key_in_yaml_is_rejected(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"extends: {COVE}\nmetrics:\n  SSIM:\n    franes: 3\n")
    with pytest.raises(ConfigError, match=r"metrics.SSIM.franes.*did you mean `metrics.SSIM.frames`"):
        load_config(bad, REQUIRED)


def test_required_keys_are_named():
    with pytest.raises(ConfigError, match=r"`data.checklist`.*`output.dir`"):
        load_config(COVE, ["data.source_dir=/s", "data.edited_dir=/e"])


def test_bad_values_are_rejected():
    with pytest.raises(ConfigError, match=r"metrics.MSM.formula.*'papr'"):
        load_config(COVE, REQUIRED + ["metrics.MSM.formula=papr"])
    with pytest.raises(ConfigError, match=r"run.seed"):
        load_config(COVE, REQUIRED + ["run.seed=abc"])
    with pytest.raises(ConfigError, match=r"key=value"):
        load_config(COVE, REQUIRED + ["run.seed"])


def test_benchmark_must_be_known(tmp_path):
    with pytest.raises(ConfigError, match="unknown benchmark 'nope'"):
        load_config(None, ["benchmark=nope"])
    with pytest.raises(ConfigError, match="`benchmark` is not set"):
        load_config(None, ["output.dir=/x"])


def test_config_is_read_only():
    cfg = load_config(COVE, REQUIRED)
    with pytest.raises(Exception):
        cfg.run.seed = 3
