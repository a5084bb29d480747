"""Negative controls for editing benchmarks (NRVBench paper, "Beyond Rigid", App. F.1, Table 8, Figure 19).

A negative control is an "edited video" made on purpose to fail one thing, so that an evaluator can be
checked: a valid metric must not reward it. Five controls, each built from the case's source video, its
real edited video and its editing mask (per-frame, ``True`` = the region to edit):

================  ===========================================================================================
``unchanged``     the source video itself: natural, but the requested edit is absent (instruction alignment
                  should fail). No file is written; the control points at the source video.
``random_mask``   the edit placed in the wrong region: the source video, except inside a *random mask* of the
                  same shape and area as the real one (the real mask shifted by a random offset that overlaps
                  it least), where the real edit's pixels are pasted, moved by that offset. Pixels change only
                  inside the random mask (localised editing correctness should fail).
``appearance``    colour/texture change without deformation: inside the real mask the source frames get a
                  hue rotation and a posterised texture, pixel by pixel, so the source motion is untouched
                  (physical deformation should fail).
``shuffled``      the real edited video with its frames permuted (a seeded permutation without fixed points):
                  every frame is intact, the order is not (temporal coherence should fail).
``flow_corrupted`` the real edited video, order kept, with an independent smooth random warp of a few pixels
                  applied to each frame inside the mask: local flicker, popping and discontinuous
                  deformation (temporal coherence should fail).
================  ===========================================================================================

Every generator is a pure function of frames, mask and seed (:func:`make_control`), deterministic per
``(seed, case_id, control)``. Cases without a mask use a centred rectangle of ``DEFAULT_AREA`` of the frame
as the "edit region", so any editing benchmark can request controls.

Controls are sweep variants (``vbench_ray.sweeps.Variant``, made by its one expander: axis ``control``):
``control:<name>``, with ``variant_params = {"control": name}``. :func:`control_stage` is a pipeline stage a
benchmark puts first: for a control row it renders the control video once (lossless h264 under
``out_dir/<name>/``) and points the row's ``edited_path`` at it, recording how it was made in ``control_info``;
other rows pass through.
A benchmark can restrict controls to a subset (App. F.1 uses five instances per category) by setting the
row's ``control_eligible`` column to false; such rows get ``control_skip`` and are left unrendered.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from vbench_ray.safepaths import unique_component, within

log = logging.getLogger(__name__)

CONTROLS = ("unchanged", "random_mask", "appearance", "shuffled", "flow_corrupted")
SEEDED = ("random_mask", "shuffled", "flow_corrupted")  # the controls that draw from their seed (make_control)
# Table 8: the failure mode each control is built to show.
FAILURE_MODES = {
    "unchanged": "no requested edit is performed; the video remains natural but instruction-inconsistent",
    "random_mask": "changes occur in irrelevant regions, weakening localised editing correctness",
    "appearance": "colour/texture changes are present, but the requested non-rigid deformation is absent",
    "shuffled": "individual frames look plausible, but the frame order is corrupted",
    "flow_corrupted": "global order is kept, but local motion cues are corrupted (flicker, popping)",
}
DEFAULT_AREA = 0.15  # fraction of the frame used as the edit region when a case has no mask
MASK_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


# ----------------------------------------------------------------------------- variants


def control_of(row: dict) -> str | None:
    """The control a case row asks for (from its ``variant_params``), or None."""
    params = row.get("variant_params")
    if not params:
        return None
    params = json.loads(params) if isinstance(params, str) else params
    return params.get("control")


def case_seed(seed: int, case_id: str, control: str) -> int:
    """A stable per-(run seed, case, control) seed (independent of Python's hash randomisation)."""
    digest = hashlib.sha256(f"{seed}/{case_id}/{control}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


# ----------------------------------------------------------------------------- masks


def read_masks(path: str | Path) -> np.ndarray:
    """A directory of per-frame mask images (sorted by name; nonzero = edit region) as bool ``(T, H, W)``.

    Raises ``ValueError`` naming the directory and file when it is missing, empty, unreadable, or when the
    frames do not all have one size.
    """
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"mask directory not found: {path}")
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in MASK_EXTS and p.is_file())
    if not files:
        raise ValueError(f"mask directory {path} holds no mask images ({', '.join(MASK_EXTS)})")
    masks = []
    for f in files:
        img = cv2.imread(str(f), cv2.IMREAD_UNCHANGED)
        if img is None:
            raise ValueError(f"cannot read mask image {f}")
        if img.ndim == 3:
            img = img.max(axis=2)
        if masks and img.shape != masks[0].shape:
            raise ValueError(
                f"mask {f.name} is {img.shape[1]}x{img.shape[0]} but {files[0].name} is "
                f"{masks[0].shape[1]}x{masks[0].shape[0]} (every frame of {path} must have one size)"
            )
        masks.append(img > 0)
    return np.stack(masks)


