# bindloop — the two commands a fresh clone needs: `make demo` and `make test`.
# Everything below installs itself: a .venv with the package and its test extras, Pyodide from npm,
# and the wasm/pure wheels from PyPI. Only PyPI and the npm registry are contacted.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv demo demo-providers demo-openai demo-mcp test lint pytest typecheck js-test wasm-smoke \
	mcp-pyodide conformance bench bench-peers bench-mcp clean

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

## An agent that finds a local MCP server (the official SDK's, on 127.0.0.1) in its plugin catalog,
## loads it and uses its tools, traced.
demo-mcp: venv
	$(PY) -m bindloop.hosts.mcp_demo

## make test: pytest (unit, property, fences, API), mypy --strict, JS tests, conformance on
## CPython and on Pyodide 314 in Node, and a byte-for-byte comparison of the two reports.
test: lint pytest typecheck js-test conformance-compare wasm-smoke mcp-pyodide

pytest: venv
	$(PY) -m pytest

typecheck: venv
	$(PY) -m mypy

lint: venv
	$(PY) -m ruff check src tests conformance bench

js-test:
	@if ls wasm/demo/*.test.mjs >/dev/null 2>&1; then node --test wasm/demo/; else echo "no JS tests"; fi

conformance: conformance-compare

## The JS fetch transport under Pyodide: a real JS Response body streamed into the wire decoders.
wasm-smoke: wasm/node_modules/.package-lock.json wasm-wheels
	node wasm/run_smoke.mjs tests/wire/pyodide_fetch_smoke.py

## The MCP client under Pyodide in Node, over JS fetch, against the SDK's server on 127.0.0.1.
mcp-pyodide: wasm/node_modules/.package-lock.json wasm-wheels
	BINDLOOP_REQUIRE_PYODIDE=1 $(PY) -m pytest tests/mcp/test_mcp_pyodide.py -q

include wasm/wasm.mk
include conformance/conformance.mk

## Benchmarks print tables; they are not part of `make test`.
bench: venv
	$(PY) bench/loop_overhead.py

## MCP client overhead per call vs a direct tool call, and import cost on CPython and Pyodide.
bench-mcp: venv
	$(PY) bench/mcp.py

bench-peers: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/loop_overhead.py --peers

clean:
	rm -rf $(VENV) .reports wasm/node_modules wasm/wheels dist build .mypy_cache .pytest_cache .hypothesis
