"""The leaderboard page's charts as inline SVG (:mod:`vbench_ray.leaderboard_html` assembles the page): each run
against the reference (forest plot: paired bootstrap CI, Holm-adjusted permutation p), rank intervals, and the
CoVEBench analyses' figures (Figure 4: accuracy by complexity bins; Figure 5 left: the metrics' Spearman
correlation heatmap). Every text from the runs is escaped.
"""

from __future__ import annotations

import html
import math
from typing import Any

from vbench_ray.figure_draw import _ticks

NA = "–"


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return NA
    x = float(x)
    x = x + 0.0  # no "-0"
    return f"{x:.1f}" if abs(x) >= 1000 else f"{x:.4g}"


def _fmt_p(p: Any) -> str:
    if p is None:
        return NA
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _ci(ci: Any) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else NA


def _x(v: float, lo: float, hi: float, x0: float, width: float) -> float:
    return x0 + (v - lo) / (hi - lo) * width


def vs_reference(board: dict, metric: str) -> list[dict]:
    """Each other run minus the reference on ``metric``: ``{label, diff, ci95, p_perm_holm, significant, n_shared}``."""
    ref = board["reference"]
    out = []
    for row in board["rows"]:
        if row["label"] == ref:
            continue
        for p in board["pairs"]:
            if p["metric"] != metric or {p["a"], p["b"]} != {row["label"], ref}:
                continue
            sign = 1.0 if p["a"] == row["label"] else -1.0
            ci = p["ci95"]
            out.append(
                {
                    "label": row["label"],
                    "diff": None if p["diff"] is None else sign * p["diff"] + 0.0,
                    "ci95": None if ci is None else sorted([sign * ci[0] + 0.0, sign * ci[1] + 0.0]),
                    "p_perm_holm": p.get("p_perm_holm"),
                    "significant": p.get("significant"),
                    "n_shared": p["n_shared"],
                }
            )
    return out


def forest_svg(board: dict, metric: str) -> str:
    """Each run minus the reference on ``metric``: point and 95% paired bootstrap CI; zero line; filled
    marker = significant after Holm."""
    rows = [r for r in vs_reference(board, metric) if r["diff"] is not None]
    if not rows:
        return ""
    pts = [0.0] + [r["diff"] for r in rows] + [c for r in rows for c in (r["ci95"] or [])]
    lo, hi = min(pts), max(pts)
    if hi - lo <= 0:
        lo, hi = lo - 1.0, hi + 1.0
    pad = 0.05 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    label_w, width, row_h, top = 190, 360, 26, 10
    h = top + row_h * len(rows) + 30
    out = [
        f"<svg class=\"forest\" data-metric=\"{_esc(metric)}\" width=\"{label_w + width + 280}\" height=\"{h}\" "
        f"role=\"img\" aria-label=\"{_esc(metric)} minus {_esc(board['reference'])}\">"
    ]
    zx = _x(0.0, lo, hi, label_w, width)
    out.append(
        f"<line x1=\"{zx:.1f}\" x2=\"{zx:.1f}\" y1=\"{top - 4}\" y2=\"{top + row_h * len(rows)}\" "
        "stroke=\"#888\" stroke-dasharray=\"3,3\"/>"
    )
    for i, r in enumerate(rows):
        y = top + row_h * i + row_h / 2
        out.append(f"<text class=\"lab\" x=\"{label_w - 8}\" y=\"{y + 4:.1f}\">{_esc(r['label'])}</text>")
        if r["ci95"]:
            x1, x2 = (_x(c, lo, hi, label_w, width) for c in r["ci95"])
            out.append(
                f"<line x1=\"{x1:.1f}\" x2=\"{x2:.1f}\" y1=\"{y:.1f}\" y2=\"{y:.1f}\" "
                "stroke=\"#4c78a8\" stroke-width=\"2\"/>"
            )
        x = _x(r["diff"], lo, hi, label_w, width)
        fill = "#4c78a8" if r["significant"] else "#fff"
        out.append(
            f"<circle class=\"pt\" data-model=\"{_esc(r['label'])}\" cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"5\" "
            f"fill=\"{fill}\" stroke=\"#4c78a8\" stroke-width=\"2\"/>"
        )
        out.append(
            f"<text x=\"{label_w + width + 10}\" y=\"{y + 4:.1f}\">{_fmt(r['diff'])} {_ci(r['ci95'])}"
            f" p={_fmt_p(r['p_perm_holm'])}</text>"
        )
    axis_y = top + row_h * len(rows) + 16
    for t in _ticks(lo, hi):
        out.append(f"<text class=\"tick\" x=\"{_x(t, lo, hi, label_w, width):.1f}\" y=\"{axis_y}\">{_fmt(t)}</text>")
    out.append("</svg>")
    return "".join(out)


