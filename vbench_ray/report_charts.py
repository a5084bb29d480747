"""The report's charts (:mod:`vbench_ray.report` assembles the page): the figures of :mod:`vbench_ray.figures` as
inline SVG, grouped into the page's sections, and each also as a PNG in ``RUN_DIR/figures/``.

The breakdown figures are the benchmark's (``Benchmark.report_figures``: its paper's category order, a method x
material grid), or one bar chart per metric of each breakdown when the summary names no registered benchmark; then
one figure per swept axis and metric (:func:`vbench_ray.figures.sweep_figures`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vbench_ray.figure_draw import _ticks
from vbench_ray.report_style import _esc, _fmt, _fmt_int, _num, _scale_bounds, _section

log = logging.getLogger(__name__)


def breakdown_figures(summary: dict) -> list[dict]:
    """The benchmark's breakdown figures (``Benchmark.report_figures``), else the generic ones."""
    from vbench_ray.figures import breakdowns

    name = summary.get("benchmark")
    try:
        import vbench_ray.benchmarks  # noqa: F401  (registers every benchmark)
        from vbench_ray.benchmarks.base import BENCHMARKS

        bench = BENCHMARKS[name] if isinstance(name, str) and name in BENCHMARKS else None
    except ImportError as exc:  # the report is drawn from summary.json alone: never fail for want of a module
        log.warning("benchmark %r not loaded; generic breakdown figures: %s", name, exc)
        bench = None
    return bench.report_figures(summary) if bench is not None else breakdowns(summary)


def report_figures(summary: dict) -> list[dict]:
    """Every figure of the report (:mod:`vbench_ray.figures`): the breakdowns, then the sweep's axes."""
    from vbench_ray import figures

    scales = {name: (m or {}).get("scale") for name, m in (summary.get("metrics") or {}).items()}
    out = breakdown_figures(summary)
    by_variant = summary.get("by_variant")
    if isinstance(by_variant, dict):
        out += figures.sweep_figures(
            summary.get("sweep"), by_variant, figures.metric_names(by_variant.values(), scales), scales
        )
    return out


def write_figure_pngs(summary: dict, folder: Path) -> list[Path]:
    """Each report figure as ``folder/<id>.png`` (for papers and slides)."""
    from vbench_ray.figure_draw import to_png
    from vbench_ray.figures import slug

    paths = []
    for fig in report_figures(summary):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{slug(fig['id'])}.png"
        path.write_bytes(to_png(fig))
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------- sections


def breakdown_sections(figs: list[dict], scales: dict) -> str:
    """The breakdown figures by section ("By category" always, with a line when the summary has none), each
    section's note (the paper's table or figure it follows) under its heading."""
    sections: dict[str, list[dict]] = {"By category": []}
    for fig in figs:
        sections.setdefault(fig.get("section", "By category"), []).append(fig)
    out = []
    for name, members in sections.items():
        if not members:
            out.append(_section(name, '<p class="empty">No per-category breakdown in summary.json.</p>'))
            continue
        note = next((f["note"] for f in members if f.get("note")), "")
        charts = "".join(_figure(f, scales, f["metric"]) for f in members)
        out.append(
            _section(name, (f'<p class="sub">{_esc(note)}</p>' if note else "") + f'<div class="charts">{charts}</div>')
        )
    return "\n".join(out)


def sweep_section(sweep: Any, figs: list[dict], scales: dict) -> str:
    """Score against each swept axis: a line with its CI for numeric axes (fps, resolution, each noise kind's
    level) in numeric order, base as a dashed line; bars for input order and negative controls."""
    blocks: dict[str, list[str]] = {}
    for fig in figs:
        blocks.setdefault(fig["axis"], []).append(_figure(fig, scales, fig["title"]))
    if not blocks:
        return ""
    body = "".join(
        f'<h3>{_esc(axis)}</h3><div class="charts">{"".join(charts)}</div>' for axis, charts in blocks.items()
    )
    return _section(f"Sweep: {(sweep or {}).get('name', '')}", body)


