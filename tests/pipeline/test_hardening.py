"""Issue 14 (hardening), items 6-10 and 12-13: one test per item, none of them starting Ray.

6 a dead judge is not a score; 7 undecodable edited videos are not judged; 8 duplicate ids stop the load;
9 failed rows are retried on resume; 10 torn writes and a full disk; 12-13 fail-fast config checks.
"""

from __future__ import annotations

import errno
import io
import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.common import REPO, cove_overrides
from helpers.cove_answers import JUDGE_ONLY, perfect_answers
from vbench_ray.benchmarks.base import DataError
from vbench_ray.config import ConfigError
from vbench_ray.configure import load_config

COVE = REPO / "configs" / "cove.yaml"


def _cove_cfg(data, out, *extra):
    return load_config(COVE, cove_overrides(data, out, JUDGE_ONLY, *extra))


# ----------------------------------------------------------------------------- item 6


def test_item6_dead_judge_is_reported_unavailable_and_the_command_fails(cove_data, tmp_path, capsys):
    """Every answer is an endpoint's error page: the checklist metrics are null with the reason (quoting what
    came back), summary.json is still written, and `vbench-ray run` exits non-zero. Below the threshold the
    metric keeps its value and shows the count."""
    from vbench_ray.cli import main

    answers = tmp_path / "answers.jsonl"
    ids = perfect_answers(cove_data, answers)
    answers.write_text(
        "".join(
            json.dumps({"request_id": i, "text": "upstream connect error: 503 Service Unavailable"}) + "\n" for i in ids
        )
    )
    args = [
        "run",
        str(COVE),
        *cove_overrides(
            cove_data,
            tmp_path / "dead",
            JUDGE_ONLY,
            "judge.backend=replay",
            f"judge.replay_path={answers}",
            "judge.max_retries=0",
        ),
    ]
    code = main(args)
    err = capsys.readouterr().err
    assert code != 0
    assert "metric UAS is unavailable" in err and "never got a usable answer" in err
    summary = json.loads((tmp_path / "dead" / "summary.json").read_text())
    for name in ("UAS", "IFS", "VRS", "SEM"):
        m = summary["metrics"][name]
        assert m["value"] is None and m["ci95"] is None, name
        assert m["invalid_fraction"] == 1.0 and "judge.max_invalid_fraction=0.05" in m["unavailable"]
    # the reason quotes what the judge answered (here: the parser's complaint about the error page)
    assert summary["metrics"]["IFS"]["unavailable_errors"]

    # one broken request of ~30, under a permissive threshold: a value, the count, exit 0
    perfect_answers(cove_data, answers, break_one="cove/1/base/checklist/Single-TF")
    code = main(
        [
            "run",
            str(COVE),
            *cove_overrides(
                cove_data,
                tmp_path / "alive",
                JUDGE_ONLY,
                "judge.backend=replay",
                f"judge.replay_path={answers}",
                "judge.max_retries=0",
                "judge.max_invalid_fraction=0.5",
            ),
        ]
    )
    summary = json.loads((tmp_path / "alive" / "summary.json").read_text())
    assert code == 0
    assert summary["metrics"]["IFS"]["value"] is not None and "unavailable" not in summary["metrics"]["IFS"]
    assert summary["metrics"]["IFS"]["n_invalid"] + summary["metrics"]["VRS"]["n_invalid"] > 0


# ----------------------------------------------------------------------------- item 7


