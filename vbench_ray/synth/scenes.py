"""Procedural scenes for synthetic benchmarks: coloured shapes moving over a textured background.

A :class:`Scene` is a small, JSON-serialisable description (background, shapes with motion paths,
a global colour map and a camera zoom). :func:`render_scene` turns it into uint8 RGB frames
``(T, H, W, 3)``; every pixel is evaluated analytically in scene coordinates, so an edit is made by
changing a parameter and rendering again (a new colour, a shape fewer, the path reversed, a zoomed
camera), never by post-processing pixels of another video. The same spec always renders to the same
frames, which makes the ground truth of a synthetic benchmark recomputable from its manifest
(:func:`scene_from_dict`, :func:`shape_coverage`).

Coordinates are pixels of the unzoomed frame: x to the right, y downwards, origin at the top-left
corner, pixel ``(i, j)`` centred at ``(j + 0.5, i + 0.5)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import numpy as np

__all__ = [
    "SHAPE_KINDS",
    "SHAPE_COLORS",
    "BACKGROUND_KINDS",
    "BACKGROUND_PALETTES",
    "COLORMAPS",
    "Shape",
    "Background",
    "Scene",
    "render_scene",
    "render_frame",
    "shape_coverage",
    "shape_center",
    "apply_colormap",
    "scene_to_dict",
    "scene_from_dict",
    "replace",
]

SHAPE_KINDS = ("circle", "square", "triangle", "diamond")

# Saturated colours that stand out against every background palette below.
SHAPE_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "blue": (40, 80, 230),
    "green": (30, 180, 60),
    "yellow": (240, 210, 30),
    "purple": (150, 50, 200),
    "orange": (245, 130, 20),
    "cyan": (30, 210, 220),
    "magenta": (230, 40, 190),
}

BACKGROUND_KINDS = ("mottled", "stripes", "gradient")

# Muted two-tone palettes: (dark, light) ends of the texture.
BACKGROUND_PALETTES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "sand": ((150, 128, 95), (205, 185, 145)),
    "slate": ((55, 65, 80), (110, 122, 140)),
    "moss": ((50, 75, 45), (105, 130, 85)),
    "sky-blue": ((105, 140, 185), (170, 200, 230)),
    "dusty-rose": ((150, 100, 110), (205, 160, 170)),
    "charcoal": ((30, 30, 34), (80, 80, 88)),
}

_PALETTE_TEXT = {
    "sand": "sand-coloured",
    "slate": "slate-grey",
    "moss": "moss-green",
    "sky-blue": "sky-blue",
    "dusty-rose": "dusty-rose",
    "charcoal": "charcoal-grey",
}

COLORMAPS = ("none", "invert", "sepia", "posterize", "grayscale")

_SEPIA = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]], np.float32)


@dataclass(frozen=True)
class Shape:
    """A filled shape moving from ``start`` to ``end`` (pixels) with a sinusoidal sideways wobble.

    ``radius`` is the half-size in pixels. With ``reverse`` the path is travelled from ``end`` to
    ``start`` (the same positions, in the opposite temporal order).
    """

    kind: str
    color_name: str
    color: tuple[int, int, int]
    radius: float
    start: tuple[float, float]
    end: tuple[float, float]
    wobble: float = 0.0
    wobble_cycles: float = 1.0
    wobble_phase: float = 0.0
    reverse: bool = False

    def __post_init__(self) -> None:
        if self.kind not in SHAPE_KINDS:
            raise ValueError(f"shape kind must be one of {SHAPE_KINDS}, got {self.kind!r}")
        if self.radius <= 0:
            raise ValueError(f"shape radius must be positive, got {self.radius}")

    def position(self, s: float) -> tuple[float, float]:
        """Centre at normalised time ``s`` in [0, 1] (first to last frame)."""
        if self.reverse:
            s = 1.0 - s
        (x0, y0), (x1, y1) = self.start, self.end
        dx, dy = x1 - x0, y1 - y0
        norm = math.hypot(dx, dy) or 1.0
        px, py = -dy / norm, dx / norm  # unit normal to the path
        off = self.wobble * math.sin(2.0 * math.pi * self.wobble_cycles * s + self.wobble_phase)
        return (x0 + dx * s + px * off, y0 + dy * s + py * off)

    @property
    def direction(self) -> str:
        """Dominant direction of travel as seen on screen: 'left to right', 'top to bottom', ..."""
        (x0, y0), (x1, y1) = (self.end, self.start) if self.reverse else (self.start, self.end)
        dx, dy = x1 - x0, y1 - y0
        if abs(dx) >= abs(dy):
            return "left to right" if dx > 0 else "right to left"
        return "top to bottom" if dy > 0 else "bottom to top"

    @property
    def label(self) -> str:
        return f"{self.color_name} {self.kind}"


@dataclass(frozen=True)
class Background:
    """A static two-tone texture: ``kind`` in :data:`BACKGROUND_KINDS`, colours from ``palette``."""

    kind: str
    palette: str
    seed: int
    angle: float = 0.0  # degrees: direction of stripes / gradient
    period: float = 16.0  # pixels: stripe period
    c0: tuple[int, int, int] = field(default=(0, 0, 0))
    c1: tuple[int, int, int] = field(default=(255, 255, 255))

    def __post_init__(self) -> None:
        if self.kind not in BACKGROUND_KINDS:
            raise ValueError(f"background kind must be one of {BACKGROUND_KINDS}, got {self.kind!r}")

    @property
    def label(self) -> str:
        text = {"mottled": "mottled texture", "stripes": "diagonal stripes", "gradient": "smooth gradient"}
        return f"{_PALETTE_TEXT.get(self.palette, self.palette)} {text[self.kind]}"


@dataclass(frozen=True)
class Scene:
    width: int
    height: int
    frames: int
    background: Background
    shapes: tuple[Shape, ...] = ()
    colormap: str = "none"
    zoom_end: float = 1.0  # camera zoom factor reached at the last frame (1 = static camera)

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0 or self.frames <= 0:
            raise ValueError(
                f"scene size and frame count must be positive, got {self.width}x{self.height}x{self.frames}"
            )
        if self.colormap not in COLORMAPS:
            raise ValueError(f"colormap must be one of {COLORMAPS}, got {self.colormap!r}")
        if self.zoom_end <= 0:
            raise ValueError(f"zoom_end must be positive, got {self.zoom_end}")

    def time(self, frame: int) -> float:
        return frame / (self.frames - 1) if self.frames > 1 else 0.0

    def zoom(self, frame: int) -> float:
        return 1.0 + (self.zoom_end - 1.0) * self.time(frame)


# ----------------------------------------------------------------------------------------- rendering


def _value_noise(seed: int, cell: float, x: np.ndarray, y: np.ndarray, width: int, height: int) -> np.ndarray:
    """Smooth value noise in [0, 1]: random values on a grid of ``cell`` pixels, smoothstep-interpolated."""
    gw = int(math.ceil(width / cell)) + 3
    gh = int(math.ceil(height / cell)) + 3
    grid = np.random.default_rng(seed).random((gh, gw)).astype(np.float32)
    gx = np.clip(x / cell + 1.0, 0.0, gw - 1.001)
    gy = np.clip(y / cell + 1.0, 0.0, gh - 1.001)
    ix, iy = np.floor(gx).astype(np.int64), np.floor(gy).astype(np.int64)
    fx, fy = gx - ix, gy - iy
    fx = fx * fx * (3.0 - 2.0 * fx)
    fy = fy * fy * (3.0 - 2.0 * fy)
    top = grid[iy, ix] * (1 - fx) + grid[iy, ix + 1] * fx
    bot = grid[iy + 1, ix] * (1 - fx) + grid[iy + 1, ix + 1] * fx
    return top * (1 - fy) + bot * fy


def _ramp(x: np.ndarray, y: np.ndarray, ca: float, sa: float, width: int, height: int) -> np.ndarray:
    """Linear ramp along (ca, sa): 0 at the frame corner where it is lowest, 1 at the opposite one."""
    corners = [0.0, width * ca, height * sa, width * ca + height * sa]
    lo, hi = min(corners), max(corners)
    return (x * ca + y * sa - lo) / max(hi - lo, 1e-6)


def _background(bg: Background, x: np.ndarray, y: np.ndarray, width: int, height: int) -> np.ndarray:
    base = min(width, height)
    a = math.radians(bg.angle)
    ca, sa = math.cos(a), math.sin(a)
    if bg.kind == "mottled":
        n1 = _value_noise(bg.seed, base / 4.0, x, y, width, height)
        n2 = _value_noise(bg.seed + 1, base / 10.0, x, y, width, height)
        ramp = _ramp(x, y, ca, sa, width, height)
        v = 0.55 * n1 + 0.25 * n2 + 0.3 * ramp
    elif bg.kind == "stripes":
        phase = 2.0 * math.pi * (x * ca + y * sa) / bg.period
        n = _value_noise(bg.seed, base / 6.0, x, y, width, height)
        v = 0.5 + 0.38 * np.sin(phase) + 0.2 * (n - 0.5)
    else:  # gradient
        ramp = _ramp(x, y, ca, sa, width, height)
        n = _value_noise(bg.seed, base / 5.0, x, y, width, height)
        v = 0.85 * ramp + 0.15 * n
    v = np.clip(v, 0.0, 1.0)[..., None]
    c0 = np.asarray(bg.c0, np.float32)
    c1 = np.asarray(bg.c1, np.float32)
    return (c0 + (c1 - c0) * v).astype(np.float32)


def _signed_distance(shape: Shape, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Approximate signed distance (pixels, negative inside) from the shape's outline."""
    r = shape.radius
    if shape.kind == "circle":
        return np.sqrt(dx * dx + dy * dy) - r
    if shape.kind == "square":
        return np.maximum(np.abs(dx), np.abs(dy)) - 0.85 * r
    if shape.kind == "diamond":
        return (np.abs(dx) + np.abs(dy) - 1.2 * r) / math.sqrt(2.0)
    # triangle pointing up, centred on its centroid, circumradius 1.3 r
    big = 1.3 * r
    h = big / 2.0
    c, s = math.sqrt(3.0) / 2.0, 0.5
    return np.maximum.reduce([dy - h, c * dx - s * dy - h, -c * dx - s * dy - h])


