"""Synthetic AgenticVBench Repair tasks (§2.5, App. H.1) for :mod:`vbench_ray.agentic.synth`: a 4 s clip with a tone
track and one injected defect in a 1 s window (colour shift, blur, repeated frames, shot swap, audio noise, echo,
clipping), the clean golden, and the golden reference point measured on a perfect fix."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from vbench_ray.agentic.bundle import INPUTS, TRUTH, write_task
from vbench_ray.agentic.media import read_media, write_media
from vbench_ray.agentic.synth_media import FPS, SR, H, W, camera_view, melody, random_scene, task_rng
from vbench_ray.synth.scenes import render_scene

REPAIR_DEFECTS = ("colour_shift", "blur", "repeated_frames", "shot_swap", "audio_noise", "audio_echo", "audio_clipping")
DEFECT_GROUP = {
    "colour_shift": "visual",
    "blur": "visual",
    "repeated_frames": "timeline",
    "shot_swap": "shot_swap",
    "audio_noise": "audio",
    "audio_echo": "audio",
    "audio_clipping": "audio",
}
DELIVERY_SPEC = {"container": "mp4", "video_codec": "h264", "audio_codec": "aac", "sample_rate": SR, "fps": FPS}


# ----------------------------------------------------------------------------- repair


def _defect_audio(defect: str, audio: np.ndarray, a: int, b: int, rng: np.random.Generator) -> np.ndarray:
    out = audio.copy()
    seg = audio[a:b].astype(np.float64)
    if defect == "audio_noise":
        rms = float(np.sqrt(np.mean(seg**2))) or 0.1
        out[a:b] = seg + rng.normal(0.0, rms * 1.2, len(seg))
    elif defect == "audio_echo":
        wet = seg.copy()
        for delay_s, gain in ((0.09, 0.65), (0.17, 0.5), (0.26, 0.38), (0.35, 0.25)):
            d = int(delay_s * SR)
            src = audio[max(0, a - d) : b - d].astype(np.float64)
            wet[len(seg) - len(src) :] += gain * src
        out[a:b] = wet
    elif defect == "audio_clipping":
        peak = float(np.max(np.abs(seg))) or 0.3
        out[a:b] = np.clip(seg * 6.0, -0.3 * peak, 0.3 * peak) * 2.5
    return np.clip(out, -1.0, 1.0).astype(np.float32)


def repair_task(root: Path, seed: int, k: int) -> dict:
    import cv2

    rng = task_rng(seed, "repair", k)
    defect = REPAIR_DEFECTS[k % len(REPAIR_DEFECTS)]
    group = DEFECT_GROUP[defect]
    task_id = f"repair_{k:03d}"
    n = 4 * FPS
    wc, hc = 2 * W, 2 * H
    scene = random_scene(rng, wc, hc, n, n_shapes=3, travel=0.4)
    s = np.linspace(0.0, 1.0, n)
    direction = 1 if rng.random() < 0.5 else -1
    pan = np.stack([direction * 0.18 * wc * (2 * s - 1), 0.04 * hc * np.sin(2 * np.pi * s)], axis=1)
    src = camera_view(render_scene(scene), W, H, 1.0 + 0.3 * s, np.zeros(n), pan)
    audio = melody(rng, n / FPS)
    spf = SR // FPS  # audio samples per frame
    broken_v, broken_a = src.copy(), audio.copy()
    truth: dict[str, Any] = {"group": group, "defect": defect, "broken": "broken.mp4", "golden": "golden.mp4"}
    a = int(rng.integers(FPS, n - 2 * FPS))
    if group in ("visual", "audio"):
        b = a + FPS
        truth["window"] = [a / FPS, b / FPS]
        if defect == "colour_shift":
            gain = np.array([1.3, 0.95, 0.7]) if rng.random() < 0.5 else np.array([0.75, 1.0, 1.3])
            offset = np.array([14.0, 0.0, -12.0]) * np.sign(gain[0] - 1)
            broken_v[a:b] = np.clip(src[a:b].astype(np.float64) * gain + offset, 0, 255).astype(np.uint8)
            truth["params"] = {"gain": gain.tolist(), "offset": offset.tolist()}
        elif defect == "blur":
            sigma = float(rng.uniform(2.2, 3.0))
            while True:  # strong enough to stand out of codec noise on this scene (window PSNR <= 28 dB)
                for i in range(a, b):
                    broken_v[i] = cv2.GaussianBlur(src[i], (0, 0), sigma)
                mse = float(np.mean((broken_v[a:b].astype(np.float64) - src[a:b]) ** 2))
                if sigma >= 6.0 or 10 * np.log10(255.0**2 / max(mse, 1e-9)) <= 28.0:
                    break
                sigma += 0.5
            truth["params"] = {"sigma": sigma}
        else:
            broken_a = _defect_audio(defect, audio, a * spf, b * spf, rng)
    elif group == "timeline":
        seg = FPS // 2
        broken_v = np.concatenate([src[: a + seg], src[a : a + seg], src[a + seg :]])
        broken_a = np.concatenate(
            [audio[: (a + seg) * spf], audio[a * spf : (a + seg) * spf], audio[(a + seg) * spf :]]
        )
        truth["ranges"] = [
            {"range": [(a + seg) / FPS, (a + 2 * seg) / FPS], "equivalent": [[a / FPS, (a + seg) / FPS]]}
        ]
        truth["tolerance_s"] = 0.25
        truth["window"] = [a / FPS, (a + 2 * seg) / FPS]
        truth["window_golden"] = [a / FPS, (a + seg) / FPS]  # the same stretch in the golden's time
    else:  # shot swap: [a, b) and [b, c) exchanged
        b = a + int(rng.integers(8, 12))
        c = min(n - 2, b + int(rng.integers(8, 12)))
        broken_v = np.concatenate([src[:a], src[b:c], src[a:b], src[c:]])
        broken_a = np.concatenate(
            [audio[: a * spf], audio[b * spf : c * spf], audio[a * spf : b * spf], audio[c * spf :]]
        )
        truth["window"] = [a / FPS, c / FPS]
        truth["segments"] = [[a / FPS, b / FPS], [b / FPS, c / FPS]]
    write_media(root / INPUTS / "broken.mp4", broken_v, FPS, broken_a, SR)
    write_media(root / TRUTH / "golden.mp4", src, FPS, audio, SR)
    truth["reference"] = _repair_reference(root, truth)
    hint = {
        "visual": "something in the picture looks wrong for about a second",
        "audio": "the sound goes bad for a moment",
        "timeline": "the edit stutters at one point",
        "shot_swap": "the action jumps around in the middle",
    }[group]
    spec = {**DELIVERY_SPEC, "width": W, "height": H, "duration_s": n / FPS}
    instruction = (
        f"Client note: \"Before we deliver this clip, please fix it: {hint}.\"\n\n"
        "`inputs/broken.mp4` is the clip. Find the defect (what and when), fix it, and leave the rest untouched.\n\n"
        "Deliverables (in your output folder):\n"
        f"- `fixed.mp4`: MP4, H.264 video ({W}x{H}, {FPS} fps), AAC audio at {SR} Hz;\n"
        "- `report.md`: what the defect was, its time range, and what you did, with one `## Diagnosis` block "
        "per defect holding the lines `- type: <defect>`, `- start: <time>` and `- end: <time>` (times in "
        "broken.mp4, seconds or MM:SS.mmm);\n"
        "- if your fix removes material: `solution.json` with `{\"ranges\": [[start_s, end_s], ...]}`, the "
        "removed ranges in the time of broken.mp4.\n"
    )
    write_task(
        root,
        {
            "task_id": task_id,
            "family": "repair",
            "subtype": defect,
            "group": group,
            "inputs": {"broken": "broken.mp4"},
            "spec": spec,
        },
        instruction,
        truth,
    )
    return {"task_id": task_id, "family": "repair", "defect": defect}


def perfect_fix(broken, golden, truth: dict) -> tuple[np.ndarray, np.ndarray]:
    """What a flawless agent renders from ``broken``: the defect undone exactly, everything else kept
    (the broken input's own decoded frames and samples outside the defect)."""
    fps, sr = broken.fps, broken.sample_rate
    frames, audio = broken.frames.copy(), broken.audio.copy()
    group = truth["group"]
    if group in ("visual", "audio"):
        a, b = truth["window"]
        if group == "visual":
            fa, fb = int(round(a * fps)), int(round(b * fps))
            frames[fa:fb] = golden.frames[fa:fb]
        else:
            sa, sb = int(round(a * sr)), int(round(b * sr))
            audio[sa:sb] = golden.audio[sa:sb]
        return frames, audio
    if group == "timeline":
        ranges = [r["range"] if isinstance(r, dict) else r for r in truth["ranges"]]
        keep_f = np.ones(len(frames), bool)
        keep_a = np.ones(len(audio), bool)
        for s0, e0 in ranges:
            keep_f[int(round(s0 * fps)) : int(round(e0 * fps))] = False
            keep_a[int(round(s0 * sr)) : int(round(e0 * sr))] = False
        return frames[keep_f], audio[keep_a]
    (a, b), (_, c) = truth["segments"]
    # broken = pre + B + A + post with A = [a, b) and B = [b, c) of the source
    fa, fb, fc = (int(round(x * fps)) for x in (a, b, c))
    split = fa + (fc - fb)
    f2 = np.concatenate([frames[:fa], frames[split:fc], frames[fa:split], frames[fc:]])
    spf = sr / fps
    sa, ss, sc = int(round(fa * spf)), int(round(split * spf)), int(round(fc * spf))
    a2 = np.concatenate([audio[:sa], audio[ss:sc], audio[sa:ss], audio[sc:]])
    return f2, a2


def _repair_reference(root: Path, truth: dict) -> dict:
    """App. H.1: the golden reference point ``M_golden``: the measurements of a perfect fix (the defect
    undone exactly on the broken input's decoded content) delivered as h264/AAC with the task's
    settings, against the golden. A submission at least this good scores 1; so does the golden itself."""
    from vbench_ray.agentic.verifiers.repair import measure_references

    golden = read_media(root / TRUTH / truth["golden"])
    broken = read_media(root / INPUTS / truth["broken"])
    frames, audio = perfect_fix(broken, golden, truth)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "perfect_fix.mp4"
        write_media(path, frames, golden.fps, audio, golden.sample_rate)
        ref = measure_references(root / TRUTH / truth["golden"], path, truth)
    return {region: {m: round(float(v), 6) for m, v in values.items()} for region, values in ref.items()}
