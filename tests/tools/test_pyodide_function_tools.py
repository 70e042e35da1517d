"""Tools from plain functions give the same definitions, answers and refusals under Pyodide 314
(Python 3.14, deferred annotations) as under CPython: tests/tools/pyodide_function_tools.py,
run on both. Run by ``make tools-pyodide`` (part of ``make test``), after the wheels are rebuilt;
a plain pytest run checks the CPython side only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = ROOT / "tests" / "tools" / "pyodide_function_tools.py"

pytestmark = pytest.mark.anyio


async def _cpython_value() -> str:
    source = SNIPPET.read_text()
    body, last = source.rstrip().rsplit("\n", 1)
    assert last.startswith("await _main()")
    scope: dict[str, Any] = {"__name__": "pyodide_function_tools"}
    exec(compile(body, str(SNIPPET), "exec"), scope)
    value = await scope["_main"]()
    assert isinstance(value, str)
    return value


async def test_the_cpython_side_runs_and_says_what_is_expected() -> None:
    got = json.loads(await _cpython_value())
    assert got["refused"] == [True, True, True]
    assert got["bad"]["kind"] == "validation"
    assert got["search"]["content"] == (
        '{"call":"c0","limit":3,"near":{"x":1,"y":0},"order":"score","q":"bind"}')
    names = [d[0] for d in got["definitions"]]
    assert names == ["search", "ask", "weather"]
    assert got["definitions"][0][2]["properties"]["limit"]["description"] == "How many at most"
    assert got["agent"][0] == "Sunny."
    assert got["agent"][1][0] == "sunny in Lisbon for 2 day(s)"


@pytest.mark.skipif(not os.environ.get("BINDLOOP_REQUIRE_PYODIDE"),
                    reason="run by `make tools-pyodide`, after the wheels are rebuilt")
async def test_pyodide_gives_the_same_answers() -> None:
    done = subprocess.run(["node", str(ROOT / "harness" / "wasm" / "run_smoke.mjs"), str(SNIPPET)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().splitlines()[-1] == await _cpython_value()
