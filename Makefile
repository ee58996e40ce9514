# The two commands: `make run` (the whole platform on this machine) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install model run test browser lint bench-engine bench-e2e clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Pin torch first: a CPU build is on this machine's disk; a loose spec pulls GBs of CUDA.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

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
