"""``leaderboard.html``: one self-contained page for a ``compare`` leaderboard (see :mod:`vbench_ray.compare`).

Inline CSS (the run report's), charts as inline SVG, and one small inline script that sorts the
leaderboard table when a header is clicked (each cell carries its sort key in ``data-v``); without
scripts the table still reads in rank order. No external URLs. Every text from the runs is escaped.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from vbench_ray.report import _CSS, _ticks

NA = "–"

_EXTRA_CSS = """
th.sortable { cursor: pointer; user-select: none; } th.sortable::after { content: " ⇅"; color: #9aa3b2; }
td.sig { font-weight: 600; } .tag { display: inline-block; font-size: 11px; color: #7a4b00; background: #fff1cc;
  border-radius: 3px; padding: 0 4px; margin-left: 4px; }
svg.forest text { font-size: 12px; fill: var(--fg); }
svg.forest .tick { text-anchor: middle; fill: var(--muted); font-size: 11px; }
svg.forest .lab { text-anchor: end; }
.warn { margin-top: 16px; padding: 10px 16px; border-left: 4px solid var(--warn); background: #fdecea;
  border-radius: 4px; }
"""

_SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th.sortable').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var dir = th.getAttribute('data-dir') === 'asc' ? 'desc' : 'asc';
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-dir'); });
      th.setAttribute('data-dir', dir);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
        var nx = parseFloat(x), ny = parseFloat(y), r;
        if (x === '' || x === null) return 1; if (y === '' || y === null) return -1;
        r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return dir === 'asc' ? r : -r;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


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


def render(board: dict) -> str:
    title = f"{board['benchmark']} leaderboard"
    parts = [
        _header(board),
        _warnings(board),
        _leaderboard(board),
        _forest_section(board),
        _ranks_section(board),
        _pairs(board),
        _analyses(board),
        _method(board),
    ]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>vbench-ray {_esc(title)}</title>\n<style>{_CSS}{_EXTRA_CSS}</style>\n</head>\n"
        f"<body>\n<main>\n{''.join(parts)}\n</main>\n<script>{_SORT_JS}</script>\n</body>\n</html>\n"
    )


def _header(board: dict) -> str:
    s = board["settings"]
    meta = {
        "benchmark": board["benchmark"],
        "variant": board["variant"],
        "runs": len(board["rows"]),
        "ranked by": board["rank_by"],
        "reference": board["reference"],
        "created": board["created"],
        "bootstrap": f"{s['n_resamples']} resamples, seed {s['seed']}",
        "alpha": f"{s['alpha']} (Holm)",
    }
    items = "".join(f"<div><dt>{_esc(k)}</dt><dd>{_esc(v)}</dd></div>" for k, v in meta.items())
    return (
        f"<header><h1>{_esc(board['benchmark'])} leaderboard</h1>"
        f"<p class=\"sub\">paired comparisons on shared cases, bootstrap rank intervals</p>"
        f"<dl class=\"meta\">{items}</dl></header>"
    )


def _warnings(board: dict) -> str:
    items = []
    if board["mixed_options"]:
        for k, vals in board["mixed_options"].items():
            items.append(
                f"<li>runs were scored with different <code>{_esc(k)}</code>: "
                + ", ".join(
                    f"{_esc(label)} = <code>{_esc(json.dumps(v, default=str))}</code>" for label, v in vals.items()
                )
                + "</li>"
            )
    items += [f"<li>{_esc(c)}</li>" for c in board.get("checks") or []]
    if not items:
        return ""
    return f"<div class=\"warn\" id=\"warnings\"><strong>Read with care</strong><ul>{''.join(items)}</ul></div>"


def _leaderboard(board: dict) -> str:
    rank_by = board["rank_by"]
    heads = [("rank", f"rank by {rank_by}"), ("model", "model"), ("judge", "judge")]
    heads += [(m, m) for m in board["metrics"]]
    heads += [(f"opt:{k}", k) for k in board["mixed_options"]]
    thead = "".join(f"<th class=\"sortable\" data-col=\"{_esc(k)}\">{_esc(t)}</th>" for k, t in heads)
    body = []
    for row in board["rows"]:
        e = row["metrics"][rank_by]
        rci = e["rank_ci95"]
        cells = [
            f"<td data-v=\"{_esc(e['rank'] if e['rank'] is not None else '')}\" class=\"rank\">"
            f"{_esc(e['rank'] if e['rank'] is not None else NA)}"
            + (f" <small>[{rci[0]}–{rci[1]}]</small>" if rci else "")
            + "</td>",
            f"<td data-v=\"{_esc(row['label'])}\" class=\"model\" title=\"{_esc(row['run_dir'])}\">"
            f"{_esc(row['label'])}</td>",
            f"<td data-v=\"{_esc(row['judge'] or '')}\">{_esc(row['judge'] or NA)}</td>",
        ]
        for m in board["metrics"]:
            me = row["metrics"][m]
            v = me["value"]
            tags = "".join(
                f"<span class=\"tag\">{_esc(k.split('.')[-1])}={_esc(val)}</span>"
                for k, val in (me.get("options") or {}).items()
            )
            extra = []
            if me["rank_ci95"]:
                extra.append(f"rank {me['rank']} [{me['rank_ci95'][0]}–{me['rank_ci95'][1]}]")
            extra.append(f"n={me['n'] if me['n'] is not None else NA}")
            if me["n_missing"]:
                extra.append(f"missing {me['n_missing']}")
            sort_v = "" if v is None else (v if me["higher_is_better"] else v)
            cells.append(
                f"<td data-v=\"{_esc(sort_v)}\" data-metric=\"{_esc(m)}\"><span class=\"value\">{_fmt(v)}</span>"
                f" <small>{_ci(me['ci95'])}</small>{tags}<br><small>{_esc('; '.join(extra))}</small></td>"
            )
        for k in board["mixed_options"]:
            val = row["options"].get(k)
            cells.append(f"<td data-v=\"{_esc(val)}\"><code>{_esc(json.dumps(val, default=str))}</code></td>")
        body.append(f"<tr data-model=\"{_esc(row['label'])}\">{''.join(cells)}</tr>")
    return (
        f"<section><h2>Leaderboard</h2><p class=\"sub\">value [95% CI] as each run's summary.json reports it; "
        f"rank [95% bootstrap interval] on the cases every run scored; click a header to sort.</p>"
        f"<table id=\"leaderboard\" class=\"sortable\"><thead><tr>{thead}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></section>"
    )


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


def _forest_section(board: dict) -> str:
    figs = []
    for m in board["metrics"]:
        svg = forest_svg(board, m)
        if svg:
            figs.append(
                f"<figure class=\"chart\"><figcaption>{_esc(m)}: model − {_esc(board['reference'])}</figcaption>"
                f"{svg}</figure>"
            )
    if not figs:
        return ""
    return (
        f"<section id=\"forest\"><h2>Differences vs {_esc(board['reference'])}</h2><p class=\"sub\">paired "
        f"bootstrap 95% CI of the difference on shared cases; filled = significant (paired permutation test, "
        f"Holm-adjusted p &lt; {board['settings']['alpha']})</p><div class=\"charts\">{''.join(figs)}</div></section>"
    )


def _ranks_section(board: dict) -> str:
    figs = [
        f"<figure class=\"chart\"><figcaption>{_esc(m)}</figcaption>{svg}</figure>"
        for m in board["metrics"]
        if (svg := rank_svg(board, m))
    ]
    if not figs:
        return ""
    return (
        f"<section id=\"ranks\"><h2>Rank intervals</h2><p class=\"sub\">rank on the cases all runs scored (dot) "
        f"and its 95% bootstrap interval (bar)</p><div class=\"charts\">{''.join(figs)}</div></section>"
    )


def _pairs(board: dict) -> str:
    if not board["pairs"]:
        return ""
    heads = [
        "metric",
        "A",
        "B",
        "n shared",
        "only A / only B",
        "A − B [95% CI]",
        "perm. p",
        "Holm p",
        "McNemar b / c",
        "McNemar p (Holm)",
    ]
    rows = []
    for p in board["pairs"]:
        mc = p.get("mcnemar")
        sig = " class=\"sig\"" if p.get("significant") else ""
        rows.append(
            "<tr>"
            + "".join(
                [
                    f"<td>{_esc(p['metric'])}</td>",
                    f"<td>{_esc(p['a'])}</td>",
                    f"<td>{_esc(p['b'])}</td>",
                    f"<td>{p['n_shared']}</td>",
                    f"<td>{p['n_only_a']} / {p['n_only_b']}</td>",
                    f"<td>{_fmt(p['diff'])} <small>{_ci(p['ci95'])}</small></td>",
                    f"<td>{_fmt_p(p['p_perm'])}</td>",
                    f"<td{sig}>{_fmt_p(p.get('p_perm_holm'))}</td>",
                    f"<td>{mc['b']} / {mc['c']}</td>" if mc else f"<td>{NA}</td>",
                    (
                        f"<td>{_fmt_p(mc['p'])} ({_fmt_p(mc.get('p_holm'))}) <small>{_esc(mc['method'])}</small></td>"
                        if mc
                        else f"<td>{NA}</td>"
                    ),
                ]
            )
            + "</tr>"
        )
    head = "".join(f"<th>{_esc(h)}</th>" for h in heads)
    return (
        f"<section><h2>Pairwise comparisons</h2><table id=\"pairs\" class=\"num\"><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _method(board: dict) -> str:
    s = board["settings"]
    return (
        "<section><h2>Method</h2><ul>"
        f"<li>Differences: mean (pooled ratio for checklist accuracies) of A minus B on the cases both runs scored; "
        f"95% percentile bootstrap over cases ({s['n_resamples']} resamples, seed {s['seed']}).</li>"
        f"<li>p-values: two-sided paired permutation test swapping each case's two scores (exact when 2^n ≤ "
        f"{s['n_permutations']}), Holm-adjusted across the pairs of each metric. McNemar (exact binomial below 25 "
        f"discordant units, else chi-square with continuity correction) on per-question / per-edit-point "
        f"correct-incorrect; questions within a case are correlated, so it is optimistic.</li>"
        f"<li>Ranks: 1 = best, ties share the better rank; intervals are the 2.5th and 97.5th percentiles of the "
        f"rank over the same case resamples.</li></ul></section>"
    )


# ----------------------------------------------------------------------------- analyses (CoVEBench)

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


def _analyses(board: dict) -> str:
    a = board.get("analyses") or {}
    if not a:
        return ""
    parts = []
    labels = [r["label"] for r in board["rows"]]
    legend = " ".join(
        f"<span style=\"color:{_COLORS[k % len(_COLORS)]}\">● {_esc(label)}</span>" for k, label in enumerate(labels)
    )
    charts = [
        f"<figure class=\"chart\"><figcaption>Acc by {_esc(name.replace('_', ' '))}</figcaption>"
        f"{_breakdown_chart(name, block)}</figure>"
        for name, block in (a.get("breakdowns") or {}).items()
    ]
    if charts:
        parts.append(
            f"<h3>Accuracy of objective questions by complexity (Figure 4)</h3><p class=\"sub\">{legend}; "
            f"bars: 95% case-bootstrap CI</p><div class=\"charts\">{''.join(charts)}</div>"
        )
    heat = _heatmap(a.get("correlations") or {})
    if heat:
        parts.append(f"<h3>Metric correlation (Figure 5, Spearman over run × case)</h3>{heat}")
    levels = a.get("category_levels") or {}
    cats = sorted({c for v in levels.values() if isinstance(v, dict) for c in (v.get("level1") or {})})
    subs = sorted({c for v in levels.values() if isinstance(v, dict) for c in (v.get("subject_level2") or {})})
    if cats:
        head = "".join(f"<th>{_esc(c)}</th>" for c in cats) + "".join(f"<th>Subject: {_esc(c)}</th>" for c in subs)
        rows = []
        for label in labels:
            v = levels.get(label) or {}
            cells = [f"<td>{_fmt((v.get('level1') or {}).get(c, {}).get('value'))}</td>" for c in cats]
            cells += [f"<td>{_fmt((v.get('subject_level2') or {}).get(c, {}).get('value'))}</td>" for c in subs]
            rows.append(f"<tr><td>{_esc(label)}</td>{''.join(cells)}</tr>")
        parts.append(
            f"<h3>UAS by category (Table 8)</h3><table id=\"levels\" class=\"num\"><thead><tr><th>model</th>{head}"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    align = a.get("human_alignment") or {}
    if align:
        rows = "".join(
            f"<tr><td>{_esc(m)}</td><td>{_fmt(100 * r['agreement'] if r['agreement'] is not None else None)}%</td>"
            f"<td>{_fmt(r['tau'])}</td><td>{r['n_correct']} / {r['n_incorrect']} / {r['n_unclear_as_tie']} of "
            f"{r['n_unclear']}</td><td>{r['n']}</td></tr>"
            for m, r in align.items()
        )
        parts.append(
            "<h3>Human alignment (App. G.2, adaptive tie threshold τ)</h3><table id=\"alignment\" class=\"num\">"
            "<thead><tr><th>metric</th><th>agreement</th><th>τ</th><th>correct / incorrect / ties within τ</th>"
            f"<th>n</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    jh = a.get("judge_human") or {}
    if jh:
        sections = list(dict.fromkeys(k for r in jh.values() for k in (r.get("by_section") or {})))  # ViDiC Table 3

        def pct(x):
            return f"{_fmt(100 * x if x is not None else None)}%"

        rows = "".join(
            f"<tr><td>{_esc(m)}</td><td>{pct(r['accuracy'])}</td>"
            f"<td>{_fmt(r['kappa'])}</td><td>{r['n']}</td><td>{r['n_unmatched']}</td>"
            + "".join(
                f"<td>{pct(((r.get('by_section') or {}).get(s) or {}).get('accuracy'))} (κ "
                f"{_fmt(((r.get('by_section') or {}).get(s) or {}).get('kappa'))})</td>"
                for s in sections
            )
            + "</tr>"
            for m, r in jh.items()
        )
        title = "Judge vs humans (ViDiC Table 3: concordance)" if sections else "Judge vs humans (§4.2)"
        extra = "".join(f"<th>{_esc(s)}</th>" for s in sections)
        parts.append(
            f"<h3>{title}</h3><table id=\"judge-human\" class=\"num\"><thead><tr><th>run</th>"
            f"<th>agreement</th><th>Cohen's κ</th><th>n</th><th>unmatched</th>{extra}</tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    st = a.get("judge_stability")
    if st:
        spread = ", ".join(f"{_esc(m)} range {_fmt(v['range'])}" for m, v in st["metrics"].items())
        parts.append(
            f"<h3>Judge stability over {st['n_runs']} repeated runs</h3><p>identical answers on "
            f"{_fmt(100 * st['agreement'] if st['agreement'] is not None else None)}% of {st['n_questions']} "
            f"questions; Fleiss' κ {_fmt(st['fleiss_kappa'])}; {spread}</p>"
        )
        human = (st.get("human") or {}).get("per_run") or {}
        if human:
            parts.append(
                "<p>concordance with humans per run: "
                + ", ".join(
                    f"{_esc(k)} {_fmt(100 * v['accuracy'] if v['accuracy'] is not None else None)}%"
                    for k, v in human.items()
                )
                + "</p>"
            )
    return f"<section id=\"analyses\"><h2>Analyses</h2>{''.join(parts)}</section>" if parts else ""
