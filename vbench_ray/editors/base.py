"""The editor contract and its pool stage (the seam the editing-model issue builds on).

``Editor.edit(source, instruction, annotations, output)`` writes the edited video to ``output`` and returns
what it wants recorded. The stage (``EditorPool``: the model loaded once per actor in ``setup``) names
each output ``edited_name(case_id)`` (``{case_id}.mp4``, the official layout, for ids that are plain file names)
under ``editor.output_dir``, skips cases whose output
already exists (resumable), and records ``edit_seconds``, ``edit_seconds_per_frame`` and ``edit_peak_mb`` (with
``edit_peak_from``, the measure behind it).
A failed edit is the case's ``error_edit``; the other cases go on.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional

from vbench_ray.config import bounded
from vbench_ray.editors.frames import FrameRules, conform, effective_rules
from vbench_ray.pipeline import Stage, format_exception
from vbench_ray.registry import Registry
from vbench_ray.safepaths import unique_component, within


@dataclass
class EditorConfig:
    # precomputed (read data.edited_dir) | identity (copy the source: a control) | command | diffusers
    name: str = "precomputed"
    model: Optional[str] = None  # the model's name, for the record (configs/editors/<model>.yaml)
    output_dir: Optional[str] = None  # where edited videos go (null: RUN_DIR/edited)
    layout: str = "by_variant"  # by_variant: {output_dir}/{variant}/{id}.mp4 | flat: {output_dir}/{id}.mp4 (official)
    num_gpus: float = bounded(0.0, ge=0)  # GPUs per editor replica (fractions allowed)
    # editor pool size (null: as many as the cluster holds)
    replicas: Optional[int] = bounded(None, ge=1, note="null: as many as the cluster holds")
    seed: int = 0  # passed to the model ({seed}); the same seed gives the same video on the same hardware
    profile: Optional[str] = None  # table5: CoVEBench Table 5's cost profile (480x480, 41 frames) over frame_rules
    frame_rules: FrameRules = field(default_factory=FrameRules)  # Table 7's row (editors/frames.py)
    command: Optional[str] = None  # command backend: the inference command template ({source} {instruction} ...)
    workdir: Optional[str] = None  # command backend: where the command runs (the model's repository)
    env: dict = field(default_factory=dict)  # command backend: variables set (null: passed on) beyond command.INHERITED
    # a case's edit taking longer fails: command killed, diffusers stopped at a step
    timeout_s: Optional[float] = bounded(None, gt=0, note="null: no limit")
    stderr_tail_chars: int = bounded(2000, ge=0)  # command backend: how much of stderr the case row keeps
    gpu_poll_s: float = bounded(
        0.5, gt=0
    )  # command backend: how often nvidia-smi is asked for the command's GPU memory
    weights: Optional[str] = None  # diffusers backend: the local model folder (model_index.json + components)
    pipeline: Optional[str] = (
        None  # diffusers backend: the pipeline class, e.g. WanVACEPipeline (null: model_index.json's)
    )
    dtype: str = "bf16"  # diffusers backend: bf16 | fp16 | fp32, the weights' dtype
    vae_dtype: Optional[str] = None  # diffusers backend: the VAE's dtype when it differs (null: dtype)
    device: Optional[str] = None  # diffusers backend: cuda | cuda:N | cpu (null: cuda when the actor has a GPU)
    offload: bool = False  # diffusers backend: enable_model_cpu_offload (a component on the GPU only while it runs)
    steps: Optional[int] = None  # diffusers backend: denoising steps (null: the pipeline's default)
    guidance: Optional[float] = None  # diffusers backend: classifier-free guidance scale (null: the pipeline's default)
    negative_prompt: Optional[str] = None  # diffusers backend
    fps: Optional[float] = None  # diffusers backend: the output's fps (null: the input's, after the frame rules)
    call_kwargs: dict = field(default_factory=dict)  # diffusers backend: more keyword arguments of the pipeline call
    config_hash: Optional[str] = None  # filled in on load: hash of what decides the edited videos


# Keys that do not change what an editor produces: left out of its config hash.
_PLACEMENT_KEYS = (
    "output_dir",
    "layout",
    "num_gpus",
    "replicas",
    "config_hash",
    "timeout_s",
    "stderr_tail_chars",
    "gpu_poll_s",
    "offload",
)


def editor_config_hash(editor: Any) -> str:
    """12 hex digits identifying the editor's settings (model, command, seed, frame rules, profile)."""
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(editor, resolve=True) if OmegaConf.is_config(editor) else dict(editor)
    data = {k: v for k, v in data.items() if k not in _PLACEMENT_KEYS}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


