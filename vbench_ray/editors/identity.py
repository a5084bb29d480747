"""``identity``: the edited video is the source video, byte for byte (a negative control: an editor that
ignores its instruction should score low on instruction following and high on preservation). The source as it
is: no frame rules, no profile, no GPU (``keeps_source``), so a 128x96 source of 24 frames stays 128x96x24 even
when ``editor.name=identity`` is set on a GPU model's block (configs/editors/identity.yaml is the whole block)."""

from __future__ import annotations

import shutil
from pathlib import Path

from vbench_ray.editors.base import Editor, register_editor


@register_editor
class IdentityEditor(Editor):
    name = "identity"
    keeps_source = True
    paper = "a negative control: the edited video is the source, unchanged"

    def edit(self, source: str, instruction: str | None, annotations: str | None, output: Path, **params) -> dict:
        tmp = output.with_name(output.name + ".tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(output)  # whole or absent: a killed edit leaves no half video behind
        return {}
