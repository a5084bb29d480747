"""Repair verifier (App. H.1) on synthetic tasks: reference points, the window split, shot swap length
penalty, timeline range matching with its honesty and audio gates, and every hard gate on adversarial
submissions (copies of the broken input, wrong codec/container/sample rate/duration, malformed ranges)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from vbench_ray.agentic.bundle import load_task
from vbench_ray.agentic.media import read_media, write_media
from vbench_ray.agentic.synth import perfect_fix, synth_agentic
from vbench_ray.agentic.verifiers import repair
from vbench_ray.agentic.verify import verify_cli


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """The seven synthetic Repair tasks, by defect."""
    info = synth_agentic(
        tmp_path_factory.mktemp("agentic_repair"), seed=3, n_assembly=0, n_sequencing=0, n_repair=7, n_repurpose=0
    )
    out = {}
    for task_id in info["tasks"]:
        task = load_task(Path(info["tasks_dir"]) / task_id)
        out[task.subtype] = task
    return out


def media(task):
    return read_media(task.input("broken.mp4")), read_media(task.truth_file("golden.mp4"))


def submit(path: Path, frames, audio, fps=12, sr=16000, name="fixed.mp4", **kw) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    write_media(path / name, frames, fps, audio, sr if audio is not None else None, **kw)
    return path


def verify(task, sub, **cfg):
    return repair.verify(task, sub, repair.RepairConfig(**cfg))


@pytest.mark.parametrize(
    "defect", ["colour_shift", "blur", "repeated_frames", "shot_swap", "audio_noise", "audio_echo", "audio_clipping"]
)
def test_golden_scores_one_and_a_perfect_fix_about_one(tasks, tmp_path, defect):
    task = tasks[defect]
    sub = tmp_path / "golden"
    sub.mkdir()
    shutil.copyfile(task.truth_file("golden.mp4"), sub / "fixed.mp4")
    if task.truth["group"] == "timeline":
        (sub / "solution.json").write_text(json.dumps({"ranges": [task.truth["ranges"][0]["range"]]}))
    assert verify(task, sub).reward == pytest.approx(1.0)
    broken, golden = media(task)
    frames, audio = perfect_fix(broken, golden, task.truth)  # what a flawless agent renders
    sub2 = submit(tmp_path / "perfect", frames, audio)
    if task.truth["group"] == "timeline":
        shutil.copyfile(sub / "solution.json", sub2 / "solution.json")
    v = verify(task, sub2)
    assert v.status == "ok" and v.reward >= 0.97, v.details


@pytest.mark.parametrize("defect", ["colour_shift", "repeated_frames", "audio_noise"])
def test_copies_of_the_broken_input_are_gated(tasks, tmp_path, defect):
    task = tasks[defect]
    sub = tmp_path / "copy"
    sub.mkdir()
    shutil.copyfile(task.input("broken.mp4"), sub / "fixed.mp4")
    (sub / "solution.json").write_text(json.dumps({"ranges": []}))
    v = verify(task, sub)
    assert v.reward == 0.0 and v.status == "invalid" and "verbatim copy" in v.details["reason"]
    broken, _ = media(task)
    sub2 = submit(tmp_path / "reencoded", broken.frames, broken.audio)  # same content, new bytes
    shutil.copyfile(sub / "solution.json", sub2 / "solution.json")
    v = verify(task, sub2)
    assert v.reward == 0.0 and "near-verbatim copy" in v.details["reason"], v.details
    # without the gate the copy would earn the 0.1 * s_out of an untouched clean region
    if task.truth["group"] in ("visual", "audio"):
        v = verify(task, sub2, near_copy_psnr_db=1000.0)
        assert v.status == "ok" and v.details["s_in"] == pytest.approx(0.0, abs=0.02) and v.reward > 0.05


def test_format_gates(tasks, tmp_path):
    task = tasks["colour_shift"]
    broken, golden = media(task)
    frames, audio = perfect_fix(broken, golden, task.truth)
    cases = {
        "video codec": dict(video_codec="mpeg4"),
        "sample rate": dict(
            sr=22050,
            audio=np.interp(
                np.linspace(0, len(audio) - 1, int(len(audio) * 22050 / 16000)), np.arange(len(audio)), audio
            ).astype(np.float32),
        ),
        "no audio stream": dict(audio=None),
        "duration": dict(frames=frames[:40]),
        "frame size": dict(frames=np.ascontiguousarray(frames[:, ::2, ::2])),
    }
    for reason, kw in cases.items():
        args = {"frames": frames, "audio": audio, **kw}
        sub = submit(tmp_path / reason.replace(" ", "_"), args.pop("frames"), args.pop("audio"), **args)
        v = verify(task, sub)
        assert v.reward == 0.0 and v.status == "invalid" and reason in v.details["reason"], (reason, v.details)
    # a Matroska file named fixed.mp4
    mkv = submit(tmp_path / "mkv", frames, audio, name="fixed.mkv")
    (mkv / "fixed.mkv").rename(mkv / "fixed.mp4")
    v = verify(task, mkv)
    assert v.reward == 0.0 and "container" in v.details["reason"]
    # missing and undecodable files
    (tmp_path / "empty").mkdir()
    v = verify(task, tmp_path / "empty")
    assert v.reward == 0.0 and v.status == "missing"
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "fixed.mp4").write_bytes(b"\x00not a video" * 100)
    v = verify(task, junk)
    assert v.reward == 0.0 and "cannot be decoded" in v.details["reason"]


def test_visual_window_split(tasks, tmp_path):
    task = tasks["colour_shift"]
    broken, golden = media(task)
    a, b = (int(round(x * 12)) for x in task.truth["window"])
    half = broken.frames.copy()
    half[a : (a + b) // 2] = golden.frames[a : (a + b) // 2]  # fix half the window
    v = verify(task, submit(tmp_path / "half", half, broken.audio))
    assert 0.25 < v.details["s_in"] < 0.75 and v.details["s_out"] > 0.95
    assert v.reward == pytest.approx(0.9 * v.details["s_in"] + 0.1 * v.details["s_out"])
    # the window fixed, the clean region damaged: only the 0.1 term is lost
    damaged, _ = perfect_fix(broken, golden, task.truth)
    damaged = damaged.copy()
    outside = np.ones(len(damaged), bool)
    outside[a:b] = False
    damaged[outside] = (damaged[outside] * 0.6).astype(np.uint8)
    v = verify(task, submit(tmp_path / "damaged", damaged, broken.audio))
    assert v.details["s_in"] > 0.95 and v.details["s_out"] < 0.5 and v.reward < 0.95


def test_audio_window_split(tasks, tmp_path):
    task = tasks["audio_noise"]
    broken, golden = media(task)
    sa, sb = (int(round(x * 16000)) for x in task.truth["window"])
    half = broken.audio.copy()
    half[sa : (sa + sb) // 2] = golden.audio[sa : (sa + sb) // 2]
    sub = submit(tmp_path / "half", broken.frames, half)
    v = verify(task, sub, measures="substitute")  # the numpy stand-ins, a named fallback
    assert 0.2 < v.details["s_in"] < 0.8 and v.details["s_out"] > 0.9
    assert set(v.details["measures"]) == {"si_sdr", "lsd", "env_corr"}
    assert v.details["measures_used"]["substitutes"] == ["lsd", "env_corr"]
    v = verify(task, sub)  # default: the paper's PESQ-WB, STOI and SI-SDR; half a noisy window stays poor
    assert set(v.details["measures"]) == {"pesq_wb", "stoi", "si_sdr"}
    assert v.details["measures_used"] == {
        "scheme": "paper",
        "measure_set": "paper",
        "visual": [],
        "audio": ["pesq_wb", "stoi", "si_sdr"],
        "substitutes": [],
    }
    assert 0.0 < v.details["s_in"] < 0.5 and v.details["s_out"] > 0.9


def test_shot_swap_length_penalty(tasks, tmp_path):
    task = tasks["shot_swap"]
    broken, golden = media(task)
    frames, audio = perfect_fix(broken, golden, task.truth)
    extra = int(round(0.15 * len(frames)))  # 15% longer: 5 points past the 10% tolerance -> factor 0.5
    longer = np.concatenate([frames, np.repeat(frames[-1:], extra, axis=0)])
    longer_audio = np.concatenate([audio, np.zeros(extra * 16000 // 12, np.float32)])
    v = verify(task, submit(tmp_path / "longer", longer, longer_audio))
    ratio = len(longer) / len(golden.frames)
    assert v.details["length_factor"] == pytest.approx(1 - (ratio - 1 - 0.1) / 0.1)
    assert v.reward == pytest.approx(v.details["s"] * v.details["length_factor"])
    assert 0.4 < v.reward < 0.65
    unfixed_order = np.concatenate([broken.frames[:4], broken.frames[4:]])  # broken order, new encode
    v = verify(task, submit(tmp_path / "unfixed", unfixed_order[::-1].copy(), broken.audio[::-1].copy()))
    assert v.reward < 0.2


def _timeline(task, tmp_path, name, ranges_reported, ranges_rendered, audio_override=None, **cfg):
    broken, _ = media(task)
    t = np.arange(len(broken.frames)) / 12
    ta = np.arange(len(broken.audio)) / 16000
    keep, keep_a = np.ones(len(t), bool), np.ones(len(ta), bool)
    for s, e in ranges_rendered:
        keep &= ~((t >= s - 1e-9) & (t < e - 1e-9))
        keep_a &= ~((ta >= s - 1e-9) & (ta < e - 1e-9))
    audio = broken.audio[keep_a] if audio_override is None else audio_override(broken.audio[keep_a])
    sub = submit(tmp_path / name, broken.frames[keep], audio)
    (sub / "solution.json").write_text(json.dumps({"ranges": ranges_reported}))
    return verify(task, sub, **cfg)


def test_timeline_range_match_honesty_and_audio_gates(tasks, tmp_path):
    task = tasks["repeated_frames"]
    (s, e) = task.truth["ranges"][0]["range"]
    (s2, e2) = task.truth["ranges"][0]["equivalent"][0]
    tol = task.truth["tolerance_s"]
    v = _timeline(task, tmp_path, "exact", [[s, e]], [[s, e]])
    assert v.reward == 1.0 and v.details["honesty"]["passed"] and v.details["audio_check"]["passed"]
    v = _timeline(task, tmp_path, "first_copy", [[s2, e2]], [[s2, e2]])  # the equivalent cut
    assert v.reward == 1.0
    near = [round((s + 0.6 * tol) * 12) / 12, round((e - 0.6 * tol) * 12) / 12]  # both ends 2 frames off
    assert _timeline(task, tmp_path, "within_tol", [near], [near]).reward == 1.0
    far = [s + 2 * tol, e + 2 * tol]
    v = _timeline(task, tmp_path, "wrong_range", [far], [far])  # honest, but the wrong place
    assert v.reward == 0.0 and v.details["honesty"]["passed"] and v.details["range_score"] == 0.0
    # the right ranges reported, a different cut rendered: the honesty check fails
    v = _timeline(task, tmp_path, "dishonest", [[s, e]], [far])
    assert v.reward == 0.0 and not v.details["honesty"]["passed"] and v.details["range_score"] == 1.0
    # right ranges, right picture, wrong sound (the audio check fails)
    v = _timeline(
        task,
        tmp_path,
        "bad_audio",
        [[s, e]],
        [[s, e]],
        audio_override=lambda a: np.random.default_rng(0).normal(0, 0.1, len(a)).astype(np.float32),
    )
    assert v.reward == 0.0 and v.details["honesty"]["passed"] and not v.details["audio_check"]["passed"]
    # an extra (honestly rendered) range: the paper's recall ignores it, the official F1 does not
    extra = [[s, e], [0.0, 0.25]]
    assert _timeline(task, tmp_path, "extra", extra, extra).reward == 1.0
    v = _timeline(task, tmp_path, "extra_f1", extra, extra, range_score="f1")
    assert v.reward == pytest.approx(2 * 0.5 * 1.0 / 1.5)


@pytest.mark.parametrize("solution", [None, "{ranges: oops", json.dumps({"ranges": [[3.0, 1.0]]})])
def test_timeline_malformed_ranges_gate(tasks, tmp_path, solution):
    task = tasks["repeated_frames"]
    (s, e) = task.truth["ranges"][0]["range"]
    broken, _ = media(task)
    keep = ~((np.arange(len(broken.frames)) / 12 >= s - 1e-9) & (np.arange(len(broken.frames)) / 12 < e - 1e-9))
    sub = submit(tmp_path / "sub", broken.frames[keep], broken.audio[: int(keep.sum() * 16000 / 12)])
    if solution is not None:
        (sub / "solution.json").write_text(solution)
    v = verify(task, sub)
    assert v.reward == 0.0 and v.status == "invalid" and "malformed ranges" in v.details["reason"]


def test_verify_cli_writes_reward_json(tasks, tmp_path):
    task = tasks["blur"]
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copyfile(task.input("broken.mp4"), sub / "fixed.mp4")
    out = verify_cli(task.root, sub)
    written = json.loads((sub / "reward.json").read_text())
    assert written == out and out["reward"] == 0.0
    assert out["details"]["status"] == "invalid" and out["details"]["family"] == "repair"
    assert out["details"]["subtype"] == "blur" and "verbatim" in out["details"]["reason"]


# ----------------------------------------------------------------------------- issue 10, item 9: real measures


def _speechlike(seconds=3.0, sr=16000, fm=4.0, seed=0):
    """Noise carrier amplitude-modulated at ``fm`` Hz (speech's syllabic rate is ~4 Hz)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    return (rng.normal(size=len(t)) * (1.0 + np.sin(2 * np.pi * fm * t)) * 0.2).astype(np.float64)


def test_pesq_wb_and_stoi_at_their_formula_maxima():
    from vbench_ray.agentic.verifiers import measures as M

    x = _speechlike()
    # P.862.2 maps raw PESQ 4.5 (identical signals) to 0.999 + 4 / (1 + exp(-1.3669 * 4.5 + 3.8224))
    top = 0.999 + 4.0 / (1.0 + np.exp(-1.3669 * 4.5 + 3.8224))
    assert top == pytest.approx(4.6439, abs=1e-4)
    assert M.pesq_wb(x, x, 16000) == pytest.approx(top, abs=2e-3)
    x32 = np.repeat(x, 2)  # the same signal at 32 kHz: resampled to P.862.2's 16 kHz
    assert M.pesq_wb(x32, x32, 32000) == pytest.approx(top, abs=2e-3)
    # STOI: the mean correlation of identical short-time envelopes is exactly 1
    assert M.stoi(x, x, 16000) == pytest.approx(1.0, abs=1e-9)
    noisy = x + np.random.default_rng(1).normal(0, 0.3, len(x))
    assert M.pesq_wb(noisy, x, 16000) < 2.0 and M.stoi(noisy, x, 16000) < 0.9


def test_srmr_follows_falk_2010():
    from vbench_ray.agentic.verifiers import measures as M

    # modulation filterbank: 8 centres log-spaced from 4 to 128 Hz: 4 * 32 ** (k / 7)
    assert M.srmr_modulation_cfs() == pytest.approx(
        [4.0, 6.5627, 10.7672, 17.6654, 28.9832, 47.5518, 78.0169, 128.0], abs=1e-3
    )
    # cochlear filterbank: 23 ERB-spaced channels (Slaney's ERBSpace) from 125 Hz up to below 8 kHz
    e = 9.26449 * 24.7
    top = -e + np.exp((np.log(125 + e) - np.log(8000 + e)) / 23) * (8000 + e)
    cfs = M.srmr_cochlear_cfs(16000)
    assert len(cfs) == 23 and cfs[0] == pytest.approx(125.0) and cfs[-1] == pytest.approx(top)
    slow, fast = _speechlike(fm=4.0), _speechlike(fm=100.0)
    # energy at low modulation frequencies (bands 1-4, 4-18 Hz) over the high ones: > 1 for a 4 Hz
    # envelope, < 1 for a 100 Hz one
    assert M.srmr(slow) > 2.0 and M.srmr(fast) < 0.5
    assert M.srmr(3.0 * slow) == pytest.approx(M.srmr(slow), rel=1e-6)  # a ratio: gain-invariant
    # reverberation (an exponentially decaying noise tail, T60 ~ 1 s) smears the envelope: SRMR drops
    rng = np.random.default_rng(2)
    tail = rng.normal(size=12000) * np.exp(-np.arange(12000) / 2300.0)
    reverberant = np.convolve(slow, tail)[: len(slow)]
    assert M.srmr(reverberant) < 0.5 * M.srmr(slow)


def test_measure_sets_and_reward_json(tasks, tmp_path):
    from vbench_ray.agentic.verifiers import measures as M

    task = tasks["audio_echo"]
    broken, golden = media(task)
    sa, sb = (int(round(x * 16000)) for x in task.truth["window"])
    half = broken.audio.copy()
    half[sa : (sa + sb) // 2] = golden.audio[sa : (sa + sb) // 2]
    sub = submit(tmp_path / "half_fixed", broken.frames, half)
    paper = verify(task, sub)
    assert set(paper.details["measures"]) == {"pesq_wb", "srmr", "si_sdr"}  # echo: SRMR for intelligibility
    assert paper.details["measures_used"]["audio"] == ["pesq_wb", "srmr", "si_sdr"]
    sub_v = verify(task, sub, measures="substitute")
    assert set(sub_v.details["measures"]) == {"si_sdr", "lsd", "env_corr"}
    out = verify_cli(task.root, sub, tmp_path / "reward.json", settings={"repair": {"measures": "substitute"}})
    assert out["details"]["measures_used"] == {
        "scheme": "paper",
        "measure_set": "substitute",
        "visual": [],
        "audio": ["si_sdr", "lsd", "env_corr"],
        "substitutes": ["lsd", "env_corr"],
    }
    with pytest.raises(ValueError, match="substitute"):
        verify(task, sub, audio_metrics=["pesq_wb", "lsd"])  # a stand-in never sneaks into the paper set
    with pytest.raises(ValueError, match="measures"):
        verify(task, sub, measures="fast")
    if M.unavailable("lpips"):  # the CPU stack: a named measure that says why it cannot run
        with pytest.raises(M.MeasureUnavailable, match="torchvision"):
            verify(tasks["blur"], sub, visual_metrics=["psnr", "lpips"])


# ----------------------------------------------------------------------------- item 10: the official scheme


def test_official_localisation_formulas(tmp_path):
    from vbench_ray.agentic.verifiers import repair_official as RO

    report = tmp_path / "report.md"
    report.write_text(
        "# Report\n\n## Diagnosis\n- type: colour shift\n- start: 00:01.500\n- end: 2.4\n\n"
        "## Repair trajectory\n- start: 9\n",
        encoding="utf-8",
    )
    prof = RO.official_profile({"group": "visual", "defect": "colour_shift", "window": [1.5, 2.5]}, 4.0)
    loc = RO.localization_score(report, prof)
    # hit 5 + start 10 exp(-3 * 0) + end 10 exp(-3 * 0.1) + IoU 10 * (0.9 / 1.0)
    assert loc["score"] == pytest.approx(5 + 10 + 10 * np.exp(-0.3) + 9.0)
    assert repair.parse_timestamp("01:02:03.5") == pytest.approx(3723.5)
    report.write_text("no diagnosis here\n", encoding="utf-8")
    assert RO.localization_score(report, prof)["score"] == 0.0
    assert RO.localization_score(tmp_path / "none.md", prof)["score"] == 0.0
    # audio: a copy 75 ms late scores its overlap share times the lag penalty 1 - 75/150
    x = np.random.default_rng(0).normal(size=32000)
    late = np.concatenate([np.zeros(1200), x[:-1200]])
    assert repair.xcorr_lagged(late, x, 16000) == pytest.approx(0.5 * (1 - 1200 / 32000), abs=0.01)


def test_official_scheme_scores_format_localisation_and_edit(tasks, tmp_path):
    task = tasks["colour_shift"]
    broken, golden = media(task)
    w = task.truth["window"]
    good = tmp_path / "good"
    good.mkdir()
    shutil.copyfile(task.truth_file("golden.mp4"), good / "fixed.mp4")
    (good / "report.md").write_text(f"## Diagnosis\n- type: colour_shift\n- start: {w[0]}\n- end: {w[1]}\n")
    v = verify(task, good, scheme="official")
    off = v.details["official"]
    assert off["format"]["score"] == 5.0 and off["localization"]["score"] == pytest.approx(35.0)
    assert off["edit"]["score"] == pytest.approx(60.0, abs=0.5) and v.reward == pytest.approx(1.0, abs=0.005)
    assert v.details["measures_used"]["scheme"] == "official"
    # the broken input re-encoded, no report: no hard gate here; format full, localisation 0, edit docked
    bad = submit(tmp_path / "bad", broken.frames, broken.audio, sr=16000)
    v = verify(task, bad, scheme="official")
    off = v.details["official"]
    assert v.status == "ok" and off["localization"]["score"] == 0.0 and off["format"]["score"] == 5.0
    assert off["edit"]["score"] < 45.0
    assert v.reward == pytest.approx((5.0 + off["edit"]["score"]) / 100.0)
    # a wrong sample rate fails one of the seven format items: 5 * 6 / 7
    wrong_sr = submit(tmp_path / "sr", golden.frames, golden.audio[::2], sr=8000)
    assert verify(task, wrong_sr, scheme="official").details["official"]["format"]["score"] == pytest.approx(30 / 7)
    missing = verify(task, tmp_path / "nothing", scheme="official")
    assert missing.reward == 0.0 and missing.status == "missing"


# ----------------------------------------------------------------------------- item 11: streaming


class _Task:
    def __init__(self, root: Path, truth: dict, spec: dict):
        self.root, self.truth, self.spec = root, truth, spec

    def input(self, name):
        return self.root / "inputs" / name

    def truth_file(self, name):
        return self.root / "truth" / name


def _long_task(root: Path, seconds: int) -> _Task:
    rng = np.random.default_rng(seconds)
    n, fps, sr = seconds * 12, 12, 16000
    base = rng.integers(0, 255, (1, 96, 128, 3)).astype(np.float64)
    frames = np.clip(base + np.arange(n)[:, None, None, None] % 24 * 4, 0, 255).astype(np.uint8)
    audio = (0.2 * np.sin(2 * np.pi * 440 * np.arange(n * sr // fps) / sr)).astype(np.float32)
    broken = frames.copy()
    broken[12:24] = (broken[12:24] * 0.5).astype(np.uint8)
    write_media(root / "truth" / "golden.mp4", frames, fps, audio, sr)
    write_media(root / "inputs" / "broken.mp4", broken, fps, audio, sr)
    write_media(root / "fixed" / "fixed.mp4", frames, fps, audio, sr, crf=30)
    truth = {
        "group": "visual",
        "defect": "colour_shift",
        "broken": "broken.mp4",
        "golden": "golden.mp4",
        "window": [1.0, 2.0],
    }
    return _Task(root, truth, {"container": "mp4", "video_codec": "h264", "audio_codec": "aac", "sample_rate": sr})


def test_long_clips_are_streamed_not_held(tmp_path):
    import tracemalloc

    peaks, rewards = {}, {}
    for seconds in (6, 36):
        task = _long_task(tmp_path / str(seconds), seconds)
        tracemalloc.start()
        v = repair.verify(task, task.root / "fixed", repair.RepairConfig(visual_metrics=["psnr"], max_side=None))
        peaks[seconds] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rewards[seconds] = v.reward
        assert v.status == "ok" and v.details["s_in"] > 0.2  # the window fixed (up to a crf 30 encode)
    clip_bytes = 36 * 12 * 96 * 128 * 3  # one 36 s clip's frames decoded whole: 15.9 MB (three are compared)
    assert peaks[36] < 0.25 * clip_bytes  # never a whole clip in memory
    assert peaks[36] < 1.5 * peaks[6] + 1_000_000  # six times longer, (about) the same peak
    # audio is read through a sliding window: 1 s stretches hold about 1 s (plus one decoded AAC frame)
    reader = repair.Source.probe(tmp_path / "36" / "truth" / "golden.mp4").audio()
    for lo in range(0, 36 * 16000, 16000):
        reader.get(lo, lo + 16000)
    assert reader.max_buffered <= 16000 + 2048
