"""A run binds its benchmark to its config once (preflight, the data check, the plan and the loader all ask that one
instance) and parses its data once: ``check_data``'s parse is what the loader then hands on (CoVEBench's checklist,
ViDiC's checklist, NRVBench's annotations). Runs in the driver alone: a judge backend defined here answers without a
model, so no Ray starts."""

from __future__ import annotations

import json

import pytest

from helpers.common import REPO, cove_overrides
from vbench_ray.benchmarks import cove
from vbench_ray.benchmarks.cove import CoveBench
from vbench_ray.judges.backends import BACKENDS
from vbench_ray.judges.base import JudgeBackend, JudgeResponse
from vbench_ray.judges.engines import Engine

COVE = REPO / "configs" / "cove.yaml"


class SevenEngine(Engine):
    """Every Score-MCQ question answered 7 (the only questions SEM scores with score.sem_questions=score_mcq)."""

    name = "seven"

    def generate(self, requests):
        for r in requests:
            items = [{"id": i, "reasoning": "-", "final_score": 7} for i in r.expected["ids"]]
            yield [JudgeResponse(r.request_id, text=json.dumps(items), model="seven")]


def seven_engine(cfg, backend_cls, run_dir=None):
    return SevenEngine(cfg)


class SevenBackend(JudgeBackend):
    name = "seven"
    engine = f"{__name__}:seven_engine"
    asks_a_model = False  # answers in the driver: the run needs no Ray


@pytest.fixture
def counted(monkeypatch):
    """``{"bound": CoveBench instances made, "read": checklist parses started}`` while the test runs."""
    counts = {"bound": 0, "read": 0}
    init, read = CoveBench.__init__, cove.read_checklist

    def counting_init(self, cfg):
        counts["bound"] += 1
        init(self, cfg)

    def counting_read(path):
        counts["read"] += 1
        return read(path)

    monkeypatch.setattr(CoveBench, "__init__", counting_init)
    monkeypatch.setattr(cove, "read_checklist", counting_read)
    monkeypatch.setitem(BACKENDS, "seven", SevenBackend)
    return counts


def _overrides(cove_data, out):
    return cove_overrides(
        cove_data, out, "metrics.enabled=[SEM]", "score.sem_questions=score_mcq", "judge.backend=seven"
    )


def test_a_run_binds_its_benchmark_once_and_parses_the_checklist_once(counted, cove_data, tmp_path):
    """SEM over the Score-MCQ questions, each answered 7: 7 x 10 = 70.0 (App. F.3: SEM is the mean score x 10)."""
    from vbench_ray.configure import load_config
    from vbench_ray.runner import run

    cfg = load_config(COVE, _overrides(cove_data, tmp_path / "run"))
    result = run(cfg)
    assert result.summary["metrics"]["SEM"]["value"] == pytest.approx(70.0)
    assert result.summary["n_cases"] == len(json.loads(open(cove_data["checklist"]).read())) == 8
    assert counted == {"bound": 1, "read": 1}


def test_dry_run_binds_once_and_parses_the_checklist_once(counted, cove_data, tmp_path):
    from vbench_ray.configure import load_config
    from vbench_ray.run_plan import dry_run

    lines = dry_run(load_config(COVE, _overrides(cove_data, tmp_path / "run")))
    assert any(line.startswith("Ray: not started") for line in lines)
    assert "cases: 8, 0 already done, 8 to compute" in lines
    assert counted == {"bound": 1, "read": 1}


def test_rows_handed_on_from_the_data_check_are_the_rows_a_fresh_read_makes(counted, cove_data, tmp_path):
    """The same rows, in the same order, whether ``iter_cases`` reads the checklist itself or takes ``check_data``'s
    parse; taken once (a second ``iter_cases`` reads the file again)."""
    from vbench_ray.configure import load_config

    cfg = load_config(COVE, cove_overrides(cove_data, tmp_path / "run", "run.limit=5"))
    fresh = CoveBench(cfg).load_cases()
    assert counted["read"] == 1
    bench = CoveBench(cfg)
    bench.check_data()
    assert counted["read"] == 2
    assert bench.load_cases() == fresh and len(fresh) == 5 and counted["read"] == 2
    assert bench.load_cases() == fresh and counted["read"] == 3


def test_vidic_and_nrv_load_cases_take_the_data_checks_parse(monkeypatch, tmp_path):
    """ViDiC's checklist and NRVBench's annotations are parsed once when the data check ran first (the runner's
    order), the same rows either way."""
    from helpers.configs import nrv_cfg, vidic_cfg
    from vbench_ray.benchmarks import nrv, vidic
    from vbench_ray.benchmarks.nrv import NRVBench
    from vbench_ray.benchmarks.vidic import VidicBench
    from vbench_ray.synth.nrv import synth_nrv
    from vbench_ray.synth.vidic import synth_vidic

    reads = {"vidic": 0, "nrv": 0}
    read_checklist, read_annotations = vidic.read_checklist, nrv.read_annotations

    def counting_checklist(path):
        reads["vidic"] += 1
        return read_checklist(path)

    def counting_annotations(path):
        reads["nrv"] += 1
        return read_annotations(path)

    monkeypatch.setattr(vidic, "read_checklist", counting_checklist)
    monkeypatch.setattr(nrv, "read_annotations", counting_annotations)
    data = synth_vidic(tmp_path / "vidic", n=3, frames=4, size=(32, 32))
    cfg = vidic_cfg(data["checklist"], tmp_path / "v", f"data.responses={data['responses']}")
    fresh = VidicBench(cfg).load_cases()
    bench = VidicBench(cfg)
    bench.check_data()
    assert bench.load_cases() == fresh and len(fresh) == 3 and reads["vidic"] == 2
    data = synth_nrv(tmp_path / "nrv", n=2, seed=0)
    cfg = nrv_cfg(data, tmp_path / "n", "metrics.enabled=[BG_PSNR]")
    fresh = NRVBench(cfg).load_cases()
    bench = NRVBench(cfg)
    bench.check_data()
    assert bench.load_cases() == fresh and len(fresh) > 0 and reads["nrv"] == 2
