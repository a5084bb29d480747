"""Repair baselines (``agentic/baselines.py`` describes every baseline): a random cut, the oracle's golden ranges,
and the heuristic that detects and undoes the synthetic defects.

The heuristic: a repeated segment is cut and reported; cuts that break continuity are re-ordered by the continuity
path (``agentic/continuity.py``); a colour shift is inverted by a per-channel affine fit at its boundaries; a
blurred window gets back the high frequencies of its sharp neighbours, registered to it, where they agree with it;
a noisy audio window is spectrally gated. Echo and clipping are not handled; anything undetected is passed through.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from vbench_ray.agentic.bundle import TaskBundle
from vbench_ray.agentic.continuity import best_path, continuity_costs, small_frame
from vbench_ray.agentic.media import Media, read_media, write_media
from vbench_ray.agentic.solution_files import write_report, write_solution

log = logging.getLogger(__name__)


def _cut(media: Media, ranges: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray | None]:
    t = np.arange(len(media.frames)) / media.fps
    keep = np.ones(len(t), bool)
    for s, e in ranges:
        keep &= ~((t >= s - 1e-9) & (t < e - 1e-9))
    audio = None
    if media.audio is not None:
        ta = np.arange(len(media.audio)) / media.sample_rate
        keep_a = np.ones(len(ta), bool)
        for s, e in ranges:
            keep_a &= ~((ta >= s - 1e-9) & (ta < e - 1e-9))
        audio = media.audio[keep_a]
    return media.frames[keep], audio


def _write_fixed(out: Path, media: Media, frames: np.ndarray, audio: np.ndarray | None) -> None:
    write_media(out / "fixed.mp4", frames, media.fps, audio, media.sample_rate)


def repair_random(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    broken = read_media(task.input("broken.mp4"))
    dur = broken.info.duration
    start = float(np.round(rng.uniform(0, max(0.0, dur - 0.5)) * broken.fps) / broken.fps)
    ranges = [(start, start + 0.5)]
    frames, audio = _cut(broken, ranges)
    _write_fixed(out, broken, frames, audio)
    write_solution(out / "solution.json", {"ranges": [list(r) for r in ranges]})
    write_report(out, f"# Repair report\n\nRandom baseline: cut {start:.2f}-{start + 0.5:.2f} s.")
    return {"how": "random 0.5 s cut", "ranges": ranges}


def repair_oracle(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    import shutil

    t = task.truth
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(task.truth_file(t["golden"]), out / "fixed.mp4")
    if t["group"] == "timeline":
        first = [r["range"] if isinstance(r, dict) else r for r in t["ranges"]]
        write_solution(out / "solution.json", {"ranges": first})
    w = t.get("window") or [0.0, 0.0]
    write_report(
        out,
        f"# Repair report\n\n## Diagnosis\n- type: {t.get('defect')}\n- start: {w[0]:.3f}\n- end: {w[1]:.3f}\n\n"
        "## Repair\nOracle: delivered the golden reference.",
    )
    return {"how": "golden reference (oracle)"}


def find_repeat(
    frames: np.ndarray, min_len: int = 2, psnr_db: float = 38.0, margin_db: float = 3.0
) -> tuple[int, int] | None:
    """``(a, L)`` when frames ``[a+L, a+2L)`` repeat frames ``[a, a+L)`` (the longest such run).

    A frame counts as a repeat of the one ``L`` earlier when they are near-identical (``psnr_db``) and
    clearly closer than the frame just before it (``margin_db``): slow, smooth content, where every frame
    looks like its neighbours, shows no repeat.
    """
    from vbench_ray.agentic.verifiers.measures import psnr

    small = [small_frame(f, 64).astype(np.uint8) for f in frames]
    n = len(small)
    prev = [0.0] + [psnr(small[i], small[i - 1]) for i in range(1, n)]
    best = None
    for lag in range(min_len, n // 2 + 1):
        run = 0
        for i in range(lag, n):
            twin = psnr(small[i], small[i - lag])
            if twin >= psnr_db and twin >= prev[i] + margin_db or (run and twin >= psnr_db and twin >= prev[i]):
                run += 1
                if run >= lag:  # frames [i-lag+1, i] equal [i-2lag+1, i-lag]
                    a = i - 2 * lag + 1
                    if best is None or lag > best[1]:
                        best = (a, lag)
                    break
            else:
                run = 0
    return best


def frame_jumps(frames: np.ndarray, factor: float = 4.0) -> list[dict]:
    """Indices ``i`` where frame i differs from i-1 far more than usual, each labelled ``colour`` when a
    per-channel affine map from frame i-1 (registered onto frame i first) explains most of the
    difference, else ``cut``."""
    small = [small_frame(f, 64) for f in frames]
    d = np.array([np.mean(np.abs(small[i] - small[i - 1])) for i in range(1, len(small))])
    med = float(np.median(d)) + 1e-3
    out = []
    for k in np.nonzero(d > max(factor * med, 2.0))[0]:
        i = int(k) + 1
        a, b = _register(small[i - 1], small[i])[4:-4, 4:-4], small[i][4:-4, 4:-4]  # motion out of the way
        fits = [np.polyfit(a[..., c].ravel(), b[..., c].ravel(), 1) for c in range(3)]
        fitted = np.stack([np.polyval(f, a[..., c]) for c, f in enumerate(fits)], -1)
        residual = float(np.mean(np.abs(fitted - b)))
        raw = float(np.mean(np.abs(a - b)))  # after registration: what motion does not explain
        # a colour change: the registered frames differ, and a non-identity channel map removes most of it
        # (a jump in time within one moving shot registers away instead, leaving the identity map)
        recoloured = max(max(abs(g - 1.0) * 128.0, abs(o + (g - 1.0) * 128.0)) for g, o in fits) > 6.0
        kind = "colour" if recoloured and raw > 2.0 and residual < 0.5 * raw else "cut"
        out.append({"i": i, "diff": float(d[k]), "kind": kind})
    return out


def _register(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``src`` warped onto ``dst`` by an affine ECC registration of their luma (ECC ignores gain and
    offset, so it aligns frames whose colours differ); the identity when it does not converge."""
    import cv2

    h, w = dst.shape[:2]
    warp = np.eye(2, 3, dtype=np.float32)
    gray = lambda f: cv2.cvtColor(f.astype(np.float32), cv2.COLOR_RGB2GRAY)  # noqa: E731
    try:
        _, warp = cv2.findTransformECC(
            gray(dst),
            gray(src),
            warp,
            cv2.MOTION_AFFINE,
            (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 100, 1e-5),
            None,
            5,
        )
    except cv2.error:
        pass
    return cv2.warpAffine(
        src.astype(np.float32),
        warp,
        (w, h),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REFLECT,
    )


