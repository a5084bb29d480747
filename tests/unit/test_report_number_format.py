"""One number format per metric in ``report.html``: the headline table, the variant table, the method x category heat
grid and the sweep's line charts write a metric's value the same way (``report_style._fmt`` by the metric's scale:
2 decimals on [0,100], 4 significant digits on [0,1]). The report is rendered from a ``summary.json`` alone."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from vbench_ray.report import write_report


def _m(value: float, **extra) -> dict:
    return {"value": value, "ci95": None, "n": 1, **extra}


def _page(tmp_path: Path, summary: dict) -> str:
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return write_report(tmp_path, n_strips=0).read_text(encoding="utf-8")


def test_nrv_heat_grid_writes_the_floor_as_the_headline_table_does(tmp_path: Path):
    """NRVE_Acc at its floor (1e-4, on [0,100]): "0.00" in the headline table and in the grid's cell and tooltip
    (it was "0.0001" in the grid); 42.125 -> "42.12" in both (2 decimals, Python's round-half-even on 42.125)."""
    summary = {
        "benchmark": "nrv",
        "metrics": {"NRVE_Acc": _m(0.0001, scale="[0,100]", higher_is_better=True)},
        "by_method_category": {
            "A": {"ASB": {"NRVE_Acc": _m(0.0001)}},
            "B": {"ASB": {"NRVE_Acc": {"value": 42.125, "ci95": [40.0, 44.5], "n": 2}}},
        },
    }
    page = _page(tmp_path, summary)
    headline = re.search(r'<span class="metric">NRVE_Acc</span></td><td><span class="value">([^<]*)</span>', page)
    assert headline is not None and headline.group(1) == "0.00"
    cells = dict(
        re.findall(r'<rect class="cell" data-row="([^"]*)".*?<text class="cell-val"[^>]*>([^<]*)</text>', page)
    )
    assert cells == {"A": "0.00", "B": "42.12"}
    tips = [html.unescape(t) for t in re.findall(r'<rect class="cell"[^>]*><title>([^<]*)</title>', page)]
    assert tips == ["A × ASB: 0.00 n=1", "B × ASB: 42.12 [40.00, 44.50] n=2"]
    shown = re.sub(r'data-value="[^"]*"', "", page.split("<svg", 1)[1])  # (the raw value stays machine-readable)
    assert "0.0001" not in shown  # no figure writes the floor otherwise


def test_a_sweep_line_writes_its_points_as_the_variant_table_does(tmp_path: Path):
    """SSIM on [0,1]: 0.5 is "0.5000" (4 significant digits) in the variant table and in the line's tooltips (it
    was "0.5" there), its CI [0.25, 0.75] "[0.2500, 0.7500]"; the x axis's fps stay plain numbers."""
    summary = {
        "benchmark": "cove",
        "metrics": {"SSIM": _m(0.5, scale="[0,1]")},
        "sweep": {
            "name": "fps",
            "variants": [{"name": "fps=1", "axis": "fps", "value": 1}, {"name": "fps=2", "axis": "fps", "value": 2}],
        },
        "by_variant": {
            "fps=1": {"SSIM": {"value": 0.5, "ci95": [0.25, 0.75], "n": 3}},
            "fps=2": {"SSIM": _m(0.125)},
        },
    }
    page = _page(tmp_path, summary)
    table = page.split('id="by-variant"', 1)[1].split("</table>", 1)[0]
    assert "0.5000<br><small>[0.2500, 0.7500] n=3" in table and "0.1250<br>" in table
    tips = re.findall(r'<circle class="pt"[^>]*><title>([^<]*)</title>', page)
    assert tips == ["frames per second 1: 0.5000 [0.2500, 0.7500] n=3", "frames per second 2: 0.1250 n=1"]
