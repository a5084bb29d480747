"""Editing models under test (DESIGN.md, "Editors"): one module per editor family, registered by name.

An editor is a model pool stage first in the stream (``editor_stages``): source video + instruction ->
the edited video under ``editor.output_dir``, with its cost per output frame and peak GPU memory recorded
(CoVEBench Table 5). ``precomputed`` (the default) adds no stage: the loader reads the edited videos a user
already has. ``identity`` copies the source video: a negative control, and the test double of the seam.
"""

from vbench_ray.editors.base import EDITORS, Editor, EditorConfig, editor_stages, register_editor
from vbench_ray.editors import identity  # noqa: F401  (registration)

__all__ = ["EDITORS", "Editor", "EditorConfig", "editor_stages", "register_editor"]