def _camera_grid(scene: Scene, frame: int) -> tuple[np.ndarray, np.ndarray, float]:
    z = scene.zoom(frame)
    w, h = scene.width, scene.height
    px = (np.arange(w, dtype=np.float32) + 0.5 - w / 2.0) / z + w / 2.0
    py = (np.arange(h, dtype=np.float32) + 0.5 - h / 2.0) / z + h / 2.0
    x, y = np.meshgrid(px, py)
    return x, y, z


def shape_center(scene: Scene, shape_index: int, frame: int) -> tuple[float, float]:
    """Centre of a shape at ``frame`` in output-pixel coordinates (after the camera zoom)."""
    cx, cy = scene.shapes[shape_index].position(scene.time(frame))
    z = scene.zoom(frame)
    w, h = scene.width, scene.height
    return ((cx - w / 2.0) * z + w / 2.0, (cy - h / 2.0) * z + h / 2.0)


def shape_coverage(scene: Scene, shape_index: int, frame: int, visible_only: bool = True) -> np.ndarray:
    """Fraction ``(H, W)`` in [0, 1] of each output pixel covered by shape ``shape_index`` at ``frame``.

    With ``visible_only`` the coverage of shapes drawn on top of it (later in ``scene.shapes``) is
    taken away, so the result is what is actually seen of that shape.
    """
    x, y, z = _camera_grid(scene, frame)
    s = scene.time(frame)
    cov = _coverage(scene.shapes[shape_index], s, x, y, z)
    if visible_only:
        for other in scene.shapes[shape_index + 1 :]:
            cov = cov * (1.0 - _coverage(other, s, x, y, z))
    return cov


