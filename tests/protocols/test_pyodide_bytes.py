"""The protocol encoders and decoders give the same bytes under Pyodide as under CPython: one
pseudo-random run of 1,500 events through both encoders (SSE-framed), and both request decoders,
hashed on each runtime (tests/protocols/pyodide_bytes.py). Run by ``make protocols-pyodide`` (part
of ``make test``), after the wheels are rebuilt; a plain pytest run checks the CPython side only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = ROOT / "tests" / "protocols" / "pyodide_bytes.py"


def _cpython_digest() -> str:
    scope: dict[str, object] = {}
    exec(compile(SNIPPET.read_text(), str(SNIPPET), "exec"), scope)
    digest = scope["digest"]
    assert callable(digest)
    return str(digest())


def test_the_cpython_side_is_deterministic() -> None:
    first = _cpython_digest()
    assert first == _cpython_digest()
    counts = first.split()[:2]
    assert all(int(c) > 500 for c in counts)  # the run really exercised the encoders


@pytest.mark.skipif(not os.environ.get("BINDLOOP_REQUIRE_PYODIDE"),
                    reason="run by `make protocols-pyodide`, after the wheels are rebuilt")
def test_pyodide_gives_the_same_bytes() -> None:
    done = subprocess.run(["node", str(ROOT / "harness" / "wasm" / "run_smoke.mjs"), str(SNIPPET)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().splitlines()[-1] == _cpython_digest()
