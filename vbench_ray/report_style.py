"""How ``report.html`` and ``leaderboard.html`` look: their CSS (one inline ``<style>`` block; no external URLs)
and the report's number formats, tables and sections (every text from the run escaped)."""

from __future__ import annotations

import html
import math
import re
from typing import Any, Iterable

_CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --bg: #f6f7f9; --bar: #4c78a8; --warn: #b3261e; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1160px; margin: 0 auto; padding: 24px 28px 48px; }
header h1 { margin: 0 0 2px; font-size: 26px; }
.sub { margin: 0 0 10px; color: var(--muted); }
dl.meta { display: flex; flex-wrap: wrap; gap: 6px 22px; margin: 0; }
dl.meta div { display: flex; gap: 6px; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; font-weight: 600; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 18px; margin-top: 18px; }
h2 { margin: 0 0 10px; font-size: 18px; } h3 { font-size: 15px; margin: 14px 0 6px; }
.notes { margin-top: 16px; padding: 10px 16px; border-left: 4px solid #e0a100; background: #fff8e1;
  border-radius: 4px; }
.notes ul { margin: 4px 0 0; padding-left: 20px; }
table { border-collapse: collapse; width: auto; max-width: 100%; }
th, td { padding: 5px 12px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
thead th { background: #eef1f5; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafbfc; }
table.num td:not(:first-child) { text-align: right; font-variant-numeric: tabular-nums; }
table.wrap td { max-width: 520px; overflow-wrap: anywhere; }
.metric { font-weight: 600; } .value { font-weight: 600; }
small { color: var(--muted); }
.empty { color: var(--muted); margin: 0; }
.charts { display: flex; flex-wrap: wrap; gap: 12px 28px; }
figure { margin: 0; }
figure.chart figcaption { font-weight: 600; margin-bottom: 2px; }
svg.bars text { font-size: 12px; fill: var(--fg); }
svg.bars .cat { text-anchor: end; }
svg.bars .tick { text-anchor: middle; fill: var(--muted); font-size: 11px; }
svg.line-chart .line { fill: none; stroke: #1f5fa8; stroke-width: 2; } svg.line-chart .pt { fill: #1f5fa8; }
svg.line-chart .ci-band { fill: #d6e4f5; } svg.line-chart .whisker { stroke: #1f5fa8; }
svg.line-chart .base { stroke: #888; stroke-dasharray: 5 5; } svg.line-chart text { font-size: 11px; fill: #555; }
svg.line-chart .grid { stroke: #e5e5e5; }
svg.bars .val { font-variant-numeric: tabular-nums; } svg.bars .na { fill: var(--muted); font-style: italic; }
svg.bars .grid { stroke: #eceff3; } svg.bars .zero { stroke: #888; }
svg.bars .bar { fill: var(--bar); }
svg.bars .whisker { stroke: #222; stroke-width: 1.4; fill: none; }
span.why { display: block; text-align: left; color: var(--muted); font-style: italic; }
svg.heat text { font-size: 12px; } svg.heat .cell-val { font-variant-numeric: tabular-nums; }
figure.strip { padding: 10px 0; border-bottom: 1px solid var(--line); }
figure.strip:last-child { border-bottom: 0; }
.video { display: flex; align-items: center; gap: 10px; margin: 4px 0; }
.video .label { width: 52px; color: var(--muted); font-size: 12px; text-transform: uppercase; }
.video img { display: block; max-width: calc(100% - 62px); height: auto; border: 1px solid var(--line); }
figure.strip figcaption { margin-top: 6px; }
.scores { font-variant-numeric: tabular-nums; color: var(--muted); }
.err { color: var(--warn); overflow-wrap: anywhere; margin: 0; }
"""


NA = "–"  # shown for null / missing values


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> float | None:
    """A finite float, or None for null / NaN / non-numbers."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _scale_bounds(scale: Any) -> tuple[float, float] | None:
    """A metric's own axis: ``"[0,1]"`` (or ``"~[1,10]"``) -> ``(0.0, 1.0)``, ``"0-100"`` -> ``(0.0, 100.0)``,
    ``"percent"`` -> ``(0.0, 100.0)``; anything that is not an interval -> None (the values decide)."""
    text = str(scale or "").strip()
    if text.lower() == "percent":
        return 0.0, 100.0
    m = re.fullmatch(r"~?\s*[\[(]\s*(-?[\d.eE+-]+)\s*,\s*(-?[\d.eE+-]+)\s*[\])]", text) or re.fullmatch(
        r"(-?\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)", text
    )
    if not m:
        return None
    lo, hi = _num(m.group(1)), _num(m.group(2))
    return (lo, hi) if lo is not None and hi is not None and hi > lo else None


def _fmt(value: Any, scale: Any = None) -> str:
    """4 significant digits on a [0,1] scale (or when the scale is not given), 2 decimals otherwise."""
    x = _num(value)
    if x is None:
        return NA
    if scale is None or _scale_bounds(scale) == (0.0, 1.0):
        return f"{x:#.4g}"
    return f"{x:.2f}"


def _fmt_ci(ci: Any, scale: Any = None) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or any(_num(c) is None for c in ci):
        return NA
    return f"[{_fmt(ci[0], scale)}, {_fmt(ci[1], scale)}]"


def _fmt_int(value: Any) -> str:
    x = _num(value)
    return NA if x is None else str(int(x))


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], attrs: str = "") -> str:
    """Cells are HTML already (callers escape); headers are escaped here."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(heading: str, content: str) -> str:
    return f'<section>\n<h2>{_esc(heading)}</h2>\n{content}\n</section>'
