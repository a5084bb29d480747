"""Token authentication for the tests' in-process Ray runtime, scoped to the ``ray.init`` that starts it.

Ray 2.60 turns token authentication on for every new local ``ray.init`` and, unless told otherwise, uses
``~/.ray/auth_token``: one token shared by every Ray runtime of the user on the host (on a machine where several
people run the suite, any of their processes could then talk to this session's runtime). The tests' runtime
(``ray_local``) gets a token file of its own instead. Ray reads ``RAY_AUTH_MODE`` and the token where a process
starts: its GCS, raylet and workers are children of the ``ray.init`` and read them from the environment they are
started with; this process reads them once into Ray's cached config (``ray._raylet.Config``) and token loader, so
both are reloaded after the variables are set (what Ray's own ``_enable_token_auth`` does in
``ray/_private/authentication/authentication_token_setup.py``). Once ``ray.init`` has returned the variables leave
``os.environ`` again: a process a test starts afterwards (a CLI run, a ``ray start`` head, a vLLM server) gets the
environment a user's shell has, unless the test hands it a token itself.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from contextlib import contextmanager
from pathlib import Path

from helpers.common import RAY_AUTH_VARS


def new_token_file(directory: Path | None = None) -> Path:
    """A fresh random token in a file only this user can read."""
    folder = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="vbr-token-"))
    path = folder / "auth_token"
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    return path


def _reload_ray_auth() -> None:
    """Make this process's Ray read ``RAY_AUTH_MODE`` and the token again (it cached them when first used)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@contextmanager
def private_ray_auth(token: Path):
    """Within the block, token authentication with ``token`` for a ``ray.init`` made there; afterwards
    ``os.environ`` holds what it held before (the runtime started in the block keeps its token)."""
    saved = {k: os.environ.pop(k) for k in RAY_AUTH_VARS if k in os.environ}
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    _reload_ray_auth()
    try:
        yield
    finally:
        for k in RAY_AUTH_VARS:
            os.environ.pop(k, None)
        os.environ.update(saved)
