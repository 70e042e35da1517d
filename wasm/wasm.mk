# Pyodide-in-Node targets. Included from the root Makefile, which defines
# PY (.venv/bin/python) and a `venv` target (package + test extras installed).
# Everything runs offline once npm and pip have fetched their packages.

WASM_REPORT ?= .reports/conformance-pyodide.json

# Pyodide 314.0.7 from the npm registry, exactly as pinned in wasm/package-lock.json.
wasm/node_modules/.package-lock.json: wasm/package.json $(wildcard wasm/package-lock.json)
	cd wasm && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
	touch $@

.PHONY: wasm-node wasm-wheels conformance-pyodide wasm-clean

wasm-node: wasm/node_modules/.package-lock.json

# bindloop wheel (always rebuilt) + msgspec wasm wheel + anyio and its pure deps.
wasm-wheels: venv
	$(PY) wasm/fetch_wheels.py

# The conformance suite under Pyodide in Node; the report must be byte-identical
# to the CPython one.
conformance-pyodide: wasm/node_modules/.package-lock.json wasm-wheels
	mkdir -p .reports
	node wasm/run_conformance.mjs . $(WASM_REPORT)

wasm-clean:
	rm -rf wasm/node_modules wasm/wheels
