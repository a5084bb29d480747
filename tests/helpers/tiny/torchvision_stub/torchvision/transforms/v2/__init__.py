"""TEST-ONLY stand-in for ``torchvision.transforms.v2`` (see the package docstring): functional API only."""

from . import functional  # noqa: F401
from ..functional import InterpolationMode  # noqa: F401
