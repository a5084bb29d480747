"""Test-only tiny models (random weights, built offline) and the helpers for the processes that serve them.

Nothing in here is used by the ``vbench_ray`` library itself; see ``models.py`` and ``procs.py``.
"""
