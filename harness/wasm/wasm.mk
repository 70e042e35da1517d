# Pyodide-in-Node targets. Included from the root Makefile, which defines
# PY (.venv/bin/python) and a `venv` target (package + test extras installed).
# Everything runs offline once npm and pip have fetched their packages.

WASM_REPORT ?= .reports/conformance-pyodide.json

# Pyodide 314.0.7 from the npm registry, exactly as pinned in harness/wasm/package-lock.json.
harness/wasm/node_modules/.package-lock.json: harness/wasm/package.json $(wildcard harness/wasm/package-lock.json)
	cd harness/wasm && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
	touch $@

.PHONY: wasm-node wasm-wheels conformance-pyodide wasm-clean

wasm-node: harness/wasm/node_modules/.package-lock.json

# bindloop wheel (always rebuilt) + msgspec wasm wheel + anyio and its pure deps.
wasm-wheels: venv
	$(PY) harness/wasm/fetch_wheels.py

# The conformance suite under Pyodide in Node; the report must be byte-identical
# to the CPython one.
conformance-pyodide: harness/wasm/node_modules/.package-lock.json wasm-wheels
	mkdir -p .reports
	node harness/wasm/run_conformance.mjs . $(WASM_REPORT)

wasm-clean:
	rm -rf harness/wasm/node_modules harness/wasm/wheels harness/wasm/wheels-pyc harness/wasm/wheels-bytecode harness/wasm/stdlib-bytecode

# ---- The compiled wheel sets, the browser page and its Chromium test -------------------------------
.PHONY: wasm-wheels-pyc wasm-wheels-bytecode wasm-stdlib-bytecode conformance-pyodide-pyc \
	conformance-pyodide-bytecode test-browser demo-browser bench-edge

WASM_PYC_REPORT ?= .reports/conformance-pyodide-pyc.json
CHROMIUM ?= /usr/bin/chromium

# Every wheel of harness/wasm/wheels/ with its modules compiled by Pyodide's own CPython 3.14 (inside
# Pyodide, offline) into harness/wasm/wheels-pyc/, sources kept: the set workerd vendors.
wasm-wheels-pyc: harness/wasm/node_modules/.package-lock.json wasm-wheels
	node harness/wasm/build_pyc_wheels.mjs harness/wasm/wheels harness/wasm/wheels-pyc

# The same, bytecode only (the sources replaced by their .pyc, as Pyodide ships its own packages)
# into harness/wasm/wheels-bytecode/: the default set for the browser page.
wasm-wheels-bytecode: harness/wasm/node_modules/.package-lock.json wasm-wheels
	node harness/wasm/build_pyc_wheels.mjs --bytecode-only harness/wasm/wheels harness/wasm/wheels-bytecode

# The standard-library modules the page imports after the runtime's boot, compiled by Pyodide's own
# CPython from Pyodide's own python_stdlib.zip, into one table the page installs right after the boot
# (harness/wasm/stdlib_bytecode.py): harness/wasm/stdlib-bytecode/stdlib-bytecode.bin.
wasm-stdlib-bytecode: wasm-wheels-bytecode
	node harness/wasm/build_stdlib_bytecode.mjs harness/wasm/wheels-bytecode harness/wasm/stdlib-bytecode/stdlib-bytecode.bin

# The conformance suite on the .pyc set: must be byte-identical to CPython's report too.
conformance-pyodide-pyc: wasm-wheels-pyc conformance-cpython
	mkdir -p .reports
	BINDLOOP_WHEELS_DIR=harness/wasm/wheels-pyc node harness/wasm/run_conformance.mjs . $(WASM_PYC_REPORT)
	@cmp $(CPYTHON_REPORT) $(WASM_PYC_REPORT) || { \
	  echo "conformance: the CPython and Pyodide (.pyc wheels) reports differ" >&2; exit 1; }
	@echo "conformance: CPython and Pyodide (.pyc wheels) reports byte-identical"

# The conformance suite on the bytecode set: byte-identical to CPython's report as well.
WASM_BYTECODE_REPORT ?= .reports/conformance-pyodide-bytecode.json
conformance-pyodide-bytecode: wasm-wheels-bytecode conformance-cpython
	mkdir -p .reports
	BINDLOOP_WHEELS_DIR=harness/wasm/wheels-bytecode node harness/wasm/run_conformance.mjs . $(WASM_BYTECODE_REPORT)
	@cmp $(CPYTHON_REPORT) $(WASM_BYTECODE_REPORT) || { \
	  echo "conformance: the CPython and Pyodide (bytecode wheels) reports differ" >&2; exit 1; }
	@echo "conformance: CPython and Pyodide (bytecode wheels) reports byte-identical"

# Debian's Chromium (never a browser download); CI runs as root on a clean machine.
$(CHROMIUM):
	apt-get update && apt-get install -y chromium

# The agent page in headless Chromium, all three wheel sets; screenshot in .reports/browser-demo.png
# (`make test-browser SCREENSHOT=docs/browser-demo.png` refreshes the one the docs show). Then the
# standard-library table's checks under Pyodide in Node (it steps aside for another stdlib).
test-browser: harness/wasm/node_modules/.package-lock.json wasm-wheels-pyc wasm-stdlib-bytecode $(CHROMIUM) venv
	SCREENSHOT=$(SCREENSHOT) node --test harness/wasm/browser.test.mjs harness/wasm/stdlib_bytecode.test.mjs

## make demo-browser: serve the page, Pyodide, the wheels and the scripted providers on 127.0.0.1.
demo-browser: harness/wasm/node_modules/.package-lock.json wasm-wheels-pyc wasm-stdlib-bytecode venv
	$(PY) harness/wasm/demo/serve.py

# Cold start, plain vs .pyc vs bytecode wheels, in Node and Chromium (figures, not a test).
bench-edge: harness/wasm/node_modules/.package-lock.json wasm-wheels-pyc wasm-stdlib-bytecode $(CHROMIUM) venv
	node bench/edge_startup.mjs --runs $(or $(RUNS),5)
