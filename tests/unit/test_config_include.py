"""Composed YAML configs: `include: FILE` in any mapping (keys beside it win), nested, relative to the including file
then configs/, cycles and missing files named; the judge files of configs/judges/; `KEY.include=FILE` overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from vbench_ray.benchmarks import BENCHMARKS
from vbench_ray.config import ConfigError, read_yaml
from vbench_ray.configure import load_config
from vbench_ray.judges.base import JudgeConfig

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
JUDGES = CONFIGS / "judges"
COVE_REQ = ["data.checklist=/c.json", "data.source_dir=/src", "data.edited_dir=/ed", "output.dir=/tmp/x"]
VIDIC_REQ = ["data.checklist=/c.json", "output.dir=/tmp/x"]
NRV_REQ = ["data.annotations=/a.jsonl", "data.edited_dir=/e", "output.dir=/tmp/x"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- configs/judges/


def test_default_judge_yaml_documents_every_judge_default():
    """configs/judges/default.yaml is JudgeConfig, key for key: every benchmark's judge blocks start from it."""
    documented = OmegaConf.load(JUDGES / "default.yaml")
    assert OmegaConf.to_container(documented) == OmegaConf.to_container(OmegaConf.structured(JudgeConfig))


@pytest.mark.parametrize("name", sorted(p.name for p in JUDGES.glob("*.yaml")))
def test_every_judge_file_is_a_complete_valid_judge(name):
    composed = read_yaml(JUDGES / name)
    schema = OmegaConf.structured(JudgeConfig)
    merged = OmegaConf.merge(schema, composed)  # struct mode: an unknown key raises
    assert set(composed) == set(schema), "a judge file should include default.yaml (every knob)"
    assert merged.backend in ("vllm", "http", "hf", "replay")


def test_judge_profiles():
    from vbench_ray.benchmarks.cove import CoveConfig

    paper = read_yaml(JUDGES / "qwen35_122b_vllm.yaml")
    assert OmegaConf.to_container(paper) == OmegaConf.to_container(OmegaConf.structured(CoveConfig).judge)
    assert (paper.backend, paper.temperature, paper.top_p, paper.max_tokens) == ("vllm", 0.0, 1.0, 16384)
    api = read_yaml(JUDGES / "gpt5_mini_http.yaml")
    assert (api.backend, api.model, api.http.send_sampling, api.http.api_key_env) == (
        "http",
        "gpt-5-mini",
        False,
        "OPENAI_API_KEY",
    )
    tiny = read_yaml(JUDGES / "tiny_hf.yaml")
    assert tiny.backend == "hf" and tiny.video.max_frames == 4 and tiny.video.fps == 2.0  # the rest from default


def test_no_schema_key_is_named_include_or_extends():
    """`include` (and `extends`) are consumed by the loader, so no config key may carry those names."""

    def walk(node, where):
        for key in node:
            assert key not in ("include", "extends"), f"{where}.{key}"
            child = node._get_node(key)
            if OmegaConf.is_dict(child):
                walk(child, f"{where}.{key}")

    for name, bench in BENCHMARKS.items():
        walk(OmegaConf.structured(bench.config_class), name)


# ----------------------------------------------------------------------------- include in YAML files


def test_keys_beside_include_override_and_includes_nest(tmp_path):
    _write(tmp_path / "parts" / "leaf.yaml", "a: 1\nb: {x: 1, y: 2}\nlist: [1, 2]\n")
    _write(tmp_path / "parts" / "mid.yaml", "include: leaf.yaml\nb: {y: 20}\nc: 3\n")  # relative to parts/
    _write(tmp_path / "parts" / "extra.yaml", "z: 9\n")
    main = _write(
        tmp_path / "main.yaml",
        "node:\n  include: parts/mid.yaml\n  a: 100\n  list: [7]\n  deeper: {include: parts/extra.yaml}\n"
        "items:\n  - {include: parts/extra.yaml, name: one}\n  - plain\nother: ${node.a}\n",
    )
    cfg = read_yaml(main)
    assert OmegaConf.to_container(cfg.node) == {
        "a": 100,
        "b": {"x": 1, "y": 20},
        "list": [7],
        "c": 3,
        "deeper": {"z": 9},
    }
    assert OmegaConf.to_container(cfg["items"]) == [{"z": 9, "name": "one"}, "plain"]
    assert cfg.other == 100  # plain interpolations survive composition


def test_include_inside_an_extended_and_an_extending_file(tmp_path):
    _write(tmp_path / "j.yaml", "temperature: 0.5\nmax_tokens: 10\n")
    _write(tmp_path / "base.yaml", "judge: {include: j.yaml}\n")
    child = _write(tmp_path / "child.yaml", "extends: base.yaml\njudge: {max_tokens: 20}\n")
    assert OmegaConf.to_container(read_yaml(child).judge) == {"temperature": 0.5, "max_tokens": 20}


