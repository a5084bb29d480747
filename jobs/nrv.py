"""Ray job entrypoint for NRVBench: the same arguments as `vbench-ray run`.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python jobs/nrv.py configs/nrv.yaml data.annotations=... data.edited_dir=... output.dir=...

The config path may be left out (configs/nrv.yaml is used). Inside `ray job submit`, RAY_ADDRESS is set and
the run attaches to the cluster; run directly, it starts a local Ray runtime. Negative controls
(`controls.names=[shuffled,...]`) run as variants next to the real edits.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the working dir, when not pip-installed
sys.path.insert(0, str(Path(__file__).resolve().parent))  # jobs/_deps.py, however the file is run

from _deps import require  # noqa: E402  (jobs/_deps.py: standard library only)

require()  # an interpreter without the project's packages: a one-line hint, not a deep ModuleNotFoundError

from vbench_ray.jobs import job_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(job_main("nrv", sys.argv[1:]))
