"""Import time of bindloop: the root, the loop, and every module, on CPython and in Pyodide.

Each CPython figure is the median over fresh interpreters (bytecode caching on, as installed wheels
have). ``--pyodide`` also measures inside Pyodide 314 in Node (needs ``make wasm-wheels wasm-node``);
there every module is compiled from source on first import, as in a browser or a Worker.

    python bench/import_time.py [--repeats 9] [--pyodide]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = r"""
import time, json
t = time.perf_counter()
import msgspec, anyio
t0 = time.perf_counter()
import bindloop
t1 = time.perf_counter()
from bindloop import run_tool_loop
t2 = time.perf_counter()
import bindloop.wire, bindloop.checkpoints, bindloop.compaction, bindloop.skills, bindloop.routing
import bindloop.tools, bindloop.schema, bindloop.transcript, bindloop.completion
t3 = time.perf_counter()
print(json.dumps({"deps": (t0 - t) * 1e3, "root": (t1 - t0) * 1e3, "loop": (t2 - t0) * 1e3, "everything": (t3 - t0) * 1e3}))
"""


def cpython(code: str, repeats: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # warm pyc
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                      capture_output=True, text=True).stdout) for _ in range(repeats)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def pyodide() -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROBE)
        path = f.name
    try:
        out = subprocess.run(["node", os.path.join(ROOT, "harness", "wasm", "run_smoke.mjs"), path, ROOT],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--pyodide", action="store_true")
    args = parser.parse_args()
    ours = cpython(PROBE, args.repeats)
    rows = [("CPython " + sys.version.split()[0], ours)]
    if args.pyodide:
        rows.append(("Pyodide 314 (Node)", pyodide()))
    print("| runtime | msgspec + anyio | import bindloop | + run_tool_loop | + every module |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['deps']:.1f} ms | {r['root']:.1f} ms | {r['loop']:.1f} ms "
              f"| {r['everything']:.1f} ms |")
    print(f"\n(bindloop columns are cumulative after the dependencies are loaded; CPython: medians of "
          f"{args.repeats} fresh interpreters; Pyodide: one cold run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
