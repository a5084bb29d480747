"""The report's figures (issue 26 items 3 and 7): a sweep's numeric axes as lines in numeric order, categorical
axes as bars, each breakdown as bars, and every figure also a PNG in RUN_DIR/figures; the page as rendered by
headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.chromium import chromium_exe, run_chromium
from vbench_ray.report import write_report


def _m(value, lo, hi, n=4):
    return {"value": value, "ci95": [lo, hi], "n": n}


# given in a scrambled order (as a sweep file may list them): the curve must sort them
VARIANTS = [
    ("base", None, None),
    ("fps:4", "fps", 4.0),
    ("fps:0.5", "fps", 0.5),
    ("fps:2", "fps", 2.0),
    ("res:720", "resolution", 720),
    ("res:240", "resolution", 240),
    ("noise:30", "noise", "noise:30"),
    ("noise:15", "noise", "noise:15"),
    ("blur:9", "noise", "blur:9"),
    ("blur:5", "noise", "blur:5"),
    ("order:reverse", "order", "reverse"),
]
SSIM = {
    "base": 0.8,
    "fps:4": 0.78,
    "fps:0.5": 0.6,
    "fps:2": 0.7,
    "res:720": 0.79,
    "res:240": 0.5,
    "noise:30": 0.4,
    "noise:15": 0.55,
    "blur:9": 0.45,
    "blur:5": 0.65,
    "order:reverse": 0.75,
}
SUMMARY = {
    "benchmark": "vidic",
    "run_name": "sweep",
    "n_rows": 4,
    "metrics": {"SSIM": _m(0.8, 0.7, 0.9), "Avg": _m(50, 40, 60)},
    "by_category": {"style": {"SSIM": _m(0.7, 0.6, 0.8)}, "camera": {"SSIM": _m(0.9, 0.8, 1.0)}},
    "by_method": {"m1": {"SSIM": _m(0.6, 0.5, 0.7)}, "m2": {"SSIM": _m(0.85, 0.8, 0.9)}},
    "by_variant": {
        name: {"SSIM": _m(v, v - 0.05, v + 0.05), "Avg": _m(100 * v, 100 * v - 5, 100 * v + 5)}
        for name, v in SSIM.items()
    },
    "sweep": {"name": "robustness", "variants": [{"name": n, "axis": a, "value": v} for n, a, v in VARIANTS]},
}
# noise kinds start at the base video's neutral level (sigma 0, no blur); fps and resolution have no base point
LINES = {
    ("fps", "SSIM"): [0.5, 2.0, 4.0],
    ("resolution", "SSIM"): [240, 720],
    ("noise", "SSIM"): [0, 15, 30],
    ("blur", "SSIM"): [0, 5, 9],
}


@pytest.fixture()
def sweep_run(tmp_path: Path) -> Path:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text(json.dumps(SUMMARY))
    return tmp_path / "run"


def _line_charts(page: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    out = {}
    for axis, metric, body in re.findall(
        r'<svg class="line-chart" data-axis="([^"]*)" data-metric="([^"]*)"(.*?)</svg>', page, re.S
    ):
        pts = re.findall(r'<circle class="pt" data-x="([^"]+)" data-value="([^"]+)" cx="([^"]+)"', body)
        out[(axis, metric)] = [(float(x), float(v), float(cx)) for x, v, cx in pts]
    return out


def _check_lines(page: str) -> None:
    charts = _line_charts(page)
    assert set(charts) == set(LINES) | {(a, "Avg") for a, _ in LINES}  # one line chart per numeric axis x metric
    for (axis, metric), xs in LINES.items():
        pts = charts[(axis, metric)]
        assert [p[0] for p in pts] == xs  # numeric order, whatever the sweep file's order
        cxs = [p[2] for p in pts]
        assert cxs == sorted(cxs) and len(set(cxs)) == len(cxs)  # drawn left to right
        name = {"fps": "fps:{:g}", "resolution": "res:{:g}", "noise": "noise:{:g}", "blur": "blur:{:g}"}[axis]
        assert [p[1] for p in pts] == [SSIM["base" if x == 0 else name.format(x)] for x in xs]
    # input order stays categorical: a bar chart with base and reverse
    order = re.search(r'id="fig-sweep-order-SSIM".*?</figure>', page, re.S).group(0)
    assert 'class="bars"' in order and "order:reverse" in order and ">base<" in order


def test_sweep_axes_are_lines_in_numeric_order_and_every_figure_is_a_png(sweep_run: Path):
    page = write_report(sweep_run).read_text()
    _check_lines(page)
    assert "By method" in page
    pngs = sorted(p.name for p in (sweep_run / "figures").glob("*.png"))
    expected = {f"sweep-{a}-{m}.png" for a in ("fps", "resolution", "noise", "blur", "order") for m in ("SSIM", "Avg")}
    expected |= {"by_category-SSIM.png", "by_method-SSIM.png"}
    assert set(pngs) == expected
    from PIL import Image

    img = Image.open(sweep_run / "figures" / "sweep-fps-SSIM.png")
    assert img.size == (840, 500) and len(img.convert("L").getcolors(1 << 16)) > 10  # drawn, not blank


def test_sweep_curves_render_in_chromium(sweep_run: Path, tmp_path: Path):
    exe = chromium_exe()
    url = write_report(sweep_run).resolve().as_uri()
    dom = run_chromium(exe, tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    _check_lines(dom.stdout)
    shot = tmp_path / "sweep.png"
    res = run_chromium(
        exe, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,2400", "--hide-scrollbars", url
    )
    assert res.returncode == 0 and shot.stat().st_size > 20_000


# ----------------------------------------------------------------------------- each benchmark's breakdown as its paper

# ViDiC Table 2's class columns, in its order (Subject, Motion, Pos., Backgr., Cam., Style, Tech.)
VIDIC_TABLE2 = ["Subject", "Motion", "Position", "Background", "Camera", "Style", "Playback Technique"]
# CoVEBench Table 8's Level-1 columns, in its order (the four Subject operations as one: Subject)
COVE_TABLE8 = ["Subject", "Background", "Camera", "Motion", "Position", "Visual Effects", "Style"]


def _bar_labels(page: str, fig_id: str) -> list[str]:
    fig = re.search(rf'id="fig-{re.escape(fig_id)}".*?</figure>', page, re.S).group(0)
    return re.findall(r'<text class="cat"[^>]*><title>([^<]*)</title>', fig)


def _write(tmp_path: Path, summary: dict) -> Path:
    run = tmp_path / summary["benchmark"]
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_vidic_classes_in_table_2_order_in_the_page_and_as_pngs(tmp_path: Path):
    """The summary lists the seven classes in the checklist framework's order (and one class the checklist adds):
    the figures show them in Table 2's column order, the extra class last; every figure also a PNG."""
    scrambled = ["Style", "unknown", "Playback Technique", "Camera", "Background", "Position", "Motion", "Subject"]
    by_class = {
        c: {m: _m(10.0 * k, 10.0 * k - 5, 10.0 * k + 5) for m in ("Sim", "Diff", "Avg")}
        for k, c in enumerate(scrambled)
    }
    summary = {"benchmark": "vidic", "run_name": "r", "metrics": {"Avg": _m(50, 40, 60)}, "by_category": by_class}
    run = _write(tmp_path, summary)
    page = write_report(run).read_text()
    for m in ("Sim", "Diff", "Avg"):
        assert _bar_labels(page, f"by_category-{m}") == VIDIC_TABLE2 + ["unknown"]
    assert "column order of ViDiC Table 2" in page
    assert {p.name for p in (run / "figures").glob("*.png")} == {f"by_category-{m}.png" for m in ("Sim", "Diff", "Avg")}


