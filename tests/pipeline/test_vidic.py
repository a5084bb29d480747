"""ViDiC-1K end to end on synthetic data with the replay backend (a scripted model under test and a scripted judge;
no real model): the synthetic set, whole runs, the error-analysis phase, precomputed responses, variants, the report,
sweeps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers.configs import vidic_cfg
from helpers.vidic_runs import DESCRIPTION, VIDIC, gold_items, json_answer, question_counts, replay, script
from vbench_ray.benchmarks import vidic_questions
from vbench_ray.benchmarks import vidic_scoring as scoring
from vbench_ray.benchmarks.vidic import VidicBench
from vbench_ray.configure import load_config
from vbench_ray.runner import run


@pytest.fixture(scope="module")
def vidic_data(tmp_path_factory):
    """A synthetic ViDiC-1K of 8 pairs (every class differs at least once). Treat as read-only."""
    from vbench_ray.synth.vidic import synth_vidic

    return synth_vidic(tmp_path_factory.mktemp("vidic_data"), n=8, seed=0)


# ----------------------------------------------------------------------------- end to end on synthetic data


def test_synth_vidic_layout_and_determinism(vidic_data, tmp_path):
    from vbench_ray.synth.vidic import synth_vidic

    items = gold_items(vidic_data)
    assert len(items) == 8 and [i["index"] for i in items] == list(range(8))
    root = Path(vidic_data["video_root"])
    assert items[6]["video1_path"] == "data/playback_technique/6_src.mp4"
    assert items[6]["video2_path"] == "data/playback_technique/6_tgt.mp4"
    assert all((root / i[k]).is_file() for i in items for k in ("video1_path", "video2_path"))
    for item in items:
        sims, diffs = item["structured_analysis"]["Similarities"], item["structured_analysis"]["Differences"]
        assert sims and diffs
        assert all(q["correct_answer"] == "no" and "different" in q["question"] for q in sims)
        assert all(q["correct_answer"] == "yes" for q in diffs)
        assert not vidic_questions.parse_questions(item, "x")[1]
    diff_classes = {
        vidic_questions.canonical_class(q["class"]) for i in items for q in i["structured_analysis"]["Differences"]
    }
    assert diff_classes == set(scoring.CLASSES)
    again = synth_vidic(tmp_path / "again", n=8, seed=0)
    assert Path(again["checklist"]).read_bytes() == Path(vidic_data["checklist"]).read_bytes()
    assert Path(again["manifest"]).read_bytes() == Path(vidic_data["manifest"]).read_bytes()
    other = synth_vidic(tmp_path / "other", n=8, seed=1)
    assert Path(other["checklist"]).read_bytes() != Path(vidic_data["checklist"]).read_bytes()


def test_end_to_end_perfect_then_one_wrong(vidic_data, tmp_path):
    checklist, root = Path(vidic_data["checklist"]), vidic_data["video_root"]
    items = gold_items(vidic_data)
    n_sim, n_diff = question_counts(items)
    answers = tmp_path / "perfect.jsonl"
    script(checklist, answers)
    perfect = run(vidic_cfg(checklist, tmp_path / "perfect", *replay(answers), video_root=root)).summary
    for name in ("Sim", "Diff", "Avg"):
        assert perfect["metrics"][name]["value"] == pytest.approx(100.0), name
        assert perfect["metrics"][name]["n_invalid"] == 0
    assert perfect["metrics"]["Sim"]["n"] == n_sim and perfect["metrics"]["Diff"]["n"] == n_diff
    assert perfect["metrics"]["Avg"]["n"] == n_sim + n_diff and perfect["n_cases"] == 8
    assert all(v["Avg"]["value"] == 100.0 for v in perfect["by_category"].values())
    assert perfect["judge"]["describe"]["n_requests"] == 8 and perfect["judge"]["judge"]["n_ok"] == n_sim + n_diff

    # flip one difference answer of the motion pair (index 4)
    wrong = tmp_path / "one_wrong.jsonl"
    script(checklist, wrong, answer=lambda i, tag, gold: json_answer("no" if (i, tag) == (4, "diff0") else gold))
    s = run(vidic_cfg(checklist, tmp_path / "one_wrong", *replay(wrong), video_root=root)).summary
    assert s["metrics"]["Sim"]["value"] == pytest.approx(100.0)
    assert s["metrics"]["Diff"]["value"] == pytest.approx(100.0 * (n_diff - 1) / n_diff)
    assert s["metrics"]["Avg"]["value"] == pytest.approx(100.0 * (n_sim + n_diff - 1) / (n_sim + n_diff))
    motion = [
        q
        for i in items
        for sec in ("Similarities", "Differences")
        for q in i["structured_analysis"][sec]
        if q["class"] == "motion"
    ]
    assert s["by_category"]["Motion"]["Avg"]["value"] == pytest.approx(100.0 * (len(motion) - 1) / len(motion))
    assert s["by_category"]["Subject"]["Avg"]["value"] == 100.0


def test_error_analysis_phase(vidic_data, tmp_path):
    checklist, root = Path(vidic_data["checklist"]), vidic_data["video_root"]
    error_answer = {
        "request_id": "vidic/4/base/error/diff0",
        "text": '```json\n{"error_type": "Missed Detection (Incomplete)", "explanation": "not said"}\n```',
    }
    answers = tmp_path / "answers.jsonl"
    script(
        checklist,
        answers,
        answer=lambda i, tag, gold: json_answer("no" if (i, tag) == (4, "diff0") else gold),
        extra=[error_answer],
    )
    out = tmp_path / "run"
    s = run(vidic_cfg(checklist, out, *replay(answers), "error_analysis.enabled=true", video_root=root)).summary
    assert s["error_types"]["counts"]["Missed Detection"] == 1 and s["error_types"]["n_wrong"] == 1
    assert s["error_types"]["by_section"]["Diff"]["Missed Detection"] == 1
    assert s["judge"]["error"]["n_requests"] == 1 and s["judge"]["error"]["n_ok"] == 1
    judged = {r["request_id"]: r for r in pq.read_table(out / "judgments.parquet").to_pylist()}
    assert judged["vidic/4/base/judge/diff0"]["error_type"] == "Missed Detection"
    log = [json.loads(x) for x in (out / "judge_log.jsonl").read_text().splitlines()]
    request = next(r for r in log if r["request_id"] == "vidic/4/base/error/diff0")
    assert request["parse_status"] == "ok"


def test_precomputed_responses(vidic_data, tmp_path):
    """data.responses: descriptions from the official responses file (no model), one pair missing."""
    checklist = Path(vidic_data["checklist"])
    entries = json.loads(Path(vidic_data["responses"]).read_text())
    missing = entries.pop(3)
    entries[0]["video1_path"] = "./" + entries[0]["video1_path"]  # normalised before the join
    responses = tmp_path / "my_model.json"
    responses.write_text(json.dumps(entries))
    judge_answers = tmp_path / "judge.jsonl"
    script(checklist, judge_answers, describe=lambda item: None)
    out = tmp_path / "run"
    s = run(vidic_cfg(checklist, out, f"data.responses={responses}", *replay(judge_answers, model=False))).summary
    items = gold_items(vidic_data)
    n_sim, n_diff = question_counts(items)
    lost = question_counts([items[3]])
    assert s["metrics"]["Avg"]["n"] == n_sim + n_diff
    assert s["metrics"]["Avg"]["value"] == pytest.approx(100.0 * (n_sim + n_diff - sum(lost)) / (n_sim + n_diff))
    assert s["metrics"]["Avg"]["n_invalid"] == sum(lost) and s["question_status"]["describe_error"] == sum(lost)
    assert s["judge"]["describe"]["backend"] == "replay"
    assert s["judge"]["describe"]["model"] == "responses:my_model.json"
    assert s["judge"]["describe"]["n_ok"] == 7 and s["judge"]["describe"]["n_error"] == 1
    assert s["failures"]["by_stage"] == {"describe": 1}
    written = [json.loads(x) for x in (out / "vidic_responses.jsonl").read_text().splitlines()]
    assert len(written) == 7 and missing["video1_path"] not in json.dumps(written)
    log = [json.loads(x) for x in (out / "judge_log.jsonl").read_text().splitlines()]
    described = {r["request_id"]: r["text"] for r in log if "/describe/" in r["request_id"] and r["text"]}
    assert described["vidic/0/base/describe/response"] == entries[0]["response"]

    # the run directory alone re-scores the run (descriptions and judge answers are in its judge log)
    again = run(vidic_cfg(checklist, tmp_path / "again", *replay(out), video_root=vidic_data["video_root"])).summary
    assert again["metrics"]["Sim"]["value"] == s["metrics"]["Sim"]["value"]
    assert again["metrics"]["Avg"]["value"] == s["metrics"]["Avg"]["value"]


def test_variants_reach_the_describe_requests(vidic_data, tmp_path):
    """Sweep rows (variant + variant_params) build their own describe requests: fps -> request.video,
    order=reverse -> Video B's part first."""
    cfg = vidic_cfg(Path(vidic_data["checklist"]), tmp_path / "o", video_root=vidic_data["video_root"])
    bench = VidicBench
    base = bench(cfg).load_cases()[:2]
    rows = (
        base
        + [{**c, "variant": "fps:1", "variant_params": json.dumps({"fps": 1.0})} for c in base]
        + [{**c, "variant": "order:reverse", "variant_params": json.dumps({"order": "reverse"})} for c in base]
    )
    describe = bench(cfg).judge_phases()[0]
    assert describe.name == "describe" and describe.judge_cfg.temperature == 0.7
    requests = {r.request_id: r for r in describe.build(rows, {})}
    assert len(requests) == 6
    assert requests["vidic/0/fps:1/describe/response"].video == {"fps": 1.0}
    assert requests["vidic/0/base/describe/response"].video is None
    parts = [
        p
        for p in requests["vidic/1/order:reverse/describe/response"].messages[0]["content"]
        if p["type"] == "video_url"
    ]
    assert parts[0]["video_url"]["url"].endswith("1_tgt.mp4") and parts[1]["video_url"]["url"].endswith("1_src.mp4")


