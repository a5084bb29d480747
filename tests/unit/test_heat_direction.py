"""NRVBench's method x category heat grid (Fig. 6) shades by how good a value is: darker is better, so for a
lower-is-better metric (BG_MSE) the lowest value is the darkest cell; the legend under the grid says which way."""

from __future__ import annotations

import io
import re

from vbench_ray.benchmarks.nrv import NRVBench
from vbench_ray.figure_draw import heat_svg, to_png

LIGHT, MID, DARK = (238, 244, 251), (134, 170, 210), (31, 95, 168)  # MID: round(238 + (31 - 238) / 2) ...


def _m(v: float) -> dict:
    return {"value": v, "ci95": None, "n": 1}


SUMMARY = {
    "benchmark": "nrv",
    "metrics": {
        "NRVE_Acc": {**_m(20.0), "scale": "[0,100]", "higher_is_better": True},
        "BG_MSE": {**_m(2.0), "scale": "[0,inf)", "higher_is_better": False},
    },
    "by_method_category": {
        "A": {"ASB": {"NRVE_Acc": _m(10.0), "BG_MSE": _m(1.0)}},
        "B": {"ASB": {"NRVE_Acc": _m(20.0), "BG_MSE": _m(2.0)}},
        "C": {"ASB": {"NRVE_Acc": _m(30.0), "BG_MSE": _m(3.0)}},
    },
}


def _heat(metric: str) -> dict:
    return next(f for f in NRVBench.report_figures(SUMMARY) if f["kind"] == "heat" and f["metric"] == metric)


def _fills(svg: str) -> dict[str, tuple[int, ...]]:
    cells = re.findall(r'<rect class="cell" data-row="([^"]*)" data-col="[^"]*" .*? fill="rgb\(([^)]*)\)"', svg)
    return {row: tuple(int(c) for c in fill.split(",")) for row, fill in cells}


def test_darker_is_better_for_a_higher_and_a_lower_is_better_metric():
    acc, mse = _heat("NRVE_Acc"), _heat("BG_MSE")
    # NRVE_Acc 10 < 20 < 30, higher is better: C (30) darkest; BG_MSE 1 < 2 < 3, lower is better: A (1) darkest
    assert _fills(heat_svg(acc)) == {"A": LIGHT, "B": MID, "C": DARK}
    assert _fills(heat_svg(mse)) == {"A": DARK, "B": MID, "C": LIGHT}
    assert "darker = better (higher is better)" in heat_svg(acc)
    assert "darker = better (lower is better)" in heat_svg(mse)


def test_the_png_shades_the_same_way():
    from PIL import Image

    for metric, top_down in (("NRVE_Acc", [LIGHT, MID, DARK]), ("BG_MSE", [DARK, MID, LIGHT])):
        img = Image.open(io.BytesIO(to_png(_heat(metric)))).convert("RGB")
        column = [img.getpixel((2 * 150 + 20, y)) for y in range(img.height)]  # 2x pixels, in the first column
        shades = [c for c in dict.fromkeys(column) if c in (LIGHT, MID, DARK)]
        assert shades == top_down  # rows A, B, C from the top