def rank_svg(board: dict, metric: str) -> str:
    """Rank (dot) and 95% bootstrap rank interval (bar) of every run on ``metric``."""
    rows = [(r["label"], r["metrics"][metric]) for r in board["rows"] if r["metrics"][metric]["rank_ci95"]]
    if not rows:
        return ""
    n = len(board["rows"])
    label_w, width, row_h, top = 190, 260, 24, 10
    h = top + row_h * len(rows) + 28
    out = [
        f"<svg class=\"forest ranks\" data-metric=\"{_esc(metric)}\" width=\"{label_w + width + 40}\" "
        f"height=\"{h}\" role=\"img\">"
    ]
    lo, hi = 0.5, n + 0.5
    for i, (label, e) in enumerate(sorted(rows, key=lambda t: t[1]["rank"])):
        y = top + row_h * i + row_h / 2
        a, b = e["rank_ci95"]
        out.append(f"<text class=\"lab\" x=\"{label_w - 8}\" y=\"{y + 4:.1f}\">{_esc(label)}</text>")
        out.append(
            f"<rect x=\"{_x(a - 0.3, lo, hi, label_w, width):.1f}\" y=\"{y - 5:.1f}\" "
            f"width=\"{_x(b + 0.3, lo, hi, label_w, width) - _x(a - 0.3, lo, hi, label_w, width):.1f}\" height=\"10\" "
            f"fill=\"#c6d6ea\"/>"
        )
        out.append(
            f"<circle cx=\"{_x(e['rank'], lo, hi, label_w, width):.1f}\" cy=\"{y:.1f}\" r=\"5\" fill=\"#4c78a8\"/>"
        )
    axis_y = top + row_h * len(rows) + 16
    for k in range(1, n + 1):
        out.append(f"<text class=\"tick\" x=\"{_x(k, lo, hi, label_w, width):.1f}\" y=\"{axis_y}\">{k}</text>")
    out.append("</svg>")
    return "".join(out)


_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def _heatmap(corr: dict) -> str:
    names, rho = corr.get("metrics") or [], corr.get("rho") or []
    if len(names) < 2:
        return ""
    cell, left, top = 46, 70, 60
    out = [
        f"<svg class=\"heatmap\" width=\"{left + cell * len(names) + 10}\" "
        f"height=\"{top + cell * len(names) + 10}\" role=\"img\">"
    ]
    for j, m in enumerate(names):
        out.append(
            f"<text x=\"{left + cell * j + cell / 2:.0f}\" y=\"{top - 8}\" text-anchor=\"middle\" "
            f"font-size=\"12\">{_esc(m)}</text>"
        )
    for i, m in enumerate(names):
        out.append(
            f"<text x=\"{left - 6}\" y=\"{top + cell * i + cell / 2 + 4:.0f}\" text-anchor=\"end\" "
            f"font-size=\"12\">{_esc(m)}</text>"
        )
        for j in range(len(names)):
            r = rho[i][j]
            if r is None:
                color, txt = "#eeeeee", NA
            else:
                a = min(1.0, abs(r))
                color = (
                    f"rgb({int(255 - 180 * a)},{int(255 - 120 * a)},255)"
                    if r >= 0
                    else f"rgb(255,{int(255 - 150 * a)},{int(255 - 150 * a)})"
                )
                txt = f"{r:.2f}"
            out.append(
                f"<rect x=\"{left + cell * j}\" y=\"{top + cell * i}\" width=\"{cell - 2}\" height=\"{cell - 2}\" "
                f"fill=\"{color}\"/>"
                f"<text x=\"{left + cell * j + cell / 2 - 1:.0f}\" y=\"{top + cell * i + cell / 2 + 4:.0f}\" "
                f"text-anchor=\"middle\" font-size=\"11\">{txt}</text>"
            )
    out.append("</svg>")
    return "".join(out)


def _breakdown_chart(name: str, block: dict) -> str:
    bins, runs = block.get("bins") or [], block.get("runs") or {}
    if not bins or not runs:
        return ""
    left, width, top, height = 40, 60 * len(bins) + 40, 10, 140
    out = [
        f"<svg class=\"breakdown\" data-attr=\"{_esc(name)}\" width=\"{left + width + 10}\" "
        f"height=\"{top + height + 40}\" role=\"img\">"
    ]
    for v in (0, 50, 100):
        y = top + height * (1 - v / 100)
        out.append(
            f"<line x1=\"{left}\" x2=\"{left + width}\" y1=\"{y:.0f}\" y2=\"{y:.0f}\" stroke=\"#e3e6eb\"/>"
            f"<text x=\"{left - 4}\" y=\"{y + 4:.0f}\" text-anchor=\"end\" font-size=\"10\">{v}</text>"
        )
    step = width / len(bins)
    for k, (label, rows) in enumerate(runs.items()):
        color = _COLORS[k % len(_COLORS)]
        pts = []
        for i, row in enumerate(rows):
            x = left + step * (i + 0.5) + (k - (len(runs) - 1) / 2) * 4
            if row["value"] is None:
                continue
            y = top + height * (1 - row["value"] / 100)
            pts.append(f"{x:.1f},{y:.1f}")
            if row["ci95"]:
                y1, y2 = (top + height * (1 - c / 100) for c in row["ci95"])
                out.append(f"<line x1=\"{x:.1f}\" x2=\"{x:.1f}\" y1=\"{y1:.1f}\" y2=\"{y2:.1f}\" stroke=\"{color}\"/>")
            out.append(
                f"<circle cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"3\" fill=\"{color}\"><title>{_esc(label)} "
                f"{_esc(row['bin'])}: {_fmt(row['value'])} (n={row['n_cases']})</title></circle>"
            )
        if len(pts) > 1:
            out.append(f"<polyline points=\"{' '.join(pts)}\" fill=\"none\" stroke=\"{color}\"/>")
    for i, b in enumerate(bins):
        out.append(
            f"<text x=\"{left + step * (i + 0.5):.0f}\" y=\"{top + height + 16}\" text-anchor=\"middle\" "
            f"font-size=\"10\">{_esc(b)}</text>"
        )
    out.append("</svg>")
    return "".join(out)