class EditFailed(RuntimeError):
    """An edit that did not produce a video; ``record`` (exit code, stderr tail) still goes in the row."""

    def __init__(self, message: str, record: dict | None = None):
        super().__init__(message)
        self.record = record or {}


class Editor:
    """Base class: ``setup()`` loads the model once per actor; ``edit`` makes one edited video."""

    name: ClassVar[str] = ""
    # True: the edited video is the source itself (identity): no frame rules or profile resample it, and the
    # stage asks for no GPU, whatever the editor block it was switched onto says (editor.name=identity on VACE's)
    keeps_source: ClassVar[bool] = False
    # what `vbench-ray list editors` shows: what it is (paper / official code), what it needs beyond a CPU, and
    # its config keys that name weights -> where the official weights are published (in missing-weights messages)
    paper: ClassVar[str] = ""
    needs: ClassVar[str] = ""
    weights_from: ClassVar[dict[str, str]] = {}

    def __init__(self, cfg: Any):
        self.cfg = cfg

    @classmethod
    def check_weights(cls, cfg: Any) -> list[str]:
        """Problems with what ``cfg`` asks for (weights, templates), each naming its ``editor.*`` key:
        ``vbench_ray.preflight`` calls this before any compute, as it calls each metric's ``check_weights``."""
        return []

    def setup(self) -> None:
        """Load weights (once per pool actor)."""

    def edit(self, source: str, instruction: str | None, annotations: str | None, output: Path, **params) -> dict:
        """Write the edited video to ``output``. ``params``: ``frames``, ``height``, ``width`` (what the frame
        rules made of the source, which ``source`` already is) and ``seed``."""
        raise NotImplementedError


# `editor.name`: a registered editor, or precomputed (no editor stage: the loader reads data.edited_dir)
EDITORS: Registry = Registry(
    "editor", describe=lambda cls: {"section": cls.paper, "needs": cls.needs}, extra=("precomputed",)
)


def register_editor(cls: type[Editor]) -> type[Editor]:
    """Class decorator: add ``cls`` to ``EDITORS`` under its ``name`` (a taken name is refused)."""
    return EDITORS.add(cls.name, cls)


def edited_name(case_id: str) -> str:
    """The file an editor writes for ``case_id`` and the one ``data.edited_dir`` is searched for first:
    ``{id}.mp4`` (the official layout) when the id is a harmless file name, else a one-to-one safe form
    (``safepaths.unique_component``: ``a b`` and ``a_b`` never share a video)."""
    return f"{unique_component(case_id)}.mp4"


class EditorPool:
    """Row -> ``{edited_path, edit_seconds, edit_seconds_per_frame, edit_peak_mb, ...}`` (see ``EDIT_OUTPUTS``)."""

    def __init__(self, cfg: dict, output_dir: str, inputs_dir: str | None = None):
        from omegaconf import OmegaConf

        self.cfg = OmegaConf.create(cfg)
        self.editor = EDITORS[cfg["name"]](self.cfg)
        self.editor.setup()
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.inputs_dir = Path(inputs_dir) if inputs_dir else self.output_dir / ".inputs"
        self.rules = None if self.editor.keeps_source else effective_rules(self.cfg)
        self.flat = self.cfg.get("layout", "by_variant") == "flat"
        self.stamp = {
            "edit_seed": int(self.cfg.seed),
            "editor_hash": self.cfg.get("config_hash") or editor_config_hash(self.cfg),
        }

    def _path(self, root: Path, row: dict) -> Path:
        return (
            within(root, edited_name(row["case_id"]))
            if self.flat
            else within(root, unique_component(row["variant"]), edited_name(row["case_id"]))
        )

    def __call__(self, row: dict) -> dict:
        from vbench_ray.video.io import VideoReader

        output = self._path(self.output_dir, row)
        if output.exists():  # made by an earlier run: resumable
            return {"edited_path": str(output), **self.stamp}
        output.parent.mkdir(parents=True, exist_ok=True)
        # the editor writes a partial file; only a finished video gets the official name
        partial = self._path(self.output_dir / ".partial", row)
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.unlink(missing_ok=True)
        source = row["source_path"]
        params = {"seed": int(self.cfg.seed)}
        out: dict = dict(self.stamp)
        if self.rules:
            source, p = conform(source, self._path(self.inputs_dir, row), self.rules)
            params.update(frames=p.frames, height=p.height, width=p.width)
            out["edit_input_path"] = source
        else:
            info = VideoReader(source).info
            params.update(frames=info.num_frames, height=info.height, width=info.width)
        peak = _reset_peak()
        start = time.perf_counter()
        try:
            out.update(
                self.editor.edit(source, row.get("instruction"), row.get("annotations"), partial, **params) or {}
            )
            if not partial.exists():
                raise EditFailed(f"the editor wrote no video ({partial})")
            frames = VideoReader(str(partial)).info.num_frames
        except Exception as exc:  # this case failed; the other cases go on
            partial.unlink(missing_ok=True)
            record = exc.record if isinstance(exc, EditFailed) else {}
            return {
                **out,
                **record,
                "edit_seconds": time.perf_counter() - start,
                **_peak_fields(record, peak),
                "error_edit": str(exc) if isinstance(exc, EditFailed) else format_exception(exc),
            }
        seconds = time.perf_counter() - start
        shutil.move(str(partial), output)
        return {
            **out,
            "edited_path": str(output),
            "edit_seconds": seconds,
            "edit_frames": frames,
            "edit_seconds_per_frame": seconds / max(1, frames),
            **_peak_fields(out, peak),
        }