def _figure(fig: dict, scales: dict, caption: str) -> str:
    from vbench_ray.figure_draw import heat_svg, line_svg

    if fig["kind"] == "line":
        svg = line_svg(fig)
    elif fig["kind"] == "heat":
        svg = heat_svg(fig)
    else:
        per = {
            r[0]: {"value": r[1], "ci95": [r[2], r[3]] if r[2] is not None else None, "n": r[4]} for r in fig["rows"]
        }
        svg = _bar_chart(fig["metric"], per, scales.get(fig["metric"]))
    return f'<figure class="chart" id="fig-{_esc(fig["id"])}"><figcaption>{_esc(caption)}</figcaption>{svg}</figure>'


# ----------------------------------------------------------------------------- bars

_LABEL_W, _PLOT_W, _VALUE_W, _ROW_H, _TOP, _AXIS_H = 140, 260, 110, 24, 6, 22


def _bar_chart(metric: str, per_cat: dict[str, dict], scale: Any) -> str:
    rows = [(cat, _num(d.get("value")), _ci_pair(d.get("ci95")), d.get("n")) for cat, d in per_cat.items()]
    lo, hi = _domain(rows, scale)
    width, plot_h = _LABEL_W + _PLOT_W + _VALUE_W, _ROW_H * len(rows)
    height = _TOP + plot_h + _AXIS_H

    def x(v: float) -> float:
        return round(_LABEL_W + (v - lo) / (hi - lo) * _PLOT_W, 2)

    parts = [
        f'<svg class="bars" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{_esc(metric)} by category">'
    ]
    for t in _ticks(lo, hi):
        parts.append(
            f'<line class="grid" x1="{x(t)}" x2="{x(t)}" y1="{_TOP}" y2="{_TOP + plot_h}"/>'
            f'<text class="tick" x="{x(t)}" y="{_TOP + plot_h + 15}">{_esc(f"{t:.6g}")}</text>'
        )
    if lo < 0 < hi:
        parts.append(f'<line class="zero" x1="{x(0)}" x2="{x(0)}" y1="{_TOP}" y2="{_TOP + plot_h}"/>')
    for i, (cat, value, ci, n) in enumerate(rows):
        parts.append(_bar_row(_TOP + i * _ROW_H, cat, value, ci, n, x, scale))
    parts.append("</svg>")
    return "".join(parts)


def _bar_row(y: float, cat: str, value, ci, n, x, scale) -> str:
    mid = y + _ROW_H / 2
    short = cat if len(cat) <= 22 else cat[:21] + "…"
    out = [f'<text class="cat" x="{_LABEL_W - 6}" y="{mid}" dy="0.35em"><title>{_esc(cat)}</title>{_esc(short)}</text>']
    if value is not None:
        x0, x1 = sorted((x(0.0), x(value)))
        width = max(round(x1 - x0, 2), 1)  # a zero value still shows a sliver
        out.append(f'<rect class="bar" x="{x0}" y="{y + 4}" width="{width}" height="{_ROW_H - 8}"/>')
    if ci is not None:
        a, b = x(ci[0]), x(ci[1])
        out.append(f'<path class="whisker" d="M{a},{mid}H{b}M{a},{mid - 5}V{mid + 5}M{b},{mid - 5}V{mid + 5}"/>')
    label = f"{_fmt(value, scale)}  n={_fmt_int(n)}" if value is not None else f"n/a  n={_fmt_int(n)}"
    cls = "val" if value is not None else "val na"
    out.append(f'<text class="{cls}" x="{_LABEL_W + _PLOT_W + 8}" y="{mid}" dy="0.35em">{_esc(label)}</text>')
    return "".join(out)


def _ci_pair(ci: Any) -> tuple[float, float] | None:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None
    a, b = _num(ci[0]), _num(ci[1])
    return (min(a, b), max(a, b)) if a is not None and b is not None else None


def _domain(rows: list, scale: Any) -> tuple[float, float]:
    """The x range: zero, the scale's interval if it has one, every value and CI end."""
    points = [0.0, *(_scale_bounds(scale) or ())]
    for _, value, ci, _ in rows:
        points += [p for p in (value, *(ci or ())) if p is not None]
    lo, hi = min(points), max(points)
    if hi - lo <= 0:
        hi = lo + 1.0
    return lo, hi
