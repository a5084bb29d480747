"""One generic registry (vbench_ray.registry) behind benchmarks, metrics, editors and judge backends: a taken name
is refused, an unknown name lists the known ones, a ``module:object`` entry is imported only when looked up."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from helpers.common import REPO
from vbench_ray.benchmarks import Benchmark, get_benchmark, register_benchmark
from vbench_ray.editors import EDITORS, Editor, register_editor
from vbench_ray.judges.backends import BACKENDS
from vbench_ray.metrics import METRICS, FrameMetric, register_metric
from vbench_ray.metrics.fidelity import SSIM
from vbench_ray.registry import DuplicateName, Registry, UnknownName


@pytest.fixture
def lazy_module(tmp_path, monkeypatch):
    """A module ``toy_lazy_target`` on sys.path, not imported yet, holding ``Thing``."""
    (tmp_path / "toy_lazy_target.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_lazy_target", raising=False)
    return "toy_lazy_target"


def test_a_taken_name_is_refused_the_same_object_again_is_not():
    reg = Registry("widget")
    first, second = type("A", (), {}), type("B", (), {})
    reg.add("a", first)
    reg.add("a", first)  # a module imported twice registers the same class again: no error
    with pytest.raises(DuplicateName, match=r"widget 'a' is already registered .*A\); registering .*B under the same"):
        reg.add("a", second)
    with pytest.raises(DuplicateName):
        reg["a"] = second  # the mapping form refuses too
    assert reg["a"] is first and list(reg) == ["a"]


def test_an_unknown_name_lists_the_known_ones():
    reg = Registry("widget", extra=("none",))
    reg.add("b", 1)
    reg.add("a", 2)
    with pytest.raises(UnknownName) as err:
        reg["c"]
    assert str(err.value) == "unknown widget 'c'; available: none, a, b"
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    with pytest.raises(UnknownName, match="unknown widget 'c'"):
        del reg["c"]


def test_a_lazy_entry_is_imported_on_first_lookup_only(lazy_module):
    reg = Registry("widget")
    reg.add("thing", f"{lazy_module}:Thing", section="§1", needs="GPU")
    assert "thing" in reg and reg.entry("thing").section == "§1" and reg.entries()[0].needs == "GPU"
    assert lazy_module not in sys.modules  # listing it did not import it
    thing = reg["thing"]
    assert thing.__name__ == "Thing" and lazy_module in sys.modules
    reg.add("thing", thing)  # the module registering the class it names: the same entry, allowed
    with pytest.raises(DuplicateName):
        reg.add("thing", type("Thing", (), {}))  # another class under that name
    reg.add("broken", "no_such_module_xyz:Thing")
    with pytest.raises(ModuleNotFoundError):
        reg["broken"]


def test_metrics_refuse_a_second_class_under_a_taken_name():
    impostor = type("Impostor", (FrameMetric,), {"name": "SSIM"})
    with pytest.raises(DuplicateName, match="metric 'SSIM' is already registered"):
        register_metric(impostor)
    assert METRICS["SSIM"] is SSIM


def test_benchmarks_editors_refuse_duplicates_and_name_the_known_ones():
    with pytest.raises(UnknownName) as err:
        get_benchmark("cvoe")
    assert str(err.value) == "unknown benchmark 'cvoe'; available: agentic, cove, nrv, vidic"
    with pytest.raises(DuplicateName, match="benchmark 'cove' is already registered"):
        register_benchmark(type("Other", (Benchmark,), {"name": "cove"}))
    with pytest.raises(DuplicateName, match="editor 'identity' is already registered"):
        register_editor(type("Other", (Editor,), {"name": "identity"}))
    with pytest.raises(UnknownName, match=r"unknown editor 'vace'; available: precomputed, command, diffusers, ident"):
        EDITORS["vace"]
    with pytest.raises(UnknownName, match="unknown judge backend 'openai'; available: hf, http, replay, vllm"):
        BACKENDS["openai"]


def test_judge_backends_are_listed_without_importing_them():
    """Listing the judge backends imports none of them (vLLM, transformers); a lookup imports its module."""
    code = textwrap.dedent("""
        import sys
        from vbench_ray.judges.backends import BACKENDS
        lines = [e.line() for e in BACKENDS.entries()]
        assert not [m for m in sys.modules if m.startswith("vbench_ray.judges.backends.")], sorted(sys.modules)
        assert BACKENDS["replay"].__name__ == "ReplayBackend"
        assert "vbench_ray.judges.backends.replay" in sys.modules
        assert "vbench_ray.judges.backends.vllm" not in sys.modules
        print("\\n".join(lines))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    vllm = next(line for line in out.stdout.splitlines() if line.startswith("vllm"))
    assert "judge.model" in vllm and "GPU" in vllm


def test_a_config_naming_an_unknown_benchmark_says_which_there_are():
    from vbench_ray.config import ConfigError
    from vbench_ray.configure import load_config

    with pytest.raises(ConfigError) as err:
        load_config(REPO / "configs" / "cove.yaml", ["benchmark=cvoe"])
    assert str(err.value) == "config key `benchmark`: unknown benchmark 'cvoe'; available: agentic, cove, nrv, vidic"