def _coverage(shape: Shape, s: float, x: np.ndarray, y: np.ndarray, z: float) -> np.ndarray:
    cx, cy = shape.position(s)
    sd = _signed_distance(shape, x - cx, y - cy)
    return np.clip(0.5 - sd * z, 0.0, 1.0)  # one output pixel of anti-aliasing


def apply_colormap(frames: np.ndarray, colormap: str) -> np.ndarray:
    """Global colour map on float RGB in [0, 255] (any leading shape). Returns float32."""
    f = np.asarray(frames, np.float32)
    if colormap == "none":
        return f
    if colormap == "invert":
        return 255.0 - f
    if colormap == "sepia":
        return np.clip(f @ _SEPIA.T, 0.0, 255.0)
    if colormap == "grayscale":
        g = f @ np.array([0.299, 0.587, 0.114], np.float32)
        return np.repeat(g[..., None], 3, axis=-1)
    if colormap == "posterize":
        levels = 3
        step = 255.0 / (levels - 1)
        return np.round(np.round(f / step) * step)
    raise ValueError(f"colormap must be one of {COLORMAPS}, got {colormap!r}")


def render_frame(scene: Scene, frame: int, _bg_cache: dict | None = None) -> np.ndarray:
    """One uint8 RGB frame ``(H, W, 3)``."""
    x, y, z = _camera_grid(scene, frame)
    key = round(z, 9)
    if _bg_cache is not None and key in _bg_cache:
        img = _bg_cache[key].copy()
    else:
        img = _background(scene.background, x, y, scene.width, scene.height)
        if _bg_cache is not None:
            _bg_cache[key] = img.copy()
    s = scene.time(frame)
    for shape in scene.shapes:
        cov = _coverage(shape, s, x, y, z)[..., None]
        img = img * (1.0 - cov) + np.asarray(shape.color, np.float32) * cov
    img = apply_colormap(img, scene.colormap)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def render_scene(scene: Scene) -> np.ndarray:
    """All frames, uint8 RGB ``(T, H, W, 3)``. Deterministic: the spec alone decides every pixel."""
    cache: dict = {}
    return np.stack([render_frame(scene, i, cache) for i in range(scene.frames)])


# ------------------------------------------------------------------------------------ serialisation


def scene_to_dict(scene: Scene) -> dict[str, Any]:
    return asdict(scene)


def _tuple(v: Sequence) -> tuple:
    return tuple(_tuple(x) if isinstance(x, (list, tuple)) else x for x in v)


def scene_from_dict(d: dict[str, Any]) -> Scene:
    bg = dict(d["background"])
    for k in ("c0", "c1"):
        bg[k] = _tuple(bg[k])
    shapes = []
    for sd in d.get("shapes", ()):
        sd = dict(sd)
        for k in ("color", "start", "end"):
            sd[k] = _tuple(sd[k])
        shapes.append(Shape(**sd))
    return Scene(
        width=int(d["width"]),
        height=int(d["height"]),
        frames=int(d["frames"]),
        background=Background(**bg),
        shapes=tuple(shapes),
        colormap=d.get("colormap", "none"),
        zoom_end=float(d.get("zoom_end", 1.0)),
    )
