# bindloop — the two commands a fresh clone needs: `make demo` and `make test`.
# Everything below installs itself: a .venv with the package and its test extras, Pyodide from npm,
# and the wasm/pure wheels from PyPI. Only PyPI and the npm registry are contacted.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv demo demo-providers demo-openai test lint pytest typecheck js-test wasm-smoke conformance \
	bench bench-peers clean test-matrix

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

## The same agent through real provider wires over loopback HTTP: an Anthropic-wire provider that
## answers 503, then fallback to an OpenAI-chat-wire provider streaming SSE (route log in the trace).
demo-providers: venv
	$(PY) -m bindloop.hosts.provider_demo

## Against a real OpenAI-compatible endpoint: make demo-openai BASE_URL=... MODEL=... (key from
## $$OPENAI_API_KEY, read by the CLI only).
demo-openai: venv
	$(PY) -m bindloop.hosts.provider_demo openai --base-url $(BASE_URL) --model $(MODEL)

## make test: pytest (unit, property, fences, API), mypy --strict, JS tests, conformance on
## CPython and on Pyodide 314 in Node (plain and .pyc wheels), a byte-for-byte comparison of the
## reports, and the agent page in headless Chromium.
test: lint pytest typecheck js-test conformance-compare conformance-pyodide-pyc wasm-smoke test-browser

pytest: venv
	$(PY) -m pytest

typecheck: venv
	$(PY) -m mypy

lint: venv
	$(PY) -m ruff check src tests conformance bench wasm

js-test:
	@if ls wasm/demo/*.test.mjs >/dev/null 2>&1; then node --test wasm/demo/; else echo "no JS tests"; fi

conformance: conformance-compare

## The JS fetch transport under Pyodide: a real JS Response body streamed into the wire decoders.
wasm-smoke: wasm/node_modules/.package-lock.json wasm-wheels
	node wasm/run_smoke.mjs tests/wire/pyodide_fetch_smoke.py

include wasm/wasm.mk
include conformance/conformance.mk

## Benchmarks print tables; they are not part of `make test`.
bench: venv
	$(PY) bench/loop_overhead.py

bench-peers: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/loop_overhead.py --peers

## pytest + conformance on CPython 3.11, 3.12, 3.13 (pyenv; a venv each in .venv-3.XX) beside
## Pyodide 3.14: every report byte-identical to Pyodide's. Not part of `make test` (time).
test-matrix: venv conformance-pyodide
	scripts/test_matrix.sh $(WASM_REPORT)

clean:
	rm -rf $(VENV) .venv-3.* .reports wasm/node_modules wasm/wheels wasm/wheels-pyc dist build .mypy_cache .pytest_cache .hypothesis
