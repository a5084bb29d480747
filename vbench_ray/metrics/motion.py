"""Motion Fidelity (MF) between source and edited videos. CoVEBench App. F.3, "Motion Fidelity".

Both videos are sampled to 16 uniform frames and resized to 384x384; a point tracker follows a
grid_size x grid_size grid of query points from frame 0. Each trajectory i is summarised by its average
position p_i (over the frames where it is visible) and average velocity v_i (mean frame-to-frame
displacement). The matching cost between source trajectory i and edited trajectory j is

    c_ij = alpha * ||p_i^src - p_j^edit|| / d_max
         + (1 - alpha) * (1 - v_i^src . v_j^edit / (||v_i^src|| ||v_j^edit|| + eps))

with d_max the image diagonal (sqrt(2) * size) and alpha = 0.5; Hungarian matching gives pi*, and
MF = 1 - 1/N * sum_i c_{i, pi*(i)}.

Trackers sit behind ``PointTracker.track(frames) -> (tracks (T, N, 2), visible (T, N))``: ``lk`` is
OpenCV's pyramidal Lucas-Kanade with a forward-backward check (CPU, no weights), ``cotracker`` is
CoTracker3 offline (the official tracker), our own model definition in ``vbench_ray.metrics.cotracker3``
loading the official ``scaled_offline.pth``; no ``cotracker`` package is needed. It is called as the official
MF script calls ``CoTrackerPredictor(video, grid_size=10, grid_query_frame=0)`` on the 384x384 frames: resized
to 384x512 for the model, 6 updates, a point visible where sigmoid(visibility) > 0.9 (``visibility_threshold``;
the official predictor's threshold, the script's later ``> 0.5`` on that boolean changes nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Protocol

import cv2
import numpy as np

from vbench_ray.metrics.base import FrameMetric, VideoTooShortError, register_metric, require_weights, weights_problem
from vbench_ray.video.flow import AreaResize, FrameView, Gray
from vbench_ray.metrics.tracking_grid import grid_points  # noqa: F401  (LK's and CoTracker's grid)

TRACKERS = ("lk", "cotracker")


@dataclass
class MFConfig:
    frames: int = 16  # uniformly sampled frames per video (official: 16)
    size: int = 384  # frames resized to size x size; d_max = sqrt(2) * size
    grid_size: int = 10  # grid_size x grid_size query points on frame 0 (official: 10)
    alpha: float = 0.5  # weight of the position term in c_ij (paper: 0.5)
    eps: float = 1e-6  # keeps the velocity cosine finite for static trajectories
    tracker: str = "lk"  # "lk" (OpenCV Lucas-Kanade, CPU) or "cotracker" (CoTracker3)
    cotracker_weights: Optional[str] = None  # local CoTracker3 checkpoint, e.g. scaled_offline.pth
    device: str = "cpu"  # torch device for CoTracker
    visibility_threshold: float = 0.9  # CoTracker sigmoid(visibility) above this counts as visible (official: 0.9)
    # [H, W] CoTracker3 runs at (the official predictor's 384x512); multiples of 4, at least 32
    cotracker_resolution: List[int] = field(default_factory=lambda: [384, 512])
    fb_threshold: float = 1.0  # px; LK forward-backward error above this ends a track
    pool_batch: int = 8  # tracker=cotracker (its own pool): cases whose videos are tracked together


# ---------------------------------------------------------------------------------------------- math


def summarize_tracks(tracks: np.ndarray, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per trajectory: mean position over visible frames and mean frame-to-frame displacement.

    ``tracks`` (T, N, 2), ``visible`` (T, N) bool → positions (N, 2), velocities (N, 2). A step t → t+1
    counts when the point is visible at t (the official code's rule; the paper does not say). A point
    never visible falls back to all its frames and steps, as in the official code, rather than
    dropping out of the matching.
    """
    tracks = np.asarray(tracks, dtype=np.float64)
    visible = np.asarray(visible, dtype=bool)
    steps = np.diff(tracks, axis=0)  # (T-1, N, 2)
    pos = np.empty((tracks.shape[1], 2))
    vel = np.zeros((tracks.shape[1], 2))
    for i in range(tracks.shape[1]):
        seen = visible[:, i]
        pos[i] = tracks[seen, i].mean(axis=0) if seen.any() else tracks[:, i].mean(axis=0)
        moving = seen[:-1] if seen[:-1].any() else np.ones(len(steps), bool)
        if len(steps):
            vel[i] = steps[moving, i].mean(axis=0)
    return pos, vel


