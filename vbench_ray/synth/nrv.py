"""A deterministic synthetic mini NRVBench in the format of ``docs/nrv_format.md``.

``synth_nrv(out_dir, n=6, seed=0)`` writes ``n`` edit instances, cycling through the six categories (App. C),
each a small procedural non-rigid scene over a static textured background:

=====  ======================================================================================================
ASB    an arm (two capsules) swinging at shoulder and elbow; edit: wave the forearm strongly at the elbow
CTS    a striped flag waving on a pole (travelling surface wave); edit: much stronger waving
DSO    a dough ball squashing and recovering (area-preserving); edit: squeeze it hard
GSF    a smoke plume: value noise advected upwards inside a widening envelope; edit: drift to the right
HFF    fur strands swaying on a body; edit: strong sway as in wind
LFS    ripples on a pool (travelling rings); edit: larger, stronger ripples
=====  ======================================================================================================

Per instance: the source video, per-frame masks (the edit region: the subject in the source *and* in the
target motion, dilated by 3 px, so a clean edit changes nothing outside it), and three edited "methods":

* ``coherent``: the target motion rendered cleanly (an ideal edit);
* ``jitter``: the target motion with random time jumps per frame and brightness flicker inside the
  region (temporally incoherent; its jumps also leak outside the mask);
* ``frozen``: the target shape, not moving at all, and a slightly blurred frame (no dynamics, weaker
  background preservation).

Each method folder has a ``timing.json`` (made-up editor timings, for the FPS column). A synthetic
``human_scores.jsonl`` rates the methods as their construction implies (two "annotators"; for the
agreement plumbing only, not a human study). ``synth_manifest.json`` records the parameters.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np

from vbench_ray.benchmarks.nrv_scoring import CATEGORIES
from vbench_ray.controls import write_masks
from vbench_ray.video.encode import write_video

WIDTH, HEIGHT, FRAMES, FPS = 128, 96, 24, 12.0
METHODS = ("coherent", "jitter", "frozen")
MASK_DILATE = 3

# Per category: (source params, target params) and the texts of the instance (App. A fields).
SPECS = {
    "ASB": {
        "source": {"swing": 0.15, "elbow": 0.15},
        "target": {"swing": 0.15, "elbow": 0.9},
        "source_prompt": "A bare arm hangs from the shoulder and sways slightly.",
        "target_prompt": "A bare arm waves its forearm up and down strongly at the elbow.",
        "instruction": "Make the arm wave its forearm up and down at the elbow.",
        "mcq": ("What does the forearm do?", {"A": "It barely moves", "B": "It waves up and down at the elbow"}),
        "criteria": ["joint_consistency", "limb_length_preservation", "no_rubber_stretching"],
        "phy_q": "Does the forearm bend at the elbow like a real joint, without stretching or breaking?",
        "temp_q": "Does the forearm move smoothly between frames, without popping?",
    },
    "CTS": {
        "source": {"amp": 2.5},
        "target": {"amp": 8.0},
        "source_prompt": "A red and white striped flag hangs on a pole and ripples gently.",
        "target_prompt": "A red and white striped flag on a pole flaps strongly in the wind.",
        "instruction": "Make the flag flap strongly, as in a strong wind.",
        "mcq": ("How does the flag move?", {"A": "It ripples gently", "B": "It flaps strongly in waves"}),
        "criteria": ["fold_continuity", "thin_shell_topology", "no_tearing"],
        "phy_q": "Does the flag bend like a continuous sheet of cloth, without tearing?",
        "temp_q": "Do the folds travel consistently across frames without jitter?",
    },
    "DSO": {
        "source": {"squash": 0.06},
        "target": {"squash": 0.3},
        "source_prompt": "A ball of dough rests on a table and wobbles slightly.",
        "target_prompt": "A ball of dough is squeezed flat and springs back, again and again.",
        "instruction": "Squeeze the dough ball so it flattens and springs back.",
        "mcq": ("What happens to the dough?", {"A": "It barely wobbles", "B": "It flattens and springs back"}),
        "criteria": ["volume_preservation", "shape_integrity", "no_melting"],
        "phy_q": "Does the dough keep its volume and stay solid while it deforms?",
        "temp_q": "Does the dough deform continuously from frame to frame?",
    },
    "GSF": {
        "source": {"tilt": 0.0},
        "target": {"tilt": 0.45},
        "source_prompt": "A grey smoke plume rises straight up from the ground.",
        "target_prompt": "A grey smoke plume rises and drifts to the right.",
        "instruction": "Make the smoke drift to the right as it rises.",
        "mcq": ("Which way does the smoke go?", {"A": "Straight up", "B": "Up and to the right"}),
        "criteria": ["turbulent_evolution", "soft_boundaries", "no_rigid_translation"],
        "phy_q": "Does the smoke evolve like a turbulent gas rather than a sliding texture?",
        "temp_q": "Does the plume evolve smoothly over time, without flicker?",
    },
    "HFF": {
        "source": {"sway": 0.12},
        "target": {"sway": 0.55},
        "source_prompt": "Strands of fur stand on an animal's back and barely move.",
        "target_prompt": "Strands of fur on an animal's back sway strongly as in a gust of wind.",
        "instruction": "Make the fur sway strongly, as in a gust of wind.",
        "mcq": ("How does the fur move?", {"A": "It barely moves", "B": "It sways strongly"}),
        "criteria": ["strand_separation", "texture_fidelity", "coherent_sway"],
        "phy_q": "Do the strands stay separate and move like fine fibres?",
        "temp_q": "Do the strands move coherently across frames, without flicker?",
    },
    "LFS": {
        "source": {"wavelength": 7.0, "amp": 28.0},
        "target": {"wavelength": 14.0, "amp": 55.0},
        "source_prompt": "Small ripples spread over the surface of a pool.",
        "target_prompt": "Large, strong ripples spread over the surface of a pool.",
        "instruction": "Make the ripples on the pool much larger and stronger.",
        "mcq": ("What do the ripples look like?", {"A": "Small and faint", "B": "Large and strong"}),
        "criteria": ["wave_propagation", "surface_continuity", "no_frozen_flow"],
        "phy_q": "Do the ripples propagate like waves on a liquid surface?",
        "temp_q": "Do the ripples travel consistently across frames?",
    },
}


# ----------------------------------------------------------------------------- rendering


def _noise(rng: np.random.Generator, h: int, w: int, cell: float) -> np.ndarray:
    """Smooth value noise in [0, 1] of size ``(h, w)``."""
    small = rng.random((max(2, int(h / cell) + 2), max(2, int(w / cell) + 2))).astype(np.float32)
    big = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    big -= big.min()
    return big / max(float(big.max()), 1e-6)


def background(rng: np.random.Generator) -> np.ndarray:
    base = _noise(rng, HEIGHT, WIDTH, 12.0)[..., None]
    fine = _noise(rng, HEIGHT, WIDTH, 3.0)[..., None]
    dark, light = np.array([70, 85, 60], np.float32), np.array([150, 160, 120], np.float32)
    img = dark + (light - dark) * (0.7 * base + 0.3 * fine)
    return np.clip(img, 0, 255).astype(np.uint8)


def _grid():
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    return xx + 0.5, yy + 0.5


def _capsule(xx, yy, p0, p1, radius):
    (x0, y0), (x1, y1) = p0, p1
    dx, dy = x1 - x0, y1 - y0
    t = np.clip(((xx - x0) * dx + (yy - y0) * dy) / max(dx * dx + dy * dy, 1e-6), 0, 1)
    return np.hypot(xx - (x0 + t * dx), yy - (y0 + t * dy)) <= radius


def render_frame(
    category: str, params: dict, t: float, bg: np.ndarray, noise: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One frame at time ``t`` (frames) and the subject's region (bool)."""
    xx, yy = _grid()
    frame = bg.astype(np.float32).copy()
    w = 2.0 * math.pi / 15.0  # one cycle per 15 frames (not a divisor of FRAMES // 2: I_0, I_m, I_T-1 differ)
    if category == "ASB":
        shoulder = (40.0, 30.0)
        a = 1.2 + params["swing"] * math.sin(w * t)
        elbow = (shoulder[0] + 26 * math.cos(a), shoulder[1] + 26 * math.sin(a))
        b = a - 0.4 - params["elbow"] * (1 + math.sin(w * t)) * 1.1
        hand = (elbow[0] + 24 * math.cos(b), elbow[1] + 24 * math.sin(b))
        upper, fore = _capsule(xx, yy, shoulder, elbow, 6.0), _capsule(xx, yy, elbow, hand, 5.0)
        region = upper | fore
        shade = 0.85 + 0.15 * np.sin(xx * 0.2)[..., None]
        frame = np.where(region[..., None], np.array([215, 170, 140], np.float32) * shade, frame)
    elif category == "CTS":
        x0, x1, y0, height = 28.0, 104.0, 28.0, 34.0
        u = (xx - x0) / (x1 - x0)
        dy = params["amp"] * u * np.sin(2 * math.pi * (xx - x0) / 38.0 - w * t)
        v = yy - y0 - dy
        region = (xx >= x0) & (xx <= x1) & (v >= 0) & (v <= height)
        stripe = (np.floor(v / 5.0) % 2)[..., None]
        light = (0.78 + 0.22 * np.cos(2 * math.pi * (xx - x0) / 38.0 - w * t))[..., None]
        color = np.where(stripe > 0, np.array([230, 230, 225], np.float32), np.array([200, 40, 40], np.float32)) * light
        frame = np.where(region[..., None], color, frame)
        pole = (np.abs(xx - (x0 - 2)) <= 1.5) & (yy >= y0 - 6)
        frame = np.where(pole[..., None], np.array([90, 90, 95], np.float32), frame)
    elif category == "DSO":
        s = 1.0 + params["squash"] * math.sin(w * t)
        rx, ry = 22.0 * s, 22.0 / s
        cx, cy = 64.0, 80.0 - ry
        u, v = (xx - cx) / rx, (yy - cy) / ry
        region = u * u + v * v <= 1.0
        spots = 0.9 + 0.1 * np.sin(u * 9.0) * np.sin(v * 7.0)
        light = 0.75 + 0.25 * np.clip(-v * 0.8 + 0.4, 0, 1)
        frame = np.where(region[..., None], np.array([235, 205, 150], np.float32) * (spots * light)[..., None], frame)
    elif category == "GSF":
        base_y, top_y = 90.0, 8.0
        height = np.clip((base_y - yy) / (base_y - top_y), 0, 1)
        cx = 64.0 + params["tilt"] * (base_y - yy) * 0.9
        sigma = 5.0 + 14.0 * height
        env = np.exp(-((xx - cx) ** 2) / (2 * sigma**2)) * (yy <= base_y) * (yy >= top_y)
        map_y = np.broadcast_to(
            (np.arange(HEIGHT, dtype=np.float32)[:, None] + 1.6 * t) % noise.shape[0], (HEIGHT, WIDTH)
        )
        map_x = np.broadcast_to(np.arange(WIDTH, dtype=np.float32)[None, :], (HEIGHT, WIDTH))
        turb = cv2.remap(
            noise,
            np.ascontiguousarray(map_x),
            np.ascontiguousarray(map_y),
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_WRAP,
        )
        density = np.clip(env * (0.35 + 0.65 * turb), 0, 1)
        region = env > 0.25
        frame = frame * (1 - density[..., None]) + np.array([200, 200, 205], np.float32) * density[..., None]
    elif category == "HFF":
        body = ((xx - 64) / 40.0) ** 2 + ((yy - 82) / 14.0) ** 2 <= 1.0
        frame = np.where(body[..., None], np.array([120, 80, 45], np.float32), frame)
        canvas = np.zeros((HEIGHT, WIDTH), np.uint8)
        for i in range(14):
            root = (32.0 + i * 4.8, 72.0)
            phase = w * t + 0.35 * i
            x, y = root
            pts = [root]
            for k in range(1, 8):
                ang = -math.pi / 2 + 2.0 * params["sway"] * (k / 7) ** 2 * math.sin(phase)
                x, y = x + (34 / 7) * math.cos(ang), y + (34 / 7) * math.sin(ang)
                pts.append((x, y))
            cv2.polylines(canvas, [np.round(np.array(pts) * 4).astype(np.int32)], False, 255, 2, cv2.LINE_AA, shift=2)
        hair = canvas.astype(np.float32)[..., None] / 255.0
        frame = frame * (1 - hair) + np.array([60, 40, 25], np.float32) * hair
        region = (canvas > 40) | body
    elif category == "LFS":
        cx, cy, rx, ry = 64.0, 52.0, 46.0, 28.0
        inside = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1.0
        r = np.hypot(xx - cx, (yy - cy) * rx / ry)
        wave = np.sin(2 * math.pi * r / params["wavelength"] - w * t) * np.exp(-r / 40.0)
        water = np.array([40, 90, 150], np.float32) + params["amp"] * wave[..., None]
        frame = np.where(inside[..., None], water, frame)
        region = inside
    else:
        raise ValueError(f"unknown category {category!r}")
    return np.clip(frame, 0, 255).astype(np.uint8), region


