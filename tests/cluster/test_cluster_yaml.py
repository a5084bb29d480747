"""cluster.yaml passes Ray's own launcher validation (the schema shipped with the installed Ray) and keeps
the shape the project relies on: a CPU-only head, CPU workers, GPU workers, setup that installs vbench_ray.

The validation runs the same steps as ``ray up`` before it talks to the cloud: ``prepare_config`` (merge
the provider's defaults, merge setup commands) then ``validate_config`` (``ray-schema.json`` + checks)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"


def _validate(config: dict) -> dict:
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


@pytest.fixture(scope="module")
def raw() -> dict:
    with open(CLUSTER_YAML) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def prepared(raw: dict) -> dict:
    return _validate(raw)


def _gpus(node_type: dict) -> int:
    return node_type.get("resources", {}).get("GPU", 0)


def test_validates_with_rays_schema(raw: dict, prepared: dict):
    assert raw["cluster_name"] == "vbench-ray"
    assert raw["provider"]["type"] == "aws"
    assert {"region", "availability_zone"} <= set(raw["provider"])
    # prepare_config merged nothing of the provider's example node types into ours
    assert set(prepared["available_node_types"]) == set(raw["available_node_types"])


def test_head_schedules_no_work(raw: dict):
    head = raw["available_node_types"][raw["head_node_type"]]
    assert head["resources"].get("CPU") == 0 and _gpus(head) == 0
    assert head.get("max_workers", 0) == 0


def test_cpu_and_gpu_worker_types(raw: dict):
    workers = {k: v for k, v in raw["available_node_types"].items() if k != raw["head_node_type"]}
    gpu = [k for k, v in workers.items() if _gpus(v) > 0]
    cpu_only = [k for k, v in workers.items() if _gpus(v) == 0 and v["resources"].get("CPU", 0) > 0]
    assert gpu, "no worker type with GPU resources (judges, model metrics)"
    assert cpu_only, "no CPU-only worker type (decoding, classical metrics)"
    for name, node in workers.items():
        assert node.get("min_workers", 0) <= node["max_workers"] <= raw["max_workers"], name
        assert node["node_config"].get("InstanceType"), name


def test_setup_installs_vbench_ray(raw: dict, prepared: dict):
    assert raw["file_mounts"] == {"~/vbench-ray": "."}
    install = [c for c in raw["setup_commands"] if "pip install" in c and "-e '.[gpu]'" in c]
    assert len(install) == 1
    assert "cd ~/vbench-ray" in install[0] and "-c constraints/gpu.txt" in install[0]
    assert any("import vbench_ray" in c for c in raw["setup_commands"])
    # after merging, both head and workers run the install
    for key in ("head_setup_commands", "worker_setup_commands"):
        assert install[0] in prepared[key], key


def test_start_commands_and_documented_job_path(raw: dict):
    assert any("ray start --head" in c and "--dashboard-port=8265" in c for c in raw["head_start_ray_commands"])
    assert any("ray start --address=$RAY_HEAD_IP:6379" in c for c in raw["worker_start_ray_commands"])
    text = CLUSTER_YAML.read_text()
    for line in (
        "ray up cluster.yaml",
        "ray dashboard cluster.yaml",
        "ray job submit --address http://127.0.0.1:8265 --working-dir . --",
        "python jobs/cove.py",
    ):
        assert line in text, line


def _unknown_top_level_key(c: dict) -> None:
    c["setup_comands"] = ["pip install vbench-ray"]


def _unknown_node_type_key(c: dict) -> None:
    c["available_node_types"]["gpu_worker"]["gpus"] = 4


def _fractional_gpu_resource(c: dict) -> None:
    c["available_node_types"]["gpu_worker"]["resources"]["GPU"] = 0.5


def _head_type_not_defined(c: dict) -> None:
    c["head_node_type"] = "no_such_type"


def _min_workers_over_global_max(c: dict) -> None:
    c["available_node_types"]["cpu_worker"]["min_workers"] = c["max_workers"] + 1


@pytest.mark.parametrize(
    "breakage, message",
    [
        (_unknown_top_level_key, "'setup_comands' was unexpected"),
        (_unknown_node_type_key, "'gpus' was unexpected"),
        (_fractional_gpu_resource, "is not of type 'integer'"),
        (_head_type_not_defined, "must be one of `available_node_types`"),
        (_min_workers_over_global_max, "smaller than the sum of `min_workers`"),
    ],
)
def test_validator_rejects_broken_copies(raw: dict, breakage, message: str):
    """Proves the validator runs: each deliberately broken copy fails, for the reason broken."""
    import jsonschema

    broken = copy.deepcopy(raw)
    breakage(broken)
    with pytest.raises((jsonschema.ValidationError, ValueError), match=message):
        _validate(broken)


def test_raw_file_against_the_shipped_schema_file(raw: dict):
    """Belt and braces: the file itself (before any merging) against ray/autoscaler/ray-schema.json."""
    import json

    import jsonschema
    import ray.autoscaler

    schema_path = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
    assert schema_path.exists(), schema_path
    jsonschema.validate(raw, json.loads(schema_path.read_text()))


def test_jobs_get_the_environments_python(raw: dict):
    """`ray job submit ... -- python jobs/cove.py` runs the `python` on the PATH of the shell that started Ray
    (the README's trap): the setup puts the venv first on PATH for the launcher's shells, and Ray is started
    from the venv, so a job's `python` has the project's packages."""
    setup = " ".join(raw["setup_commands"])
    assert 'export PATH="$HOME/venv/bin:$PATH"' in setup and ".bashrc" in setup
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [c for c in raw[key] if "ray start" in c]
        assert starts and all("~/venv/bin/ray start" in c for c in starts), key
    constraints = [c for c in raw["setup_commands"] if "pip install -c" in c]
    for c in constraints:
        path = c.split("-c ", 1)[1].split()[0]
        assert (CLUSTER_YAML.parent / path).exists(), path
