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
import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from vbench_ray.report_charts import (  # noqa: F401  (report_figures, _bar_chart: read from here too)
    _bar_chart,
    breakdown_sections,
    report_figures,
    sweep_section,
    write_figure_pngs,
)
from vbench_ray.figures import metric_names
from vbench_ray.report_style import _CSS, NA, _esc, _fmt, _fmt_ci, _fmt_int, _section, _table
from vbench_ray.strips import STRIP_FRAMES, encode_strip as _encode_strip, resolve as _resolve

log = logging.getLogger(__name__)

INSTRUCTION_CHARS = 200  # instructions longer than this are cut in strip captions


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


def _case_sort_key(case_id: Any) -> tuple:
    """Numeric ids in numeric order ("2" before "10"), then the rest as strings."""
    s = str(case_id)
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


# ----------------------------------------------------------------------------- page


def _page(summary: dict, cases: pd.DataFrame, run_dir: Path, n_strips: int) -> str:
    metrics = summary.get("metrics") or {}
    scales = {name: (m or {}).get("scale") for name, m in metrics.items()}
    title = f"{summary.get('benchmark', 'benchmark')} · {summary.get('run_name', run_dir.name)}"
    figs = report_figures(summary)
    sweep = [f for f in figs if "axis" in f]
    sections = [
        _header(summary, title),
        _notes(summary.get("notes")),
        _section("Headline metrics", _headline(metrics)),
        breakdown_sections([f for f in figs if "axis" not in f], scales),
        _report_tables(summary.get("report_tables")),
        _variants(summary.get("by_variant"), scales),
        sweep_section(summary.get("sweep"), sweep, scales),
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
    why = {name: _why_none(m or {}) for name, m in metrics.items()}  # a metric with no value says why, as the CLI
    headers = (
        ["Metric", "Value", "95% CI", "n", "Excluded", "Failed"]
        + (["Invalid judge answers"] if judged else [])
        + ["Scale", "Better"]
        + (["Why no value"] if any(why.values()) else [])
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
                *([f'<span class="why">{_esc(why[name])}</span>'] if any(why.values()) else []),
            )
        )
    return _table(headers, rows, ' id="headline" class="num"')


def _why_none(m: dict) -> str:
    """Why a headline metric has no value (``unavailable``: a dead judge; ``note``: e.g. no valid judge answer)."""
    if m.get("value") is not None:
        return ""
    return str(m.get("unavailable") or m.get("note") or "")


def _variants(by_variant: Any, scales: dict) -> str:
    """One row per variant, one column per metric; shown only when there is more than one variant."""
    if not isinstance(by_variant, dict) or len(by_variant) < 2:
        return ""
    names = metric_names(by_variant.values(), scales)
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
    instruction = row.get("instruction")
    instruction = instruction if isinstance(instruction, str) else ""  # none (ViDiC's pairs): no quote, not "nan"
    if len(instruction) > INSTRUCTION_CHARS:
        instruction = instruction[: INSTRUCTION_CHARS - 1] + "…"
    values = [f"{_esc(m)} = {_fmt(row.get(m), scales.get(m))}" for m in scales if m in row.index]
    errors = [f"{_esc(k)}: {_esc(v)}" for k, v in row.items() if str(k).startswith("error_") and isinstance(v, str)]
    videos = _strip_image("source", row.get("source_path"), run_dir) + _strip_image(
        "edited", row.get("edited_path"), run_dir
    )
    caption = (
        f"<strong>{_esc(title)}</strong>"
        + (f" <q>{_esc(instruction)}</q>" if instruction else "")
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
