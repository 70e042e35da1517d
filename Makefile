# bindloop — the two commands a fresh clone needs: `make demo` and `make test`.
# Everything below installs itself: a .venv with the package and its test extras, Pyodide from npm,
# and the wasm/pure wheels from PyPI. Only PyPI and the npm registry are contacted.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# The test tooling that is not shipped (harness.fixtures) and the demos (examples.demos) import
# from the repository root.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: all venv demo demo-providers demo-openai demo-mcp test lint pytest typecheck js-test wasm-smoke \
	mcp-pyodide pyodide-timers conformance bench bench-peers bench-mcp bench-agent clean crash-test fuzz soak bench-report \
	test-matrix store-servers bench-scale bench-persist test-mcp-conformance test-mcp-conformance-2026 mcp-everything

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(STAMP)

# `make demo` needs only the package and httpx (the loopback transport): a venv of its own, so a
# fresh clone runs the demo without downloading the test toolchain.
DEMO_VENV  := .venv-demo
DEMO_PY    := $(DEMO_VENV)/bin/python
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_PY) -m pip install --quiet -e '.[httpx]'
	touch $@

## make demo: an agent loop over a deterministic policy model with real pure tools, traced; then
## the agent API: prompt_agent(schema) with a tool, a re-ask and partial structured output, over
## a scripted OpenAI-chat provider on 127.0.0.1.
demo: $(DEMO_STAMP)
	$(DEMO_PY) -m examples.demos.demo
	$(DEMO_PY) -m examples.demos.agent_demo

## The same agent through real provider wires over loopback HTTP: an Anthropic-wire provider that
## answers 503, then fallback to an OpenAI-chat-wire provider streaming SSE (route log in the trace).
demo-providers: venv
	$(PY) -m examples.demos.provider_demo

## Against a real OpenAI-compatible endpoint: make demo-openai BASE_URL=... MODEL=... (key from
## $$OPENAI_API_KEY, read by the CLI only).
demo-openai: venv
	$(PY) -m examples.demos.provider_demo openai --base-url $(BASE_URL) --model $(MODEL)

## An agent that finds a local MCP server (the official SDK's, on 127.0.0.1) in its plugin catalog,
## loads it and uses its tools, traced.
demo-mcp: venv
	$(PY) -m examples.demos.mcp_demo

## make test: pytest (unit, property, fences, API), mypy --strict, JS tests, conformance on
## CPython, on Pyodide 314 in Node (plain, .pyc and bytecode wheels) and in real workerd, byte-for-byte
## comparisons of the reports, the Worker template (tests/worker) in real workerd, the MCP client under
## Pyodide, the MCP client against the TypeScript everything server and the official MCP conformance
## suite, and the agent page in headless Chromium.
test: lint pytest typecheck js-test conformance-compare conformance-pyodide-pyc conformance-pyodide-bytecode wasm-smoke mcp-pyodide pyodide-timers \
	mcp-everything test-mcp-conformance test-mcp-conformance-2026 \
	conformance-workerd test-worker test-browser

pytest: venv store-servers
	$(PY) -m pytest

## Debian's postgresql and redis-server for the store tests (tests/hosts start their own on free
## 127.0.0.1 ports), installed with apt-get when missing; the tests use a running server instead
## when BINDLOOP_TEST_POSTGRES_DSN / BINDLOOP_TEST_REDIS_URL name one.
store-servers:
	@missing=""; ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "store-servers: missing$$missing (not root: install them or set the URLs)"; exit 0; fi; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing

typecheck: venv
	$(PY) -m mypy

lint: venv
	$(PY) -m ruff check src tests examples harness bench worker