def test_report_renders(vidic_data, tmp_path):
    checklist, root = Path(vidic_data["checklist"]), vidic_data["video_root"]
    answers = tmp_path / "answers.jsonl"
    script(checklist, answers)
    cfg = load_config(
        VIDIC,
        [
            f"data.checklist={checklist}",
            f"data.video_root={root}",
            f"output.dir={tmp_path / 'r'}",
            "wandb.mode=disabled",
            "report.n_strips=1",
            "stats.bootstrap_samples=100",
            *replay(answers),
        ],
    )
    result = run(cfg)
    assert result.report_path.exists() and "Avg" in result.report_path.read_text()
    shutil.rmtree(tmp_path / "r")


@pytest.mark.ray
@pytest.mark.slow
def test_robustness_sweep_end_to_end_with_replay(vidic_data, tmp_path, ray_local):
    """The shipped sweep's axes on 3 synthetic pairs: every variant's requests answered by a scripted
    model and a perfect judge; perturbed videos rendered once per (video, variant), reused on re-run."""
    from vbench_ray.configure import load_sweep

    checklist, root = Path(vidic_data["checklist"]), vidic_data["video_root"]
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(
        f"base: {VIDIC}\nname: mini_robustness\naxes:\n  fps: [0.5, 1]\n  resolution: [48]\n"
        "  noise: [noise:15, blur:5, saturation:0.5]\n  order: [forward, reverse]\n"
    )
    variants = [v.name for v in load_sweep(sweep_file, [f"data.checklist={checklist}", "output.dir=x"]).variants]
    assert variants == ["base", "fps:0.5", "fps:1", "res:48", "noise:15", "blur:5", "saturation:0.5", "order:reverse"]
    lines = []
    for item in gold_items(vidic_data)[:3]:
        for v in variants:
            lines.append({"request_id": f"vidic/{item['index']}/{v}/describe/response", "text": DESCRIPTION})
            for q in vidic_questions.parse_questions(item, "")[0]:
                lines.append(
                    {"request_id": f"vidic/{item['index']}/{v}/judge/{q.tag}", "text": json_answer(q.correct_answer)}
                )
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "run"
    args = [
        f"data.checklist={checklist}",
        f"data.video_root={root}",
        f"output.dir={out}",
        "run.limit=3",
        "wandb.mode=disabled",
        *replay(answers),
    ]
    sweep = load_sweep(sweep_file, args)
    first = run(sweep.config, variants=sweep.variants).summary
    assert set(first["by_variant"]) == set(variants)
    assert all(m["Avg"]["value"] == 100.0 for m in first["by_variant"].values())
    # 3 pairs = 6 videos, each decoded once per pixel-changing variant (res, noise, blur, saturation)
    assert first["sweep"]["rendered"] == first["sweep"]["videos_decoded"] == 6 * 4
    log = [json.loads(line) for line in (out / "judge_log.jsonl").read_text().splitlines()]
    describe = {r["request_id"] for r in log if "/describe/" in r["request_id"]}
    assert len(describe) == 3 * len(variants)
    again = run(load_sweep(sweep_file, args).config, variants=sweep.variants).summary
    assert again["sweep"]["rendered"] == 0 and again["by_variant"] == first["by_variant"]


