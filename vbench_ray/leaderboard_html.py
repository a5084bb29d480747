"""``leaderboard.html``: one self-contained page for a ``compare`` leaderboard (see :mod:`vbench_ray.compare`).

Inline CSS (the run report's), charts as inline SVG, and one small inline script that sorts the
leaderboard table when a header is clicked (each cell carries its sort key in ``data-v``); without
scripts the table still reads in rank order. No external URLs. Every text from the runs is escaped.
"""

from __future__ import annotations

import json

from vbench_ray.leaderboard_charts import (  # noqa: F401  (board_outputs reads the charts from here)
    NA,
    _breakdown_chart,
    _ci,
    _COLORS,
    _esc,
    _fmt,
    _fmt_p,
    _heatmap,
    forest_svg,
    rank_svg,
    vs_reference,
)
from vbench_ray.report_style import _CSS


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
