"""The editor contract and its pool stage (the seam the editing-model issue builds on).

``Editor.edit(source, instruction, annotations, output)`` writes the edited video to ``output`` and returns
what it wants recorded. The stage (``EditorPool``: the model loaded once per actor in ``setup``) names
each output ``{case_id}.mp4`` (the official layout) under ``editor.output_dir``, skips cases whose output
already exists (resumable), and records ``edit_seconds``, ``edit_seconds_per_frame`` and ``edit_peak_mb``.
A failed edit is the case's ``error_edit``; the other cases go on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

from vbench_ray.pipeline import Stage
from vbench_ray.safepaths import component, within


@dataclass
class EditorConfig:
    name: str = "precomputed"  # precomputed (read data.edited_dir) | identity (copy the source: a control)
    output_dir: Optional[str] = None  # where edited videos go (null: RUN_DIR/edited)
    num_gpus: float = 0.0  # GPUs per editor replica (fractions allowed)
    replicas: Optional[int] = None  # editor pool size (null: as many as the cluster holds)
    seed: int = 0


class Editor:
    """Base class: ``setup()`` loads the model once per actor; ``edit`` makes one edited video."""

    name: ClassVar[str] = ""

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def setup(self) -> None:
        """Load weights (once per pool actor)."""

    def edit(self, source: str, instruction: str | None, annotations: str | None, output: Path) -> dict:
        raise NotImplementedError


EDITORS: dict[str, type[Editor]] = {}


def register_editor(cls: type[Editor]) -> type[Editor]:
    EDITORS[cls.name] = cls
    return cls


class EditorPool:
    """Row -> ``{edited_path, edit_seconds, edit_seconds_per_frame, edit_peak_mb}``."""

    def __init__(self, cfg: dict, output_dir: str):
        from omegaconf import OmegaConf

        self.editor = EDITORS[cfg["name"]](OmegaConf.create(cfg))
        self.editor.setup()
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)

    def __call__(self, row: dict) -> dict:
        from vbench_ray.video.io import VideoReader

        output = within(self.output_dir, component(row["variant"]), f"{component(row['case_id'])}.mp4")
        if output.exists():  # made by an earlier run: resumable
            return {"edited_path": str(output)}
        output.parent.mkdir(parents=True, exist_ok=True)
        peak = _reset_peak()
        start = time.perf_counter()
        self.editor.edit(row["source_path"], row.get("instruction"), row.get("annotations"), output)
        seconds = time.perf_counter() - start
        frames = VideoReader(str(output)).info.num_frames
        return {"edited_path": str(output), "edit_seconds": seconds,
                "edit_seconds_per_frame": seconds / max(1, frames), "edit_peak_mb": peak()}


def _reset_peak():
    """A function returning the peak GPU memory (MB) since this call, or None without CUDA."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
            return lambda: torch.cuda.max_memory_allocated() / 2 ** 20
    except ImportError:
        pass
    return lambda: None


def editor_stages(cfg: Any) -> list[Stage]:
    """The editor pool (first in the stream), or nothing: ``precomputed``, or a benchmark without editors."""
    editor = cfg.get("editor") if hasattr(cfg, "get") else None
    if editor is None or editor.name == "precomputed":
        return []
    run_dir = Path(cfg.output.dir).resolve()
    if editor.name not in EDITORS:
        from vbench_ray.config import ConfigError

        raise ConfigError(f"editor.name={editor.name!r} is not a known editor: {['precomputed', *sorted(EDITORS)]}")
    from omegaconf import OmegaConf

    return [Stage(name="edit", fn=EditorPool, kind="pool",
                  init_kwargs={"cfg": OmegaConf.to_container(editor, resolve=True),
                               "output_dir": str(editor.output_dir or run_dir / "edited")},
                  inputs=("source_path", "instruction", "annotations"),
                  outputs={"edited_path": "str", "edit_seconds": "float", "edit_seconds_per_frame": "float",
                           "edit_peak_mb": "float"},
                  num_cpus=1.0, num_gpus=float(editor.num_gpus), workers=editor.replicas, batch_size=1)]
