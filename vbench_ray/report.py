"""A static ``report.html`` for one run directory: one self-contained file that opens offline.

Everything is inline: CSS in a ``<style>`` block, charts as inline SVG, frames as base64 PNG data
URIs. No scripts, no external URLs, no template engine. Every piece of text that comes from the run
(metric names, categories, instructions, error messages) goes through :func:`html.escape`.

Inputs (see docs/architecture.md, "Sink"): ``summary.json`` (required) and ``cases/*.parquet`` (optional; one
row per ``(case_id, variant)``). Metric names are whatever ``summary.json`` holds; nothing here knows
a benchmark. The output is deterministic: the same run directory gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import math
import re
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from vbench_ray.report_style import _CSS  # noqa: F401  (leaderboard_html reads it from here)
from vbench_ray.strips import STRIP_FRAMES, encode_strip as _encode_strip, resolve as _resolve

log = logging.getLogger(__name__)

INSTRUCTION_CHARS = 200  # instructions longer than this are cut in strip captions
NA = "–"  # shown for null / missing values


def write_report(run_dir: str | Path, n_strips: int = 3, out: str | Path | None = None) -> Path:
    """Write ``run_dir/report.html`` (or ``out``) and return its path.

    ``n_strips`` frame strips are drawn from the first cases by case id that have both a source and
    an edited video and no load error; a video that cannot be decoded shows its error instead.
    """
    from vbench_ray.run_lock import check_not_in_progress

    run_dir = Path(run_dir)
    check_not_in_progress(run_dir, "report")  # a reader must not read half a run (the run's own call passes)
    summary = _load_summary(run_dir)
    cases = _load_cases(run_dir)
    page = _page(summary, cases, run_dir, n_strips)
    out = Path(out) if out is not None else run_dir / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    from vbench_ray.sinks import write_text_atomic

    write_text_atomic(out, page)  # temp file + rename: a full disk never leaves a truncated report
    write_figure_pngs(summary, out.parent / "figures")
    log.info("wrote report %s", out)
    return out


def report_figures(summary: dict) -> list[dict]:
    """Every figure of the report (:mod:`vbench_ray.figures`): the breakdowns, then the sweep's axes."""
    from vbench_ray import figures

    metrics = summary.get("metrics") or {}
    scales = {name: (m or {}).get("scale") for name, m in metrics.items()}
    out = []
    for key, name in BREAKDOWNS:
        groups = summary.get(key)
        if isinstance(groups, dict):
            out += figures.breakdown_figures(name, groups, _metric_names(groups.values(), scales), key)
    by_variant = summary.get("by_variant")
    if isinstance(by_variant, dict):
        out += figures.sweep_figures(summary.get("sweep"), by_variant, _metric_names(by_variant.values(), scales))
    return out


def write_figure_pngs(summary: dict, folder: Path) -> list[Path]:
    """Each report figure as ``folder/<id>.png`` (for papers and slides)."""
    from vbench_ray.figures import slug, to_png

    paths = []
    for fig in report_figures(summary):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{slug(fig['id'])}.png"
        path.write_bytes(to_png(fig))
        paths.append(path)
    return paths


# breakdowns drawn as bars, one figure per metric: summary key, what its groups are
BREAKDOWNS = (("by_category", "category"), ("by_difficulty", "difficulty"), ("by_method", "method"))


# ----------------------------------------------------------------------------- inputs


