"""Ray job entrypoint for leaderboards: the same arguments as `vbench-ray compare`.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python jobs/compare.py /abs/runs/a /abs/runs/b /abs/runs/c --out /abs/leaderboards/cove

Reads finished run directories (paths must be visible to the node running the job) and writes
leaderboard.json, leaderboard.csv, leaderboard.html and an offline wandb run into --out.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working dir, when not pip-installed
sys.path.insert(0, str(Path(__file__).resolve().parent))  # jobs/_deps.py, however the file is run

from _deps import require  # noqa: E402  (jobs/_deps.py: standard library only)

require()  # an interpreter without the project's packages: a one-line hint, not a deep ModuleNotFoundError

from vbench_ray.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]]))
