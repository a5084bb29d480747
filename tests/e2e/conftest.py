"""Fixtures the end-to-end tests share."""

import pytest

from helpers.common import REPO, cove_overrides
from vbench_ray.judges.base import JudgeRequest


@pytest.fixture(scope="module")
def cove_requests(cove_data, tmp_path_factory) -> list[JudgeRequest]:
    """The official-layout requests (one per question type) of the first synthetic CoVEBench task."""
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.benchmarks.cove_checklist import build_requests
    from vbench_ray.configure import load_config

    cfg = load_config(REPO / "configs" / "cove.yaml", cove_overrides(cove_data, tmp_path_factory.mktemp("cove_out")))
    case = next(c for c in CoveBench(cfg).load_cases() if not c.get("error_load"))
    requests = build_requests(case)
    assert {r.group for r in requests} == {"AB-MCQ", "Single-TF", "Dual-TF", "Score-MCQ"}
    return requests