def write_masks(path: str | Path, masks: np.ndarray) -> Path:
    """Write bool ``(T, H, W)`` masks as ``00000.png ...`` (0 / 255)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for t, m in enumerate(np.asarray(masks, bool)):
        cv2.imwrite(str(path / f"{t:05d}.png"), (m.astype(np.uint8) * 255))
    return path


def default_mask(t: int, h: int, w: int, area: float = DEFAULT_AREA) -> np.ndarray:
    """A centred rectangle of ``area`` of the frame, in every frame: the edit region of maskless cases."""
    side = float(np.sqrt(area))
    mh, mw = max(1, int(round(h * side))), max(1, int(round(w * side)))
    y0, x0 = (h - mh) // 2, (w - mw) // 2
    mask = np.zeros((t, h, w), bool)
    mask[:, y0 : y0 + mh, x0 : x0 + mw] = True
    return mask


def fit_masks(masks: np.ndarray | None, t: int, h: int, w: int) -> np.ndarray:
    """Masks for a ``t``-frame ``h x w`` video: resampled in time (nearest) and resized (nearest) if needed."""
    if masks is None:
        return default_mask(t, h, w)
    idx = np.round(np.linspace(0, len(masks) - 1, t)).astype(int) if len(masks) != t else np.arange(t)
    out = masks[idx]
    if out.shape[1:] != (h, w):
        out = np.stack([cv2.resize(m.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0 for m in out])
    return out


# ----------------------------------------------------------------------------- generators


def unchanged(source: np.ndarray) -> np.ndarray:
    return np.array(source, copy=True)


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A random permutation of ``range(n)`` with no fixed point (for ``n > 1``)."""
    if n < 2:
        return np.arange(n)
    while True:
        perm = rng.permutation(n)
        if not np.any(perm == np.arange(n)):
            return perm


