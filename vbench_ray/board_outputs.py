"""The outputs of ``vbench-ray compare`` (:mod:`vbench_ray.compare`): ``leaderboard.json``, ``leaderboard.csv``
(cells a spreadsheet will not run), ``leaderboard.html`` (:mod:`vbench_ray.leaderboard_html`) and the offline wandb
run with the tables and plots."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd


def write_outputs(board: dict, out: str | Path, wandb_mode: str = "offline", wandb_project: str = "vbench-ray") -> dict:
    from vbench_ray.sinks import write_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": write_json(out / "leaderboard.json", board), "csv": _write_csv(board, out / "leaderboard.csv")}
    from vbench_ray.leaderboard_html import render

    (out / "leaderboard.html").write_text(render(board), encoding="utf-8")
    paths["html"] = out / "leaderboard.html"
    paths["wandb"] = log_wandb(board, out, wandb_mode, wandb_project)
    return paths


def csv_rows(board: dict) -> list[dict]:
    rows = []
    for row in board["rows"]:
        rec: dict[str, Any] = {"model": row["label"], "run_dir": row["run_dir"], "judge": row["judge"]}
        for m in board["metrics"]:
            e = row["metrics"][m]
            ci = e["ci95"] or [None, None]
            rci = e["rank_ci95"] or [None, None]
            rec.update(
                {
                    f"{m}": e["value"],
                    f"{m}_ci_lo": ci[0],
                    f"{m}_ci_hi": ci[1],
                    f"{m}_n": e["n"],
                    f"{m}_n_missing": e["n_missing"],
                    f"{m}_rank": e["rank"],
                    f"{m}_rank_lo": rci[0],
                    f"{m}_rank_hi": rci[1],
                }
            )
        for k, v in row["options"].items():
            rec[f"option:{k}"] = json.dumps(v, default=str) if not isinstance(v, (str, int, float)) else v
        rows.append(rec)
    return rows


FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")  # a cell starting with one is a formula to a spreadsheet


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet will not run: text starting with ``= + - @``, a tab or a CR gets a
    leading ``'`` (OWASP's CSV-injection rule), so a run named ``=HYPERLINK(...)`` shows as text. Numbers stay
    numbers (``-0.5`` is a value, not a formula)."""
    if isinstance(value, str) and value.startswith(FORMULA_LEADS):
        return "'" + value
    return value


def _write_csv(board: dict, path: Path) -> Path:
    rows = [{csv_cell(k): csv_cell(v) for k, v in r.items()} for r in csv_rows(board)]
    fields = list(dict.fromkeys(k for r in rows for k in r))
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)
    return path


def pair_rows(board: dict) -> list[dict]:
    out = []
    for p in board["pairs"]:
        mc = p.get("mcnemar") or {}
        ci = p["ci95"] or [None, None]
        out.append(
            {
                "metric": p["metric"],
                "a": p["a"],
                "b": p["b"],
                "n_shared": p["n_shared"],
                "n_only_a": p["n_only_a"],
                "n_only_b": p["n_only_b"],
                "diff": p["diff"],
                "ci_lo": ci[0],
                "ci_hi": ci[1],
                "p_perm": p["p_perm"],
                "p_perm_holm": p.get("p_perm_holm"),
                "significant": p.get("significant"),
                "mcnemar_b": mc.get("b"),
                "mcnemar_c": mc.get("c"),
                "mcnemar_p": mc.get("p"),
                "mcnemar_method": mc.get("method"),
                "mcnemar_p_holm": mc.get("p_holm"),
            }
        )
    return out


def _ci_pair(ci: Any) -> tuple[Any, Any]:
    return (ci[0], ci[1]) if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None)


