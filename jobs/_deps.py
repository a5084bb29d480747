"""Checked first by every job entrypoint: does this interpreter have the project's packages?

`ray job submit ... -- python jobs/cove.py` runs the `python` on the PATH of the shell that ran `ray start`,
which is often not the project's environment; without this check the job dies deep in an import with
`ModuleNotFoundError: No module named 'pyarrow'`. Only the standard library is used here.
"""

import importlib.util
import sys
from pathlib import Path

# What every benchmark imports at once (pyproject's core dependencies); found, not imported (fast).
REQUIRED = ("numpy", "pyarrow", "omegaconf", "ray", "cv2", "av")


def require() -> None:
    missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
    if not missing:
        return
    here = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"  # run from a checkout with .venv
    python = str(here) if here.exists() else "/path/to/vbench-ray/.venv/bin/python"
    sys.exit(
        f"vbench-ray job: this interpreter ({sys.executable}) lacks the packages {', '.join(missing)}: "
        f"activate the project's environment (`. .venv/bin/activate` in the repository) before `ray start` "
        f"(`ray stop` first), or give the job that interpreter (`-- {python} jobs/...`); README, "
        f"\"On a Ray cluster\"."
    )