def test_item7_undecodable_edited_videos_are_not_judged(cove_copy, tmp_path):
    """A zero-byte and a corrupt edited video: no request is sent for them, their questions count wrong by
    default (Score-MCQ: 1), `score.missing_output=exclude` leaves them out; counted either way."""
    from vbench_ray.benchmarks.cove import unusable_edited
    from vbench_ray.runner import run

    answers = tmp_path / "answers.jsonl"
    perfect_answers(cove_copy, answers)  # a perfect judge, so only the rule decides cases 1 and 2
    edited = Path(cove_copy["edited_dir"])
    (edited / "1.mp4").write_bytes(b"")
    (edited / "2.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)
    base = ("judge.backend=replay", f"judge.replay_path={answers}")
    wrong = run(_cove_cfg(cove_copy, tmp_path / "wrong", *base))
    sent = {
        json.loads(line)["request_id"].split("/")[1]
        for line in (tmp_path / "wrong" / "judge_log.jsonl").read_text().splitlines()
    }
    assert "1" not in sent and "2" not in sent and "3" in sent
    judged = pq.read_table(tmp_path / "wrong" / "judgments.parquet").to_pylist()
    lost = [r for r in judged if r["case_id"] in ("1", "2")]
    assert lost and all(r["status"] == "no_output" for r in lost)
    assert all(r["correct"] is False for r in lost if r["type"] != "Score-MCQ")
    assert all(r["score"] == 1.0 for r in lost if r["type"] == "Score-MCQ")
    m = wrong.summary["metrics"]
    assert m["IFS"]["value"] < 100.0 and m["IFS"]["n_missing_output"] >= 1 and m["IFS"]["n_invalid"] == 0
    assert wrong.summary["missing_output"] == {"rule": "wrong", "n_cases": 2, "cases": ["1", "2"]}
    assert wrong.summary["failures"]["by_stage"].get("edited") == 2

    excluded = run(_cove_cfg(cove_copy, tmp_path / "excl", *base, "score.missing_output=exclude"))
    m = excluded.summary["metrics"]
    assert all(m[k]["value"] == pytest.approx(100.0) for k in ("UAS", "IFS", "VRS", "SEM"))
    assert excluded.summary["missing_output"]["n_cases"] == 2
    # with frame metrics on, the frame stage's decode failure of the edited file is what counts
    row = {"edited_path": "/d/e/7.mp4", "source_path": "/d/s.mp4"}
    assert unusable_edited({**row, "error_frames": "VideoError: video is an empty file: /d/e/7.mp4"})
    assert not unusable_edited({**row, "error_frames": "VideoError: video is an empty file: /d/s.mp4"})


# ----------------------------------------------------------------------------- item 8


def test_item8_duplicate_ids_stop_the_load_naming_them(cove_copy, tmp_path):
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.benchmarks.nrv import NRVBench
    from vbench_ray.benchmarks.vidic import VidicBench

    checklist = Path(cove_copy["checklist"])
    tasks = json.loads(checklist.read_text())
    tasks.append({**tasks[3], "id": f"00{tasks[3]['id']}"})  # "004" is task 4 again
    checklist.write_text(json.dumps(tasks))
    with pytest.raises(DataError, match=rf"duplicate task ids: '{int(tasks[3]['id'])}' \(2x\)"):
        CoveBench(_cove_cfg(cove_copy, tmp_path / "o")).load_cases()

    items = [
        {"index": 5, "video1_path": "a.mp4", "video2_path": "b.mp4"},
        {"index": "5", "video1_path": "c.mp4", "video2_path": "d.mp4"},
    ]
    (tmp_path / "vidic.json").write_text(json.dumps(items))
    cfg = load_config(
        REPO / "configs" / "vidic.yaml",
        [f"data.checklist={tmp_path / 'vidic.json'}", f"data.video_root={tmp_path}", f"output.dir={tmp_path / 'v'}"],
    )
    with pytest.raises(DataError, match=r"duplicate indexes: '5' \(2x\)"):
        VidicBench(cfg).load_cases()

    (tmp_path / "nrv" / "edited" / "m").mkdir(parents=True)
    (tmp_path / "nrv" / "edited" / "m" / "x.mp4").write_bytes(b"")
    (tmp_path / "nrv" / "annotations.jsonl").write_text('{"id": "0001_a"}\n{"id": "0002_b"}\n{"id": "0001_a"}\n')
    cfg = load_config(
        REPO / "configs" / "nrv.yaml",
        [
            f"data.annotations={tmp_path / 'nrv' / 'annotations.jsonl'}",
            f"data.edited_dir={tmp_path / 'nrv' / 'edited'}",
            f"output.dir={tmp_path / 'n'}",
        ],
    )
    with pytest.raises(DataError, match=r"duplicate instance ids: '0001_a' \(2x\)"):
        NRVBench(cfg).load_cases()


def test_item8_duplicate_agentic_task_ids(tmp_path):
    from vbench_ray.agentic.synth import synth_agentic
    from vbench_ray.benchmarks.agentic import AgenticBench

    data = synth_agentic(tmp_path / "a", seed=1, n_assembly=1, n_sequencing=0, n_repair=0, n_repurpose=0)
    tasks = Path(data["tasks_dir"])
    first = sorted(p for p in tasks.iterdir() if (p / "task.json").exists())[0]
    shutil.copytree(first, tasks / "zz_copy")  # a second bundle claiming the same task_id
    cfg = load_config(
        REPO / "configs" / "agentic.yaml",
        [f"data.tasks_dir={tasks}", "data.agent=oracle", "data.families=[assembly]", f"output.dir={tmp_path / 'o'}"],
    )
    task_id = json.loads((first / "task.json").read_text())["task_id"]
    with pytest.raises(DataError, match=rf"duplicate task ids: '{task_id}' \(2x\)"):
        AgenticBench(cfg).load_cases()


# ----------------------------------------------------------------------------- item 9


def test_item9_failed_rows_are_retried_and_superseded(tmp_path):
    from vbench_ray.sinks import CaseSink

    schema = pa.schema(
        [("case_id", pa.string()), ("variant", pa.string()), ("SSIM", pa.float64()), ("error_frames", pa.string())]
    )
    rows = [
        {"case_id": "1", "variant": "base", "SSIM": 0.9, "error_frames": None},
        {"case_id": "2", "variant": "base", "SSIM": None, "error_frames": "MemoryError: out of memory"},
    ]
    CaseSink(tmp_path, schema).write(pa.Table.from_pylist(rows, schema=schema))

    sink = CaseSink(tmp_path, schema)  # a rerun: the failed row is to do again, the good one is done
    assert sink.done_keys == {("1", "base")}
    fixed = {"case_id": "2", "variant": "base", "SSIM": 0.7, "error_frames": None}
    assert sink.write(pa.Table.from_pylist([fixed], schema=schema)) == 1
    assert CaseSink(tmp_path, schema).read_all().to_pylist() == [rows[0], fixed]  # newest row per key
    assert CaseSink(tmp_path, schema).done_keys == {("1", "base"), ("2", "base")}

    other = tmp_path / "keep"
    CaseSink(other, schema).write(pa.Table.from_pylist(rows, schema=schema))
    kept = CaseSink(other, schema, retry_failed=False)  # output.retry_failed=false
    assert kept.done_keys == {("1", "base"), ("2", "base")}
    assert kept.write(pa.Table.from_pylist([fixed], schema=schema)) == 0
    assert (
        load_config(
            COVE,
            cove_overrides(
                {"checklist": "c", "source_dir": "s", "edited_dir": "e"}, tmp_path, "output.retry_failed=false"
            ),
        ).output.retry_failed
        is False
    )


# ----------------------------------------------------------------------------- item 10


def _disk_full_after(monkeypatch, limit: int, suffixes=(".tmp", ".html", ".json")):
    """Make text writes to matching files fail with ENOSPC after ``limit`` characters, like a full disk."""
    real_open = io.open

    class Full(io.TextIOWrapper):
        pass

    def fake_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        if "w" not in mode or "b" in mode or not str(file).endswith(suffixes):
            return fh
        write = fh.write
        budget = [limit]

        def partial(text):
            if len(text) > budget[0]:
                write(text[: budget[0]])
                fh.flush()
                budget[0] = 0
                raise OSError(errno.ENOSPC, "No space left on device", str(file))
            budget[0] -= len(text)
            return write(text)

        fh.write = partial
        return fh

    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr("builtins.open", fake_open)


def test_item10_torn_writes_and_full_disk(tmp_path, monkeypatch, capsys):
    from vbench_ray.judges.log import JudgeLog, LogRecord, read_records

    log_path = tmp_path / "judge_log.jsonl"
    whole = json.dumps({"request_id": "a", "attempt": 0, "parse_status": "ok", "text": "x"})
    log_path.write_text(whole + "\n" + whole[:25])  # a line cut by a full disk
    JudgeLog(tmp_path).append([LogRecord("b", 0, "replay", "m", "h", "h", "answer", None, "ok")])
    lines = log_path.read_text().splitlines()
    assert lines[1] == whole[:25] and json.loads(lines[2])["request_id"] == "b"  # not glued onto the torn line
    assert [r["request_id"] for r in read_records(log_path)] == ["a", "b"]

    # report.html / summary.json: a full disk leaves the previous file whole, and no temp file behind
    from vbench_ray.report import write_report
    from vbench_ray.sinks import write_json

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_json(run_dir / "summary.json", {"benchmark": "cove", "metrics": {}})
    before = write_report(run_dir, n_strips=0).read_text()
    _disk_full_after(monkeypatch, 100)
    with pytest.raises(OSError):
        write_report(run_dir, n_strips=0)
    with pytest.raises(OSError):
        write_json(run_dir / "summary.json", {"benchmark": "cove", "metrics": {"x": "y" * 500}})
    monkeypatch.undo()
    assert (run_dir / "report.html").read_text() == before
    assert json.loads((run_dir / "summary.json").read_text()) == {"benchmark": "cove", "metrics": {}}
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]

    # the command stops with a clear message, not a traceback
    import vbench_ray.runner
    from vbench_ray.cli import main

    def full(cfg, variants=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x" / "cases" / "part-0.parquet"))

    monkeypatch.setattr(vbench_ray.runner, "run", full)
    code = main(
        ["run", str(COVE), *cove_overrides({"checklist": "c", "source_dir": "s", "edited_dir": "e"}, tmp_path / "x")]
    )
    err = capsys.readouterr().err
    assert code != 0 and "no space left on device" in err and "part-0.parquet" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- item 12


def test_item12_fail_fast_before_any_compute(cove_data, tmp_path):
    """Each problem is one ConfigError naming the key, raised by run() within about a second, before the
    run directory is even created."""
    from vbench_ray.preflight import check
    from vbench_ray.runner import run

    def problem(*extra, data=cove_data, config=COVE, judge_only=True):
        args = cove_overrides(data, tmp_path / "never", *((JUDGE_ONLY,) if judge_only else ()), *extra)
        cfg = load_config(config, args)
        with pytest.raises(ConfigError) as info:
            check(cfg)
        return str(info.value)

    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"judge.replay_path` = .*does not exist"):
        run(_cove_cfg(cove_data, tmp_path / "never", "judge.backend=replay", f"judge.replay_path={tmp_path / 'no'}"))
    assert time.perf_counter() - start < 5 and not (tmp_path / "never").exists()

    assert "`judge.model` is not set" in problem()  # vllm by default
    assert "`judge.model` = '/models/none' does not exist" in problem("judge.backend=hf", "judge.model=/models/none")
    assert "`judge.http.base_url` is not set" in problem("judge.backend=http", "judge.model=m")
    msg = problem(
        "judge.backend=http",
        "judge.model=m",
        "judge.http.base_url=http://127.0.0.1:9/v1",
        "judge.http.api_key_env=VBR_SURELY_UNSET_KEY",
    )
    assert "`judge.http.api_key_env` names the environment variable 'VBR_SURELY_UNSET_KEY', which is not set" in msg
    assert "`judge.replay_path` is not set" in problem("judge.backend=replay")
    msg = problem(
        "metrics.MSM.flow=raft",
        f"metrics.MSM.raft_weights={tmp_path / 'raft.pth'}",
        "metrics.MF.tracker=cotracker",
        judge_only=False,
    )
    assert "metrics.MSM.raft_weights" in msg and "metrics.MF.cotracker_weights" in msg and "2 problems" in msg
    assert "`stats.bootstrap_samples` = 0" in problem("stats.bootstrap_samples=0", judge_only=False)

    human = tmp_path / "human.jsonl"
    human.write_text('{"method": "m", "id": "0001_a", "instr": "correct", "phy": 9, "temp": 3}\n')
    nrv = load_config(
        REPO / "configs" / "nrv.yaml",
        [
            "data.annotations=a.jsonl",
            "data.edited_dir=e",
            f"output.dir={tmp_path / 'n'}",
            "judge.backend=replay",
            f"judge.replay_path={human}",
            f"agreement.human_scores={human}",
        ],
    )
    with pytest.raises(ConfigError, match=r"`agreement.human_scores`: human.jsonl:1.phy: expected an integer"):
        check(nrv)
    with pytest.raises(ConfigError, match=r"`agreement.human_scores`: agreement.human_scores not found"):
        check(
            load_config(
                REPO / "configs" / "nrv.yaml",
                [
                    "data.annotations=a.jsonl",
                    "data.edited_dir=e",
                    f"output.dir={tmp_path / 'n'}",
                    "judge.backend=replay",
                    f"judge.replay_path={human}",
                    f"agreement.human_scores={tmp_path / 'none.csv'}",
                ],
            )
        )


