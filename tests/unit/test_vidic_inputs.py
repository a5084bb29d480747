"""ViDiC-1K without a run: config, loader, the judge's parsers (the official chain by hand), request building."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from helpers.configs import vidic_cfg
from helpers.vidic_runs import VIDIC, hand_checklist
from vbench_ray.benchmarks import DataError
from vbench_ray.benchmarks import vidic_scoring as scoring
from vbench_ray.benchmarks.vidic import VidicBench, VidicConfig
from vbench_ray.config import ConfigError, read_yaml
from vbench_ray.configure import load_config
from vbench_ray.judges.stage import JudgeResult


# ----------------------------------------------------------------------------- config


def test_vidic_yaml_documents_the_defaults():
    documented = read_yaml(VIDIC)  # with its `include`s resolved (model, judge: configs/judges/)
    schema = OmegaConf.structured(VidicConfig)
    for section in ("data", "model", "judge", "error_analysis"):
        assert OmegaConf.to_container(documented[section]) == OmegaConf.to_container(schema[section]), section
    raw = OmegaConf.load(VIDIC)
    assert raw.benchmark == "vidic" and raw.extends == "base.yaml"


def test_config_defaults_and_choices(tmp_path):
    cfg = vidic_cfg(tmp_path / "c.json", tmp_path / "o")
    assert cfg.model.temperature == 0.7 and cfg.model.video.fps == 2.0 and cfg.model.video.max_frames == 32
    assert cfg.model.max_tokens == 2048 and cfg.judge.temperature == 0.0 and cfg.judge.max_tokens == 1024
    assert cfg.error_analysis.enabled is False
    with pytest.raises(ConfigError, match=r"model.backend"):
        vidic_cfg(tmp_path / "c.json", tmp_path / "o", "model.backend=gpt")
    with pytest.raises(ConfigError, match=r"judge.http.media"):
        vidic_cfg(tmp_path / "c.json", tmp_path / "o", "judge.http.media=ftp")
    with pytest.raises(ConfigError, match=r"`data.checklist`"):
        load_config(VIDIC, ["output.dir=/tmp/x"])


# ----------------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    "text, answer",
    [
        ('Sure.\n```json\n{"answer": "yes", "explanation": "B is blue"}\n```', "yes"),
        ('```JSON\n{"answer": "No", "explanation": "same"}\n```', "no"),
        ('{"answer": "no", "explanation": "not mentioned"}', "no"),
        ('<think>answer: yes?</think>{"answer": "no", "explanation": "x"}', "no"),
        ("Answer: YES\nExplanation: the description says so", "yes"),
        ("answer：no （全角冒号）", "no"),
        ('The result is {"answer": "yes", "explanation": "stated"} as shown', "yes"),  # not raw JSON: regex
        ('{"answer": "yes.", "explanation": ""}', "yes"),
    ],
)
def test_judge_parser_accepts(text, answer):
    parsed = scoring.parse_judge(text)
    assert parsed.ok, parsed.error
    assert parsed.value["answer"] == answer


@pytest.mark.parametrize(
    "text, why",
    [
        ('```json\n{"answer": "unsure", "explanation": "?"}\n```', "yes"),
        ("answer: unsure", "yes"),
        ("I think the videos are probably different.", "no JSON"),
        ('{"explanation": "forgot"}', "no \"answer\""),
        ('{"answer": "maybe"}', "yes"),
        ("", "no JSON"),
    ],
)
def test_judge_parser_rejects(text, why):
    parsed = scoring.parse_judge(text)
    assert not parsed.ok and why in parsed.error


def test_free_text_and_error_type_parsers():
    assert scoring.parse_free_text("  a description \n").value == "a description"
    assert scoring.parse_free_text("<think>hmm</think>\n[Subject] ...").value == "[Subject] ..."
    assert not scoring.parse_free_text("   ").ok and not scoring.parse_free_text("<think>x</think>  ").ok
    ok = scoring.parse_error_type('```json\n{"error_type": "Missed Detection (Incomplete)", "explanation": "e"}\n```')
    assert ok.ok and ok.value["error_type"] == "Missed Detection"
    assert scoring.parse_error_type('{"error_type": "Vague / Imprecise"}').value["error_type"] == "Vague / Imprecise"
    assert scoring.parse_error_type('{"error_type": "self_contradiction"}').value["error_type"] == "Self-Contradiction"
    assert not scoring.parse_error_type('{"error_type": "bad luck"}').ok
    assert not scoring.parse_error_type("no json").ok


# ----------------------------------------------------------------------------- loader


def test_loader_rows(tmp_path):
    checklist = hand_checklist(tmp_path)
    cases = VidicBench(vidic_cfg(checklist, tmp_path / "o", video_root=tmp_path)).load_cases()
    assert [c["case_id"] for c in cases] == ["0", "1"]
    c0 = cases[0]
    assert c0["source_path"] == str((tmp_path / "data/x/0_src.mp4").resolve())
    assert c0["edited_path"] == str((tmp_path / "data/x/0_tgt.mp4").resolve())
    assert c0["categories"] == ["Subject", "Style", "Camera", "Motion", "Position"]  # Table 2's class order
    assert c0["instruction"] is None and c0["variant"] == "base" and c0["variant_params"] is None
    assert json.loads(c0["annotations"])["index"] == 0 and not c0["error_load"]
    assert cases[1]["categories"] == ["Subject", "Background"]


def test_loader_whole_file_problems(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match=r"data.checklist .*bad.json is not valid JSON"):
        VidicBench(vidic_cfg(bad, tmp_path / "o", video_root=tmp_path)).load_cases()
    bad.write_text('{"index": 0}')
    with pytest.raises(DataError, match=r"expected a JSON list"):
        VidicBench(vidic_cfg(bad, tmp_path / "o", video_root=tmp_path)).load_cases()
    with pytest.raises(DataError, match=r"data.checklist not found"):
        VidicBench(vidic_cfg(tmp_path / "nope.json", tmp_path / "o", video_root=tmp_path)).load_cases()
    checklist = hand_checklist(tmp_path)
    with pytest.raises(DataError, match=r"data.video_root is not set"):
        VidicBench(vidic_cfg(checklist, tmp_path / "o")).load_cases()
    with pytest.raises(DataError, match=r"data.video_root is not a directory"):
        VidicBench(vidic_cfg(checklist, tmp_path / "o", video_root=tmp_path / "missing")).load_cases()
    responses = tmp_path / "responses.json"
    responses.write_text('{"response": "x"}')
    with pytest.raises(DataError, match=r"data.responses .*expected a JSON list"):
        VidicBench(vidic_cfg(checklist, tmp_path / "o", f"data.responses={responses}")).load_cases()
    responses.write_text('[{"video1_path": "a.mp4", "response": "x"}]')
    with pytest.raises(DataError, match=r"entry\[0\].video2_path"):
        VidicBench(vidic_cfg(checklist, tmp_path / "o", f"data.responses={responses}")).load_cases()


def test_loader_per_case_problems_name_file_and_field(tmp_path):
    checklist = hand_checklist(tmp_path)
    items = json.loads(checklist.read_text())
    items[0]["structured_analysis"]["Differences"][1]["class"] = "lighting"
    items[0]["structured_analysis"]["Similarities"][0]["question"] = ""
    items[0]["structured_analysis"]["Differences"][0]["correct_answer"] = "maybe"
    items.append({**items[1], "index": 2, "video2_path": "data/x/missing.mp4"})
    items.append({**items[1], "index": 3, "video1_path": "../outside.mp4"})
    items.append({**items[1], "index": 4, "video1_path": str(tmp_path.parent / "elsewhere.mp4")})  # absolute, outside
    items.append({**items[1], "index": 5})  # (a duplicate index stops the load: test_hardening, item 8)
    items.append({**items[1], "index": 6, "structured_analysis": ["not", "an", "object"]})
    checklist.write_text(json.dumps(items))
    official = {
        c["case_id"]: c for c in VidicBench(vidic_cfg(checklist, tmp_path / "o", video_root=tmp_path)).load_cases()
    }
    assert not official["0"]["error_load"]  # data.questions=official: scored as the official code (test_vidic_parity)
    cases = {
        c["case_id"]: c
        for c in VidicBench(
            vidic_cfg(checklist, tmp_path / "o", "data.questions=strict", video_root=tmp_path)
        ).load_cases()
    }
    e0 = cases["0"]["error_load"]
    assert "checklist.json: item[0] (index=0).structured_analysis.Differences[1].class: unknown class 'lighting'" in e0
    assert "structured_analysis.Similarities[0].question: missing or empty" in e0
    assert "structured_analysis.Differences[0].correct_answer: expected 'yes' or 'no', got 'maybe'" in e0
    assert not cases["1"]["error_load"]
    assert "item[2] (index=2).video2_path: video not found" in cases["2"]["error_load"]
    assert "item[3] (index=3).video1_path '../outside.mp4' escapes the data root" in cases["3"]["error_load"]
    assert "escapes the data root" in cases["4"]["error_load"]
    assert not cases["5"]["error_load"]
    assert "item[6] (index=6).structured_analysis: expected an object" in cases["6"]["error_load"]


# ----------------------------------------------------------------------------- requests


def _case(tmp_path, variant="base", params=None):
    checklist = hand_checklist(tmp_path)
    case = VidicBench(vidic_cfg(checklist, tmp_path / "o", video_root=tmp_path)).load_cases()[0]
    return {**case, "variant": variant, "variant_params": json.dumps(params) if params else None}


def test_describe_request_layout_and_variants(tmp_path):
    base = scoring.describe_request(_case(tmp_path))
    assert base.request_id == "vidic/0/base/describe/response" and base.parser == "free_text"
    assert base.video is None
    content = base.messages[0]["content"]
    assert content[0]["type"] == "text" and "Video A" in content[0]["text"]
    assert "Playback Technique" in content[0]["text"]
    assert [p.get("text") for p in content[1:]] == ["Video A:", None, "Video B:", None]
    assert content[2]["video_url"]["url"].endswith("0_src.mp4") and content[4]["video_url"]["url"].startswith("file://")
    assert content[4]["video_url"]["url"].endswith("0_tgt.mp4")

    rev = scoring.describe_request(_case(tmp_path, "order:reverse", {"order": "reverse"}))
    rc = rev.messages[0]["content"]
    assert rev.request_id == "vidic/0/order:reverse/describe/response"
    assert [p.get("text") for p in rc[1:]] == ["Video B:", None, "Video A:", None]  # Video B's part first
    assert rc[2]["video_url"]["url"].endswith("0_tgt.mp4") and rc[4]["video_url"]["url"].endswith("0_src.mp4")
    assert rc[0] == content[0]

    fps = scoring.describe_request(_case(tmp_path, "fps:1", {"fps": 1.0}))
    assert fps.video == {"fps": 1.0} and fps.messages == base.messages
    with pytest.raises(ValueError, match="variant_params.order"):
        scoring.describe_request(_case(tmp_path, "order:sideways", {"order": "sideways"}))


def test_judge_request_layout(tmp_path):
    case = _case(tmp_path)
    results = {"vidic/0/base/describe/response": JudgeResult("x", "ok", "desc with {question} inside")}
    requests = scoring.judge_requests([case], results)
    assert [r.request_id for r in requests] == [
        f"vidic/0/base/judge/{t}" for t in ("sim0", "sim1", "diff0", "diff1", "diff2")
    ]
    sim, diff = requests[0], requests[2]
    assert sim.messages[0] == {
        "role": "system",
        "content": "You are a rigorous video analysis assistant. This is a Similarities problem.",
    }
    assert diff.messages[0]["content"].endswith("This is a Differences problem.")
    user = sim.messages[1]["content"]
    assert "desc with {question} inside" in user and user.rstrip().endswith("Is the style different?")
    assert "Default" in user or "default" in user
    assert not any(
        p.get("type") == "video_url"
        for m in sim.messages
        for p in (m["content"] if isinstance(m["content"], list) else [])
    )  # text-only
    assert scoring.judge_requests([case], {}) == []  # no description, no judge request


@pytest.mark.parametrize(
    "text, answer",
    [
        ('```json\n{"answer": "Yes.", "explanation": "x"}\n```', "Yes."),  # kept literally: scores wrong
        ('The result is {"answer": "yes", "explanation": "stated"} as shown', "error"),  # JSON in prose
        ('<think>first guess answer: no</think>{"answer": "yes"}', "no"),  # the regex meets the think block first
        ('```JSON\n{"answer": "no"}\n```', "error"),  # the fence is case-sensitive, and "answer": is not answer:
        ("Answer: YES\nExplanation: said so", "yes"),
        ("answer：unsure", "unsure"),
        ('{"answer": "no", "explanation": "same"}', "no"),
        ("", "error"),
    ],
)
def test_official_judge_chain(text, answer):
    """Item 7: the official parse_judge_response chain, by hand."""
    assert scoring.official_judge_answer(text) == answer
    parsed = scoring.parse_judge_official(text)
    assert parsed.ok and parsed.value["answer"] == answer  # never re-asked
