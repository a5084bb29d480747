"""``vbench_ray.cfgutil``: the one reader of dotted config keys and the one config-to-plain conversion, the same
whether the config is an OmegaConf node, a dataclass, a dict or a plain object; and one file per metric family."""

from dataclasses import dataclass, field
from types import SimpleNamespace

from omegaconf import OmegaConf

from vbench_ray import cfgutil


@dataclass
class Http:
    base_url: str = "http://x"
    retries: int = 0


@dataclass
class Judge:
    http: Http = field(default_factory=Http)
    model: str | None = None


def test_get_reads_a_dotted_key_from_every_kind_of_container():
    as_dict = {"judge": {"http": {"base_url": "http://x", "retries": 0}, "model": None}}
    containers = [
        as_dict,
        OmegaConf.create(as_dict),
        OmegaConf.structured({"judge": Judge()}),
        {"judge": Judge()},
        SimpleNamespace(judge=SimpleNamespace(http=Http(), model=None)),
    ]
    for cfg in containers:
        assert cfgutil.get(cfg, "judge.http.base_url") == "http://x"
        assert cfgutil.get(cfg, "judge.http.retries", 5) == 0  # a falsy value is a value, not absent
        assert cfgutil.get(cfg, "judge.model") is None and cfgutil.get(cfg, "judge.model", "m") == "m"
        assert cfgutil.get(cfg, "judge.nope.deeper", "d") == "d"
        assert cfgutil.get(cfg, "judge.http.base_url.more") is None
    # a mandatory value not set (???) and a struct node's unknown key read as absent
    assert cfgutil.get(OmegaConf.create({"a": "???"}), "a", 1) == 1
    struct = OmegaConf.structured(Judge())
    assert cfgutil.get(struct, "unknown", 2) == 2


def test_plain_turns_config_nodes_and_dataclasses_into_plain_values():
    node = OmegaConf.create({"a": {"b": "${c}"}, "c": 3, "l": [1, {"x": 2}]})
    out = cfgutil.plain(node)
    assert out == {"a": {"b": 3}, "c": 3, "l": [1, {"x": 2}]} and type(out) is dict and type(out["l"]) is list
    assert cfgutil.plain(OmegaConf.create([1, 2])) == [1, 2]
    assert cfgutil.plain(Judge()) == {"http": {"base_url": "http://x", "retries": 0}, "model": None}
    plain_dict = {"k": 1}
    assert cfgutil.plain(plain_dict) is plain_dict and cfgutil.plain(7) == 7 and cfgutil.plain(Judge) is Judge


def test_one_file_per_metric_family():
    """NRVBench's conventional metrics: background preservation (PSNR, MSE, SSIM), NIQE and the motion score each
    in a module of their own."""
    from vbench_ray.metrics import METRICS

    modules = {name: METRICS[name].__module__ for name in ("BG_PSNR", "BG_MSE", "BG_SSIM", "NIQE", "MotionScore")}
    assert modules == {
        "BG_PSNR": "vbench_ray.metrics.background",
        "BG_MSE": "vbench_ray.metrics.background",
        "BG_SSIM": "vbench_ray.metrics.background",
        "NIQE": "vbench_ray.metrics.niqe",
        "MotionScore": "vbench_ray.metrics.motion_score",
    }


def test_one_definition_of_each_config_reader():
    """No module of the package keeps its own copy of the config-to-plain conversion or of the dotted-key getter
    (``compare.py``'s reader of run records' config.yaml aside)."""
    import ast
    from pathlib import Path

    import vbench_ray

    copies = []
    for path in sorted(Path(vbench_ray.__file__).parent.rglob("*.py")):
        if path.name in ("cfgutil.py", "compare.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in ("_plain", "to_plain", "_get", "cfg_get"):
                copies.append(f"{path.name}: {node.name}")
    assert copies == []
