#!/usr/bin/env bash
# make test-matrix: pytest + the conformance suite on every CPython in MATRIX_VERSIONS (found under
# pyenv), beside the Pyodide 3.14 report; every report must be byte-identical to Pyodide's.
#
#   scripts/test_matrix.sh PYODIDE_REPORT            (run from the repository root)
#   MATRIX_SETUP_ONLY=1 scripts/test_matrix.sh ...   (only create/update the venvs)
#
# One venv per version in .venv-3.XX (gitignored), the package editable with its test extras; msgspec
# and anyio are pinned to the versions in .venv so every interpreter runs the same dependency code.
# Network: PyPI only, and only while a venv is created or its pins change.
set -uo pipefail

PYODIDE_REPORT=${1:?usage: scripts/test_matrix.sh PYODIDE_REPORT}
VERSIONS=${MATRIX_VERSIONS:-"3.11 3.12 3.13"}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
mkdir -p .reports

pins=$(.venv/bin/python -c 'import importlib.metadata as m; print(" ".join(f"{d}=={m.version(d)}" for d in ("msgspec", "anyio")))')

find_python() {  # newest pyenv build of $1 (e.g. 3.12 -> ~/.pyenv/versions/3.12.1/bin/python)
  local found
  found=$(ls -d "$PYENV_ROOT"/versions/"$1".*/bin/python 2>/dev/null | sort -V | tail -n 1)
  [ -n "$found" ] && echo "$found" || command -v "python$1" || true
}

setup() {  # create or update .venv-$1
  local v=$1 py venv=".venv-$1"
  py=$(find_python "$v")
  if [ -z "$py" ]; then echo "matrix: no Python $v (looked in $PYENV_ROOT/versions)" >&2; return 1; fi
  local stamp="$venv/.matrix-installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins $(sha256sum pyproject.toml | cut -c1-16)" ]; then
    return 0
  fi
  echo "matrix: creating $venv from $py ($pins)"
  "$py" -m venv "$venv" || return 1
  # (pip's warnings about this machine's extra index locations are noise here)
  "$venv/bin/python" -m pip install --quiet --upgrade pip 2>&1 | { grep -v '^WARNING: Location' || true; }
  [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  "$venv/bin/python" -m pip install --quiet -e '.[test]' $pins 2>&1 | { grep -v '^WARNING: Location' || true; }
  [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  echo "$pins $(sha256sum pyproject.toml | cut -c1-16)" > "$stamp"
}

declare -A PYTEST_LINE REPORT_STATE
status=0
for v in $VERSIONS; do
  if ! setup "$v"; then PYTEST_LINE[$v]="venv setup failed"; REPORT_STATE[$v]="-"; status=1; continue; fi
  [ -n "${MATRIX_SETUP_ONLY:-}" ] && continue
  venv=".venv-$v"
  version=$("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])')
  echo "matrix: CPython $version: pytest"
  # -p no:cacheprovider: the runs share one tree; no version writes .pytest_cache for another.
  "$venv/bin/python" -m pytest -q -p no:cacheprovider > ".reports/matrix-pytest-$v.log" 2>&1
  rc=$?
  PYTEST_LINE[$v]="$version: $(tail -n 1 ".reports/matrix-pytest-$v.log")"
  [ $rc -eq 0 ] || status=1
  report=".reports/conformance-cpython-$v.json"
  "$venv/bin/python" -m harness.conformance.runner harness/conformance/scenarios --out "$report" \
    > ".reports/matrix-conformance-$v.log" 2>&1 || status=1
  if cmp -s "$report" "$PYODIDE_REPORT"; then
    REPORT_STATE[$v]="byte-identical to Pyodide"
  else
    REPORT_STATE[$v]="DIFFERS from Pyodide (diff $report $PYODIDE_REPORT)"; status=1
  fi
done
[ -n "${MATRIX_SETUP_ONLY:-}" ] && exit $status

pyodide_count=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["scenario_count"])' "$PYODIDE_REPORT")
echo
echo "matrix: conformance ($pyodide_count scenarios; reference: Pyodide 3.14 report $PYODIDE_REPORT)"
for v in $VERSIONS; do
  printf '  CPython %-5s pytest %-60s conformance %s\n' "$v" "${PYTEST_LINE[$v]}" "${REPORT_STATE[$v]}"
done
exit $status