def _load_summary(run_dir: Path) -> dict:
    path = run_dir / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"no summary.json in run directory {run_dir} (has the run finished?)")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(summary, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level, got {type(summary).__name__}")
    return summary


def _load_cases(run_dir: Path) -> pd.DataFrame:
    """All case shards, concatenated. Shards are read one by one so that a column present in only
    some shards (a metric that started later, an ``error_<stage>`` column) is kept."""
    shards = sorted((run_dir / "cases").glob("*.parquet"))
    frames = []
    for shard in shards:
        try:
            frames.append(pd.read_parquet(shard))
        except Exception as exc:  # a torn shard must not cost the whole report
            log.warning("skipping unreadable case shard %s: %s", shard, exc)
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ----------------------------------------------------------------------------- formatting


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


def _case_sort_key(case_id: Any) -> tuple:
    """Numeric ids in numeric order ("2" before "10"), then the rest as strings."""
    s = str(case_id)
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], attrs: str = "") -> str:
    """Cells are HTML already (callers escape); headers are escaped here."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# ----------------------------------------------------------------------------- page


def _page(summary: dict, cases: pd.DataFrame, run_dir: Path, n_strips: int) -> str:
    metrics = summary.get("metrics") or {}
    scales = {name: (m or {}).get("scale") for name, m in metrics.items()}
    title = f"{summary.get('benchmark', 'benchmark')} · {summary.get('run_name', run_dir.name)}"
    sections = [
        _header(summary, title),
        _notes(summary.get("notes")),
        _section("Headline metrics", _headline(metrics)),
        _section("By category", _category_charts(summary.get("by_category"), metrics)),
        _section("By difficulty", _category_charts(summary.get("by_difficulty"), metrics))
        if summary.get("by_difficulty")
        else "",
        _section("By method", _category_charts(summary.get("by_method"), metrics)) if summary.get("by_method") else "",
        _report_tables(summary.get("report_tables")),
        _variants(summary.get("by_variant"), scales),
        _sweep_charts(summary.get("sweep"), summary.get("by_variant"), scales),
        _judge(summary.get("judge")),
        _section("Failures", _failures(summary.get("failures"))),
        _section("Exclusions", _exclusions(summary.get("exclusions"))),
        _section("Frame strips", _strips(cases, run_dir, n_strips, scales)),
    ]
    body = "\n".join(s for s in sections if s)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>vbench-ray report: {_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def _judge(judge: Any) -> str:
    """The judge(s) behind the judge-based metrics: one row per judge phase or judge, one column per count."""
    if not isinstance(judge, dict) or not judge:
        return ""
    per = judge if all(isinstance(v, dict) for v in judge.values()) else {"judge": judge}
    keys = list(dict.fromkeys(k for v in per.values() for k in v))
    rows = [(_esc(name), *[_esc(v.get(k, NA)) for k in keys]) for name, v in per.items()]
    return _section("Judge", _table(["", *[k.replace("_", " ") for k in keys]], rows, ' id="judge"'))


def _report_tables(tables: Any) -> str:
    """Benchmark-specific tables (``summary.report_tables``: ``{title, columns, rows}``, plain-text cells)."""
    if not isinstance(tables, list):
        return ""
    out = []
    for t in tables:
        if isinstance(t, dict) and t.get("rows"):
            rows = [[_esc(c) for c in row] for row in t["rows"]]
            out.append(_section(str(t.get("title", "")), _table([str(c) for c in t.get("columns", [])], rows)))
    return "\n".join(out)


def _section(heading: str, content: str) -> str:
    return f'<section>\n<h2>{_esc(heading)}</h2>\n{content}\n</section>'


def _header(summary: dict, title: str) -> str:
    """Title, then every scalar top-level field (benchmark, run_name, created, n_cases, n_rows, ...)."""
    scalars = {k: v for k, v in summary.items() if k != "created" and v is not None and not isinstance(v, (dict, list))}
    meta = "".join(f"<div><dt>{_esc(k)}</dt><dd>{_esc(v)}</dd></div>" for k, v in scalars.items())
    created = summary.get("created")
    sub = f'<p class="sub">created {_esc(created)}</p>' if created else ""
    return f"<header>\n<h1>{_esc(title)}</h1>\n{sub}\n<dl class=\"meta\">{meta}</dl>\n</header>"


def _notes(notes: Any) -> str:
    if not notes:
        return ""
    notes = [notes] if isinstance(notes, str) else list(notes)
    items = "".join(f"<li>{_esc(n)}</li>" for n in notes)
    return f'<aside class="notes" role="note"><strong>Notes</strong><ul>{items}</ul></aside>'


def _headline(metrics: dict) -> str:
    if not metrics:
        return '<p class="empty">No metrics in summary.json.</p>'
    judged = any("n_invalid" in (m or {}) for m in metrics.values())
    headers = (
        ["Metric", "Value", "95% CI", "n", "Excluded", "Failed"]
        + (["Invalid judge answers"] if judged else [])
        + ["Scale", "Better"]
    )
    rows = []
    for name, m in metrics.items():
        m = m or {}
        scale = m.get("scale")
        better = {True: "higher ↑", False: "lower ↓"}.get(m.get("higher_is_better"), NA)
        rows.append(
            (
                f'<span class="metric">{_esc(name)}</span>',
                f'<span class="value">{_fmt(m.get("value"), scale)}</span>',
                _fmt_ci(m.get("ci95"), scale),
                _fmt_int(m.get("n")),
                _fmt_int(m.get("n_excluded", 0)),
                _fmt_int(m.get("n_failed", 0)),
                *([_fmt_int(m["n_invalid"]) if "n_invalid" in m else NA] if judged else []),
                _esc(scale) if scale is not None else NA,
                better,
            )
        )
    return _table(headers, rows, ' id="headline" class="num"')


def _variants(by_variant: Any, scales: dict) -> str:
    """One row per variant, one column per metric; shown only when there is more than one variant."""
    if not isinstance(by_variant, dict) or len(by_variant) < 2:
        return ""
    names = _metric_names(by_variant.values(), scales)
    rows = []
    for variant, per_metric in by_variant.items():
        cells = [_esc(variant)]
        for name in names:
            m = (per_metric or {}).get(name) or {}
            ci = _fmt_ci(m.get("ci95"), scales.get(name))
            n = _fmt_int(m.get("n"))
            cells.append(f'{_fmt(m.get("value"), scales.get(name))}<br><small>{ci} n={n}</small>')
        rows.append(cells)
    return _section("By variant", _table(["Variant", *names], rows, ' id="by-variant" class="num"'))


def _sweep_charts(sweep: Any, by_variant: Any, scales: dict) -> str:
    """Score against each swept axis: a line with its CI for numeric axes (fps, resolution, each noise kind's
    level) in numeric order, base as a dashed line; bars for input order and negative controls."""
    from vbench_ray.figures import line_svg, sweep_figures

    if not isinstance(by_variant, dict):
        return ""
    figs = sweep_figures(sweep, by_variant, _metric_names(by_variant.values(), scales))
    if not figs:
        return ""
    blocks: dict[str, list[str]] = {}
    for fig in figs:
        svg = (
            line_svg(fig)
            if fig["kind"] == "line"
            else _bar_chart(
                fig["metric"],
                {
                    r[0]: {"value": r[1], "ci95": [r[2], r[3]] if r[2] is not None else None, "n": r[4]}
                    for r in fig["rows"]
                },
                scales.get(fig["metric"]),
            )
        )
        blocks.setdefault(fig["axis"], []).append(
            f'<figure class="chart" id="fig-{_esc(fig["id"])}"><figcaption>{_esc(fig["title"])}</figcaption>'
            f"{svg}</figure>"
        )
    body = "".join(
        f'<h3>{_esc(axis)}</h3><div class="charts">{"".join(charts)}</div>' for axis, charts in blocks.items()
    )
    return _section(f"Sweep: {sweep.get('name', '')}", body)


def _metric_names(groups: Iterable[Any], scales: dict) -> list[str]:
    """Headline metric order first, then metrics seen only in the breakdown, in first-seen order."""
    seen = [name for name in scales]
    for group in groups:
        for name in (group or {}) if isinstance(group, dict) else ():
            if name not in seen:
                seen.append(name)
    present = {name for g in groups if isinstance(g, dict) for name in g}
    return [name for name in seen if name in present]


def _failures(failures: Any) -> str:
    if not isinstance(failures, dict) or not (failures.get("count") or failures.get("examples")):
        return '<p class="empty">No failures.</p>'
    parts = [f"<p>{_fmt_int(failures.get('count'))} failed rows.</p>"]
    by_stage = failures.get("by_stage") or {}
    if by_stage:
        rows = [(_esc(stage), _fmt_int(n)) for stage, n in by_stage.items()]
        parts.append(_table(["Stage", "Rows"], rows, ' id="failures-by-stage"'))
    examples = [e for e in failures.get("examples") or [] if isinstance(e, dict)]
    if examples:
        keys = list(dict.fromkeys(k for e in examples for k in e))
        rows = [[_esc(e.get(k, "")) for k in keys] for e in examples]
        parts.append("<h3>Examples</h3>" + _table(keys, rows, ' id="failure-examples" class="wrap"'))
    return "\n".join(parts)


def _exclusions(exclusions: Any) -> str:
    if not isinstance(exclusions, dict) or not exclusions:
        return '<p class="empty">No exclusions.</p>'
    rows = []
    for metric, reasons in exclusions.items():
        items = reasons.items() if isinstance(reasons, dict) else [("", reasons)]
        rows.extend((_esc(metric), _esc(reason), _esc(count)) for reason, count in items)
    return _table(["Metric", "Reason", "Rows excluded"], rows, ' id="exclusions"')


# ----------------------------------------------------------------------------- charts


def _category_charts(by_category: Any, metrics: dict) -> str:
    """One horizontal bar chart per metric; bars are categories, whiskers the 95% CI."""
    if not isinstance(by_category, dict) or not by_category:
        return '<p class="empty">No per-category breakdown in summary.json.</p>'
    scales = {name: (m or {}).get("scale") for name, m in metrics.items()}
    charts = []
    for name in _metric_names(by_category.values(), scales):
        per_cat = {cat: (d or {}).get(name) or {} for cat, d in by_category.items() if name in (d or {})}
        svg = _bar_chart(name, per_cat, scales.get(name))
        charts.append(f'<figure class="chart"><figcaption>{_esc(name)}</figcaption>{svg}</figure>')
    return '<div class="charts">' + "".join(charts) + "</div>"


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


def _ticks(lo: float, hi: float, target: int = 4) -> list[float]:
    """Round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) inside ``[lo, hi]``."""
    raw = (hi - lo) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    return [round(k * step, 12) for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def _domain(rows: list, scale: Any) -> tuple[float, float]:
    """The x range: zero, the scale's interval if it has one, every value and CI end."""
    points = [0.0, *(_scale_bounds(scale) or ())]
    for _, value, ci, _ in rows:
        points += [p for p in (value, *(ci or ())) if p is not None]
    lo, hi = min(points), max(points)
    if hi - lo <= 0:
        hi = lo + 1.0
    return lo, hi