def render(category: str, params: dict, times, bg: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    frames, regions = zip(*(render_frame(category, params, float(t), bg, noise) for t in times))
    return np.stack(frames), np.stack(regions)


def dilate(regions: np.ndarray, px: int = MASK_DILATE) -> np.ndarray:
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * px + 1, 2 * px + 1))
    return np.stack([cv2.dilate(r.astype(np.uint8), kernel) > 0 for r in regions])


# ----------------------------------------------------------------------------- the benchmark


def _difficulty(category: str, i: int) -> str:
    if category == "ASB":  # App. A: ASB is entirely L2
        return "L2"
    return ("L1", "L2", "L3")[(i // len(CATEGORIES) + CATEGORIES.index(category)) % 3]


def _record(i: int, category: str, iid: str) -> dict:
    spec = SPECS[category]
    question, options = spec["mcq"]
    return {
        "id": iid,
        "video_id": iid,
        "video": f"videos/{iid}.mp4",
        "mask": f"masks/{iid}",
        "category": category,
        "difficulty": _difficulty(category, i),
        "source_prompt": spec["source_prompt"],
        "target_prompt": spec["target_prompt"],
        "instruction": spec["instruction"],
        "negative_prompt": "worst quality, low quality, blurry, flicker, distorted",
        "mcq": {"question": question, "options": options, "answer": "B", "partial": []},
        "physics": {"criteria": spec["criteria"], "question": spec["phy_q"]},
        "temporal": {
            "question": spec["temp_q"],
            "flicker_question": "Is the edited region free of frame-to-frame flicker?",
        },
        "subset": "synthetic",
    }


# What a careful annotator would give each method (two "annotators" each): instr, phy, temp.
_HUMAN = {
    "coherent": [("correct", 5, 5), ("correct", 4, 5)],
    "jitter": [("correct", 3, 1), ("partial", 2, 2)],
    "frozen": [("wrong", 2, 3), ("partial", 2, 2)],
}


def synth_nrv(out_dir: str | Path, n: int = 6, seed: int = 0) -> dict:
    """Write the synthetic set; returns the paths a config needs (``annotations``, ``root``, ``edited_dir``,
    ``human_scores``) and ``methods``, ``ids``, ``n``."""
    out = Path(out_dir)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    (out / "videos").mkdir(parents=True, exist_ok=True)
    records, manifest, humans = (
        [],
        {
            "seed": seed,
            "frames": FRAMES,
            "size": [WIDTH, HEIGHT],
            "fps": FPS,
            "methods": list(METHODS),
            "instances": [],
        },
        [],
    )
    timings: dict[str, dict] = {m: {} for m in METHODS}
    for i in range(n):
        category = CATEGORIES[i % len(CATEGORIES)]
        iid = f"{i:04d}_{category.lower()}{i // len(CATEGORIES):02d}"
        rng = np.random.default_rng([seed, i])
        bg = background(rng)
        noise = _noise(rng, HEIGHT * 3, WIDTH, 6.0)
        spec = SPECS[category]
        times = np.arange(FRAMES, dtype=np.float32)
        source, src_region = render(category, spec["source"], times, bg, noise)
        target, tgt_region = render(category, spec["target"], times, bg, noise)
        masks = dilate(src_region | tgt_region)
        write_video(out / "videos" / f"{iid}.mp4", source, fps=FPS, crf=10)
        write_masks(out / "masks" / iid, masks)
        jumps = times + rng.normal(0.0, 3.0, FRAMES).astype(np.float32)
        jitter, _ = render(category, spec["target"], jumps, bg, noise)
        flicker = rng.uniform(-30, 30, FRAMES).astype(np.float32)
        jitter = np.where(
            masks[..., None], np.clip(jitter.astype(np.float32) + flicker[:, None, None, None], 0, 255), jitter
        ).astype(np.uint8)
        frozen, _ = render(category, spec["target"], np.zeros(FRAMES), bg, noise)
        frozen = np.stack([cv2.GaussianBlur(f, (0, 0), 0.8) for f in frozen])
        for method, frames in zip(METHODS, (target, jitter, frozen)):
            write_video(out / "edited" / method / f"{iid}.mp4", frames, fps=FPS, crf=10)
            timings[method][iid] = {
                "seconds": round(float(FRAMES / (2.0 + METHODS.index(method))), 3),
                "frames": FRAMES,
            }
            for a, (instr, phy, temp) in enumerate(_HUMAN[method]):
                humans.append(
                    {
                        "method": method,
                        "id": iid,
                        "annotator": f"synthetic-{a + 1}",
                        "instr": instr,
                        "phy": phy,
                        "temp": temp,
                    }
                )
        records.append(_record(i, category, iid))
        manifest["instances"].append(
            {
                "id": iid,
                "category": category,
                "source_params": spec["source"],
                "target_params": spec["target"],
                "mask_fraction": float(masks.mean()),
            }
        )
    for method in METHODS:
        (out / "edited" / method / "timing.json").write_text(json.dumps(timings[method], indent=1) + "\n")
    annotations = out / "annotations.jsonl"
    annotations.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    human = out / "human_scores.jsonl"
    human.write_text("".join(json.dumps(h) + "\n" for h in humans))
    (out / "synth_manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return {
        "annotations": annotations,
        "root": out,
        "edited_dir": out / "edited",
        "human_scores": human,
        "methods": list(METHODS),
        "ids": [r["id"] for r in records],
        "n": n,
    }