def _undo_colour(frames: np.ndarray, a: int, b: int) -> np.ndarray:
    """Map frames [a, b) back with per-channel affine fits between each boundary frame of the window and
    its clean neighbour registered onto it."""
    fixed = frames.astype(np.float64).copy()
    pairs = []
    if a > 0:
        pairs.append((_register(frames[a - 1], frames[a]), frames[a]))
    if b < len(frames):
        pairs.append((_register(frames[b], frames[b - 1]), frames[b - 1]))
    m = 6  # ignore the borders, where the registration reflects
    for c in range(3):
        clean = np.concatenate([p[0][m:-m, m:-m, c].ravel() for p in pairs]).astype(np.float64)
        bad = np.concatenate([p[1][m:-m, m:-m, c].ravel() for p in pairs]).astype(np.float64)
        ok = (bad > 3) & (bad < 252) & (clean > 3) & (clean < 252)
        g, o = np.polyfit(bad[ok], clean[ok], 1) if ok.sum() > 10 else (1.0, 0.0)
        fixed[a:b, ..., c] = g * fixed[a:b, ..., c] + o
    return np.clip(np.rint(fixed), 0, 255).astype(np.uint8)


def sharpness(frame: np.ndarray) -> float:
    import cv2

    return float(cv2.Laplacian(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float64), cv2.CV_64F).var())


