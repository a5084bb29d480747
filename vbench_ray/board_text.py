"""Plain-text tables for the terminal: the whole leaderboard of ``vbench-ray compare``, a run's metrics per
NRVBench method (NRVBench Tables 2 and 3 have one row per method) and a sweep's metrics per variant (one row per
setting of ViDiC's robustness study: fps, resolution, augmentation, input order).

Only formatting: every number comes from the leaderboard dict (:func:`vbench_ray.compare.compare`) or the
run's ``summary.json``.
"""

from __future__ import annotations

from typing import Any

SIG = "*"  # differs from the reference run: Holm-adjusted paired permutation p < alpha
SIG_MCNEMAR = "^"  # differs from the reference run: Holm-adjusted McNemar p < alpha (binary units only)


def _num(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.4g}"


def _ci(ci: Any) -> str:
    return f"[{_num(ci[0])}, {_num(ci[1])}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ""


def render_table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> list[str]:
    """Columns padded to their widest cell; columns in ``right`` right-aligned."""
    right = right if right is not None else set(range(1, len(headers)))
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _marks(board: dict, label: str, metric: str) -> str:
    """Significance marks of ``label`` against the reference run on ``metric`` (none for the reference)."""
    ref = board["reference"]
    if label == ref:
        return ""
    for p in board["pairs"]:
        if p["metric"] == metric and {p["a"], p["b"]} == {label, ref}:
            mc = p.get("mcnemar") or {}
            return (SIG if p.get("significant") else "") + (SIG_MCNEMAR if mc.get("significant") else "")
    return ""


def format_board(board: dict) -> str:
    """The whole leaderboard: one row per run in rank order of ``rank_by``; per metric its value, 95% CI, rank
    interval and marks against the reference run; the legend, n_missing and the consistency checks below."""
    rank_by, names = board["rank_by"], board["metrics"]
    alpha = (board.get("settings") or {}).get("alpha", 0.05)
    lines = [
        f"{board['benchmark']} leaderboard: {len(board['rows'])} runs ranked by {rank_by}; "
        f"reference {board['reference']}"
    ]
    headers = ["rank", "model"]
    for m in names:
        headers += [m, f"{m} 95% CI", f"{m} rank"]
    rows, missing = [], []
    for row in board["rows"]:
        e = row["metrics"][rank_by]
        cells = [str(e["rank"]) if e["rank"] is not None else "-", row["label"]]
        for m in names:
            x = row["metrics"][m]
            rci = x.get("rank_ci95")
            cells += [
                _num(x["value"]) + _marks(board, row["label"], m),
                _ci(x.get("ci95")),
                f"{rci[0]}-{rci[1]}" if rci else "-",
            ]
            if x.get("n_missing"):
                missing.append(f"{row['label']} {m}: {x['n_missing']}")
        rows.append(cells)
    lines += ["  " + s for s in render_table(headers, rows, right=set(range(len(headers))) - {1})]
    lines.append(
        f"  {SIG} differs from {board['reference']} (paired permutation, Holm-adjusted p < {alpha}); "
        f"{SIG_MCNEMAR} the same by McNemar on binary units; rank: 95% bootstrap rank interval on the "
        "cases every run scored"
    )
    if missing:
        lines.append("  cases another run scored and this one did not (n_missing): " + "; ".join(missing))
    for c in board["checks"]:
        lines.append(f"  check: {c}")
    return "\n".join(lines)


def format_groups(groups: dict[str, dict], what: str, metric_order: list[str] | None = None) -> list[str]:
    """One row per group (a method, a variant), one column per metric: ``value [CI] n=``; metrics in
    ``metric_order`` first, then the others in first-seen order."""
    names = list(metric_order or [])
    for per in groups.values():
        for m in per or {}:
            if m not in names:
                names.append(m)
    names = [m for m in names if any(m in (per or {}) for per in groups.values())]
    rows = []
    for group, per in groups.items():
        cells = [str(group)]
        for m in names:
            s = (per or {}).get(m) or {}
            cells.append(f"{_num(s.get('value'))} {_ci(s.get('ci95'))} n={s.get('n', 0)}".replace("  ", " "))
        rows.append(cells)
    return ["  " + s for s in render_table([what, *names], rows)]
