"""Test-only tiny models (random weights, built offline) and the test-only torchvision stand-in.

Nothing in here is used by the ``vbench_ray`` library itself; see ``models.py`` and ``torchvision_stub/``.
"""
