"""Every test in tests/pipeline runs on the session's in-process Ray runtime (``ray_local``), including those that
only call ``runner.run``: the run then finds that runtime (one fake GPU, the session's own token) instead of
starting one of its own with Ray's defaults."""

import pytest


@pytest.fixture(autouse=True)
def _on_the_sessions_ray(ray_local):
    return ray_local
