"""Each editing model's frame and resolution rules (CoVEBench Table 7) and the input resampling of § G.1.

§ G.1: "Each model's output resolution follows its officially recommended setting, and the number of generated
frames is matched to the input sequence whenever permitted by the model's frame constraints. When a model
imposes a specific frame-count range or mathematical requirement, we preprocess the input videos accordingly,
such as sampling frames to satisfy the required format."

So, for a source of ``n`` frames (``plan``, a pure function of the source's size and the rules):

* frame count: a fixed count when the model uses one (InsV2V: 64); else the source's own count, clamped to
  ``[min_frames, max_frames]``, then moved to the nearest count satisfying the ``a·k+b`` constraint (4k+1)
  *at or below* it -- fewer frames are sampled from the source, none are invented -- or, when that falls
  below ``min_frames``, the smallest valid count at or above it (a short source's frames are repeated);
* frames are taken uniformly over the whole source, ``round(i·(n-1)/(m-1))`` for ``i`` in ``0..m-1``
  (CoVEBench's sampler; with ``m > n`` some frames repeat), and the fps is scaled by ``m/n`` so the clip
  keeps its duration;
* resolution: ``exact`` (the model's output resolution, e.g. 848×480) or ``max`` (the official pipeline's
  largest, e.g. ≤ 720p: the source is scaled down to fit, orientation kept, aspect kept, never scaled up),
  each side a multiple of ``size_multiple``.

The evaluation then compares the edited video with the *original* source; frame count or size that differ
are aligned as the official evaluator does (``data.pair_mismatch=resample``: each video sampled uniformly
over its own length and resized).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from vbench_ray import cfgutil
from vbench_ray.config import bounded


@dataclass
class FrameRules:
    """One model's Table 7 row. All null/defaults: the source is passed through unchanged."""

    resolution: Optional[list[int]] = None  # [width, height]; null: the source's size
    resolution_mode: str = "exact"  # exact: output is resolution | max: the source scaled down to fit it
    min_frames: int = bounded(1, ge=0)  # valid input frame range after preprocessing
    max_frames: Optional[int] = bounded(None, ge=1, note="null: no maximum")
    fixed_frames: Optional[int] = bounded(
        None, ge=1, note="null: the source's count"
    )  # "Default / Used Frames": null = Original, else the fixed count
    frame_constraint: Optional[str] = None  # e.g. "4k+1" (frame count = 4k+1 for an integer k >= 0)
    size_multiple: int = bounded(2, ge=1)  # each side a multiple of this (h264/yuv420p needs even sizes)


# The Table 5 profile: "a standardized configuration of 480×480 spatial resolution and 41 video frames".
PROFILES = {"table5": {"resolution": [480, 480], "resolution_mode": "exact", "fixed_frames": 41}}


@dataclass(frozen=True)
class Plan:
    """What the editor receives: ``indices`` of the source's frames, at ``height``×``width`` and ``fps``."""

    indices: tuple[int, ...]
    height: int
    width: int
    fps: float
    source_frames: int
    source_height: int
    source_width: int

    @property
    def frames(self) -> int:
        return len(self.indices)

    @property
    def unchanged(self) -> bool:
        return self.indices == tuple(range(self.source_frames)) and (self.height, self.width) == (
            self.source_height,
            self.source_width,
        )


def parse_constraint(text: str | None) -> tuple[int, int]:
    """``"4k+1"`` -> ``(4, 1)``; null, ``""`` or ``"-"`` -> ``(1, 0)`` (no constraint)."""
    if text is None or str(text).strip() in ("", "-", "–", "none"):
        return 1, 0
    m = re.fullmatch(r"\s*(\d+)\s*k\s*(?:\+\s*(\d+))?\s*", str(text))
    if not m or int(m.group(1)) < 1:
        raise ValueError(f"frame_constraint {text!r}: expected the form 'a k + b', e.g. '4k+1'")
    a, b = int(m.group(1)), int(m.group(2) or 0)
    return a, b % a


