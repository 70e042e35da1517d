# bindloop — the two commands a fresh clone needs: `make demo` and `make test`.
# Everything below installs itself: a .venv with the package and its test extras, Pyodide from npm,
# and the wasm/pure wheels from PyPI. Only PyPI and the npm registry are contacted.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv demo demo-providers demo-openai test lint pytest typecheck js-test wasm-smoke conformance \
	bench bench-peers bench-agent clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(STAMP)

## make demo: an agent loop over a deterministic policy model with real pure tools, traced; then
## the agent API: prompt_agent(schema) with a tool, a re-ask and partial structured output, over
## a scripted OpenAI-chat provider on 127.0.0.1.
demo: venv
	$(PY) -m bindloop.hosts.demo
	$(PY) -m bindloop.hosts.agent_demo

## The same agent through real provider wires over loopback HTTP: an Anthropic-wire provider that
## answers 503, then fallback to an OpenAI-chat-wire provider streaming SSE (route log in the trace).
demo-providers: venv
	$(PY) -m bindloop.hosts.provider_demo

## Against a real OpenAI-compatible endpoint: make demo-openai BASE_URL=... MODEL=... (key from
## $$OPENAI_API_KEY, read by the CLI only).
demo-openai: venv
	$(PY) -m bindloop.hosts.provider_demo openai --base-url $(BASE_URL) --model $(MODEL)

## make test: pytest (unit, property, fences, API), mypy --strict, JS tests, conformance on
## CPython and on Pyodide 314 in Node, and a byte-for-byte comparison of the two reports.
test: lint pytest typecheck js-test conformance-compare wasm-smoke

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

include wasm/wasm.mk
include conformance/conformance.mk

## Benchmarks print tables; they are not part of `make test`.
bench: venv
	$(PY) bench/loop_overhead.py

bench-peers: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/loop_overhead.py --peers

## The agent API's overhead per turn vs bare run_tool_loop, pydantic-ai and openai-agents.
bench-agent: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/agent.py --peers --peer-ns 10,100

clean:
	rm -rf $(VENV) .reports wasm/node_modules wasm/wheels dist build .mypy_cache .pytest_cache .hypothesis
