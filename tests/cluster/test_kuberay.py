"""deploy/kuberay/rayjob.yaml: a KubeRay RayJob (ray.io/v1) that KubeRay would accept and that runs this project.

KubeRay's CRD schema is not available offline, so this checks, by hand, what the RayJob v1 CRD and the operator
require (KubeRay v1.1+: `ray-operator/apis/ray/v1/rayjob_types.go`, `raycluster_types.go`):

* `apiVersion: ray.io/v1`, `kind: RayJob`, `metadata.name` a DNS-1123 label (<= 63 chars: it names the cluster,
  the submitter Job and services);
* `spec.entrypoint` a non-empty string; `spec.runtimeEnvYAML` a string that parses as a YAML mapping whose keys
  are runtime-env fields; `submissionMode` one of K8sJobMode / HTTPMode / InteractiveMode / SidecarMode;
  `shutdownAfterJobFinishes` a bool, `ttlSecondsAfterFinished`, `activeDeadlineSeconds`, `backoffLimit`
  non-negative integers;
* `spec.rayClusterSpec.headGroupSpec.template.spec.containers` non-empty, each with `name` and `image`;
  `rayStartParams` (when given) a map of string to *string* (the CRD types it `map[string]string`: a bare
  number or bool is rejected by the API server);
* each `workerGroupSpecs[]` entry: a unique `groupName`, a pod `template` with containers, integer
  `replicas`/`minReplicas`/`maxReplicas` with `min <= replicas <= max`;
* `rayVersion` equal to the installed Ray (the image must run the same Ray as the job).

And what this project needs of it: a CPU-only head, a CPU worker group and a GPU worker group (`nvidia.com/gpu`
in requests and limits, equal), the entrypoint is one of `jobs/*.py` with a config that exists, every Ray pod
mounts the same shared volume at the same path the entrypoint's paths use, and the image is built by the
Dockerfile beside it. `test_checks_reject_broken_copies` proves the checks can fail.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path

import pytest
import yaml

from helpers.common import REPO

RAYJOB = REPO / "deploy" / "kuberay" / "rayjob.yaml"
RUNTIME_ENV_KEYS = {
    "working_dir",
    "py_modules",
    "pip",
    "uv",
    "conda",
    "env_vars",
    "container",
    "image_uri",
    "excludes",
    "config",
    "nsight",
    "py_executable",
    "java_jars",
}
SUBMISSION_MODES = {"K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _containers(pod_template: dict, where: str) -> list[dict]:
    spec = pod_template.get("spec") or {}
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ValueError(f"{where}: template.spec.containers must be a non-empty list")
    for c in containers:
        if not c.get("name") or not c.get("image"):
            raise ValueError(f"{where}: every container needs a name and an image")
    return containers


def _ray_start_params(group: dict, where: str) -> None:
    params = group.get("rayStartParams", {})
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        raise ValueError(f"{where}: rayStartParams must map names to strings (quote numbers)")


def check_rayjob(doc: dict) -> None:
    """Raise ValueError naming the first thing KubeRay's RayJob v1 (or this project) would refuse."""
    import ray

    if doc.get("apiVersion") != "ray.io/v1" or doc.get("kind") != "RayJob":
        raise ValueError("apiVersion must be ray.io/v1 and kind RayJob")
    name = (doc.get("metadata") or {}).get("name", "")
    if not DNS_LABEL.match(name) or len(name) > 63:
        raise ValueError(f"metadata.name {name!r} is not a DNS-1123 label")
    spec = doc.get("spec") or {}
    if not isinstance(spec.get("entrypoint"), str) or not spec["entrypoint"].strip():
        raise ValueError("spec.entrypoint must be a non-empty string")
    renv = spec.get("runtimeEnvYAML")
    if renv is not None:
        if not isinstance(renv, str):
            raise ValueError("spec.runtimeEnvYAML must be a string (a YAML document)")
        parsed = yaml.safe_load(renv)
        if not isinstance(parsed, dict) or set(parsed) - RUNTIME_ENV_KEYS:
            raise ValueError(f"spec.runtimeEnvYAML: unknown runtime env fields {set(parsed or {}) - RUNTIME_ENV_KEYS}")
        if not all(isinstance(v, str) for v in (parsed.get("env_vars") or {}).values()):
            raise ValueError("spec.runtimeEnvYAML: env_vars values must be strings")
    if spec.get("submissionMode", "K8sJobMode") not in SUBMISSION_MODES:
        raise ValueError(f"spec.submissionMode must be one of {sorted(SUBMISSION_MODES)}")
    if not isinstance(spec.get("shutdownAfterJobFinishes", False), bool):
        raise ValueError("spec.shutdownAfterJobFinishes must be a bool")
    for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        value = spec.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"spec.{key} must be a non-negative integer")
    cluster = spec.get("rayClusterSpec")
    if not isinstance(cluster, dict):
        raise ValueError("spec.rayClusterSpec is required (this manifest starts its own cluster)")
    if str(cluster.get("rayVersion")) != ray.__version__:
        raise ValueError(
            f"rayClusterSpec.rayVersion {cluster.get('rayVersion')!r} is not the project's Ray {ray.__version__}"
        )
    head = cluster.get("headGroupSpec") or {}
    _containers(head.get("template") or {}, "headGroupSpec")
    _ray_start_params(head, "headGroupSpec")
    groups = cluster.get("workerGroupSpecs") or []
    names = [g.get("groupName") for g in groups]
    if not all(names) or len(set(names)) != len(names):
        raise ValueError("every workerGroupSpecs entry needs a unique groupName")
    for g in groups:
        where = f"workerGroupSpecs[{g['groupName']}]"
        _containers(g.get("template") or {}, where)
        _ray_start_params(g, where)
        counts = [g.get(k) for k in ("minReplicas", "replicas", "maxReplicas")]
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise ValueError(f"{where}: replicas, minReplicas, maxReplicas must be non-negative integers")
        if not counts[0] <= counts[1] <= counts[2]:
            raise ValueError(f"{where}: needs minReplicas <= replicas <= maxReplicas")


