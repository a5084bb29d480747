"""report.html: built from a hand-made run directory, checked as text and as rendered by headless Chromium."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.chromium import chromium_exe, run_chromium
from vbench_ray.report import write_report
from vbench_ray.video.encode import write_video

SUMMARY = {
    "benchmark": "cove",
    "run_name": "demo",
    "created": "2026-11-26T02:00:00Z",
    "n_cases": 4,
    "n_rows": 4,
    "metrics": {
        "SSIM": {
            "value": 0.81,
            "ci95": [0.74, 0.88],
            "n": 9,
            "n_excluded": 2,
            "n_failed": 1,
            "higher_is_better": True,
            "scale": "[0,1]",
        },
        "MSM": {
            "value": 0.9,
            "ci95": [0.85, 0.95],
            "n": 3,
            "n_excluded": 0,
            "n_failed": 1,
            "higher_is_better": True,
            "scale": "[0,1]",
        },
        "MF": {
            "value": 12.3456,
            "ci95": [-1.5, 20.0],
            "n": 11,
            "n_excluded": 1,
            "n_failed": 0,
            "higher_is_better": False,
            "scale": "pixels",
        },
        "UAS <judge>": {
            "value": None,
            "ci95": None,
            "n": 0,
            "n_excluded": 0,
            "n_failed": 4,
            "higher_is_better": True,
            "scale": "[0,1]",
        },
    },
    "by_category": {
        "Background": {
            "SSIM": {"value": None, "ci95": None, "n": 0},
            "MSM": {"value": 0.9, "ci95": [0.85, 0.95], "n": 3},
            "MF": {"value": -0.5, "ci95": [-1.5, 0.4], "n": 2},
        },
        "Subject & <Style>": {
            "SSIM": {"value": 0.81, "ci95": [0.74, 0.88], "n": 9},
            "MF": {"value": 15.0, "ci95": [10.0, 20.0], "n": 9},
        },
    },
    "by_variant": {
        "base": {"SSIM": {"value": 0.81, "ci95": [0.74, 0.88], "n": 9}},
        "fps8": {"SSIM": {"value": 0.79, "ci95": [0.7, 0.86], "n": 9}},
    },
    "failures": {
        "count": 1,
        "by_stage": {"load": 1},
        "examples": [
            {"case_id": "7", "variant": "base", "stage": "load", "error": "edited video not found: /data/7.mp4"}
        ],
    },
    "exclusions": {"SSIM": {"category:Background": 2}, "MF": {"category:Camera": 1}},
    "notes": ["judge scores from random weights mean nothing <really>"],
}

# name -> (value, CI, n, excluded, failed) as the headline table must show them
EXPECTED = {
    "SSIM": ("0.8100", "[0.7400, 0.8800]", "9", "2", "1"),
    "MSM": ("0.9000", "[0.8500, 0.9500]", "3", "0", "1"),
    "MF": ("12.35", "[-1.50, 20.00]", "11", "1", "0"),
    "UAS <judge>": ("–", "–", "0", "0", "4"),
}


def _frames(t: int, h: int, w: int, shift: int) -> np.ndarray:
    """A moving bright square on a colour gradient: frames differ, so strips are not flat."""
    yy, xx = np.mgrid[0:h, 0:w]
    out = np.empty((t, h, w, 3), np.uint8)
    for i in range(t):
        out[i, ..., 0] = (xx * 255 // w + shift) % 256
        out[i, ..., 1] = yy * 255 // h
        out[i, ..., 2] = (i * 16 + shift) % 256
        x0 = (i * 4) % (w - 12)
        out[i, 10:22, x0 : x0 + 12] = 255
    return out


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    videos = tmp_path / "videos"
    src = write_video(videos / "src.mp4", _frames(16, 64, 80, 0), fps=8)
    edited = write_video(videos / "edited.mp4", _frames(16, 64, 80, 90), fps=8)
    corrupt = videos / "corrupt.mp4"
    corrupt.write_bytes(b"this is not a video" * 50)
    (run / "cases").mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(SUMMARY))
    rows = [  # (case_id, source, edited, error_load, SSIM)
        ("10", src, edited, None, 0.7),
        ("2", src, corrupt, None, 0.6),  # chosen (numeric order) but the edited video does not decode
        ("7", src, None, "edited video not found: /data/7.mp4", None),  # load error: never a strip
        ("1", src, edited, None, 0.9),
        ("30", src, edited, None, 0.8),  # fourth eligible case: beyond n_strips=3
    ]
    df = pd.DataFrame(
        {
            "benchmark": "cove",
            "case_id": [r[0] for r in rows],
            "variant": "base",
            "categories": [["Background"], ["Subject & <Style>"], ["Camera"], ["Background"], ["Subject"]],
            "instruction": [
                f"make the sky <purple> & add {'stars ' * 60}" if r[0] == "1" else f"edit {r[0]}" for r in rows
            ],
            "source_path": [str(r[1]) for r in rows],
            "edited_path": [None if r[2] is None else str(r[2]) for r in rows],
            "SSIM": [r[4] for r in rows],
            "MF": [3.25, None, None, 1.5, 2.0],
            "error_load": [r[3] for r in rows],
        }
    )
    df.iloc[:2].to_parquet(run / "cases" / "part-00000.parquet", index=False)
    df.iloc[2:].drop(columns=["MF"]).to_parquet(run / "cases" / "part-00001.parquet", index=False)
    return run


class _Doc(HTMLParser):
    """Collects the headline table's rows (as cell texts), every img src and every href/src."""

    def __init__(self):
        super().__init__()
        self.headline: list[list[str]] = []
        self.imgs: list[str] = []
        self.refs: list[str] = []
        self._in_headline = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "table" and a.get("id") == "headline":
            self._in_headline = True
        elif self._in_headline and tag == "tr":
            self._row = []
        elif self._row is not None and tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_headline = False
        elif tag == "td" and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.headline.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parse(text: str) -> _Doc:
    doc = _Doc()
    doc.feed(text)
    return doc


