"""Writing a baseline's submission folder: ``solution.json`` and the repair ``report.md``."""

from __future__ import annotations

import json
from pathlib import Path


def write_solution(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_report(out: Path, text: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text.rstrip() + "\n", encoding="utf-8")
