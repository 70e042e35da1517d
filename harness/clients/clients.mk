# The real frontend clients, from the npm registry (pinned in harness/clients/package-lock.json): npm `ai`
# (v6, Node 20), `@ag-ui/client`, and `@ai-sdk/react` on a page bundled by esbuild for headless
# Chromium (playwright-core), run against bindloop's ASGI protocol host under uvicorn. AI SDK 7
# beside it (harness/clients/v7/package-lock.json): `ai@7` and its `@ai-sdk/react`, React, and Node 22 from
# npm `node@22`; the same scripts run with harness/clients/v7 as their module root.
# Included from the root Makefile, which defines PY and the `venv` target; $(CHROMIUM) and its
# apt-get install come from harness/wasm/wasm.mk.

.PHONY: test-clients demo-ui clients-node protocols-pyodide clients-clean

# `make test` runs both (after the root Makefile's own prerequisites), `make clean` clears the
# installs.
test: test-clients protocols-pyodide
clean: clients-clean

clients-clean:
	rm -rf harness/clients/node_modules harness/clients/v7/node_modules harness/clients/a2a/node_modules harness/clients/dist

harness/clients/node_modules/.package-lock.json: harness/clients/package.json $(wildcard harness/clients/package-lock.json)
	cd harness/clients && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
	touch $@

harness/clients/v7/node_modules/.package-lock.json: harness/clients/v7/package.json harness/clients/v7/package-lock.json
	cd harness/clients/v7 && npm ci --no-audit --no-fund
	touch $@

harness/clients/a2a/node_modules/.package-lock.json: harness/clients/a2a/package.json harness/clients/a2a/package-lock.json
	cd harness/clients/a2a && npm ci --no-audit --no-fund
	touch $@

clients-node: harness/clients/node_modules/.package-lock.json harness/clients/v7/node_modules/.package-lock.json \
	harness/clients/a2a/node_modules/.package-lock.json

## The AI SDK's DefaultChatTransport / readUIMessageStream and AG-UI's HttpAgent (with its event
## verifier) against the host: whole runs, a connection cut mid-stream and resumed, approvals,
## client-side tools, stop; run logs in memory and in SQLite; then useChat in headless Chromium
## with an approval clicked through. The AI SDK scenarios run once per major (ai@6, ai@7).
test-clients: venv clients-node $(CHROMIUM)
	BINDLOOP_REQUIRE_CLIENTS=1 $(PY) -m pytest tests/protocols/test_npm_clients.py \
		tests/protocols/test_a2a_js.py tests/protocols/test_asgi_continuation.py -q

## The protocol host on http://127.0.0.1:8787 over a scripted model (PORT=..., DELAY=... seconds
## before each event): a useChat page at / (bundled offline by esbuild), POST /api/chat for the
## AI SDK, POST /ag-ui for AG-UI.
PORT  ?= 8787
DELAY ?= 0.05
demo-ui: venv harness/clients/node_modules/.package-lock.json
	node harness/clients/build_page.mjs harness/clients/dist
	$(PY) -m examples.demos.ui_demo --port $(PORT) --delay $(DELAY) --page harness/clients/dist

# The Worker's frontend routes are tested with the same clients (tests/worker/test_workerd_protocols.py):
# whole runs, a cut connection, a workerd killed with SIGKILL mid-run, useChat in Chromium.
test-worker: clients-node $(CHROMIUM)

## The encoders and decoders under Pyodide 314 in Node give the same bytes as on CPython.
protocols-pyodide: harness/wasm/node_modules/.package-lock.json wasm-wheels
	BINDLOOP_REQUIRE_PYODIDE=1 $(PY) -m pytest tests/protocols/test_pyodide_bytes.py -q
