# bindloop — the two commands a fresh clone needs: `make demo` and `make test`.
# Everything below installs itself: a .venv with the package and its test extras, Pyodide from npm,
# and the wasm/pure wheels from PyPI. Only PyPI and the npm registry are contacted.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv demo test pytest typecheck js-test conformance bench bench-peers clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(STAMP)

## make demo: an agent loop over a deterministic policy model with real pure tools, traced.
demo: venv
	$(PY) -m bindloop.hosts.demo

## make test: pytest (unit, property, fences, API), mypy --strict, JS tests, conformance on
## CPython and on Pyodide 314 in Node, and a byte-for-byte comparison of the two reports.
test: pytest typecheck js-test conformance-compare

pytest: venv
	$(PY) -m pytest

typecheck: venv
	$(PY) -m mypy

js-test:
	@if ls wasm/demo/*.test.mjs >/dev/null 2>&1; then node --test wasm/demo/; else echo "no JS tests"; fi

conformance: conformance-compare

include wasm/wasm.mk
include conformance/conformance.mk

## Benchmarks print tables; they are not part of `make test`.
bench: venv
	$(PY) bench/loop_overhead.py

bench-peers: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/loop_overhead.py --peers

clean:
	rm -rf $(VENV) .reports wasm/node_modules wasm/wheels dist build .mypy_cache .pytest_cache .hypothesis
