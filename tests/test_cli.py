"""The command line: synth, report, errors as messages (not tracebacks)."""

import json

from vbench_ray.cli import main


def test_synth_command_writes_the_official_layout(tmp_path, capsys):
    assert main(["synth", "cove", "--out", str(tmp_path / "d"), "--n", "3", "--seed", "1"]) == 0
    tasks = json.loads((tmp_path / "d" / "checklist.json").read_text())
    assert [t["id"] for t in tasks] == [1, 2, 3]
    assert all((tmp_path / "d" / t["videoA_path"]).exists() for t in tasks)
    assert all((tmp_path / "d" / "edited" / f"{t['id']}.mp4").exists() for t in tasks)
    assert "checklist" in capsys.readouterr().out


def test_config_errors_are_one_line_messages(tmp_path, capsys):
    code = main(["run", "configs/cove.yaml", "data.checklst=x"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown config key `data.checklst`") and "Traceback" not in err


def test_data_errors_are_one_line_messages(tmp_path, capsys):
    code = main(["run", "configs/cove.yaml", f"data.checklist={tmp_path}/none.json", f"data.source_dir={tmp_path}",
                 f"data.edited_dir={tmp_path}", f"output.dir={tmp_path}/run", "wandb.mode=disabled",
                 "metrics.enabled=[SSIM]"])  # (no judge: an unset judge.model is caught before the data is read)
    assert code == 2
    assert "data.checklist not found" in capsys.readouterr().err


def test_verify_agentic_writes_reward_json(tmp_path, capsys):
    from vbench_ray.agentic import synth_agentic

    info = synth_agentic(tmp_path / "tasks", seed=0, n_assembly=0, n_sequencing=1, n_repair=0, n_repurpose=0)
    task = next(p for p in (tmp_path / "tasks").rglob("task.json")).parent
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "solution.json").write_text('{"order": ["not-a-clip"]}')
    assert main(["verify", "agentic", "--task", str(task), "--submission", str(sub)]) == 0
    reward = json.loads((sub / "reward.json").read_text())
    assert reward["reward"] == 0 and reward["details"]["status"] == "invalid"
    assert "unknown clip" in reward["details"]["reason"] and info["n_tasks"] == 1