EDIT_OUTPUTS = {
    "edited_path": "str",
    "edit_input_path": "str",
    "edit_frames": "int",
    "edit_seconds": "float",
    "edit_seconds_per_frame": "float",
    "edit_peak_mb": "float",
    "edit_peak_from": "str",
    "edit_exit_code": "int",
    "edit_stderr": "str",
    "edit_seed": "int",
    "editor_hash": "str",
}

# What ``edit_peak_mb`` measured: the tensors the actor's own process allocated (an in-process model, e.g. the
# diffusers backend: CoVEBench Table 5's measure), or what nvidia-smi reports for a command's processes (command.py).
PEAK_TORCH = "torch.cuda.max_memory_allocated"


def _reset_peak():
    """A function returning the peak GPU memory (MB) since this call, summed over the actor's visible GPUs (one,
    for a one-GPU replica), or None without CUDA. A process that never initialised CUDA (a ``command`` editor's
    actor, a model on the CPU) holds nothing there, and torch refuses to reset its statistics: None too. One that has
    not imported torch has not initialised CUDA through it, and is not made to import it (seconds of CPU per actor)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            devices = range(torch.cuda.device_count())
            for d in devices:
                torch.cuda.reset_peak_memory_stats(d)
            return lambda: sum(torch.cuda.max_memory_allocated(d) for d in devices) / 2**20
    except RuntimeError:
        pass
    return lambda: None


def _peak_fields(record: dict, peak) -> dict:
    """``edit_peak_mb`` and what measured it: the editor's own measure when it made one (``edit_peak_from`` in
    its record: a command's processes are not the actor's), else the actor's CUDA peak."""
    if "edit_peak_from" in record:
        return {"edit_peak_mb": record.get("edit_peak_mb"), "edit_peak_from": record["edit_peak_from"]}
    mb = peak()
    return {"edit_peak_mb": mb, "edit_peak_from": PEAK_TORCH if mb is not None else None}


def editor_stages(cfg: Any) -> list[Stage]:
    """The editor pool (first in the stream), or nothing: ``precomputed``, or a benchmark without editors."""
    editor = cfg.get("editor") if hasattr(cfg, "get") else None
    if editor is None or editor.name == "precomputed":
        return []
    run_dir = Path(cfg.output.dir).resolve()
    if editor.name not in EDITORS:
        from vbench_ray.config import ConfigError

        raise ConfigError(f"`editor.name`: {EDITORS.unknown(editor.name)}")
    from omegaconf import OmegaConf

    return [
        Stage(
            name="edit",
            fn=EditorPool,
            kind="pool",
            init_kwargs={
                "cfg": OmegaConf.to_container(editor, resolve=True),
                "output_dir": str(editor.output_dir or run_dir / "edited"),
                "inputs_dir": str(run_dir / "edit_inputs"),
            },
            inputs=("source_path", "instruction", "annotations"),
            outputs=dict(EDIT_OUTPUTS),
            num_cpus=1.0,
            num_gpus=0.0 if EDITORS[editor.name].keeps_source else float(editor.num_gpus),
            workers=editor.replicas,
            batch_size=1,
            cpu_setting="editor.num_gpus=0",
        )
    ]