def blur_window(frames: np.ndarray, ratio: float = 0.35) -> tuple[int, int] | None:
    """``[a, b)`` entered by a sharpness drop below ``ratio`` times the previous frame's and left by the
    inverse rise (a blurred stretch inside an otherwise sharp clip)."""
    s = np.array([sharpness(f) for f in frames]) + 1e-6
    r = s[1:] / s[:-1]
    drops = [int(i) + 1 for i in np.nonzero(r < ratio)[0]]
    rises = [int(i) + 1 for i in np.nonzero(r > 1.0 / ratio)[0]]
    pairs = [(a, b) for a in drops for b in rises if b - a >= 2]
    if not pairs:
        return None
    return min(pairs, key=lambda p: p[1] - p[0])


def _blur_sigma(sharp: np.ndarray, blurred: np.ndarray, border: int = 6) -> float:
    """The Gaussian sigma that best turns ``sharp`` into ``blurred`` (borders ignored)."""
    import cv2

    inner = (slice(border, -border), slice(border, -border))
    errs = [
        (float(np.mean((cv2.GaussianBlur(sharp.astype(np.float32), (0, 0), sg)[inner] - blurred[inner]) ** 2)), sg)
        for sg in np.arange(0.8, 4.01, 0.2)
    ]
    return float(min(errs)[1])


def _detail_transfer(frames: np.ndarray, a: int, b: int, tau: float = 16.0) -> np.ndarray:
    """Undo a blur of frames [a, b): each blurred frame gets the high frequencies of the nearest sharp
    frame, registered onto it (affine ECC; the camera moves smoothly, so the lost detail is in the
    neighbours). The blur is estimated on the registered boundary pair; detail is added only where the
    re-blurred neighbour agrees with the blurred frame (weight ``exp(-(err / tau)^2)``), so independently
    moving objects are left alone."""
    import cv2

    sharp_idx = [i for i in (a - 1, b) if 0 <= i < len(frames)]
    if not sharp_idx:
        return frames
    n0 = sharp_idx[0]
    first = a if n0 == a - 1 else b - 1
    blurred = frames[first].astype(np.float32)
    sigma = _blur_sigma(_register(frames[n0], blurred), blurred)
    fixed = frames.copy()
    for i in range(a, b):
        n = min(sharp_idx, key=lambda j: abs(j - i))
        dst = frames[i].astype(np.float32)
        moved = _register(frames[n], dst)
        soft = cv2.GaussianBlur(moved, (0, 0), sigma)
        weight = np.exp(-((np.abs(soft - dst).mean(-1, keepdims=True) / tau) ** 2))
        fixed[i] = np.clip(np.rint(dst + weight * (moved - soft)), 0, 255).astype(np.uint8)
    return fixed