def target_frames(n: int, rules: Any) -> int:
    """The frame count the model gets for a source of ``n`` frames (see the module's docstring)."""
    if n <= 0:
        raise ValueError(f"a source video needs frames, got {n}")
    a, b = parse_constraint(cfgutil.get(rules, "frame_constraint"))
    lo = max(1, int(cfgutil.get(rules, "min_frames", 1)))
    hi = cfgutil.get(rules, "max_frames")
    fixed = cfgutil.get(rules, "fixed_frames")
    if fixed is not None:
        m = int(fixed)
    else:
        m = max(lo, n if hi is None else min(n, int(hi)))
    if (m - b) % a:
        down = m - ((m - b) % a)  # the largest valid count <= m
        m = down if down >= max(lo, 1) else down + a
    if m < 1 or (hi is not None and m > int(hi)) or m < lo and fixed is None:
        raise ValueError(
            f"no frame count satisfies min_frames={lo}, max_frames={hi}, "
            f"frame_constraint={cfgutil.get(rules, 'frame_constraint')!r}"
        )
    return m


def sample_indices(n: int, m: int) -> list[int]:
    """``m`` frame indices spread uniformly over ``n`` (``round(i·(n-1)/(m-1))``; repeats when ``m > n``)."""
    if m == 1:
        return [n // 2]
    return [int(round(i * (n - 1) / (m - 1))) for i in range(m)]


def target_size(height: int, width: int, rules: Any) -> tuple[int, int]:
    """``(height, width)`` the model gets for a ``height``×``width`` source."""
    mult = max(1, int(cfgutil.get(rules, "size_multiple", 2)))
    res = cfgutil.get(rules, "resolution")
    mode = cfgutil.get(rules, "resolution_mode", "exact")
    if res is None:
        h, w = height, width
    elif mode == "exact":
        w, h = int(res[0]), int(res[1])
    elif mode == "max":
        bw, bh = int(res[0]), int(res[1])
        if (bw >= bh) != (width >= height):  # a bound like 720p bounds the long and the short side
            bw, bh = bh, bw
        scale = min(1.0, bw / width, bh / height)
        h, w = height * scale, width * scale
    else:
        raise ValueError(f"resolution_mode must be exact or max, got {mode!r}")
    return max(mult, int(h // mult) * mult), max(mult, int(w // mult) * mult)


def plan(num_frames: int, height: int, width: int, fps: float, rules: Any) -> Plan:
    m = target_frames(num_frames, rules)
    h, w = target_size(height, width, rules)
    return Plan(
        tuple(sample_indices(num_frames, m)), h, w, fps * m / num_frames if fps > 0 else fps, num_frames, height, width
    )


def effective_rules(editor_cfg: Any) -> dict | None:
    """The editor's ``frame_rules`` with its ``profile`` (``table5``) applied on top; None: no rules."""
    rules = editor_cfg.get("frame_rules") if hasattr(editor_cfg, "get") else None
    rules = dict(rules) if rules else {}
    profile = editor_cfg.get("profile") if hasattr(editor_cfg, "get") else None
    if profile:
        if profile not in PROFILES:
            raise ValueError(f"editor.profile={profile!r}: known profiles are {sorted(PROFILES)}")
        rules.update(PROFILES[profile])
    defaults = FrameRules().__dict__
    return rules if any(rules.get(k) != v for k, v in defaults.items() if k in rules) else None


def conform(source: str | Path, dest: Path, rules: Any, backend: str = "auto") -> tuple[str, Plan]:
    """Write ``source`` resampled to ``rules`` at ``dest`` (an existing ``dest`` is reused); the path the editor
    gets (``source`` itself when nothing changes) and the plan."""
    import cv2
    import numpy as np

    from vbench_ray.video.encode import write_video
    from vbench_ray.video.io import VideoReader

    reader = VideoReader(str(source), backend=backend)
    info = reader.info
    p = plan(info.num_frames, info.height, info.width, info.fps, rules)
    if p.unchanged:
        return str(source), p
    if not dest.exists():
        unique = sorted(set(p.indices))
        frames = dict(zip(unique, reader.read(unique)))
        interp = cv2.INTER_AREA if p.height * p.width < info.height * info.width else cv2.INTER_CUBIC
        out = np.stack(
            [
                cv2.resize(frames[i], (p.width, p.height), interpolation=interp)
                if (p.height, p.width) != (info.height, info.width)
                else frames[i]
                for i in p.indices
            ]
        )
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.stem + ".tmp.mp4")
        write_video(tmp, out, fps=p.fps or 16.0)
        tmp.replace(dest)
    return str(dest), p
