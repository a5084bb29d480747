"""The report's figures (:mod:`vbench_ray.figures`: figures as data) drawn twice: inline SVG for ``report.html`` and a
PNG in ``RUN_DIR/figures/``, drawn with Pillow (no browser, no plotting library) on the same geometry as the SVG.
A value is written by its metric's scale (the figure's ``scale``), as the report's tables write it."""

from __future__ import annotations

import io
import math

from vbench_ray.report_style import _esc, _fmt as value_text

W, H, LEFT, RIGHT, TOP, BOTTOM = 420, 250, 56, 16, 26, 42
LEGEND_X, LEGEND_Y = W - RIGHT - 104, TOP - 10  # a line chart's base legend: a dashed sample, then its value


# ----------------------------------------------------------------------------- geometry


def _ticks(lo: float, hi: float, target: int = 4) -> list[float]:
    raw = (hi - lo) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(k * mag for k in (1, 2, 2.5, 5, 10) if k * mag >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    return [round(k * step, 12) for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def _span(values: list[float], pad: float = 0.08) -> tuple[float, float]:
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo <= 0:
        lo, hi = lo - 0.5, hi + 0.5
    d = (hi - lo) * pad
    return lo - d, hi + d


def _line_geometry(fig: dict) -> dict:
    pts = [p for p in fig["points"] if p[1] is not None]
    xs = [p[0] for p in fig["points"]]
    ys = [y for p in pts for y in (p[1], p[2], p[3]) if y is not None] + (
        [fig["base"]] if fig.get("base") is not None else []
    )
    (x0, x1), (y0, y1) = _span(xs), _span(ys)

    def px(x: float) -> float:
        return round(LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT), 2)

    def py(y: float) -> float:
        return round(H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM), 2)

    return {"pts": pts, "px": px, "py": py, "xticks": sorted(set(xs)), "yticks": _ticks(y0, y1)}


def _fmt(v: float) -> str:
    """An axis tick or a sweep setting."""
    return f"{v:.4g}"


def _value(v: float, fig: dict) -> str:
    """A value of the figure's metric as every table and figure of the report writes it: ``report_style._fmt`` by
    the metric's scale (4 significant digits on [0,1] or with no scale, 2 decimals otherwise)."""
    return value_text(v, fig.get("scale"))


# ----------------------------------------------------------------------------- SVG


