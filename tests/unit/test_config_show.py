"""`vbench-ray config`'s fallback comments: read from a config dataclass's source, wherever the formatter put them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from vbench_ray.config_show import _field_comments


@dataclass
class _Toy:
    """Docstring: not a field's comment."""

    plain: int = 1  # on the field's line
    # above the field,
    # two lines
    above: str = "x"
    wrapped: Optional[int] = None  # inside a wrapped value
    bare: int = 0
    items: list = field(default_factory=list)  # a call's value

    def method(self) -> int:  # not a field
        # nor this
        x: int = 2  # nor this annotated local
        return x


def test_field_comments_above_inline_and_wrapped():
    assert _field_comments(_Toy) == {
        "plain": "on the field's line",
        "above": "above the field, two lines",
        "wrapped": "inside a wrapped value",
        "items": "a call's value",
    }


def test_a_shipped_config_keeps_its_wrapped_comments():
    from vbench_ray.config import RayConfig

    comments = _field_comments(RayConfig)
    assert comments["stall_s"].startswith("a stream from which no row came")
    assert "batch_size" in comments and "address" in comments