js-test:
	@if ls harness/wasm/demo/*.test.mjs >/dev/null 2>&1; then node --test harness/wasm/demo/; else echo "no JS tests"; fi

conformance: conformance-compare

## The JS fetch transport under Pyodide: a real JS Response body streamed into the wire decoders;
## then create_model there (no environment read, fetch, fallback across a 503) over loopback HTTP.
wasm-smoke: harness/wasm/node_modules/.package-lock.json wasm-wheels
	node harness/wasm/run_smoke.mjs tests/wire/pyodide_fetch_smoke.py
	BINDLOOP_REQUIRE_PYODIDE=1 $(PY) -m pytest tests/hosts/test_create_model_pyodide.py -q

## The MCP client under Pyodide in Node, over JS fetch, against the SDK's server on 127.0.0.1;
## and the MCP server core there, its transcript identical to CPython's.
mcp-pyodide: harness/wasm/node_modules/.package-lock.json wasm-wheels
	BINDLOOP_REQUIRE_PYODIDE=1 $(PY) -m pytest tests/mcp/test_mcp_pyodide.py \
		tests/mcp/test_mcp_server_runtimes.py -q

## Tools from plain functions under Pyodide in Node (Python 3.14, deferred annotations): the same
## definitions, answers and refusals as on CPython.
tools-pyodide: harness/wasm/node_modules/.package-lock.json wasm-wheels
	BINDLOOP_REQUIRE_PYODIDE=1 $(PY) -m pytest tests/tools/test_pyodide_function_tools.py -q
test: tools-pyodide
.PHONY: tools-pyodide

## Under Pyodide in Node, a finished run leaves no long timer scheduled: Node exits within seconds.
pyodide-timers: harness/wasm/node_modules/.package-lock.json wasm-wheels
	BINDLOOP_REQUIRE_PYODIDE=1 $(PY) -m pytest tests/run/test_pyodide_exit.py -q

## The official MCP conformance suite (npm @modelcontextprotocol/conformance, on Node 22 from npm
## node@22) running its client scenarios against bindloop's client through
## harness.fixtures.mcp_conformance_client; then its server scenarios against bindloop's MCP server
## (McpServerApp under uvicorn, tests/mcp/conformance/run_server.py); prints one line per scenario
## and the totals.
MCP_CONFORMANCE := tests/mcp/conformance
$(MCP_CONFORMANCE)/node_modules/.package-lock.json: $(MCP_CONFORMANCE)/package.json $(MCP_CONFORMANCE)/package-lock.json
	cd $(MCP_CONFORMANCE) && npm ci --no-audit --no-fund
	touch $@

test-mcp-conformance: venv $(MCP_CONFORMANCE)/node_modules/.package-lock.json
	$(PY) $(MCP_CONFORMANCE)/run.py --retry
	$(PY) $(MCP_CONFORMANCE)/run_server.py

## The suite's 0.2.0 pre-release (tests/mcp/conformance/v2026, pinned apart from 0.1.16) with its
## 2026-07-28 client scenarios against the same adapter: bindloop's client speaking the stateless
## revision; then its 2026-07-28 server scenarios against bindloop's MCP server (run_server.py,
## the ones a tools-only server answers: its docstring lists the rest). Pinned to the exact pre-release (its package-lock), so a newer pre-release changes
## nothing until the pin moves.
$(MCP_CONFORMANCE)/v2026/node_modules/.package-lock.json: $(MCP_CONFORMANCE)/v2026/package.json $(MCP_CONFORMANCE)/v2026/package-lock.json
	cd $(MCP_CONFORMANCE)/v2026 && npm ci --no-audit --no-fund
	touch $@

test-mcp-conformance-2026: venv $(MCP_CONFORMANCE)/v2026/node_modules/.package-lock.json
	$(PY) $(MCP_CONFORMANCE)/run.py --retry --suite v2026 --spec-version 2026-07-28
	$(PY) $(MCP_CONFORMANCE)/run_server.py --retry --suite v2026 --spec-version 2026-07-28

## The TypeScript everything server (npm @modelcontextprotocol/server-everything, bound to
## 127.0.0.1) against bindloop's client on asyncio and trio: tools, resources, prompts,
## completion, sampling, elicitation, roots, logging.
mcp-everything: venv $(MCP_CONFORMANCE)/node_modules/.package-lock.json
	BINDLOOP_REQUIRE_MCP_EVERYTHING=1 $(PY) -m pytest tests/mcp/test_mcp_everything.py -q

include harness/wasm/wasm.mk
include harness/conformance/conformance.mk
include worker/worker.mk
include harness/clients/clients.mk

## Benchmarks print tables; they are not part of `make test`.
bench: venv
	$(PY) bench/loop_overhead.py

## MCP client overhead per call vs a direct tool call, and import cost on CPython and Pyodide;
## then bindloop's MCP server vs the SDK's: TTFB and server CPU per tools/call.
bench-mcp: venv
	$(PY) bench/mcp_client.py
	$(PY) bench/mcp_server.py

## A2A 1.0 on CPython: time to first byte and server CPU per request (SendStreamingMessage,
## SendMessage, GetTask) beside POST /api/chat of the same agent.
.PHONY: bench-a2a
bench-a2a: venv
	$(PY) bench/a2a_requests.py

bench-peers: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/loop_overhead.py --peers

## Scale: 1,000 sessions over 4 processes sharing Postgres (+ Redis for the limit) vs one process
## on SQLite (servers started here); sessions/s, store time and round trips per turn.
bench-scale: venv store-servers
	$(PY) bench/scale.py --sessions 1000 --processes 4

## A persisted turn on Postgres and Redis (servers started here): worker CPU, round trips counted
## by the client and the server, and sessions/s at 1, 2 and 4 processes.
bench-persist: venv store-servers
	$(PY) bench/persisted_turn.py

## Crash test: SIGKILL one of PROCESSES children running agent sessions on a shared BACKEND
## (sqlite, postgres, redis, or temporal: workflows on the dev server; servers are started here)
## at seeded random points, start a replacement, until every session is done; prints kills,
## finished, duplicates, lost, and transcripts differing from the uncrashed run. Postgres and
## Redis are reached through a fault proxy (connections cut, a share BLACKHOLES of the faults
## silenced) and restarted RESTARTS times over the run.
KILLS ?= 200
SEED  ?= 1
BACKEND ?= sqlite
PROCESSES ?= 3
RESTARTS ?= 3
BLACKHOLES ?= 0.1
crash-test: venv store-servers
	$(PY) tests/hardening/crash_harness.py --kills $(KILLS) --sessions 8 --seed $(SEED) \
		--backend $(BACKEND) --processes $(PROCESSES) --restarts $(RESTARTS) \
		--blackholes $(BLACKHOLES)

## Fuzz every parser that takes outside bytes for SECONDS, then the giants (1 GB line, endless
## tiny events, 100,000-deep nesting); prints inputs per target, worst time and memory.
SECONDS ?= 60
fuzz: venv
	$(PY) tests/fuzz/run_fuzz.py --seconds $(SECONDS) --seed $(SEED)

## Soak: 1,000 concurrent agent loops from a faulty scripted provider: bindloop, the bare reader
## (httpx + msgspec, bindloop's CPU per streamed token as a ratio to it) and pydantic-ai; prints
## the table and rewrites the soak section of docs/performance.md.
soak: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/report.py --only soak --soak-sessions 1000 --seed $(SEED)

## Run the benchmarks (loop overhead vs peers, import time, a streamed turn per chunk, soak) and write docs/performance.md
## with SVG charts (matplotlib, from the bench extra).
bench-report: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/report.py --seed $(SEED)

## pytest + conformance on CPython 3.11, 3.12, 3.13 (pyenv; a venv each in .venv-3.XX) beside
## Pyodide 3.14: every report byte-identical to Pyodide's. Not part of `make test` (time).
test-matrix: venv conformance-pyodide
	scripts/test_matrix.sh $(WASM_REPORT)

## The agent API's overhead per turn vs bare run_tool_loop, pydantic-ai and openai-agents.
bench-agent: venv
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/agent.py --peers --peer-ns 10,100

clean:
	rm -rf $(VENV) .venv-3.* .reports harness/wasm/node_modules harness/wasm/wheels harness/wasm/wheels-pyc harness/wasm/wheels-bytecode harness/wasm/stdlib-bytecode worker/node_modules worker/.cache dist build .mypy_cache .pytest_cache .hypothesis
