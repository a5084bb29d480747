"""The report's figures as data (drawn as inline SVG for ``report.html`` and a PNG in ``RUN_DIR/figures/``).

A figure is a dict: ``kind`` ``"line"`` (a numeric sweep axis: one point per setting in numeric order, its 95% CI
as a band and whiskers, the base setting as a dashed line; ViDiC Fig. 5a, accuracy against fps and resolution, and
Fig. 5c, against augmentation intensity), ``"bars"`` (categories: CoVEBench Fig. 5 middle and Table 8, scores per
major editing category; ViDiC Table 2, per class; NRVBench's six material categories and its per-method tables;
one bar per category with its 95% CI, in the order the benchmark's paper uses: ``Benchmark.report_figures``) or
``"heat"`` (a grid of two breakdowns, NRVBench Fig. 6: each method across the six material categories; one cell
per pair, shaded by how good its value is: darker is better, by the metric's ``higher_is_better``).

Line points: ``(x, value, lo, hi, n)``; bar rows: ``(label, value, lo, hi, n)``; heat ``cells[i][j]``:
``(value, lo, hi, n)`` of ``rows[i]`` x ``cols[j]``; ``None`` where missing. A breakdown figure names the report
``section`` it belongs to and may carry a ``note`` (the paper's table or figure it follows). A figure's ``scale`` (its
metric's, from summary.json) says how its values are written: as the report's tables write them (``report_style``).
They are drawn by :mod:`vbench_ray.figure_draw` (inline SVG, and PNG with Pillow: the same geometry).
"""

from __future__ import annotations

import math
import re
from typing import Any

NUMERIC_AXES = {"fps": "frames per second", "resolution": "short side (px)"}
NOISE_LEVELS = {"noise": "noise sigma", "blur": "blur kernel", "saturation": "saturation factor"}
NEUTRAL = {"noise": 0.0, "blur": 0.0, "saturation": 1.0}  # the level the unperturbed base video has


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _entry(per: dict | None) -> tuple[float | None, float | None, float | None, Any]:
    per = per or {}
    ci = per.get("ci95")
    lo, hi = (_num(ci[0]), _num(ci[1])) if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None)
    return _num(per.get("value")), lo, hi, per.get("n")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "figure"


# ----------------------------------------------------------------------------- figures from summary.json


def sweep_figures(sweep: Any, by_variant: Any, metrics: list[str], scales: dict | None = None) -> list[dict]:
    """Per swept axis and metric: a line for fps, resolution and each noise kind (noise sigma, blur kernel,
    saturation; the base video is a point at the kind's neutral level: sigma 0, no blur, saturation 1), points in
    numeric order; bars for input order and negative controls (categorical). ``scales``: each metric's scale
    (summary.json's), which its values are written by."""
    if not isinstance(sweep, dict) or not isinstance(by_variant, dict):
        return []
    series: dict[tuple[str, str], list[tuple[float | str, str]]] = {}
    for v in sweep.get("variants") or []:
        axis, value, name = v.get("axis"), v.get("value"), v.get("name")
        if not axis:
            continue
        if axis == "noise":  # "noise:15" -> the noise kind's own numeric level
            kind, _, level = str(value).partition(":")
            series.setdefault((kind, NOISE_LEVELS.get(kind, kind)), []).append((_num(level), name))
        elif axis in NUMERIC_AXES:
            series.setdefault((axis, NUMERIC_AXES[axis]), []).append((_num(value), name))
        else:
            series.setdefault((axis, ""), []).append((str(value), name))
    base = by_variant.get("base") or {}
    out = []
    for (axis, x_label), members in series.items():
        numeric = bool(x_label) and all(x is not None for x, _ in members)
        for m in metrics:
            if not any(m in (by_variant.get(name) or {}) for _, name in members):
                continue
            if numeric:
                named = members + ([(NEUTRAL[axis], "base")] if axis in NEUTRAL and "base" in by_variant else [])
                points = sorted((x, *_entry((by_variant.get(name) or {}).get(m))) for x, name in named)
                out.append(
                    {
                        "kind": "line",
                        "id": f"sweep-{axis}-{m}",
                        "title": f"{m} vs {axis}",
                        "axis": axis,
                        "metric": m,
                        "x_label": x_label,
                        "y_label": m,
                        "points": points,
                        "base": _entry(base.get(m))[0],
                        "scale": (scales or {}).get(m),
                    }
                )
            else:
                rows = [("base", *_entry(base.get(m)))] + [
                    (name, *_entry((by_variant.get(name) or {}).get(m))) for _, name in members
                ]
                out.append(
                    {
                        "kind": "bars",
                        "id": f"sweep-{axis}-{m}",
                        "title": f"{m} vs {axis}",
                        "axis": axis,
                        "metric": m,
                        "rows": rows,
                        "scale": (scales or {}).get(m),
                    }
                )
    return out


