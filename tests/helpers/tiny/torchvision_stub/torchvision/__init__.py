"""TEST-ONLY stand-in for ``torchvision``. NOT torchvision, and never used by the ``vbench_ray`` library.

Why it exists: on the project's CPU machines the PyPI ``torchvision`` wheels are CUDA-linked and break beside
the CPU build of torch (``operator torchvision::nms does not exist``), so the CPU stack uninstalls torchvision
(``docs/stack.md``). Yet transformers' Qwen2-VL image/video processors and, through them, vLLM's Qwen2-VL
model module import ``torchvision.transforms.v2.functional`` at import time. To exercise the VLM judge paths
(vLLM, Ray Data LLM) with a tiny random Qwen2-VL in tests, this package provides the handful of functions those
code paths actually call, implemented with plain torch (resize via ``torch.nn.functional.interpolate``,
normalize, pad, crop, dtype conversion). Outputs are close to, not bit-identical with, real torchvision.

It is only put on ``PYTHONPATH`` of test subprocesses / Ray workers (``tests/helpers/tiny/torchvision_stub.stub_env``).
The GPU stack installs real torchvision; production code must never depend on this package.
"""

__version__ = "0.28.0+teststub"  # >= 0.26: transformers then knows the removed video-decoding API is absent
IS_TEST_STUB = True

from . import io, transforms  # noqa: E402,F401
