"""The editing model's cost over a run's rows, as CoVEBench Table 5 reports it: the mean of the cases' wall seconds
per output frame, and the peak GPU memory (MB): ``torch.cuda.max_memory_allocated`` in the editor's process for an
in-process model (``diffusers``); for a ``command`` editor, whose model runs in child processes, what nvidia-smi
reported for the command's process group (editors/gpumem.py; null without nvidia-smi); null on CPU.
``peak_from`` names the measure(s) behind ``peak_mb``."""

from __future__ import annotations

from typing import Any


def edit_summary(rows: list[dict], editor: Any) -> dict:
    """``summary.json``'s ``edit`` section. Cases edited by an earlier run of the same directory keep their
    numbers; videos found already made (resumed from files alone) carry none and are not averaged."""
    loaded = [r for r in rows if not r.get("error_load")]
    failed = [r for r in loaded if r.get("error_edit")]
    timed = [r for r in loaded if not r.get("error_edit") and r.get("edit_seconds_per_frame") is not None]
    peaks = [r["edit_peak_mb"] for r in timed if r.get("edit_peak_mb") is not None]
    spf = [r["edit_seconds_per_frame"] for r in timed]
    get = editor.get if hasattr(editor, "get") else lambda k, d=None: getattr(editor, k, d)
    return {
        "editor": get("name"),
        "model": get("model"),
        "profile": get("profile"),
        "seed": get("seed"),
        "config_hash": get("config_hash"),
        "n_cases": len(loaded),
        "n_edited": len(timed),
        "n_reused": len(loaded) - len(timed) - len(failed),
        "n_failed": len(failed),
        "failed": {r["case_id"]: r["error_edit"] for r in failed[:50]},
        "mean_seconds_per_frame": sum(spf) / len(spf) if spf else None,
        "peak_mb": max(peaks) if peaks else None,
        "peak_from": sorted({r["edit_peak_from"] for r in timed if r.get("edit_peak_from")}),
        "mean_seconds_per_case": (sum(r["edit_seconds"] for r in timed) / len(timed)) if timed else None,
        "frames_edited": sum(r.get("edit_frames") or 0 for r in timed),
    }


def edit_report_table(edit: dict) -> dict:
    """The report's "Editing cost" table (``summary.report_tables``), in Table 5's columns."""

    def fmt(x, spec):
        return "n/a" if x is None else format(x, spec)

    label = edit.get("model") or edit.get("editor")
    return {
        "title": "Editing cost (CoVEBench Table 5)",
        "columns": [
            "Method",
            "Time (s/f)",
            "Peak VRAM (MB)",
            "peak measured by",
            "profile",
            "edited",
            "reused",
            "failed",
            "seed",
            "config hash",
        ],
        "rows": [
            [
                label,
                fmt(edit.get("mean_seconds_per_frame"), ".3f"),
                fmt(edit.get("peak_mb"), ",.1f"),
                "; ".join(edit.get("peak_from") or []) or "n/a",
                edit.get("profile") or "frame rules",
                edit["n_edited"],
                edit["n_reused"],
                edit["n_failed"],
                edit.get("seed"),
                edit.get("config_hash"),
            ]
        ],
    }
