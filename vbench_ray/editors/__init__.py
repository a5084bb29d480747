"""Editing models under test (docs/architecture.md, "Editors"): one module per editor family, registered by name.

An editor is a model pool stage first in the stream (``editor_stages``): source video + instruction ->
the edited video under ``editor.output_dir``, with its cost per output frame and peak GPU memory recorded
(CoVEBench Table 5). ``precomputed`` (the default) adds no stage: the loader reads the edited videos a user
already has. ``identity`` copies the source video: a negative control, and the test double of the seam.
``command`` runs a model's own inference script per case (command.py). ``diffusers`` loads a diffusers
video-to-video / VACE pipeline from a local folder once per actor (diffusers_editor.py). Each model's Table 7
frame rules are data (configs/editors/<model>.yaml, ``editor.frame_rules``): the source is resampled to them
first (frames.py).
"""

from vbench_ray.editors.base import (
    EDITORS,
    EditFailed,
    Editor,
    EditorConfig,
    editor_config_hash,
    editor_stages,
    register_editor,
)
from vbench_ray.editors.frames import FrameRules
from vbench_ray.editors import command, diffusers_editor, identity  # noqa: F401  (registration)

__all__ = [
    "EDITORS",
    "EditFailed",
    "Editor",
    "EditorConfig",
    "FrameRules",
    "editor_config_hash",
    "editor_stages",
    "register_editor",
]
