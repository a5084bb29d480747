"""``repair.scheme=official``, its edit part (60 points): ``lib/rubrics/edit.py`` ``score_edit`` of
PhiloLabs/AgentVBench at commit f058cd6, reimplemented (``repair_official.py`` describes the whole score and how
media are read).

The fixed clip against the golden, in 10 s chunks: video by the best match of sampled frames within a lag band,
audio by the lagged cross-correlation at 48 kHz, in and out of the edit window.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


EDIT_POINTS = 60.0  # the edit part's points in score.py
AUDIO_SR = 48000


def audio_48k(path: Path) -> np.ndarray:
    """The first audio stream, mono, resampled to 48 kHz and quantised to 16 bits, as float32 in [-1, 1)."""
    import av

    with av.open(str(path)) as c:
        if not c.streams.audio:
            raise RuntimeError(f"{Path(path).name}: no audio stream to extract")
        res = av.AudioResampler(format="s16", layout="mono", rate=AUDIO_SR)
        parts = []
        for frame in c.decode(c.streams.audio[0]):
            parts.extend(f.to_ndarray().reshape(-1) for f in res.resample(frame))
        parts.extend(f.to_ndarray().reshape(-1) for f in res.resample(None))
    pcm = np.concatenate(parts) if parts else np.zeros(0, np.int16)
    return pcm.astype(np.float32) / 32768.0


def xcorr_lagged(a: np.ndarray, b: np.ndarray, sr: int, max_lag_ms: float = 150.0) -> float | None:
    """Peak of the normalised cross-correlation within +-``max_lag_ms``, times ``max(0, 1 - |lag| /
    max_lag)``, clamped to [0, 1] (two silent signals: 1; None for empty ones)."""
    from scipy.signal import correlate

    n = min(len(a), len(b))
    if n == 0:
        return None
    a, b = np.asarray(a[:n]), np.asarray(b[:n])
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na * nb <= 0.0:
        return 0.0
    xc = correlate(a, b, mode="full", method="fft")
    centre, max_lag = n - 1, max(1, int(round(max_lag_ms * 1e-3 * sr)))
    lo, hi = max(0, centre - max_lag), min(len(xc), centre + max_lag + 1)
    k = int(np.argmax(xc[lo:hi]))
    lag = lo + k - centre
    return float(max(0.0, min(1.0, float(xc[lo + k]) / (na * nb) * max(0.0, 1.0 - abs(lag) / max_lag))))


def _features(bgr: np.ndarray) -> dict:
    import cv2

    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    small = cv2.resize(gray, (9, 8), interpolation=cv2.INTER_AREA)
    return {
        "gray": gray,
        "ab": cv2.cvtColor(bgr, cv2.COLOR_BGR2LAB)[..., 1:3].astype(np.int16),
        "lap": float(cv2.Laplacian(gray, cv2.CV_64F).var()),
        "dhash": (small[:, 1:] > small[:, :-1]).reshape(-1),
    }


def _match(f: dict, s: dict, lag: int, sc: dict) -> float:
    """``SSIM(grey) * min(1, lap_f / lap_s) * max(0, 1 - mean|ab_f - ab_s| / 25) * max(0, 1 - 0.03 |lag|)``."""
    from skimage.metrics import structural_similarity

    ssim = float(structural_similarity(s["gray"], f["gray"], data_range=255))
    sharp = min(1.0, f["lap"] / s["lap"]) if s["lap"] > 1.0 else 1.0
    chroma = max(0.0, 1.0 - float(np.mean(np.abs(s["ab"] - f["ab"]))) / max(sc["chroma_norm"], 1e-6))
    return ssim * sharp * chroma * max(0.0, 1.0 - sc["lag_penalty"] * abs(lag))


def _video_chunk(fixed: Path, golden: Path, start: float, end: float, window, sc: dict) -> tuple[list, list]:
    """Per sampled output frame of one chunk, its best lag-penalised match among the golden's frames
    within the band, split into (in window, outside)."""
    import cv2

    cap_s, cap_f = cv2.VideoCapture(str(golden)), cv2.VideoCapture(str(fixed))
    try:
        if not cap_s.isOpened() or not cap_f.isOpened():
            raise RuntimeError("cv2 open failed")
        src_w, src_h = int(cap_s.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap_s.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fps_s = cap_s.get(cv2.CAP_PROP_FPS) or 24.0
        fps_f = cap_f.get(cv2.CAP_PROP_FPS) or fps_s
        skip_f = max(1, int(round(fps_f / sc["sample_fps"])))
        dur = end - start
        n_wanted = max(2, int(round(dur * sc["sample_fps"])))
        n_src, n_fix = int(round(dur * fps_s)), int(round(dur * fps_f))
        cap_s.set(cv2.CAP_PROP_POS_MSEC, start * 1000.0)
        cap_f.set(cv2.CAP_PROP_POS_MSEC, start * 1000.0)
        src: dict[int, dict] = {}  # the band of golden frames: index in the chunk -> features
        n_read, src_done = 0, False
        band = int(sc["band"])
        vals_in, vals_out = [], []
        for i in range(n_fix):
            ok, fr = cap_f.read()
            if not ok:
                break
            if i % skip_f:
                continue
            while not src_done and n_read < min(n_src, i + band + 1):
                ok_s, fs = cap_s.read()
                if not ok_s:
                    src_done = True
                    break
                src[n_read] = _features(fs)
                n_read += 1
            for old in [k for k in src if k < i - band]:
                del src[old]
            if n_read == 0:
                break
            if fr.shape[:2] != (src_h, src_w):
                fr = cv2.resize(fr, (src_w, src_h), interpolation=cv2.INTER_AREA)
            f = _features(fr)
            lo, hi = max(0, i - band), min(n_read, i + band + 1)
            if lo >= hi:
                continue
            keys = list(range(lo, hi))
            if 0 < sc["topk"] and hi - lo > sc["topk"] + 1:
                keys = sorted(keys, key=lambda k: int(np.sum(f["dhash"] != src[k]["dhash"])))[: int(sc["topk"])]
                if lo <= i < hi and i not in keys:
                    keys.append(i)
            best = max(_match(f, src[k], k - i, sc) for k in keys)
            ts = start + i / fps_f
            (vals_in if window is not None and window[0] <= ts <= window[1] else vals_out).append(best)
            if len(vals_in) + len(vals_out) >= n_wanted:
                break
        return vals_in, vals_out
    finally:
        cap_s.release()
        cap_f.release()


def edit_score(fixed: Path, golden: Path, profile: dict, points: float = EDIT_POINTS) -> dict:
    """``edit.py`` ``score_edit``: 10 s chunks over the golden's duration; video: the mean best match of
    ~10 sampled frames per second, per chunk clamped to [0, 1]; audio: :func:`xcorr_lagged` at 48 kHz in
    and out of the edit window; chunk values pooled (frames by count, audio by duration). Each modality's
    budget (``video_share`` / ``audio_share`` of the points) loses ``w_in`` x its shortfall in the window
    and ``w_out`` x outside it, floored at 0. A chunk that raises (e.g. no audio stream) fails; all
    failed -> 0."""
    sc, window = profile["scoring"], profile["edit_window"]
    duration = profile["duration_s"]
    chunks, t = [], 0.0
    while t < duration - 1e-6:
        chunks.append((t, min(t + sc["chunk_s"], duration)))
        t += sc["chunk_s"]
    audio: dict[str, np.ndarray] = {}
    rows, errors = [], []
    for start, end in chunks:
        try:
            v_in, v_out = _video_chunk(fixed, golden, start, end, window, sc)
            for key, path in (("fixed", fixed), ("golden", golden)):
                if key not in audio:
                    audio[key] = audio_48k(path)
            # ffmpeg -ss {start:.3f} -t {duration:.3f}: times to the millisecond
            s0 = int(round(float(f"{start:.3f}") * AUDIO_SR))
            s1 = s0 + int(round(float(f"{end - start:.3f}") * AUDIO_SR))
            a, b = audio["fixed"][s0:s1], audio["golden"][s0:s1]
            n = min(len(a), len(b))
            a, b = a[:n], b[:n]
            row = {
                "n_in": len(v_in),
                "n_out": len(v_out),
                "v_in": min(1.0, max(0.0, float(np.mean(v_in)))) if v_in else None,
                "v_out": min(1.0, max(0.0, float(np.mean(v_out)))) if v_out else None,
            }
            if window is not None and end > window[0] and start < window[1]:
                w0, w1 = max(start, window[0]), min(end, window[1])
                i0 = max(0, min(n, int(round((w0 - start) * AUDIO_SR))))
                i1 = max(0, min(n, int(round((w1 - start) * AUDIO_SR))))
                row.update(
                    a_in=xcorr_lagged(a[i0:i1], b[i0:i1], AUDIO_SR, sc["max_lag_ms"]),
                    a_out=xcorr_lagged(
                        np.concatenate([a[:i0], a[i1:]]), np.concatenate([b[:i0], b[i1:]]), AUDIO_SR, sc["max_lag_ms"]
                    ),
                    d_in=w1 - w0,
                    d_out=(end - start) - (w1 - w0),
                )
            else:
                row.update(a_in=None, a_out=xcorr_lagged(a, b, AUDIO_SR, sc["max_lag_ms"]), d_in=0.0, d_out=end - start)
            rows.append(row)
        except Exception as exc:  # the package's per-chunk worker: an error fails the chunk
            errors.append(f"chunk [{start:g}, {end:g}] failed: {type(exc).__name__}: {exc}")
    base = {"max": points, "edit_window_s": list(window) if window else None, "n_chunks": len(chunks)}
    if not rows:
        return {**base, "score": 0.0, "error": f"all {len(chunks)} chunks failed", "chunk_errors": errors[:5]}

    def pooled(key, weight):
        pairs = [(r[key], r[weight]) for r in rows if r[key] is not None and r[weight] > 0]
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

    def deduct(sig_in, sig_out, budget):
        d_in = min(budget, sc["w_in"] * budget * max(0.0, 1.0 - sig_in)) if sig_in is not None else 0.0
        d_out = min(budget, sc["w_out"] * budget * max(0.0, 1.0 - sig_out)) if sig_out is not None else 0.0
        return max(0.0, budget - d_in - d_out)

    ssim_in, ssim_out = pooled("v_in", "n_in"), pooled("v_out", "n_out")
    x_in, x_out = pooled("a_in", "d_in"), pooled("a_out", "d_out")
    video = deduct(ssim_in, ssim_out, points * sc["video_share"])
    aud = deduct(x_in, x_out, points * sc["audio_share"])
    return {
        **base,
        "score": float(video + aud),
        "n_failed_chunks": len(errors),
        "video": {"sub": video, "ssim_in": ssim_in, "ssim_out": ssim_out, "share": sc["video_share"]},
        "audio": {"sub": aud, "xcorr_in": x_in, "xcorr_out": x_out, "share": sc["audio_share"]},
    }