def test_vidic_class_order_as_rendered_by_chromium(tmp_path: Path):
    exe = chromium_exe()
    by_class = {c: {"Avg": _m(50.0, 45, 55)} for c in reversed(VIDIC_TABLE2)}
    run = _write(tmp_path, {"benchmark": "vidic", "metrics": {"Avg": _m(50, 40, 60)}, "by_category": by_class})
    dom = run_chromium(exe, tmp_path / "profile", "--dump-dom", write_report(run).resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _bar_labels(dom.stdout, "by_category-Avg") == VIDIC_TABLE2


def test_cove_categories_in_table_8_order(tmp_path: Path):
    alphabetical = sorted(COVE_TABLE8)  # the summary's order (cove_checklist.by_category sorts them)
    by_cat = {c: {"UAS": _m(30.0, 20, 40), "SSIM": _m(0.5, 0.4, 0.6)} for c in alphabetical}
    summary = {
        "benchmark": "cove",
        "metrics": {"UAS": _m(30, 20, 40), "SSIM": _m(0.5, 0.4, 0.6)},
        "by_category": by_cat,
    }
    page = write_report(_write(tmp_path, summary)).read_text()
    assert _bar_labels(page, "by_category-UAS") == COVE_TABLE8
    assert _bar_labels(page, "by_category-SSIM") == COVE_TABLE8


def test_nrv_method_by_material_grid(tmp_path: Path):
    """NRVBench Fig. 6: each method across the six material categories, one grid per metric, categories in the
    paper's order (ASB, CTS, DSO, GSF, HFF, LFS); a pair without rows is an empty cell, not a number."""
    grid = {
        "VM-Edit": {"LFS": {"NRVE_Acc": _m(31.0, 28, 34)}, "ASB": {"NRVE_Acc": _m(29.5, 27, 32)}},
        "TokenFlow": {"CTS": {"NRVE_Acc": _m(22.25, 20, 25)}, "ASB": {"NRVE_Acc": _m(27.0, 25, 29)}},
    }
    summary = {
        "benchmark": "nrv",
        "metrics": {"NRVE_Acc": {**_m(28, 25, 31), "scale": "[0,100]"}},
        "by_category": {c: {"NRVE_Acc": _m(28.0, 25, 31)} for c in ("LFS", "ASB", "CTS")},
        "by_method_category": grid,
    }
    run = _write(tmp_path, summary)
    page = write_report(run).read_text()
    heat = re.search(r'<svg class="heat" data-metric="NRVE_Acc".*?</svg>', page, re.S).group(0)
    cols = re.findall(r'<text class="col"[^>]*><title>([^<]*)</title>', heat)
    rows = re.findall(r'<text class="row"[^>]*><title>([^<]*)</title>', heat)
    assert cols == ["ASB", "CTS", "LFS"] and rows == ["VM-Edit", "TokenFlow"]
    cells = re.findall(r'<rect class="cell" data-row="([^"]*)" data-col="([^"]*)" data-value="([^"]*)"', heat)
    assert cells == [
        ("VM-Edit", "ASB", "29.5"),
        ("VM-Edit", "CTS", ""),
        ("VM-Edit", "LFS", "31.0"),
        ("TokenFlow", "ASB", "27.0"),
        ("TokenFlow", "CTS", "22.25"),
        ("TokenFlow", "LFS", ""),
    ]
    assert "By method and category" in page and "ASB articulated soft bodies" in page
    assert _bar_labels(page, "by_category-NRVE_Acc") == ["ASB", "CTS", "LFS"]
    from PIL import Image

    png = Image.open(run / "figures" / "by_method_category-NRVE_Acc.png")
    assert len(png.convert("L").getcolors(1 << 16)) > 10  # drawn, not blank


def test_a_bar_png_draws_the_metric_on_its_own_scale(tmp_path: Path):
    """The PNG's axis is the page's: a percent metric runs 0-100 (50 ends mid-plot), not 0 to the largest value."""
    from PIL import Image

    summary = {
        "benchmark": "vidic",
        "metrics": {"Avg": {**_m(50, 50, 50), "scale": "percent"}},
        "by_category": {"Subject": {"Avg": _m(50.0, 50.0, 50.0)}},
    }
    run = _write(tmp_path, summary)
    write_report(run)
    img = Image.open(run / "figures" / "by_category-Avg.png").convert("RGB")
    bar = [x for x in range(img.width) for y in range(img.height) if img.getpixel((x, y)) == (109, 159, 214)]
    # 2x pixels: the plot starts at 150 and is 250 wide, so 50 of 100 ends at 150 + 125 = 275
    assert (min(bar), max(bar)) == (2 * 150, 2 * 275)


def test_the_base_line_label_sits_above_the_plot_not_on_its_points(sweep_run: Path):
    """The dashed base line's value is a legend above the plot area (it was drawn on the line at the right end, over
    the last point when that point is near the base)."""
    from vbench_ray.figure_draw import TOP

    page = write_report(sweep_run).read_text()
    labels = re.findall(r'<text class="base-label" x="[^"]+" y="([^"]+)"', page)
    assert len(labels) == len(LINES) * 2 and all(float(y) < TOP for y in labels)