# ----------------------------------------------------------------------------- item 13


def test_item13_range_and_type_checks(cove_copy, tmp_path, monkeypatch):
    from vbench_ray.agreement import HumanScoresError, read_human_scores
    from vbench_ray.benchmarks.cove import CoveBench
    from vbench_ray.preflight import check

    def problem(*extra, out=tmp_path / "run"):
        with pytest.raises(ConfigError) as info:
            check(load_config(COVE, cove_overrides(cove_copy, out, *extra)))
        return str(info.value)

    assert "`run.limit` = -1" in problem("run.limit=-1")
    assert "`metrics.SSIM.frames` = 0" in problem("metrics.SSIM.frames=0")
    assert "`metrics.MF.frames` = -3" in problem("metrics.MF.frames=-3")
    assert "`stats.confidence` = 1.5" in problem("stats.confidence=1.5")
    assert "`ray.workers` = 0" in problem("ray.workers=0")
    assert "`ray.batch_size` = 0" in problem("ray.batch_size=0")
    import ray

    from vbench_ray import preflight

    monkeypatch.setattr(preflight, "local_gpus", lambda: 0)  # as on a machine without a GPU
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # the suite's shared Ray has a fake GPU
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert "`metrics.MF.device` = cuda but this machine has no usable GPU" in problem("metrics.MF.device=cuda")
    assert "is the data folder `data.edited_dir`" in problem(out=cove_copy["edited_dir"])
    (tmp_path / "afile").write_text("x")
    assert "is an existing file" in problem(out=tmp_path / "afile")
    check(load_config(COVE, cove_overrides(cove_copy, tmp_path / "fine")))  # the defaults pass

    # NaN / Infinity in the data: a per-case failure (expected_answer), a refused human-scores file
    checklist = Path(cove_copy["checklist"])
    text = checklist.read_text()
    tasks = json.loads(text)
    first = tasks[0]["evaluation_groups"][0]["questions"][0]
    first["expected_answer"] = float("nan")
    checklist.write_text(json.dumps(tasks))  # json writes the bare NaN literal, which json.loads accepts
    rows = CoveBench(load_config(COVE, cove_overrides(cove_copy, tmp_path / "o"))).load_cases()
    assert "expected_answer: nan is not a valid answer" in (rows[0]["error_load"] or "")
    assert not any(r.get("error_load") for r in rows[1:])
    human = tmp_path / "human.jsonl"
    human.write_text('{"method": "m", "NRVE_Acc": NaN}\n')
    with pytest.raises(HumanScoresError, match="NRVE_Acc: expected a finite number"):
        read_human_scores(human)
