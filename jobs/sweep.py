"""Ray job entrypoint for sweeps: the same arguments as `vbench-ray sweep`.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python jobs/sweep.py configs/sweeps/vidic_robustness.yaml data.checklist=... output.dir=...
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working dir, when not pip-installed
sys.path.insert(0, str(Path(__file__).resolve().parent))  # jobs/_deps.py, however the file is run

from _deps import require  # noqa: E402  (jobs/_deps.py: standard library only)

require()  # an interpreter without the project's packages: a one-line hint, not a deep ModuleNotFoundError

from vbench_ray.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["sweep", *sys.argv[1:]]))