def matching_cost(
    pos_a: np.ndarray,
    vel_a: np.ndarray,
    pos_b: np.ndarray,
    vel_b: np.ndarray,
    alpha: float,
    dmax: float,
    eps: float = 1e-6,
) -> np.ndarray:
    """c_ij between trajectories i of video a and j of video b: (N_a, N_b)."""
    dist = np.linalg.norm(pos_a[:, None, :] - pos_b[None, :, :], axis=-1) / dmax
    dot = vel_a @ vel_b.T
    norms = np.linalg.norm(vel_a, axis=-1)[:, None] * np.linalg.norm(vel_b, axis=-1)[None, :]
    return alpha * dist + (1.0 - alpha) * (1.0 - dot / (norms + eps))


def motion_fidelity(
    pos_a: np.ndarray,
    vel_a: np.ndarray,
    pos_b: np.ndarray,
    vel_b: np.ndarray,
    alpha: float = 0.5,
    dmax: float = math.sqrt(2.0) * 384,
    eps: float = 1e-6,
) -> float:
    """MF = 1 - mean matched cost under the Hungarian assignment (paper App. F.3).

    Properties of the formula worth knowing when reading scores:

    * identical moving trajectories cost (1 - alpha) * eps / (|v|^2 + eps) ≈ 0, so MF ≈ 1;
    * reversed velocities cost (1 - alpha) * 2 plus the position term, so MF can go below 0
      (alpha = 0.5 and equal positions: MF = 0);
    * a static trajectory (v = 0) has cosine 0 with anything, so it costs (1 - alpha) even when it
      matches a static trajectory exactly: two identical static videos score MF = alpha = 0.5, not 1.
      Static background points therefore pull MF towards 0.5 in any video.

    With unequal counts the assignment covers min(N_a, N_b) pairs and the mean is over those.
    """
    from scipy.optimize import linear_sum_assignment  # here, not at import: the driver never computes MF

    if len(pos_a) == 0 or len(pos_b) == 0:
        return math.nan
    cost = matching_cost(
        np.asarray(pos_a, float),
        np.asarray(vel_a, float),
        np.asarray(pos_b, float),
        np.asarray(vel_b, float),
        alpha,
        dmax,
        eps,
    )
    rows, cols = linear_sum_assignment(cost)
    return float(1.0 - cost[rows, cols].mean())


# ------------------------------------------------------------------------------------------ trackers


