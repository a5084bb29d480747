"""Deterministic synthetic mini-benchmarks in each benchmark's official layout.

* :mod:`vbench_ray.synth.scenes`: procedural scenes (moving shapes on textured backgrounds) rendered
  from a small JSON-serialisable spec; edits are made by re-rendering with a changed parameter.
* :mod:`vbench_ray.synth.cove`: ``synth_cove(out_dir, n, seed)``, a mini CoVEBench (videos, edited
  videos, ``checklist.json`` in the official schema, ``synth_manifest.json`` with the ground truth); a task's
  scenes and edits in :mod:`vbench_ray.synth.cove_edits`, its descriptions, instruction and checklist
  questions in :mod:`vbench_ray.synth.cove_questions`.
"""

from .cove import COMPOSITE_EDITS, EDIT_CATEGORIES, EDIT_TYPES, synth_cove, task_edit_types
from .scenes import (
    Background,
    Scene,
    Shape,
    apply_colormap,
    render_scene,
    scene_from_dict,
    scene_to_dict,
    shape_center,
    shape_coverage,
)

__all__ = [
    "COMPOSITE_EDITS",
    "EDIT_CATEGORIES",
    "EDIT_TYPES",
    "Background",
    "Scene",
    "Shape",
    "apply_colormap",
    "render_scene",
    "scene_from_dict",
    "scene_to_dict",
    "shape_center",
    "shape_coverage",
    "synth_cove",
    "task_edit_types",
]
