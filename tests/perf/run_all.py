"""Run every performance script under tests/perf (on demand, never in CI): `make perf`."""

import subprocess
import sys
from pathlib import Path

for script in sorted(Path(__file__).parent.glob("*.py")):
    if script.name != "run_all.py":
        print(f"== {script.name}", flush=True)
        subprocess.run([sys.executable, str(script)], check=True)
