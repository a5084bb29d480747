"""Baseline "agents" that need no LLM: they read a task's inputs and write a submission folder, so the
evaluation job scores them exactly like any agent's rollouts (``data.agent=<name>`` in the job).

* ``random``: chance behaviour, which the chance-adjusted verifiers should score about 0. Assembly: a
  uniformly random candidate per slot; Sequencing: a random permutation; Repair: cuts a random 0.5 s
  range and reports it; Repurpose: random 1 s pieces of the source, uncropped, of a random length.
* ``heuristic``: Sequencing by visual continuity (the cost of cutting clip i to clip j is the distance
  between i's last frame, extrapolated one step, and j's first frame; the order is the cheapest path,
  exact for n <= 12 clips, best-of-greedy plus relocation moves above); Repair by detecting and undoing
  the synthetic defects (a repeated segment is cut and reported; cuts that break continuity are
  re-ordered by the same continuity path; a colour shift is inverted by a per-channel affine fit at its
  boundaries; a blurred window gets back the high frequencies of its sharp neighbours, registered to it,
  where they agree with it;
  a noisy audio window is spectrally gated; echo and clipping are not handled, and anything undetected
  is passed through, which the near-copy gate scores 0); Repurpose: a
  format-aware cut (evenly spaced pieces of the source filling the brief's runtime, centre-cropped to
  its aspect ratio, audio kept). Assembly has no non-LLM heuristic here: it falls back to ``random``.
* ``oracle``: reads the hidden truth (golden picks, golden order, the golden video and ranges): an
  upper-bound check of the verifiers, not a baseline. Repurpose: the heuristic cut.

Agents other than ``oracle`` get the task's public view only (no ``truth/``).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from vbench_ray.agentic.bundle import TaskBundle, load_task
from vbench_ray.agentic.media import Media, read_media, write_media

log = logging.getLogger(__name__)

AGENTS = ("random", "heuristic", "oracle")


def agent_rng(seed: int, agent: str, task_id: str, rep: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(f"{agent}/{task_id}/{rep}".encode())])


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _concat_clips(paths: list[Path], out: Path) -> list[float]:
    """Write the clips back to back to ``out``; their durations (frames / fps)."""
    media = [read_media(p, audio=False) for p in paths]
    write_media(out, np.concatenate([m.frames for m in media]), media[0].fps)
    return [len(m.frames) / media[0].fps for m in media]


def _clip_names(task: TaskBundle) -> list[str]:
    return sorted(p.name for p in task.input("clips").iterdir() if p.suffix == ".mp4")


# ----------------------------------------------------------------------------- assembly


def assembly_random(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    board = json.loads(task.input("storyboard.json").read_text())
    picks = {s["slot"]: str(rng.choice(s["candidates"])) for s in board["slots"]}
    return _assembly_write(task, out, board, picks, "random candidate per slot")


def assembly_oracle(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    board = json.loads(task.input("storyboard.json").read_text())
    picks = {s["slot"]: s["golden"] for s in task.truth["slots"]}
    return _assembly_write(task, out, board, picks, "golden candidate per slot (oracle)")


def _assembly_write(task, out: Path, board: dict, picks: dict, how: str) -> dict:
    """``solution.json`` in both shapes (the task judge's ``segments``, the ``slots`` mapping) and the
    picked clips concatenated in slot order, each segment's place in ``solution.mp4`` declared."""
    clips = [task.input(f"clips/{picks[s['slot']]}") for s in board["slots"]]
    durations = _concat_clips(clips, out / "solution.mp4")
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    segments = [
        {
            "slot": s["slot"],
            "source": picks[s["slot"]],
            "output": [float(starts[i]), float(starts[i + 1])],
            "source_range": [0.0, float(durations[i])],
        }
        for i, s in enumerate(board["slots"])
    ]
    _write(out / "solution.json", {"segments": segments, "slots": picks})
    return {"how": how}


# ----------------------------------------------------------------------------- sequencing


def _small(frame: np.ndarray, width: int = 48) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    return cv2.resize(frame, (width, max(4, round(h * width / w))), interpolation=cv2.INTER_AREA).astype(np.float32)


def continuity_costs(clips: list[np.ndarray]) -> np.ndarray:
    """``cost[i, j]``: mean absolute difference between clip i's last frame extrapolated one step and
    clip j's first frame (downscaled). The diagonal is infinite."""
    n = len(clips)
    heads = [_small(c[0]) for c in clips]
    tails = []
    for c in clips:
        last = _small(c[-1])
        prev = _small(c[-2]) if len(c) > 1 else last
        tails.append(np.clip(2 * last - prev, 0, 255))
    cost = np.full((n, n), np.inf)
    for i, j in itertools.permutations(range(n), 2):
        cost[i, j] = float(np.mean(np.abs(tails[i] - heads[j])))
    return cost


def _path_cost(path: list[int], cost: np.ndarray) -> float:
    return float(sum(cost[a, b] for a, b in zip(path, path[1:])))


def best_path(cost: np.ndarray, exact_max: int = 12) -> list[int]:
    """The order visiting every clip once with the least total cut cost (open path, any start)."""
    n = len(cost)
    if n <= 1:
        return list(range(n))
    if n <= exact_max:
        return _held_karp(cost)
    best = min((_greedy(cost, s) for s in range(n)), key=lambda p: _path_cost(p, cost))
    return _relocate(best, cost)


def _held_karp(cost: np.ndarray) -> list[int]:
    n = len(cost)
    full = 1 << n
    dp = np.full((full, n), np.inf)
    parent = np.full((full, n), -1, dtype=np.int64)
    for j in range(n):
        dp[1 << j, j] = 0.0
    c = np.where(np.isfinite(cost), cost, 1e18)
    for mask in range(1, full):
        row = dp[mask]
        if not np.isfinite(row).any():
            continue
        # extend every path ending at i (in mask) by every j not in mask
        cand = row[:, None] + c  # (i, j)
        for j in range(n):
            if mask & (1 << j):
                continue
            i = int(np.argmin(cand[:, j]))
            val = cand[i, j]
            nm = mask | (1 << j)
            if val < dp[nm, j]:
                dp[nm, j] = val
                parent[nm, j] = i
    mask, j = full - 1, int(np.argmin(dp[full - 1]))
    path = []
    while j != -1:
        path.append(j)
        i = int(parent[mask, j])
        mask ^= 1 << j
        j = i
    return path[::-1]


def _greedy(cost: np.ndarray, start: int) -> list[int]:
    path, left = [start], set(range(len(cost))) - {start}
    while left:
        nxt = min(left, key=lambda j: cost[path[-1], j])
        path.append(nxt)
        left.remove(nxt)
    return path


def _relocate(path: list[int], cost: np.ndarray) -> list[int]:
    """Move single clips or runs of up to 3 to their best place while that lowers the cost."""
    best, best_c = list(path), _path_cost(path, cost)
    improved = True
    while improved:
        improved = False
        for length in (1, 2, 3):
            for i in range(len(best) - length + 1):
                seg, rest = best[i : i + length], best[:i] + best[i + length :]
                for k in range(len(rest) + 1):
                    cand = rest[:k] + seg + rest[k:]
                    cc = _path_cost(cand, cost)
                    if cc < best_c - 1e-9:
                        best, best_c, improved = cand, cc, True
    return best


def sequencing_random(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    names = _clip_names(task)
    order = [names[i] for i in rng.permutation(len(names))]
    return _sequencing_write(task, out, order, "random permutation")


def sequencing_continuity(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    names = _clip_names(task)
    clips = [read_media(task.input(f"clips/{n}"), audio=False).frames for n in names]
    path = best_path(continuity_costs(clips))
    return _sequencing_write(task, out, [names[i] for i in path], "visual continuity (cheapest path)")


def sequencing_oracle(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    return _sequencing_write(task, out, list(task.truth["order"]), "ground-truth order (oracle)")


def _sequencing_write(task, out: Path, order: list[str], how: str) -> dict:
    """The clips concatenated in ``order`` and ``solution.json`` as the official harness writes it: one
    segment per slot with its place in ``solution.mp4`` (``output``) and in the clip (``source_range``)."""
    durations = _concat_clips([task.input(f"clips/{n}") for n in order], out / "solution.mp4")
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    _write(
        out / "solution.json",
        {
            "segments": [
                {
                    "source": n,
                    "output": [float(starts[i]), float(starts[i + 1])],
                    "source_range": [0.0, float(durations[i])],
                }
                for i, n in enumerate(order)
            ]
        },
    )
    return {"how": how}


# ----------------------------------------------------------------------------- repair


def _report(out: Path, text: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text.rstrip() + "\n", encoding="utf-8")


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
    _write(out / "solution.json", {"ranges": [list(r) for r in ranges]})
    _report(out, f"# Repair report\n\nRandom baseline: cut {start:.2f}-{start + 0.5:.2f} s.")
    return {"how": "random 0.5 s cut", "ranges": ranges}


def repair_oracle(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    import shutil

    t = task.truth
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(task.truth_file(t["golden"]), out / "fixed.mp4")
    if t["group"] == "timeline":
        first = [r["range"] if isinstance(r, dict) else r for r in t["ranges"]]
        _write(out / "solution.json", {"ranges": first})
    w = t.get("window") or [0.0, 0.0]
    _report(
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

    small = [_small(f, 64).astype(np.uint8) for f in frames]
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
    small = [_small(f, 64) for f in frames]
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
        _write(out / "solution.json", {"ranges": [list(r) for r in ranges]})
        _report(
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
        _report(out, f"# Repair report\n\nShots out of order (cuts at frames {cuts}); re-ordered to {order}.")
        return {"how": "re-ordered by continuity", "cuts": cuts, "order": order}
    if len(colour) >= 2:
        a, b = colour[0], colour[-1]
        _write_fixed(out, broken, _undo_colour(frames, a, b), audio)
        _report(
            out,
            f"# Repair report\n\nColour shift on frames {a}-{b - 1} ({a / fps:.2f}-{b / fps:.2f} s); "
            "inverted per channel.",
        )
        return {"how": "colour shift undone", "window": [a, b]}
    blur = blur_window(frames)
    if blur is not None:
        a, b = blur
        _write_fixed(out, broken, _detail_transfer(frames, a, b), audio)
        _report(
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
            _report(
                out,
                f"# Repair report\n\nNoise in {a / broken.sample_rate:.2f}-{b / broken.sample_rate:.2f} s; "
                "spectrally gated.",
            )
            return {"how": "noise gated", "window": [a, b]}
    _write_fixed(out, broken, frames, audio)
    _report(out, "# Repair report\n\nNo defect found; delivered unchanged.")
    return {"how": "pass-through (nothing detected)"}


# ----------------------------------------------------------------------------- repurpose


def _parse_aspect(text: str) -> float:
    a, b = str(text).replace("/", ":").split(":")
    return float(a) / float(b)


def _crop_to(frames: np.ndarray, aspect: float) -> np.ndarray:
    h, w = frames.shape[1:3]
    if w / h > aspect:
        nw = max(2, int(round(h * aspect / 2)) * 2)
        x = (w - nw) // 2
        return frames[:, :, x : x + nw]
    nh = max(2, int(round(w / aspect / 2)) * 2)
    y = (h - nh) // 2
    return frames[:, y : y + nh]


def _pieces(src: Media, starts: list[float], piece: float) -> tuple[np.ndarray, np.ndarray | None]:
    fps, sr = src.fps, src.sample_rate
    n = int(round(piece * fps))
    frames = np.concatenate([src.frames[int(round(s * fps)) : int(round(s * fps)) + n] for s in starts])
    audio = None
    if src.audio is not None:
        m = int(round(piece * sr))
        audio = np.concatenate([src.audio[int(round(s * sr)) : int(round(s * sr)) + m] for s in starts])
    return frames, audio


def repurpose_random(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    src = read_media(task.input("source.mp4"))
    total = int(rng.integers(3, 13))
    starts = sorted(float(x) for x in rng.uniform(0, src.info.duration - 1.0, size=total))
    frames, audio = _pieces(src, [math.floor(s * src.fps) / src.fps for s in starts], 1.0)
    write_media(out / "final.mp4", frames, src.fps, audio, src.sample_rate)
    _report(out, f"# Report\n\nRandom baseline: {total} random one-second pieces of the source.")
    return {"how": "random pieces", "seconds": total}


def repurpose_format_aware(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    spec = task.spec
    src = read_media(task.input("source.mp4"))
    runtime = float(spec.get("runtime_s", 6.0))
    n = max(1, int(round(runtime)))
    piece = runtime / n
    span = src.info.duration - piece
    starts = [math.floor((span * i / max(1, n - 1)) * src.fps) / src.fps for i in range(n)]
    frames, audio = _pieces(src, starts, piece)
    if spec.get("aspect_ratio"):
        frames = _crop_to(frames, _parse_aspect(spec["aspect_ratio"]))
    write_media(out / "final.mp4", frames, src.fps, audio if spec.get("audio", True) else None, src.sample_rate)
    _report(
        out,
        f"# Report\n\nFormat-aware cut: {n} evenly spaced pieces of {piece:.2f} s, centre-cropped to "
        f"{spec.get('aspect_ratio')}, source audio kept.",
    )
    return {"how": "evenly spaced pieces, cropped to the brief's aspect ratio"}


# ----------------------------------------------------------------------------- dispatch

STRATEGIES: dict[str, dict[str, Callable]] = {
    "random": {
        "assembly": assembly_random,
        "sequencing": sequencing_random,
        "repair": repair_random,
        "repurpose": repurpose_random,
    },
    "heuristic": {
        "assembly": assembly_random,
        "sequencing": sequencing_continuity,
        "repair": repair_heuristic,
        "repurpose": repurpose_format_aware,
    },
    "oracle": {
        "assembly": assembly_oracle,
        "sequencing": sequencing_oracle,
        "repair": repair_oracle,
        "repurpose": repurpose_format_aware,
    },
}


def solve(agent: str, task_dir: str | Path, out_dir: str | Path, rep: str = "0", seed: int = 0) -> dict:
    """Run baseline ``agent`` on one task; its deliverables go to ``out_dir`` (created)."""
    if agent not in STRATEGIES:
        raise ValueError(f"unknown baseline agent {agent!r}; known: {list(STRATEGIES)}")
    task = load_task(task_dir, with_truth=(agent == "oracle"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = STRATEGIES[agent][task.family](task, out, agent_rng(seed, agent, task.task_id, rep))
    return {"agent": agent, "task_id": task.task_id, "rep": rep, **info}


def run_baseline(agent: str, tasks_dir: str | Path, out_dir: str | Path, reps: int = 3, seed: int = 0) -> dict:
    """``agent`` on every task of ``tasks_dir``, ``reps`` times: ``out_dir/<task_id>/<rep>/`` (the
    submissions layout the job reads). Returns ``{"submissions_dir", "n_rollouts"}``."""
    from vbench_ray.agentic.bundle import list_tasks

    out = Path(out_dir)
    n = 0
    for task_dir in list_tasks(tasks_dir):
        for rep in range(reps):
            solve(agent, task_dir, out / task_dir.name / str(rep), str(rep), seed)
            n += 1
    return {"submissions_dir": str(out), "n_rollouts": n}