def line_svg(fig: dict) -> str:
    g = _line_geometry(fig)
    px, py, pts = g["px"], g["py"], g["pts"]
    out = [
        f'<svg class="line-chart" data-axis="{_esc(fig.get("axis", ""))}" data-metric="{_esc(fig["metric"])}" '
        f'width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="{_esc(fig["title"])}">'
    ]
    for t in g["yticks"]:
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{py(t)}" y2="{py(t)}"/>'
            f'<text class="tick" x="{LEFT - 4}" y="{py(t)}" dy="0.35em" text-anchor="end">{_fmt(t)}</text>'
        )
    for t in g["xticks"]:
        out.append(f'<text class="tick" x="{px(t)}" y="{H - BOTTOM + 14}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(
        f'<text class="axis-label" x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">'
        f'{_esc(fig["x_label"])}</text>'
    )
    band = [p for p in pts if p[2] is not None and p[3] is not None]
    if len(band) >= 2:
        poly = [f"{px(p[0])},{py(p[3])}" for p in band] + [f"{px(p[0])},{py(p[2])}" for p in reversed(band)]
        out.append(f'<polygon class="ci-band" points="{" ".join(poly)}"/>')
    if fig.get("base") is not None:
        b = py(fig["base"])
        out.append(
            f'<line class="base" x1="{LEFT}" x2="{W - RIGHT}" y1="{b}" y2="{b}"/>'
            # its legend above the plot, top right: a label on the line itself sat on the last point
            f'<line class="base" x1="{LEGEND_X}" x2="{LEGEND_X + 20}" y1="{LEGEND_Y}" y2="{LEGEND_Y}"/>'
            f'<text class="base-label" x="{LEGEND_X + 24}" y="{LEGEND_Y}" dy="0.35em">'
            f"base {_value(fig['base'], fig)}</text>"
        )
    if pts:
        out.append('<polyline class="line" points="' + " ".join(f"{px(p[0])},{py(p[1])}" for p in pts) + '"/>')
    for x, v, lo, hi, n in pts:
        if lo is not None and hi is not None:
            out.append(f'<path class="whisker" d="M{px(x)},{py(lo)}V{py(hi)}"/>')
        out.append(
            f'<circle class="pt" data-x="{x}" data-value="{v}" cx="{px(x)}" cy="{py(v)}" r="3.5">'
            f'<title>{_esc(fig["x_label"])} {_fmt(x)}: {_value(v, fig)}'
            + (f" [{_value(lo, fig)}, {_value(hi, fig)}]" if lo is not None and hi is not None else "")
            + f" n={_esc(n)}</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


HEAT_LABEL_W, HEAT_CELL_W, HEAT_CELL_H, HEAT_HEAD_H, HEAT_LEGEND_H = 150, 84, 30, 30, 22
_LIGHT, _DARK = (238, 244, 251), (31, 95, 168)


def heat_legend(fig: dict) -> str:
    """What the shade means: darker is better, for a lower-is-better metric (BG_MSE) the lower value."""
    hib = fig.get("higher_is_better")
    return "darker = higher value" if hib is None else f"darker = better ({'higher' if hib else 'lower'} is better)"


def _heat_cells(fig: dict):
    """Each cell's place, fill and text colour: ``(i, j, (value, lo, hi, n), x, y, fill, ink)``; the fill runs from
    light (the figure's worst value) to dark blue (its best: the highest, or the lowest where ``higher_is_better``
    is False), a missing value grey."""
    values = [c[0] for row in fig["cells"] for c in row if c[0] is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    flip = fig.get("higher_is_better") is False
    for i, row in enumerate(fig["cells"]):
        for j, cell in enumerate(row):
            x, y = HEAT_LABEL_W + HEAT_CELL_W * j, HEAT_HEAD_H + HEAT_CELL_H * i
            if cell[0] is None:
                yield i, j, cell, x, y, (238, 238, 238), (120, 120, 120)
                continue
            t = 0.5 if hi <= lo else (cell[0] - lo) / (hi - lo)
            t = 1.0 - t if flip else t
            fill = tuple(round(a + (b - a) * t) for a, b in zip(_LIGHT, _DARK))
            yield i, j, cell, x, y, fill, (255, 255, 255) if t > 0.55 else (20, 20, 20)


def heat_size(fig: dict) -> tuple[int, int]:
    width = max(HEAT_LABEL_W + HEAT_CELL_W * len(fig["cols"]) + 8, 360)  # room for the legend under a narrow grid
    return width, HEAT_HEAD_H + HEAT_CELL_H * len(fig["rows"]) + HEAT_LEGEND_H + 8


def _heat_legend_at(fig: dict) -> tuple[int, int]:
    """The legend's left and middle: under the grid, from the first column."""
    return HEAT_LABEL_W, HEAT_HEAD_H + HEAT_CELL_H * len(fig["rows"]) + HEAT_LEGEND_H // 2 + 2


def heat_svg(fig: dict) -> str:
    """A grid, rows x columns, each cell its value on a shade of how good it is (the legend under the grid says
    which way); hover: the 95% CI and n."""
    width, height = heat_size(fig)
    out = [
        f'<svg class="heat" data-metric="{_esc(fig["metric"])}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(fig["title"])}">'
    ]
    for j, col in enumerate(fig["cols"]):
        out.append(
            f'<text class="col" x="{HEAT_LABEL_W + HEAT_CELL_W * (j + 0.5)}" y="{HEAT_HEAD_H - 10}" '
            f'text-anchor="middle"><title>{_esc(col)}</title>{_esc(_short(col, 12))}</text>'
        )
    for i, row in enumerate(fig["rows"]):
        out.append(
            f'<text class="row" x="{HEAT_LABEL_W - 6}" y="{HEAT_HEAD_H + HEAT_CELL_H * (i + 0.5)}" dy="0.35em" '
            f'text-anchor="end"><title>{_esc(row)}</title>{_esc(_short(row, 22))}</text>'
        )
    for i, j, (v, lo, hi, n), x, y, fill, ink in _heat_cells(fig):
        ci = f" [{_value(lo, fig)}, {_value(hi, fig)}]" if lo is not None and hi is not None else ""
        tip = (
            f"{fig['rows'][i]} × {fig['cols'][j]}: " + (_value(v, fig) if v is not None else "no value") + f"{ci} n={n}"
        )
        out.append(
            f'<rect class="cell" data-row="{_esc(fig["rows"][i])}" data-col="{_esc(fig["cols"][j])}" '
            f'data-value="{"" if v is None else v}" x="{x}" y="{y}" width="{HEAT_CELL_W - 2}" '
            f'height="{HEAT_CELL_H - 2}" fill="rgb{fill}"><title>{_esc(tip)}</title></rect>'
            f'<text class="cell-val" x="{x + (HEAT_CELL_W - 2) / 2}" y="{y + (HEAT_CELL_H - 2) / 2}" dy="0.35em" '
            f'text-anchor="middle" fill="rgb{ink}">{_value(v, fig) if v is not None else "–"}</text>'
        )
    lx, ly = _heat_legend_at(fig)
    out.append(
        f'<g class="legend"><rect x="{lx}" y="{ly - 6}" width="12" height="12" fill="rgb{_LIGHT}" stroke="#ccc"/>'
        f'<rect x="{lx + 14}" y="{ly - 6}" width="12" height="12" fill="rgb{_DARK}"/>'
        f'<text x="{lx + 32}" y="{ly}" dy="0.35em">{_esc(heat_legend(fig))}</text></g>'
    )
    out.append("</svg>")
    return "".join(out)


# ----------------------------------------------------------------------------- PNG


def _font(size: int = 12):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def to_png(fig: dict, bars_svg_geometry: dict | None = None) -> bytes:
    """The figure as a PNG (2x the SVG's pixels), with its title on top."""
    from PIL import Image, ImageDraw

    s = 2
    if fig["kind"] == "line":
        width, height = W, H
    elif fig["kind"] == "heat":
        width, height = heat_size(fig)
        width = max(width, 360)
        height += TOP + 14 * len(_note_lines(fig, width))
    else:
        width = 520
        height = TOP + 14 * len(_note_lines(fig, width)) + 24 * len(fig["rows"]) + BOTTOM
    img = Image.new("RGB", (width * s, height * s), "white")
    d = ImageDraw.Draw(img)
    d.text((8 * s, 6 * s), fig["title"], fill="black", font=_font(13 * s))
    {"line": _line_png, "heat": _heat_png}.get(fig["kind"], _bars_png)(fig, d, s, width, height)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _line_png(fig: dict, d, s: int, width: int, height: int) -> None:
    g = _line_geometry(fig)
    px, py, pts, f = g["px"], g["py"], g["pts"], _font(10 * s)
    for t in g["yticks"]:
        d.line([(LEFT * s, py(t) * s), ((W - RIGHT) * s, py(t) * s)], fill="#e5e5e5", width=s)
        d.text(((LEFT - 4) * s, py(t) * s), _fmt(t), fill="#555", font=f, anchor="rm")
    for t in g["xticks"]:
        d.text((px(t) * s, (H - BOTTOM + 8) * s), _fmt(t), fill="#555", font=f, anchor="mt")
    d.text(((LEFT + W - RIGHT) / 2 * s, (H - 10) * s), fig["x_label"], fill="#333", font=f, anchor="ms")
    band = [p for p in pts if p[2] is not None and p[3] is not None]
    if len(band) >= 2:
        poly = [(px(p[0]) * s, py(p[3]) * s) for p in band] + [(px(p[0]) * s, py(p[2]) * s) for p in reversed(band)]
        d.polygon(poly, fill="#d6e4f5")
    if fig.get("base") is not None:
        b = py(fig["base"]) * s
        for x in range(LEFT * s, (W - RIGHT) * s, 10 * s):
            d.line([(x, b), (min(x + 5 * s, (W - RIGHT) * s), b)], fill="#888", width=s)
        for x in (LEGEND_X, LEGEND_X + 12):  # the legend, as on the page: above the plot, top right
            d.line([(x * s, LEGEND_Y * s), ((x + 6) * s, LEGEND_Y * s)], fill="#888", width=s)
        d.text(
            ((LEGEND_X + 24) * s, LEGEND_Y * s), f"base {_value(fig['base'], fig)}", fill="#666", font=f, anchor="lm"
        )
    if len(pts) >= 2:
        d.line([(px(p[0]) * s, py(p[1]) * s) for p in pts], fill="#1f5fa8", width=2 * s)
    for x, v, lo, hi, _ in pts:
        if lo is not None and hi is not None:
            d.line([(px(x) * s, py(lo) * s), (px(x) * s, py(hi) * s)], fill="#1f5fa8", width=s)
        r = 3.5 * s
        d.ellipse([px(x) * s - r, py(v) * s - r, px(x) * s + r, py(v) * s + r], fill="#1f5fa8")


def _bars_png(fig: dict, d, s: int, width: int, height: int) -> None:
    from vbench_ray.report_style import _scale_bounds

    rows, f, lines = fig["rows"], _font(10 * s), _note_lines(fig, width)
    for k, line in enumerate(lines):
        d.text((8 * s, (TOP - 2 + 14 * k) * s), line, fill="#555", font=f)
    top = TOP + 14 * len(lines)  # below the title and the note
    label_w, plot_w = 150, 250
    # the metric's own axis (a percent from 0 to 100, as the page draws it), widened to every value and CI end
    vals = [0.0, *(_scale_bounds(fig.get("scale")) or ())] + [y for r in rows for y in r[1:4] if y is not None]
    lo, hi = min(vals), max(vals)
    hi = hi if hi > lo else lo + 1.0

    def x(v: float) -> float:
        return (label_w + (v - lo) / (hi - lo) * plot_w) * s

    for i, (label, v, clo, chi, n) in enumerate(rows):
        y = (top + 24 * i) * s
        mid = y + 12 * s
        d.text(((label_w - 6) * s, mid), str(label)[:24], fill="#333", font=f, anchor="rm")
        if v is not None:
            x0, x1 = sorted((x(0.0), x(v)))
            d.rectangle([x0, y + 4 * s, max(x1, x0 + s), y + 20 * s], fill="#6d9fd6")
        if clo is not None and chi is not None:
            d.line([(x(clo), mid), (x(chi), mid)], fill="#222", width=s)
        d.text(
            ((label_w + plot_w + 8) * s, mid),
            (_value(v, fig) if v is not None else "n/a") + f"  n={n}",
            fill="#333",
            font=f,
            anchor="lm",
        )
    for t in _ticks(lo, hi):
        d.text((x(t), (top + 24 * len(rows) + 6) * s), _fmt(t), fill="#555", font=f, anchor="mt")


def _note_lines(fig: dict, width: int) -> list[str]:
    """The figure's note wrapped to the PNG's width (about 6 px a character at the 10 px font)."""
    import textwrap

    return textwrap.wrap(fig.get("note") or "", width=max(30, (width - 16) // 6))


def _heat_png(fig: dict, d, s: int, width: int, height: int) -> None:
    f, lines = _font(10 * s), _note_lines(fig, width)
    for k, line in enumerate(lines):
        d.text((8 * s, (TOP - 2 + 14 * k) * s), line, fill="#555", font=f)
    dy = TOP + 14 * len(lines)  # below the title and the note
    for j, col in enumerate(fig["cols"]):
        x = HEAT_LABEL_W + HEAT_CELL_W * (j + 0.5)
        d.text((x * s, (dy + HEAT_HEAD_H - 10) * s), _short(col, 12), fill="#333", font=f, anchor="ms")
    for i, row in enumerate(fig["rows"]):
        y = dy + HEAT_HEAD_H + HEAT_CELL_H * (i + 0.5)
        d.text(((HEAT_LABEL_W - 6) * s, y * s), _short(row, 22), fill="#333", font=f, anchor="rm")
    for _, _, (v, *_), x, y, fill, ink in _heat_cells(fig):
        y += dy
        d.rectangle([x * s, y * s, (x + HEAT_CELL_W - 2) * s, (y + HEAT_CELL_H - 2) * s], fill=fill)
        mid = ((x + (HEAT_CELL_W - 2) / 2) * s, (y + (HEAT_CELL_H - 2) / 2) * s)
        d.text(mid, _value(v, fig) if v is not None else "–", fill=ink, font=f, anchor="mm")
    lx, ly = _heat_legend_at(fig)
    ly += dy
    d.rectangle([lx * s, (ly - 6) * s, (lx + 12) * s, (ly + 6) * s], fill=_LIGHT, outline=(204, 204, 204))
    d.rectangle([(lx + 14) * s, (ly - 6) * s, (lx + 26) * s, (ly + 6) * s], fill=_DARK)
    d.text(((lx + 32) * s, ly * s), heat_legend(fig), fill="#333", font=f, anchor="lm")
