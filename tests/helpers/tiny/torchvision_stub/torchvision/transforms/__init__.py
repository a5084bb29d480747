"""TEST-ONLY stand-in for ``torchvision.transforms`` (see the package docstring): functional API only."""

from . import functional, v2  # noqa: F401
from .functional import InterpolationMode  # noqa: F401