def _check_headline(doc: _Doc) -> None:
    got = {row[0]: tuple(row[1:6]) for row in doc.headline}
    assert got == EXPECTED


def test_report_content(run_dir: Path):
    out = write_report(run_dir)
    assert out == run_dir / "report.html"
    text = out.read_text(encoding="utf-8")
    doc = _parse(text)
    _check_headline(doc)

    # self-contained: no network references, no scripts, only data: URIs
    assert "http://" not in text and "https://" not in text
    assert "<script" not in text and "<link" not in text
    assert all(ref.startswith("data:image/png;base64,") for ref in doc.refs)

    # title, notes, tables, one chart per metric with categories
    assert "cove · demo" in text and "2026-11-26T02:00:00Z" in text
    assert "judge scores from random weights mean nothing &lt;really&gt;" in text
    assert 'id="by-variant"' in text and "fps8" in text
    assert "edited video not found: /data/7.mp4" in text
    assert "category:Background" in text and "category:Camera" in text
    assert text.count('<svg class="bars"') == 3  # SSIM, MSM, MF have category entries; UAS has none
    assert "Subject &amp; &lt;Style&gt;" in text and "<Style>" not in text
    assert "n/a  n=0" in text  # SSIM has no Background value

    # strips: cases 1, 2, 10 (numeric order); 2's edited video fails and shows its error instead
    for case in ("case 1 ", "case 2 ", "case 10 "):
        assert case in text
    assert "case 30 " not in text and "case 7 " not in text
    assert len(doc.imgs) == 5  # 3 cases x 2 videos, less the corrupt one
    assert "cannot show" in text and "corrupt.mp4" in text
    assert "make the sky &lt;purple&gt; &amp; add" in text and "…" in text  # escaped and truncated
    assert "SSIM = 0.9000" in text and "MF = 3.25" in text and "MF = –" in text  # MF only in shard 0

    import cv2

    png = base64.b64decode(doc.imgs[0].split(",", 1)[1])
    strip = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert strip.shape[0] == 96 and strip.shape[1] == 5 * 120 + 4 * 2  # 80x64 -> 120x96, 2-px gaps
    assert strip.std() > 10

    assert write_report(run_dir).read_text(encoding="utf-8") == text  # deterministic


