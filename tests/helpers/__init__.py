"""What the tests share that is not a fixture: paths, config overrides, synthetic videos, official-code oracles,
the multi-node cluster script, tiny random models (``tiny/``) and the loud-skip plugin (``ci_skips``).

Imported as ``helpers.<module>``: ``tests/`` is on ``sys.path`` through ``tests/conftest.py`` (pytest's rootdir
conftest), on Ray workers' ``PYTHONPATH`` (the ``ray_local`` fixture) and on test subprocesses' ``PYTHONPATH``."""