# ----------------------------------------------------------------------------- frame strips


def _strips(cases: pd.DataFrame, run_dir: Path, n_strips: int, scales: dict) -> str:
    chosen = _strip_rows(cases, n_strips)
    if chosen.empty:
        return '<p class="empty">No case with both a source and an edited video to show.</p>'
    return "\n".join(_strip_figure(row, run_dir, scales) for _, row in chosen.iterrows())


def _strip_rows(cases: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first ``n`` case ids (numeric ids in numeric order) with both paths and no load error.
    One row per case: the ``base`` variant when there is one, else the first variant by name."""
    if n <= 0 or cases.empty or not {"case_id", "source_path", "edited_path"} <= set(cases.columns):
        return cases.iloc[0:0]
    ok = cases["source_path"].notna() & cases["edited_path"].notna()
    ok &= cases["source_path"].astype(str).str.len().gt(0) & cases["edited_path"].astype(str).str.len().gt(0)
    if "error_load" in cases.columns:
        ok &= cases["error_load"].isna()
    rows = cases[ok].copy()
    variant = rows["variant"].astype(str) if "variant" in rows.columns else pd.Series("", index=rows.index)
    rows["_key"] = [(_case_sort_key(c), v != "base", v) for c, v in zip(rows["case_id"], variant)]
    rows = rows.sort_values("_key", kind="stable").drop_duplicates("case_id")
    return rows.head(n).drop(columns="_key")


def _strip_figure(row: pd.Series, run_dir: Path, scales: dict) -> str:
    variant = row.get("variant")
    title = f"case {row['case_id']}" + (f" · {variant}" if variant is not None else "")
    instruction = str(row.get("instruction") or "")
    if len(instruction) > INSTRUCTION_CHARS:
        instruction = instruction[: INSTRUCTION_CHARS - 1] + "…"
    values = [f"{_esc(m)} = {_fmt(row.get(m), scales.get(m))}" for m in scales if m in row.index]
    errors = [f"{_esc(k)}: {_esc(v)}" for k, v in row.items() if str(k).startswith("error_") and isinstance(v, str)]
    videos = _strip_image("source", row.get("source_path"), run_dir) + _strip_image(
        "edited", row.get("edited_path"), run_dir
    )
    caption = (
        f"<strong>{_esc(title)}</strong> <q>{_esc(instruction)}</q>"
        + (f'<br><span class="scores">{" · ".join(values)}</span>' if values else "")
        + "".join(f'<br><span class="err">{e}</span>' for e in errors)
    )
    return f'<figure class="strip">{videos}<figcaption>{caption}</figcaption></figure>'


def _strip_image(label: str, path: Any, run_dir: Path) -> str:
    head = f'<div class="video"><span class="label">{_esc(label)}</span>'
    try:
        png = _encode_strip(_resolve(path, run_dir))
    except Exception as exc:  # any decode failure becomes text on the page
        log.warning("frame strip for %s failed: %s", path, exc)
        return f'{head}<p class="err">cannot show {_esc(path)}: {_esc(type(exc).__name__)}: {_esc(exc)}</p></div>'
    b64 = base64.b64encode(png).decode("ascii")
    alt = f"{label}: {STRIP_FRAMES} frames of {path}"
    return f'{head}<img src="data:image/png;base64,{b64}" alt="{_esc(alt)}"></div>'
