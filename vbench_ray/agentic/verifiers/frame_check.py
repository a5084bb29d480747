"""Whether a submitted ``solution.mp4`` shows a source clip where a segment says: the frame check of the
AgenticVBench task judges (PhiloLabs/agentic-vbench at 4ed7ffc, ``steps/solve/tests/judge.py`` of the
assembly tasks, e.g. ``tasks/agentic_vbench_assembly/agentic-vbench-assembly-task1``, and of the sequencing
tasks, e.g. ``tasks/agentic_vbench_sequencing/agentic-vbench-sequencing-task1``: ``_check_honesty``,
``_read_frames_around``, ``_max_ssim_pair``, ``_ssim_gray``, ``_downscale_max``), reimplemented.

At 1/4, 2/4 and 3/4 of the segment's ``output`` range in ``solution.mp4`` and the matching points of its
``source_range`` in the clip, five frames are read from 0.1 s before each point in both videos (OpenCV
seek, longest side at most 360 px); the best pairwise grey SSIM (11x11 Gaussian window, sigma 1.5) must
reach 0.95 at every point. Malformed or empty ranges, or a frame that cannot be read, fail the check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SSIM_THRESHOLD = 0.95
N_SAMPLES = 3  # points per segment, at k / (N_SAMPLES + 1)
SSIM_MAX_SIDE = 360


def _downscale(frame: np.ndarray) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    if max(h, w) <= SSIM_MAX_SIDE:
        return frame
    scale = SSIM_MAX_SIDE / max(h, w)
    return cv2.resize(frame, (int(round(w * scale)), int(round(h * scale))), interpolation=cv2.INTER_AREA)


def ssim_gaussian(a_bgr: np.ndarray, b_bgr: np.ndarray) -> float:
    """Mean SSIM of the grey frames with an 11x11 Gaussian window (sigma 1.5); ``b`` resized to ``a``."""
    import cv2

    if a_bgr.shape != b_bgr.shape:
        b_bgr = cv2.resize(b_bgr, (a_bgr.shape[1], a_bgr.shape[0]), interpolation=cv2.INTER_AREA)
    a = cv2.cvtColor(a_bgr, cv2.COLOR_BGR2GRAY).astype(np.float32)
    b = cv2.cvtColor(b_bgr, cv2.COLOR_BGR2GRAY).astype(np.float32)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(x):
        return cv2.GaussianBlur(x, (11, 11), 1.5)

    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b, cov = blur(a * a) - mu_a * mu_a, blur(b * b) - mu_b * mu_b, blur(a * b) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    return float(np.mean(num / ((mu_a * mu_a + mu_b * mu_b + c1) * (var_a + var_b + c2))))


def frames_from(path: Path, t_s: float, n: int = 5, pre_s: float = 0.10) -> list[np.ndarray]:
    """Up to ``n`` consecutive frames read after seeking to ``t_s - pre_s`` (OpenCV, BGR, downscaled)."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            return []
        cap.set(cv2.CAP_PROP_POS_MSEC, max(0.0, (t_s - pre_s) * 1000.0))
        out = []
        for _ in range(n):
            ok, frame = cap.read()
            if not ok:
                break
            out.append(_downscale(frame))
        return out
    finally:
        cap.release()


def check_shown(solution_mp4: Path, clip: Path, segment: dict) -> tuple[bool, list]:
    """Whether ``solution.mp4`` shows ``clip`` where ``segment`` says (``output`` / ``source_range``)."""
    try:
        out_lo, out_hi = float(segment["output"][0]), float(segment["output"][1])
        src_lo, src_hi = float(segment["source_range"][0]), float(segment["source_range"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return False, [{"reason": "malformed segment ranges"}]
    d_out, d_src = out_hi - out_lo, src_hi - src_lo
    if d_out <= 0 or d_src <= 0:
        return False, [{"reason": f"non-positive duration out={d_out} src={d_src}"}]
    samples = []
    for j in range(1, N_SAMPLES + 1):
        k = j / (N_SAMPLES + 1)
        t_out, t_src = out_lo + k * d_out, src_lo + k * d_src
        fa, fb = frames_from(solution_mp4, t_out), frames_from(clip, t_src)
        if not fa or not fb:
            samples.append({"k": k, "t_out_s": t_out, "t_src_s": t_src, "ssim": None, "reason": "frame read failed"})
            return False, samples
        ssim = max([0.0] + [ssim_gaussian(x, y) for x in fa for y in fb])
        samples.append({"k": k, "t_out_s": t_out, "t_src_s": t_src, "ssim": ssim})
        if ssim < SSIM_THRESHOLD:
            return False, samples
    return True, samples