def shuffled(edited: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The frames permuted (no frame stays in place); returns ``(frames, permutation)``."""
    perm = derangement(len(edited), rng)
    return np.asarray(edited)[perm].copy(), perm


def shift_masks(masks: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """Masks translated by ``(dx, dy)`` pixels, zero-filled (pixels pushed out of the frame are lost)."""
    out = np.zeros_like(masks)
    h, w = masks.shape[1:]
    ys, yd = (slice(0, h - dy), slice(dy, h)) if dy >= 0 else (slice(-dy, h), slice(0, h + dy))
    xs, xd = (slice(0, w - dx), slice(dx, w)) if dx >= 0 else (slice(-dx, w), slice(0, w + dx))
    out[:, yd, xd] = masks[:, ys, xs]
    return out


def random_offset(masks: np.ndarray, rng: np.random.Generator, tries: int = 64) -> tuple[int, int]:
    """An offset moving the masks' union inside the frame while overlapping the original union least."""
    union = masks.any(axis=0)
    h, w = union.shape
    ys, xs = np.nonzero(union)
    if not len(ys):
        return 0, 0
    y0, y1, x0, x1 = ys.min(), ys.max(), xs.min(), xs.max()
    best, best_overlap = (0, 0), None
    for _ in range(tries):
        dy = int(rng.integers(-y0, h - y1))
        dx = int(rng.integers(-x0, w - x1))
        if dx == 0 and dy == 0:
            continue
        overlap = int((shift_masks(union[None], dx, dy)[0] & union).sum())
        if best_overlap is None or overlap < best_overlap:
            best, best_overlap = (dx, dy), overlap
    return best


def random_mask_edit(
    source: np.ndarray, edited: np.ndarray, masks: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """The real edit moved to a random region of the same shape: ``(frames, random_masks, (dx, dy))``.

    ``frames`` equals ``source`` outside ``random_masks``; inside it holds the edited video's pixels of the
    real mask region, translated by ``(dx, dy)``.
    """
    source, edited = np.asarray(source), np.asarray(edited)
    dx, dy = random_offset(masks, rng)
    moved_masks = shift_masks(masks, dx, dy)
    moved_pixels = np.stack([shift_masks(edited[..., c], dx, dy) for c in range(3)], axis=-1)
    out = np.where(moved_masks[..., None], moved_pixels, source).astype(np.uint8)
    return out, moved_masks, (dx, dy)


def appearance_edit(source: np.ndarray, masks: np.ndarray, hue_shift: int = 90, levels: int = 4) -> np.ndarray:
    """Colour and texture change inside the masks, motion untouched: per pixel, hue rotated by ``hue_shift``
    degrees, saturation raised, and the result posterised to ``levels`` per channel; pixels outside the
    masks are the source's."""
    out = np.array(source, copy=True)
    step = 256 // max(2, int(levels))
    for t, frame in enumerate(source):
        hsv = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2HSV).astype(np.int32)
        hsv[..., 0] = (hsv[..., 0] + int(hue_shift) // 2) % 180  # OpenCV hue: 0..179
        hsv[..., 1] = np.clip(hsv[..., 1] * 1.5 + 60, 0, 255)
        recoloured = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2RGB)
        textured = (recoloured // step) * step + step // 2
        out[t] = np.where(masks[t][..., None], textured, frame)
    return out


def smooth_field(h: int, w: int, amplitude: float, rng: np.random.Generator, scale: float = 0.08) -> np.ndarray:
    """A smooth random displacement field ``(h, w, 2)`` whose largest displacement is ``amplitude`` px."""
    sigma = max(1.0, scale * min(h, w))
    field = np.stack(
        [cv2.GaussianBlur(rng.standard_normal((h, w)).astype(np.float32), (0, 0), sigma) for _ in range(2)], axis=-1
    )
    peak = float(np.abs(field).max())
    return field * (amplitude / peak) if peak > 0 else field


def flow_corrupted(
    edited: np.ndarray, masks: np.ndarray, rng: np.random.Generator, amplitude: float = 6.0
) -> np.ndarray:
    """Each frame warped inside its mask by an independent smooth random field (order kept)."""
    edited = np.asarray(edited)
    t, h, w = edited.shape[:3]
    grid_x, grid_y = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    out = np.array(edited, copy=True)
    for i in range(t):
        d = smooth_field(h, w, amplitude, rng)
        warped = cv2.remap(
            np.ascontiguousarray(edited[i]),
            grid_x + d[..., 0],
            grid_y + d[..., 1],
            interpolation=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REFLECT,
        )
        out[i] = np.where(masks[i][..., None], warped, edited[i])
    return out


def make_control(
    name: str, source: np.ndarray, edited: np.ndarray, masks: np.ndarray | None, seed: int, amplitude: float = 6.0
) -> tuple[np.ndarray, dict]:
    """One control's frames and a JSON-able record of how they were made.

    ``source`` and ``edited``: uint8 RGB ``(T, H, W, 3)``; ``masks``: bool ``(T_m, H_m, W_m)`` of the source (or
    None). Controls built from the edited video use the masks fitted to its length and size.
    """
    rng = np.random.default_rng(seed)
    info: dict[str, Any] = {"control": name, "seed": int(seed)}
    if name == "unchanged":
        return unchanged(source), info
    if name == "appearance":
        m = fit_masks(masks, *source.shape[:3])
        info["mask_fraction"] = float(m.mean())
        return appearance_edit(source, m), info
    if name == "random_mask":
        m = fit_masks(masks, *source.shape[:3])
        e = edited if edited.shape == source.shape else _fit_video(edited, *source.shape[:3])
        frames, moved, (dx, dy) = random_mask_edit(source, e, m, rng)
        info.update(
            offset=[dx, dy], mask_fraction=float(moved.mean()), overlap=float((moved & m).sum() / max(1, m.sum()))
        )
        return frames, info
    if name == "shuffled":
        frames, perm = shuffled(edited, rng)
        info["permutation"] = [int(p) for p in perm]
        return frames, info
    if name == "flow_corrupted":
        m = fit_masks(masks, *edited.shape[:3])
        info.update(amplitude=float(amplitude), mask_fraction=float(m.mean()))
        return flow_corrupted(edited, m, rng, amplitude), info
    raise ValueError(f"unknown negative control {name!r}; known: {list(CONTROLS)}")


def _fit_video(frames: np.ndarray, t: int, h: int, w: int) -> np.ndarray:
    idx = np.round(np.linspace(0, len(frames) - 1, t)).astype(int)
    return np.stack([cv2.resize(np.ascontiguousarray(frames[i]), (w, h), interpolation=cv2.INTER_AREA) for i in idx])


# ----------------------------------------------------------------------------- stage


def control_path(out_dir: str | Path, name: str, case_id: str) -> Path:
    """The rendered control's file, one per (control, case): a file is reused when it exists, so two case ids
    must never share one (``unique_component``: ``m:a b`` and ``m:a_b`` do not)."""
    return within(out_dir, name, f"{unique_component(case_id)}.mp4")


class ControlRenderer:
    """Pipeline-stage callable: ``row -> {"edited_path", "control_info", "control_skip"}``.

    Rows that are not control variants keep their ``edited_path``. A control row whose
    ``control_eligible`` is false gets ``control_skip`` (and its original ``edited_path``). A rendered
    control is reused when its file exists (and its ``.json`` record next to it), so a resumed run does
    not render twice.
    """

    def __init__(self, out_dir: str, seed: int = 0, video_backend: str = "auto", amplitude: float = 6.0):
        self.out_dir = str(out_dir)
        self.seed = int(seed)
        self.backend = video_backend
        self.amplitude = float(amplitude)

    def __call__(self, row: dict) -> dict:
        name = control_of(row)
        out = {"edited_path": row.get("edited_path"), "control_info": None, "control_skip": None}
        if name is None:
            return out
        if row.get("control_eligible") is False:
            out["control_skip"] = "not in the negative-control subset"
            return out
        if name not in CONTROLS:
            raise ValueError(f"unknown negative control {name!r} in variant {row.get('variant')!r}")
        seed = case_seed(self.seed, row["case_id"], name)
        if name == "unchanged":
            out.update(edited_path=row["source_path"], control_info=json.dumps({"control": name, "seed": seed}))
            return out
        target = control_path(self.out_dir, name, row["case_id"])
        record = target.with_suffix(".json")
        if target.exists() and record.exists():
            out.update(edited_path=str(target), control_info=record.read_text())
            return out
        frames, info = self.render(row, name, seed)
        self._write(target, frames, info, record)
        out.update(edited_path=str(target), control_info=json.dumps(info))
        return out

    def render(self, row: dict, name: str, seed: int) -> tuple[np.ndarray, dict]:
        from vbench_ray.video.io import VideoReader

        source_reader = VideoReader(row["source_path"], self.backend)
        source = source_reader.read(range(source_reader.info.num_frames))
        edited_reader = VideoReader(row["edited_path"], self.backend)
        edited = edited_reader.read(range(edited_reader.info.num_frames))
        masks = read_masks(row["mask_path"]) if row.get("mask_path") else None
        if masks is not None and (len(masks), *masks.shape[1:]) != source.shape[:3]:
            raise ValueError(
                f"mask {row['mask_path']} has {len(masks)} frames of {masks.shape[2]}x{masks.shape[1]} "
                f"but the source video {row['source_path']} has {len(source)} frames of "
                f"{source.shape[2]}x{source.shape[1]}"
            )
        frames, info = make_control(name, source, edited, masks, seed, self.amplitude)
        info["fps"] = (edited_reader if name in ("shuffled", "flow_corrupted") else source_reader).info.fps
        return frames, info

    @staticmethod
    def _write(target: Path, frames: np.ndarray, info: dict, record: Path) -> None:
        from vbench_ray.video.encode import write_video

        target.parent.mkdir(parents=True, exist_ok=True)
        h, w = frames.shape[1:3]
        if h % 2 or w % 2:  # h264 needs even sizes: pad by edge replication (never crops content)
            frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        tmp = target.with_name(target.stem + f".tmp-{os.getpid()}.mp4")
        write_video(tmp, frames, fps=info.get("fps") or 16.0, crf=0, pix_fmt="yuv444p")  # lossless
        os.replace(tmp, target)
        record.write_text(json.dumps(info))


def control_stage(
    out_dir: str | Path,
    seed: int = 0,
    video_backend: str = "auto",
    amplitude: float = 6.0,
    workers: int = 2,
    batch_size: int = 2,
):
    """The negative-control stage (first in a benchmark's stage list); see :class:`ControlRenderer`.

    Its ``edited_path`` output replaces the loader's column, so a benchmark must not list it twice in its
    schema (``NRVBench.schema`` drops the repeat).
    """
    from vbench_ray.pipeline import Stage

    return Stage(
        name="control",
        fn=ControlRenderer,
        init_kwargs={
            "out_dir": str(out_dir),
            "seed": int(seed),
            "video_backend": video_backend,
            "amplitude": float(amplitude),
        },
        outputs={"edited_path": "str", "control_info": "str", "control_skip": "str"},
        num_cpus=1.0,
        workers=workers,
        batch_size=batch_size,
    )