class PointTracker(Protocol):
    def track(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """uint8 RGB (T, H, W, 3) → tracks (T, N, 2) float (x, y) pixels and visible (T, N) bool. A tracker that
        reads grayscale only (LK) also takes grayscale (T, H, W): what MF's ``frame_view`` makes for it."""


class LKTracker:
    """Pyramidal Lucas-Kanade over a query grid on frame 0, frame to frame, with a forward-backward check.

    A point is lost (invisible from then on, its position frozen) when LK fails, when tracking it back
    lands more than ``fb_threshold`` px from where it started, or when it leaves the frame. Chaining
    frame-to-frame keeps each LK step small, which is what LK needs.
    """

    def __init__(self, grid_size: int = 10, fb_threshold: float = 1.0, win_size: int = 21, max_level: int = 3):
        self.grid_size = grid_size
        self.fb_threshold = fb_threshold
        self.lk_params = dict(
            winSize=(win_size, win_size),
            maxLevel=max_level,
            criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01),
        )

    def track(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``frames``: uint8 RGB (T, H, W, 3), or their grayscale (T, H, W) (``Gray``'s ``COLOR_RGB2GRAY``)."""
        grays = frames if np.ndim(frames) == 3 else [Gray()(f) for f in frames]
        h, w = grays[0].shape
        pts = grid_points(self.grid_size, h, w)
        tracks = np.zeros((len(grays), len(pts), 2), np.float32)
        visible = np.zeros((len(grays), len(pts)), bool)
        tracks[0], visible[0] = pts, True
        for t in range(1, len(grays)):
            tracks[t], visible[t] = self._step(grays[t - 1], grays[t], tracks[t - 1], visible[t - 1])
        return tracks, visible

    def _step(self, prev: np.ndarray, nxt: np.ndarray, pts: np.ndarray, alive: np.ndarray):
        new_pts, new_alive = pts.copy(), np.zeros_like(alive)
        if not alive.any():
            return new_pts, new_alive
        p0 = pts[alive].reshape(-1, 1, 2)
        p1, ok_fwd, _ = cv2.calcOpticalFlowPyrLK(prev, nxt, p0, None, **self.lk_params)
        p0_back, ok_back, _ = cv2.calcOpticalFlowPyrLK(nxt, prev, p1, None, **self.lk_params)
        fb_err = np.linalg.norm((p0_back - p0).reshape(-1, 2), axis=-1)
        p1 = p1.reshape(-1, 2)
        h, w = prev.shape
        inside = (p1[:, 0] >= 0) & (p1[:, 0] <= w - 1) & (p1[:, 1] >= 0) & (p1[:, 1] <= h - 1)
        ok = ok_fwd.ravel().astype(bool) & ok_back.ravel().astype(bool) & (fb_err <= self.fb_threshold) & inside
        idx = np.flatnonzero(alive)
        # A point lost at this step still gets LK's forward estimate when LK converged (like CoTracker's
        # guess for an occluded point), else keeps its last position; the step into the loss frame
        # starts from a visible point, so it counts towards the velocity, and a held position would
        # add a spurious zero displacement there.
        moved = ok_fwd.ravel().astype(bool)
        new_pts[idx[moved]] = p1[moved]
        new_alive[idx[ok]] = True
        return new_pts, new_alive


class CoTrackerTracker:
    """CoTracker3 offline (``vbench_ray.metrics.cotracker3``) from a local checkpoint, on a grid from frame 0."""

    videos_per_forward = 8  # videos batched into one forward pass (source and edited of 4 cases)

    def __init__(
        self,
        weights: str,
        grid_size: int = 10,
        device: str = "cpu",
        visibility_threshold: float = 0.9,
        resolution: tuple[int, int] = (384, 512),
    ):
        path = require_weights(weights, "metrics.MF.cotracker_weights", "CoTracker3")
        import torch

        from vbench_ray.metrics.cotracker3 import load_cotracker3

        self.torch = torch
        self.model = load_cotracker3(path, device)
        self.device, self.grid_size, self.visibility_threshold = device, grid_size, visibility_threshold
        self.resolution = tuple(int(v) for v in resolution)

    def track(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.track_many([frames])[0]

    def track_many(self, videos: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``track`` of each video; videos of one shape share forward passes (the model treats the batch's
        videos independently, so a video's tracks do not depend on its companions beyond float rounding)."""
        from vbench_ray.metrics.cotracker3 import track_points

        torch = self.torch
        out: list = [None] * len(videos)
        by_shape: dict[tuple, list[int]] = {}
        for i, v in enumerate(videos):
            by_shape.setdefault(np.shape(v), []).append(i)
        for idx in by_shape.values():
            for start in range(0, len(idx), self.videos_per_forward):
                chunk = idx[start : start + self.videos_per_forward]
                # (B, T, 3, H, W) float RGB in 0..255, as the official predictor takes it
                batch = torch.from_numpy(np.stack([np.ascontiguousarray(videos[i]) for i in chunk]))
                batch = batch.permute(0, 1, 4, 2, 3).float().to(self.device)
                with torch.inference_mode():
                    tracks, vis, _conf = track_points(self.model, batch, self.grid_size, 0, self.resolution)
                tracks, vis = tracks.float().cpu().numpy(), vis.float().cpu().numpy()
                for k, i in enumerate(chunk):
                    out[i] = (tracks[k], vis[k] > self.visibility_threshold)
        return out


def cotracker_resolution(cfg) -> tuple[int, int]:
    """``metrics.MF.cotracker_resolution`` as (H, W), checked: the model needs multiples of 4, at least 32 (4
    pyramid levels of 1/4-resolution features)."""
    value = list(getattr(cfg, "cotracker_resolution", None) or [])
    if len(value) != 2 or any(int(v) != v or v < 32 or int(v) % 4 for v in value):
        raise ValueError(f"metrics.MF.cotracker_resolution must be [H, W], multiples of 4 and >= 32, got {value!r}")
    return int(value[0]), int(value[1])


def build_tracker(cfg: MFConfig) -> PointTracker:
    if cfg.tracker == "lk":
        return LKTracker(int(cfg.grid_size), float(cfg.fb_threshold))
    if cfg.tracker == "cotracker":
        return CoTrackerTracker(
            cfg.cotracker_weights,
            int(cfg.grid_size),
            cfg.device,
            float(cfg.visibility_threshold),
            cotracker_resolution(cfg),
        )
    raise ValueError(f"metrics.MF.tracker must be one of {TRACKERS}, got {cfg.tracker!r}")


# ------------------------------------------------------------------------------------------- metric


@register_metric
class MF(FrameMetric):
    """Motion Fidelity, CoVEBench App. F.3: Hungarian-matched trajectory similarity of source and edit."""

    name = "MF"
    paper = "CoVEBench App. F.3 (Motion Fidelity)"
    weights_from = {  # where the official weights are published
        "cotracker_weights": "scaled_offline.pth of facebook/cotracker3 (Hugging Face), as the official CoVEBench "
        "download_assets.py fetches it",
    }
    config_class = MFConfig
    choices = {"tracker": TRACKERS}
    needs_source = True
    scale = "[0,1]"
    imports = ("scipy.optimize",)

    def __init__(self, cfg: MFConfig | None = None):
        super().__init__(cfg)
        if self.cfg.tracker not in TRACKERS:
            raise ValueError(f"metrics.MF.tracker must be one of {TRACKERS}, got {self.cfg.tracker!r}")
        if self.cfg.tracker == "cotracker":
            cotracker_resolution(self.cfg)  # a bad value fails here, before any compute
        self.tracker: PointTracker | None = None

    def resources(self) -> dict:
        return {"num_gpus": 0.5} if self.cfg.tracker == "cotracker" and str(self.cfg.device).startswith("cuda") else {}

    def in_pool(self) -> bool:
        return self.cfg.tracker == "cotracker"  # CoTracker's weights load once per pool actor

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        return (
            weights_problem(cfg.cotracker_weights, "metrics.MF.cotracker_weights", "CoTracker3")
            if cfg.tracker == "cotracker"
            else []
        )

    def setup(self) -> None:
        self.tracker = build_tracker(self.cfg)

    def frame_view(self) -> FrameView:
        """``INTER_AREA`` to size x size (RGB, as the official script resizes for its tracker); LK then reads
        grayscale, so its view ends with it (the grayscale of the resized frame, LK's own order)."""
        size = AreaResize(int(self.cfg.size))
        return FrameView((size, Gray())) if self.cfg.tracker == "lk" else FrameView((size,))

    def summarize(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Track the resized frames and summarise each trajectory as (position, velocity)."""
        return self.summarize_many([frames])[0]

    def summarize_many(self, videos: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``summarize`` of each video; CoTracker batches them into shared forward passes."""
        view = self.frame_view()
        return self.summarize_views([view.stack(v) for v in videos])

    def summarize_views(self, videos: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``summarize_many`` of videos already through ``frame_view()``."""
        if self.tracker is None:
            self.setup()
        many = getattr(self.tracker, "track_many", None)
        tracked = many(videos) if many else [self.tracker.track(v) for v in videos]
        return [summarize_tracks(*t) for t in tracked]

    def check_inputs(self, edited: np.ndarray, source: np.ndarray | None) -> None:
        if source is None:
            raise ValueError("MF compares against the source video, but no source frames were given")
        for what, frames in (("the source video", source), ("the edited video", edited)):
            if len(frames) < 2:  # a velocity needs two frames
                raise VideoTooShortError("MF", len(frames), 2, what)

    def score(self, src: tuple[np.ndarray, np.ndarray], edit: tuple[np.ndarray, np.ndarray]) -> float:
        dmax = math.sqrt(2.0) * int(self.cfg.size)
        return motion_fidelity(*src, *edit, float(self.cfg.alpha), dmax, float(self.cfg.eps))

    def compute_views(self, edited: np.ndarray, source: np.ndarray | None) -> float:
        """MF of App. F.3 on both videos' views: track, summarise, match."""
        self.check_inputs(edited, source)
        src, edit = self.summarize_views([source, edited])
        return self.score(src, edit)

    def compute_many(self, items) -> list:
        """Every case's source and edited video tracked together (CoTracker: shared forward passes); a case
        whose inputs are unusable gets its own exception, as ``compute`` would raise it."""
        out: list = [None] * len(items)
        ok = []
        for i, (edited, source, _kwargs) in enumerate(items):
            try:
                self.check_inputs(edited, source)
                ok.append(i)
            except Exception as exc:  # this case's failure only
                out[i] = exc
        summaries = self.summarize_many([v for i in ok for v in (items[i][1], items[i][0])]) if ok else []
        for k, i in enumerate(ok):
            out[i] = self.score(summaries[2 * k], summaries[2 * k + 1])
        return out
