# workerd targets. Included from the root Makefile, which defines PY, VENV, STAMP and `venv`;
# `wasm-wheels` and the report paths come from harness/wasm/wasm.mk and harness/conformance/conformance.mk.
# Only npm (workerd + pyodide, pinned in worker/package-lock.json) and PyPI (pycapnp, to encode
# the dev Pyodide bundle) are contacted; every run after that is offline.

WORKERD_REPORT ?= .reports/conformance-workerd.json
WORKER_STAMP   := $(VENV)/.worker-installed

.PHONY: worker-node worker-wheel conformance-workerd test-worker worker-dev worker-clean

worker/node_modules/.package-lock.json: worker/package.json $(wildcard worker/package-lock.json)
	cd worker && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
	touch $@

worker-node: worker/node_modules/.package-lock.json

# uv resolves the template's dependencies as pywrangler does (`uv pip compile pyproject.toml`);
# two workers-py releases are downloaded (not installed) for the table of compatibility flags each
# reads the Python version from.
PYWRANGLER_DIR := worker/.cache/pywrangler
$(WORKER_STAMP): $(STAMP) worker/worker.mk
	$(PY) -m pip install --quiet 'pycapnp==2.2.4' 'uv==0.13.9'
	rm -rf $(PYWRANGLER_DIR)
	for v in 1.16.7 1.17.9; do $(PY) -m pip download --quiet --no-deps --dest $(PYWRANGLER_DIR) "workers-py==$$v"; done
	touch $@

# The repository's own wheel where worker/pyproject.toml's path source expects it (wasm-wheels
# builds it with `python -m build --wheel`, every time).
worker-wheel: wasm-wheels
	mkdir -p dist
	cp harness/wasm/wheels/bindloop-*-py3-none-any.whl dist/

# Both serve the .pyc wheel set (harness/wasm/wheels-pyc), the workerd default (see workerd_harness.py).
# The suite served by the Worker template in real workerd (GET /conformance); its report must be
# byte-identical to the CPython and Pyodide ones.
conformance-workerd: worker/node_modules/.package-lock.json wasm-wheels-pyc $(WORKER_STAMP) conformance-cpython conformance-pyodide
	$(PY) worker/tools/workerd_harness.py conformance $(WORKERD_REPORT)
	@cmp $(CPYTHON_REPORT) $(WORKERD_REPORT) || { \
	  echo "conformance: the CPython and workerd reports differ (diff $(CPYTHON_REPORT) $(WORKERD_REPORT))" >&2; exit 1; }
	@cmp $(WASM_REPORT) $(WORKERD_REPORT) || { \
	  echo "conformance: the Pyodide and workerd reports differ (diff $(WASM_REPORT) $(WORKERD_REPORT))" >&2; exit 1; }
	@echo "conformance: CPython, Pyodide and workerd reports byte-identical"

# The Worker template (agent, Durable Object sessions, SSE) in real workerd against the scripted
# provider server on 127.0.0.1.
test-worker: worker/node_modules/.package-lock.json wasm-wheels-pyc worker-wheel $(WORKER_STAMP)
	BINDLOOP_WORKERD_TESTS=1 $(PY) -m pytest tests/worker tests/mcp/test_mcp_workerd.py -q

# A Worker directory (DEV, the template by default) served in workerd on 127.0.0.1:8787, offline,
# restarted when its files change: `make worker-dev DEV=path/to/worker DEV_ARGS="--snapshot"`.
# See docs/workers.md ("Run a Worker locally") for the options.
DEV      ?= worker
DEV_ARGS ?=
worker-dev: worker/node_modules/.package-lock.json wasm-wheels-pyc $(WORKER_STAMP)
	$(PY) worker/tools/workerd_harness.py dev $(DEV) $(DEV_ARGS)

worker-clean:
	rm -rf worker/node_modules worker/.cache worker/.workerd-dev