def _gpus(group: dict) -> int:
    res = _containers(group["template"], group.get("groupName", "head"))[0].get("resources", {})
    req, lim = res.get("requests", {}).get("nvidia.com/gpu"), res.get("limits", {}).get("nvidia.com/gpu")
    if req != lim:
        raise ValueError(f"{group.get('groupName')}: nvidia.com/gpu requests and limits differ")
    return int(lim or 0)


@pytest.fixture(scope="module")
def doc() -> dict:
    return yaml.safe_load(RAYJOB.read_text())


def test_rayjob_passes_the_structural_checks(doc: dict):
    check_rayjob(doc)


def test_head_cpu_and_gpu_groups(doc: dict):
    cluster = doc["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]
    assert head["rayStartParams"].get("num-cpus") == "0", "the head runs drivers only"
    assert _gpus(head) == 0
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}
    assert any(_gpus(g) == 0 for g in groups.values()), "no CPU worker group"
    assert any(_gpus(g) > 0 for g in groups.values()), "no GPU worker group"


def test_entrypoint_runs_a_project_job(doc: dict):
    argv = shlex.split(doc["spec"]["entrypoint"])
    assert argv[0] == "python"
    image_root = Path("/opt/vbench-ray")
    job, config = Path(argv[1]), Path(argv[2])
    assert job.parent == image_root / "jobs" and (REPO / "jobs" / job.name).exists(), job
    assert (REPO / config.relative_to(image_root)).exists(), config
    keys = dict(a.split("=", 1) for a in argv[3:])
    assert {"data.checklist", "data.source_dir", "output.dir"} <= set(keys)
    # every path the run reads or writes lies on the volume every Ray pod mounts at the same place
    mounts = []
    cluster = doc["spec"]["rayClusterSpec"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        container = group["template"]["spec"]["containers"][0]
        mounts.append({m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}.get("data"))
    assert len(set(mounts)) == 1 and mounts[0], mounts
    for key in ("data.checklist", "data.source_dir", "data.edited_dir", "judge.model", "output.dir"):
        assert keys[key].startswith(mounts[0] + "/"), key


def test_image_is_built_from_this_repository(doc: dict):
    dockerfile = (RAYJOB.parent / "Dockerfile").read_text()
    assert f"FROM rayproject/ray:{doc['spec']['rayClusterSpec']['rayVersion']}-" in dockerfile
    assert "constraints/gpu.txt" in dockerfile and "/opt/vbench-ray" in dockerfile
    cluster = doc["spec"]["rayClusterSpec"]
    images = {
        c["image"]
        for g in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
        for c in g["template"]["spec"]["containers"]
    }
    assert len(images) == 1, images  # one image: Ray needs the same Python and packages on every node
    assert images.pop() in dockerfile.split("-t ", 1)[1].split()[0]


def _set(path: str, value):
    def breakage(d: dict):
        *parents, last = path.split(".")
        node = d
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[last] = value

    return breakage


@pytest.mark.parametrize(
    "breakage, message",
    [
        (_set("apiVersion", "ray.io/v1alpha1"), "apiVersion"),
        (_set("metadata.name", "VBench_Ray"), "DNS-1123"),
        (_set("spec.entrypoint", ""), "entrypoint"),
        (_set("spec.runtimeEnvYAML", "env_var:\n  A: b\n"), "unknown runtime env fields"),
        (_set("spec.runtimeEnvYAML", "env_vars:\n  A: 1\n"), "must be strings"),
        (_set("spec.submissionMode", "Batch"), "submissionMode"),
        (_set("spec.rayClusterSpec.rayVersion", "2.9.0"), "rayVersion"),
        (_set("spec.rayClusterSpec.headGroupSpec.rayStartParams.num-cpus", 0), "quote numbers"),
        (_set("spec.rayClusterSpec.headGroupSpec.template.spec.containers", []), "non-empty"),
        (_set("spec.rayClusterSpec.workerGroupSpecs.1.groupName", "cpu"), "unique groupName"),
        (_set("spec.rayClusterSpec.workerGroupSpecs.0.replicas", 9), "minReplicas <= replicas"),
        (_set("spec.backoffLimit", -1), "non-negative"),
    ],
)
def test_checks_reject_broken_copies(doc: dict, breakage, message: str):
    broken = copy.deepcopy(doc)
    breakage(broken)
    with pytest.raises(ValueError, match=message):
        check_rayjob(broken)
