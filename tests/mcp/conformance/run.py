"""Run the official MCP conformance suite's client scenarios against bindloop's client, one at a
time, and print one line per scenario and the totals.

    python tests/mcp/conformance/run.py [--command CMD] [--scenario NAME ...] [--out DIR]
        [--suite DIR] [--spec-version REVISION]

Node 22 and the suite come from this directory's package.json (npm install): 0.1.16, the
2025-11-25 scenarios. ``--suite v2026`` takes them from ``v2026/`` instead (the 0.2.0 pre-release
that has the 2026-07-28 client scenarios; ``--spec-version 2026-07-28`` picks those). The adapter
the suite launches is ``python -m harness.fixtures.mcp_conformance_client``. Exit status 1 if any
scenario failed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SUITE = HERE
ROOT = HERE.parents[2]  # the client command imports harness.fixtures from the repository root


def node() -> str:
    return str(SUITE / "node_modules" / "node" / "bin" / "node")


def cli() -> str:
    return str(SUITE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist"
               / "index.js")


def scenarios(spec_version: str | None = None) -> list[str]:
    extra = [] if spec_version is None else ["--spec-version", spec_version]
    out = subprocess.run([node(), cli(), "list", "--client", *extra], capture_output=True,
                         text=True, check=True).stdout
    return [line.strip()[2:].split(" [")[0] for line in out.splitlines()
            if line.strip().startswith("- ")]


def run_one(name: str, command: str, out_dir: pathlib.Path) -> tuple[bool, str]:
    proc = subprocess.run([node(), cli(), "client", "--command", command, "--scenario",
                           name, "-o", str(out_dir), "--timeout", "30000"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    checks: list[dict[str, object]] = []
    for path in sorted(out_dir.glob("**/checks.json")):
        checks = json.loads(path.read_text())
    failed = [str(c.get("id")) for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    note = ", ".join(failed[:4]) if failed else ""
    if proc.returncode != 0 and not failed:
        note = (proc.stderr.strip().splitlines() or ["exit status " + str(proc.returncode)])[-1]
    return proc.returncode == 0, note


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--command", default=f"{sys.executable} -m harness.fixtures.mcp_conformance_client",
                        help="the adapter command the suite launches")
    parser.add_argument("--scenario", action="append")
    parser.add_argument("--out")
    parser.add_argument("--suite", help="the package directory of the suite (default: this one)")
    parser.add_argument("--spec-version", help="only the scenarios of this revision")
    parser.add_argument("--retry", action="store_true",
                        help="run a failed scenario once more before counting it")
    args = parser.parse_args()
    global SUITE
    if args.suite is not None:
        SUITE = (HERE / args.suite).resolve() if not pathlib.Path(args.suite).is_absolute() \
            else pathlib.Path(args.suite)
    names = args.scenario or scenarios(args.spec_version)
    if args.out is None:  # the suite's own result files are kept only when asked for (--out)
        with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as scratch:
            return run_all(names, args, pathlib.Path(scratch))
    return run_all(names, args, pathlib.Path(args.out))


def run_all(names: list[str], args: argparse.Namespace, out: pathlib.Path) -> int:
    passed = 0
    for name in names:
        started = time.monotonic()
        ok, note = run_one(name, args.command, out / name.replace("/", "-"))
        if not ok and args.retry:
            # One more try: sse-retry grades reconnect timing within 200 ms, which a loaded
            # machine can miss; a real defect fails twice.
            print(f"RETRY {name}: {note}", flush=True)
            ok, note = run_one(name, args.command, out / (name.replace("/", "-") + "-retry"))
        passed += ok
        print(f"{'PASS' if ok else 'FAIL'} {name} ({time.monotonic() - started:.1f} s)"
              f"{': ' + note if note and not ok else ''}", flush=True)
    print(f"conformance: {passed} passed, {len(names) - passed} failed")
    if args.out is not None:
        print(f"results in {out}")
    return 0 if passed == len(names) else 1


if __name__ == "__main__":
    raise SystemExit(main())