def noisy_window(audio: np.ndarray, sr: int, hop_s: float = 0.05, factor: float = 1e4) -> tuple[int, int] | None:
    """Sample range ``[a, b)`` where the energy above ``sr/4`` jumps (broadband noise over a tone track
    whose harmonics stay low), unless the waveform there is flat-topped (clipping, not noise)."""
    hop = int(sr * hop_s)
    hf = []
    for s in range(0, len(audio) - hop + 1, hop):
        p = np.abs(np.fft.rfft(audio[s : s + hop] * np.hanning(hop))) ** 2
        hf.append(float(p[len(p) // 2 :].sum()))
    hf = np.array(hf)
    high = hf > factor * float(np.median(hf)) + 1e-9
    if not high.any() or high.mean() > 0.6:
        return None
    idx = np.nonzero(high)[0]
    a, b = int(idx[0]) * hop, (int(idx[-1]) + 1) * hop
    seg = np.abs(audio[a:b])
    if len(seg) and float(np.mean(seg >= 0.98 * seg.max())) > 0.05:
        return None  # clipped, not noisy
    return a, b


def _denoise(audio: np.ndarray, sr: int, a: int, b: int) -> np.ndarray:
    """Spectral gating of [a, b): the noise power per bin is the median over time inside the window."""
    from scipy.signal import istft, stft

    out = audio.copy()
    _, _, z = stft(audio[a:b], fs=sr, nperseg=512)
    power = np.abs(z) ** 2
    noise = np.median(power, axis=1, keepdims=True)
    gain = np.clip(1.0 - 2.0 * noise / np.maximum(power, 1e-12), 0.0, 1.0)
    _, y = istft(z * gain, fs=sr, nperseg=512)
    y = np.pad(y[: b - a], (0, max(0, (b - a) - len(y))))
    out[a:b] = y.astype(np.float32)
    return out


def repair_heuristic(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    broken = read_media(task.input("broken.mp4"))
    frames, audio, fps = broken.frames, broken.audio, broken.fps
    rep = find_repeat(frames)
    if rep is not None:
        a, length = rep
        ranges = [((a + length) / fps, (a + 2 * length) / fps)]
        f2, a2 = _cut(broken, ranges)
        _write_fixed(out, broken, f2, a2)
        write_solution(out / "solution.json", {"ranges": [list(r) for r in ranges]})
        write_report(
            out,
            f"# Repair report\n\nRepeated frames: {ranges[0][0]:.2f}-{ranges[0][1]:.2f} s repeats the "
            "segment before it; cut.",
        )
        return {"how": "repeated segment cut", "ranges": ranges}
    jumps = frame_jumps(frames)
    cuts = [j["i"] for j in jumps if j["kind"] == "cut"]
    colour = [j["i"] for j in jumps if j["kind"] == "colour"]
    if len(cuts) >= 2:
        bounds = [0, *cuts, len(frames)]
        segs = [frames[s:e] for s, e in zip(bounds, bounds[1:])]
        seg_audio = None
        if audio is not None:
            spf = broken.sample_rate / fps
            seg_audio = [audio[int(s * spf) : int(e * spf)] for s, e in zip(bounds, bounds[1:])]
        order = best_path(continuity_costs(segs))
        f2 = np.concatenate([segs[i] for i in order])
        a2 = np.concatenate([seg_audio[i] for i in order]) if seg_audio is not None else None
        _write_fixed(out, broken, f2, a2)
        write_report(out, f"# Repair report\n\nShots out of order (cuts at frames {cuts}); re-ordered to {order}.")
        return {"how": "re-ordered by continuity", "cuts": cuts, "order": order}
    if len(colour) >= 2:
        a, b = colour[0], colour[-1]
        _write_fixed(out, broken, _undo_colour(frames, a, b), audio)
        write_report(
            out,
            f"# Repair report\n\nColour shift on frames {a}-{b - 1} ({a / fps:.2f}-{b / fps:.2f} s); "
            "inverted per channel.",
        )
        return {"how": "colour shift undone", "window": [a, b]}
    blur = blur_window(frames)
    if blur is not None:
        a, b = blur
        _write_fixed(out, broken, _detail_transfer(frames, a, b), audio)
        write_report(
            out,
            f"# Repair report\n\nBlur on frames {a}-{b - 1} ({a / fps:.2f}-{b / fps:.2f} s); detail "
            "restored from the neighbouring sharp frames.",
        )
        return {"how": "blur undone (detail transfer)", "window": [a, b]}
    if audio is not None:
        noisy = noisy_window(audio, broken.sample_rate)
        if noisy is not None:
            a, b = noisy
            _write_fixed(out, broken, frames, _denoise(audio, broken.sample_rate, a, b))
            write_report(
                out,
                f"# Repair report\n\nNoise in {a / broken.sample_rate:.2f}-{b / broken.sample_rate:.2f} s; "
                "spectrally gated.",
            )
            return {"how": "noise gated", "window": [a, b]}
    _write_fixed(out, broken, frames, audio)
    write_report(out, "# Repair report\n\nNo defect found; delivered unchanged.")
    return {"how": "pass-through (nothing detected)"}