def test_missing_include_names_the_key_and_the_file(tmp_path):
    main = _write(tmp_path / "main.yaml", "judge:\n  include: judges/nope.yaml\n")
    with pytest.raises(ConfigError) as err:
        read_yaml(main)
    msg = str(err.value)
    assert "`judge.include`" in msg and str(main) in msg and "judges/nope.yaml" in msg and "not found" in msg
    nested = _write(tmp_path / "list.yaml", "judges:\n  - {name: a}\n  - {include: ''}\n")
    with pytest.raises(ConfigError, match=r"`judges\[1\].include`.*path of a YAML file"):
        read_yaml(nested)
    with pytest.raises(ConfigError, match=r"`extends` in .*orphan.yaml.*not found"):
        read_yaml(_write(tmp_path / "orphan.yaml", "extends: missing_parent.yaml\n"))


def test_include_cycles_are_refused(tmp_path):
    _write(tmp_path / "a.yaml", "x: {include: b.yaml}\n")
    _write(tmp_path / "b.yaml", "include: a.yaml\ny: 1\n")
    with pytest.raises(ConfigError, match=r"cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        read_yaml(tmp_path / "a.yaml")
    _write(tmp_path / "self.yaml", "node: {include: self.yaml}\n")
    with pytest.raises(ConfigError, match="cycle"):
        read_yaml(tmp_path / "self.yaml")
    _write(tmp_path / "e1.yaml", "extends: e2.yaml\n")
    _write(tmp_path / "e2.yaml", "judge: {include: e1.yaml}\n")
    with pytest.raises(ConfigError, match="cycle"):
        read_yaml(tmp_path / "e1.yaml")
    # the same file twice side by side is no cycle
    _write(tmp_path / "twice.yaml", "p: {include: leaf.yaml}\nq: {include: leaf.yaml}\n")
    _write(tmp_path / "leaf.yaml", "v: 1\n")
    assert read_yaml(tmp_path / "twice.yaml").q.v == 1


def test_user_yaml_anywhere_points_a_benchmark_at_another_judge(tmp_path):
    """The documented recipe: `extends: cove.yaml` and `judge: {include: judges/x.yaml}` from any folder
    (looked up next to the file, then in configs/); a file next to the user's YAML wins."""
    mine = _write(
        tmp_path / "mine.yaml", "extends: cove.yaml\njudge:\n  include: judges/gpt5_mini_http.yaml\n  max_tokens: 99\n"
    )
    cfg = load_config(mine, COVE_REQ)
    assert cfg.judge.backend == "http" and cfg.judge.http.send_sampling is False and cfg.judge.max_tokens == 99
    assert cfg.metrics.SSIM.frames == 10  # the rest of cove.yaml
    _write(tmp_path / "judges" / "gpt5_mini_http.yaml", "include: judges/default.yaml\nmodel: local-override\n")
    assert load_config(mine, COVE_REQ).judge.model == "local-override"  # ./judges/ shadows configs/judges/,
    assert load_config(mine, COVE_REQ).judge.backend == "vllm"  # (its judges/default.yaml: configs/judges/'s)


def test_unknown_key_in_an_included_file_is_named(tmp_path):
    _write(tmp_path / "bad_judge.yaml", "include: judges/default.yaml\nvllm: {tensor_paralel_size: 2}\n")
    mine = _write(tmp_path / "mine.yaml", f"extends: {CONFIGS / 'cove.yaml'}\njudge: {{include: bad_judge.yaml}}\n")
    with pytest.raises(ConfigError, match=r"judge.vllm.tensor_paralel_size.*did you mean `judge.vllm.tensor_par"):
        load_config(mine, COVE_REQ)


def test_resolvers_in_included_files_are_refused_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("VBR_PLANTED_INCLUDE_SECRET", "s3cr3t-include")
    _write(tmp_path / "leaky.yaml", "include: judges/default.yaml\nmodel: ${oc.env:VBR_PLANTED_INCLUDE_SECRET}\n")
    mine = _write(tmp_path / "mine.yaml", "extends: cove.yaml\njudge: {include: leaky.yaml}\n")
    with pytest.raises(ConfigError) as err:
        load_config(mine, COVE_REQ)
    assert "`model`" in str(err.value) and "leaky.yaml" in str(err.value) and "s3cr3t" not in str(err.value)
    with pytest.raises(ConfigError, match=r"`model`.*leaky\.yaml"):
        load_config(CONFIGS / "cove.yaml", [*COVE_REQ, f"judge.include={tmp_path / 'leaky.yaml'}"])


# ----------------------------------------------------------------------------- KEY.include=FILE overrides


def test_include_override_switches_a_whole_judge_block():
    base = load_config(CONFIGS / "vidic.yaml", VIDIC_REQ)
    for order in (
        ["judge.include=judges/gpt5_mini_http.yaml", "judge.http.concurrency=2"],
        ["judge.http.concurrency=2", "judge.include=judges/gpt5_mini_http.yaml"],
    ):
        cfg = load_config(CONFIGS / "vidic.yaml", [*VIDIC_REQ, *order])
        assert cfg.judge.backend == "http" and cfg.judge.model == "gpt-5-mini"
        assert cfg.judge.http.send_sampling is False and cfg.judge.http.concurrency == 2  # other overrides win
        assert cfg.model == base.model  # only the named block changes
    expected = OmegaConf.merge(OmegaConf.structured(JudgeConfig), read_yaml(JUDGES / "gpt5_mini_http.yaml"))
    cfg = load_config(CONFIGS / "vidic.yaml", [*VIDIC_REQ, "judge.include=judges/gpt5_mini_http.yaml"])
    assert OmegaConf.to_container(cfg.judge) == OmegaConf.to_container(expected)  # replaced, not merged


def test_include_override_reproduces_the_demo_judge():
    """`judge.include=judges/tiny_hf.yaml` is exactly the demo's judge overrides (vbench_ray/cli.py cmd_demo)."""
    demo = [
        "judge.backend=hf",
        "judge.model=/m/tiny",
        "judge.name=tiny-random-judge",
        "judge.max_tokens=48",
        "judge.max_retries=1",
        "judge.video.max_frames=4",
        "judge.max_invalid_fraction=1.0",
    ]
    a = load_config(CONFIGS / "cove.yaml", [*COVE_REQ, *demo])
    b = load_config(CONFIGS / "cove.yaml", [*COVE_REQ, "judge.include=judges/tiny_hf.yaml", "judge.model=/m/tiny"])
    assert OmegaConf.to_container(a) == OmegaConf.to_container(b)


def test_include_inside_an_override_value_and_errors(tmp_path, monkeypatch):
    cfg = load_config(CONFIGS / "nrv.yaml", [*NRV_REQ, "judges=[{include: judges/tiny_hf.yaml, name: t}, {name: b}]"])
    assert cfg.judges[0]["backend"] == "hf" and cfg.judges[0]["name"] == "t"
    assert OmegaConf.to_container(cfg.judges[1]) == {"name": "b"}
    with pytest.raises(ConfigError, match=r"override `judge.include=judges/nope.yaml`.*not found"):
        load_config(CONFIGS / "cove.yaml", [*COVE_REQ, "judge.include=judges/nope.yaml"])
    with pytest.raises(ConfigError, match="name the key"):
        load_config(CONFIGS / "cove.yaml", [*COVE_REQ, "include=judges/default.yaml"])
    monkeypatch.chdir(tmp_path)  # a relative override path is looked up in the working directory first
    _write(tmp_path / "my_judge.yaml", "include: judges/default.yaml\nbackend: replay\nreplay_path: /runs/a\n")
    cfg = load_config(CONFIGS / "cove.yaml", [*COVE_REQ, "judge.include=my_judge.yaml"])
    assert cfg.judge.backend == "replay" and cfg.judge.replay_path == "/runs/a" and cfg.judge.max_tokens == 4096


def test_readme_nrv_block_composes_two_judges_from_included_files():
    """The README's NRVBench command, split as bash splits it: its `judges=[...]` parses, and each entry is the
    included judge file with the keys beside it on top (the file's max_invalid_fraction 1.0, not nrv.yaml's 0.05)."""
    import re
    import shlex

    text = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(vbench-ray synth nrv --out data/nrv\n.*?)```", text, re.S).group(1)
    words = shlex.split(block.replace("\\\n", " "), comments=True)
    run_at = words.index("run")
    assert words[run_at - 1] == "vbench-ray" and words[run_at + 1] == "configs/nrv.yaml"
    overrides = [w for w in words[run_at + 2 :] if "=" in w]
    assert any(w.startswith("judges=") for w in overrides)
    cfg = load_config(REPO / words[run_at + 1], overrides)
    assert cfg.judge.max_invalid_fraction == 0.05 and cfg.judge.backend == "vllm"  # nrv.yaml's own judge
    specs = BENCHMARKS["nrv"](cfg).judge_specs()
    assert [(label, s.backend, s.max_invalid_fraction, s.max_tokens, s.model) for label, s in specs] == [
        ("tiny-a", "hf", 1.0, 48, "runs/demo/tiny-judge"),
        ("tiny-b", "hf", 1.0, 32, "runs/demo/tiny-judge"),
    ]