def test_report_minimal_run(tmp_path: Path):
    """Only the required parts: no cases folder, no breakdowns, null values everywhere."""
    run = tmp_path / "bare"
    run.mkdir()
    summary = {
        "benchmark": "nrv",
        "run_name": "x",
        "metrics": {"Acc": {"value": None, "ci95": None, "n": None}},
        "by_category": {},
        "failures": {},
        "exclusions": None,
    }
    (run / "summary.json").write_text(json.dumps(summary))
    out = write_report(run, out=tmp_path / "elsewhere" / "r.html")
    doc = _parse(out.read_text(encoding="utf-8"))
    assert doc.headline == [["Acc", "–", "–", "–", "0", "0", "–", "–"]]
    assert doc.imgs == []
    assert not (run / "report.html").exists()


def test_report_needs_summary(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="summary.json"):
        write_report(tmp_path)


def test_report_renders_in_chromium(run_dir: Path, tmp_path: Path):
    exe = chromium_exe()
    report = write_report(run_dir).resolve()
    url = report.as_uri()

    dom = run_chromium(exe, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="headline"' in dom.stdout
    _check_headline(_parse(dom.stdout))
    assert len(re.findall(r'<img src="data:image/png;base64,', dom.stdout)) == 5

    shot = tmp_path / "r.png"
    res = run_chromium(
        exe, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars", url
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 20_000

    import cv2

    img = cv2.imread(str(shot))
    assert img is not None and img.shape[:2] == (1600, 1200)
    assert img.std() > 10  # not a blank page


def test_a_metric_without_a_value_says_why_in_the_headline(tmp_path: Path):
    """The terminal prints why a metric has no number (a dead judge, no valid answer); the report says it too."""
    summary = {
        "benchmark": "cove",
        "metrics": {
            "SSIM": {"value": 0.5, "ci95": [0.4, 0.6], "n": 3},
            "UAS": {"value": None, "ci95": None, "n": 4, "n_invalid": 19, "note": "no valid judge answer: no number"},
            "IFS": {"value": None, "ci95": None, "n": 4, "unavailable": "judge answers 90% invalid > 50%"},
        },
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    doc = _parse(write_report(tmp_path).read_text(encoding="utf-8"))
    why = {row[0]: row[-1] for row in doc.headline}
    assert why == {"SSIM": "", "UAS": "no valid judge answer: no number", "IFS": "judge answers 90% invalid > 50%"}


def test_a_case_without_an_instruction_has_no_quote_in_its_strip(tmp_path: Path):
    """ViDiC's video pairs have no instruction (null in the shard, NaN once read): the caption shows none, not "nan"."""
    videos = tmp_path / "videos"
    src = write_video(videos / "a.mp4", _frames(8, 64, 80, 0), fps=8)
    other = write_video(videos / "b.mp4", _frames(8, 64, 80, 90), fps=8)
    (tmp_path / "cases").mkdir()
    (tmp_path / "summary.json").write_text(json.dumps({"benchmark": "vidic", "metrics": {}}))
    rows = {"case_id": ["0"], "variant": ["base"], "source_path": [str(src)], "edited_path": [str(other)]}
    pd.DataFrame({**rows, "instruction": [None]}).to_parquet(tmp_path / "cases" / "part-0.parquet")
    text = write_report(tmp_path).read_text(encoding="utf-8")
    assert "<strong>case 0 · base</strong></figcaption>" in text and "<q>nan</q>" not in text