@pytest.mark.ray
@pytest.mark.slow
def test_sweep_with_the_tiny_models(vidic_data, tmp_path, ray_local, tiny_judge_dir):
    """The real path: a tiny random VLM (hf backend) describes each pair under every variant, the same tiny
    model judges the text; every variant is scored and is its own offline wandb run in the sweep's group."""
    from vbench_ray.configure import load_sweep

    tiny = tiny_judge_dir
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(
        f"base: {VIDIC}\nname: tiny_sweep\naxes:\n  fps: [1]\n  noise: [blur:5]\n  order: [reverse]\n"
    )
    out = tmp_path / "run"
    args = [
        f"data.checklist={vidic_data['checklist']}",
        f"data.video_root={vidic_data['video_root']}",
        f"output.dir={out}",
        "run.limit=2",
        "wandb.mode=offline",
        "report.enabled=false",
    ]
    for role in ("model", "judge"):
        args += [
            f"{role}.backend=hf",
            f"{role}.model={tiny}",
            f"{role}.max_tokens=16",
            f"{role}.max_retries=0",
            f"{role}.video.max_frames=8",
        ]
    sweep = load_sweep(sweep_file, args)
    s = run(sweep.config, variants=sweep.variants).summary
    assert set(s["by_variant"]) == {"base", "fps:1", "blur:5", "order:reverse"}
    describe = [json.loads(line) for line in (out / "judge_log.jsonl").read_text().splitlines() if "/describe/" in line]
    assert len(describe) == 2 * 4 and all(r["text"] is not None and r["prompt_tokens"] for r in describe)
    tokens = {
        r["request_id"].split("/")[2]: r["prompt_tokens"] for r in describe if r["request_id"].startswith("vidic/0/")
    }
    assert tokens["fps:1"] < tokens["base"]  # 3 s clips: 3 frames per video at 1 fps, 6 at the base 2 fps
    for v in s["by_variant"].values():
        assert v["Avg"]["n"] > 0 and 0.0 <= v["Avg"]["value"] <= 100.0
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 4