def breakdown_figures(name: str, groups: Any, metrics: list[str], prefix: str) -> list[dict]:
    """One bar figure per metric over the groups of a breakdown (``by_category``, ``by_method``...)."""
    if not isinstance(groups, dict) or not groups:
        return []
    out = []
    for m in metrics:
        rows = [(str(g), *_entry((per or {}).get(m))) for g, per in groups.items() if m in (per or {})]
        if rows:
            out.append({"kind": "bars", "id": f"{prefix}-{m}", "title": f"{m} by {name}", "metric": m, "rows": rows})
    return out


# the breakdowns a summary may hold, drawn as bars one figure per metric: summary key, what its groups are, section
BREAKDOWNS = (
    ("by_category", "category", "By category"),
    ("by_difficulty", "difficulty", "By difficulty"),
    ("by_method", "method", "By method"),
)


def metric_names(groups: Any, scales: dict) -> list[str]:
    """The metrics of a breakdown's groups: headline order first (``scales``' keys), then those seen only in the
    breakdown, in first-seen order."""
    groups = [g for g in groups if isinstance(g, dict)]
    seen = list(scales)
    for group in groups:
        seen += [name for name in group if name not in seen]
    present = {name for g in groups for name in g}
    return [name for name in seen if name in present]


def ordered(groups: dict, order: tuple[str, ...]) -> dict:
    """``groups`` with the names of ``order`` first, in that order (matched without regard to case), then the
    others in their own order."""
    rank = {str(name).lower(): i for i, name in enumerate(order)}
    keys = sorted(groups, key=lambda g: (0, rank[str(g).lower()]) if str(g).lower() in rank else (1, 0))
    return {k: groups[k] for k in keys}


def breakdowns(summary: dict, orders: dict[str, tuple[str, ...]] | None = None, notes: dict | None = None) -> list:
    """Every breakdown of ``summary`` as bar figures, one per metric (``Benchmark.report_figures``' default).
    ``orders``: a breakdown's group order (summary key -> names, e.g. a paper table's column order); ``notes``:
    the paper's table or figure a breakdown follows (summary key -> text)."""
    scales = {name: (m or {}).get("scale") for name, m in (summary.get("metrics") or {}).items()}
    out = []
    for key, name, section in BREAKDOWNS:
        groups = summary.get(key)
        if not isinstance(groups, dict) or not groups:
            continue
        if key in (orders or {}):
            groups = ordered(groups, orders[key])
        for fig in breakdown_figures(name, groups, metric_names(groups.values(), scales), key):
            note = {"note": notes[key]} if key in (notes or {}) else {}
            out.append({**fig, "section": section, "scale": scales.get(fig["metric"]), **note})
    return out


def heat_figures(
    grid: Any,
    row_name: str,
    col_name: str,
    prefix: str,
    scales: dict,
    cols: tuple[str, ...] = (),
    note: str = "",
    higher: dict | None = None,
) -> list[dict]:
    """One heat figure per metric of a two-way breakdown ``{row: {col: {metric: stats}}}`` (NRVBench Fig. 6:
    method x material category): rows in the grid's order, columns ``cols`` first, then any other. ``higher``:
    each metric's ``higher_is_better`` (summary.json's headline metrics), so that darker is better either way."""
    if not isinstance(grid, dict) or not grid:
        return []
    rows = [str(r) for r in grid]
    seen = [c for r in grid.values() if isinstance(r, dict) for c in r]
    columns = list(ordered(dict.fromkeys(seen), cols))
    cells_of = [[((grid[r] or {}).get(c) or {}) for c in columns] for r in grid]
    out = []
    for m in metric_names([cell for row in cells_of for cell in row], scales):
        cells = [[_entry(cell.get(m)) for cell in row] for row in cells_of]
        if any(c[0] is not None for row in cells for c in row):
            out.append(
                {
                    "kind": "heat",
                    "id": f"{prefix}-{m}",
                    "title": f"{m} by {row_name} and {col_name}",
                    "metric": m,
                    "higher_is_better": (higher or {}).get(m),
                    "scale": scales.get(m),
                    "rows": rows,
                    "cols": columns,
                    "cells": cells,
                    "section": f"By {row_name} and {col_name}",
                    **({"note": note} if note else {}),
                }
            )
    return out