def analysis_tables(board: dict) -> dict[str, pd.DataFrame]:
    """The ``analyses`` section as flat tables (one row per model x subset / bin / cell), for wandb."""
    a = board.get("analyses") or {}
    out: dict[str, pd.DataFrame] = {}
    rows: list[dict] = []
    for attr, block in (a.get("breakdowns") or {}).items():
        for label, bins in (block.get("runs") or {}).items():
            for b in bins:
                lo, hi = _ci_pair(b.get("ci95"))
                rows.append(
                    {
                        "attribute": attr,
                        "model": label,
                        "bin": b.get("bin"),
                        "value": b.get("value"),
                        "ci_lo": lo,
                        "ci_hi": hi,
                        "n_cases": b.get("n_cases"),
                    }
                )
    if rows:
        out["breakdowns"] = pd.DataFrame(rows)
    corr = a.get("correlations") or {}
    if corr.get("metrics"):
        out["correlations"] = pd.DataFrame(
            [
                {"metric_a": m1, "metric_b": m2, "rho": corr["rho"][i][j], "n": corr["n"][i][j]}
                for i, m1 in enumerate(corr["metrics"])
                for j, m2 in enumerate(corr["metrics"])
            ]
        )
    rows = []
    for label, levels in (a.get("category_levels") or {}).items():
        for level in ("level1", "subject_level2"):
            for cat, v in ((levels or {}).get(level) or {}).items():
                lo, hi = _ci_pair(v.get("ci95"))
                rows.append(
                    {
                        "model": label,
                        "level": level,
                        "category": cat,
                        "value": v.get("value"),
                        "ci_lo": lo,
                        "ci_hi": hi,
                        "n": v.get("n"),
                        "n_cases": v.get("n_cases"),
                    }
                )
    if rows:
        out["category_levels"] = pd.DataFrame(rows)
    align = a.get("human_alignment") or {}
    if align:
        out["human_alignment"] = pd.DataFrame([{"metric": m, **r} for m, r in align.items()])
    rows = []
    for label, r in (a.get("judge_human") or {}).items():
        rows.append(
            {
                "model": label,
                "subset": "all",
                "n": r.get("n"),
                "accuracy": r.get("accuracy"),
                "kappa": r.get("kappa"),
                "n_unmatched": r.get("n_unmatched"),
            }
        )
        for kind in ("by_type", "by_section"):
            for sub, v in (r.get(kind) or {}).items():
                rows.append(
                    {
                        "model": label,
                        "subset": sub,
                        "n": v.get("n"),
                        "accuracy": v.get("accuracy"),
                        "kappa": v.get("kappa"),
                        "n_unmatched": None,
                    }
                )
    if rows:
        out["judge_human"] = pd.DataFrame(rows)
    st = a.get("judge_stability")
    if st:
        rows = [
            {
                "subset": "all",
                "n_runs": st.get("n_runs"),
                "n_questions": st.get("n_questions"),
                "agreement": st.get("agreement"),
                "fleiss_kappa": st.get("fleiss_kappa"),
            }
        ]
        rows += [
            {
                "subset": sub,
                "n_runs": st.get("n_runs"),
                "n_questions": v.get("n_questions"),
                "agreement": v.get("agreement"),
                "fleiss_kappa": v.get("fleiss_kappa"),
            }
            for sub, v in (st.get("by_section") or {}).items()
        ]
        out["judge_stability"] = pd.DataFrame(rows)
        runs = st.get("runs") or []
        rows = [
            {
                "metric": m,
                "run": runs[i] if i < len(runs) else str(i),
                "value": x,
                "range": v.get("range"),
                "std": v.get("std"),
            }
            for m, v in (st.get("metrics") or {}).items()
            for i, x in enumerate(v["values"])
        ]
        if rows:
            out["judge_stability_metrics"] = pd.DataFrame(rows)
        human = (st.get("human") or {}).get("per_run") or {}
        if human:
            out["judge_stability_human"] = pd.DataFrame(
                [
                    {"run": label, "n": v.get("n"), "accuracy": v.get("accuracy"), "kappa": v.get("kappa")}
                    for label, v in human.items()
                ]
            )
    return out


def log_wandb(board: dict, out: Path, mode: str = "offline", project: str = "vbench-ray") -> str | None:
    """One wandb run in ``out/wandb`` (offline by default): the leaderboard and pair tables, per-model values
    in the summary, the analyses as tables (:func:`analysis_tables`, ``analyses/<name>``), and the page's plots
    (forest, ranks, correlation heatmap, breakdowns) as HTML panels."""
    if mode == "disabled":
        return None
    from vbench_ray.sinks import _flatten, wandb_env

    os.environ.update(wandb_env(out))
    import wandb

    from vbench_ray.leaderboard_html import _breakdown_chart, _heatmap, forest_svg, rank_svg

    run = wandb.init(
        mode=mode,
        project=project,
        name=f"compare-{board['benchmark']}",
        job_type="compare",
        config={
            "runs": [r["run_dir"] for r in board["rows"]],
            **board["settings"],
            "reference": board["reference"],
            "rank_by": board["rank_by"],
        },
        dir=str(out.resolve()),
        reinit="finish_previous",
    )
    try:
        values = {
            row["label"]: {m: {k: row["metrics"][m][k] for k in ("value", "rank")} for m in board["metrics"]}
            for row in board["rows"]
        }
        flat = _flatten("leaderboard", values, {})
        run.summary.update(flat)
        run.log(
            {
                "leaderboard": wandb.Table(dataframe=pd.DataFrame(csv_rows(board))),
                "pairs": wandb.Table(dataframe=pd.DataFrame(pair_rows(board))),
            }
        )
        plots = {}
        for m in board["metrics"]:
            svg = forest_svg(board, m)
            if svg:
                plots[f"forest/{m}"] = wandb.Html(f"<html><body>{svg}</body></html>", inject=False)
            svg = rank_svg(board, m)
            if svg:
                plots[f"ranks/{m}"] = wandb.Html(f"<html><body>{svg}</body></html>", inject=False)
        tables = analysis_tables(board)
        if tables:
            run.log({f"analyses/{name}": wandb.Table(dataframe=df) for name, df in tables.items()})
        analyses = board.get("analyses") or {}
        svg = _heatmap(analyses.get("correlations") or {})
        if svg:
            plots["analyses/correlations"] = wandb.Html(f"<html><body>{svg}</body></html>", inject=False)
        for name, block in (analyses.get("breakdowns") or {}).items():
            svg = _breakdown_chart(name, block)
            if svg:
                plots[f"analyses/breakdown/{name}"] = wandb.Html(f"<html><body>{svg}</body></html>", inject=False)
        if plots:
            run.log(plots)
        return run.dir
    finally:
        run.finish()
