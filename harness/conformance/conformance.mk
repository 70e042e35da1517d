# The conformance suite on CPython, and the byte-for-byte comparison with the Pyodide run.
# Included from the root Makefile, which defines PY (.venv/bin/python) and a `venv` target;
# `conformance-pyodide` and WASM_REPORT come from harness/wasm/wasm.mk.

CPYTHON_REPORT ?= .reports/conformance-cpython.json

.PHONY: conformance-cpython conformance-compare

# Exits non-zero (after writing the report) when a scenario fails its expectations.
conformance-cpython: venv
	mkdir -p .reports
	$(PY) -m harness.conformance.runner harness/conformance/scenarios --out $(CPYTHON_REPORT)

conformance-compare: conformance-cpython conformance-pyodide
	@cmp $(CPYTHON_REPORT) $(WASM_REPORT) || { \
	  echo "conformance: the CPython and Pyodide reports differ (diff $(CPYTHON_REPORT) $(WASM_REPORT))" >&2; \
	  exit 1; }
	@echo "conformance: $$($(PY) -c 'import json,sys; print(json.load(open(sys.argv[1]))["scenario_count"])' $(CPYTHON_REPORT)) scenarios, CPython and Pyodide reports byte-identical"
