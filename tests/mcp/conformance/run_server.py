"""Run the official MCP conformance suite's **server** scenarios against bindloop's MCP server
(:class:`bindloop.hosts.mcp.server.McpServerApp` serving ``server_tools.py`` under uvicorn on
127.0.0.1), one at a time; print one line per scenario and the totals.

    python tests/mcp/conformance/run_server.py [--scenario NAME ...] [--suite DIR]
        [--spec-version REVISION] [--retry]

Without options: suite 0.1.16 (this directory), its 2025-11-25 scenarios (``SCENARIOS``).
``--suite v2026 --spec-version 2026-07-28``: the 0.2.0 pre-release in ``v2026/`` and its
2026-07-28 scenarios (``SCENARIOS_2026``). ``--retry`` runs a failed scenario once more before
counting it.

The scenarios run are those a tools-only server answers. Left out, for what bindloop's server
does not offer:

- resources, prompts, completion: ``resources-*``, ``prompts-*``, ``completion-complete``,
  ``sep-2164-resource-not-found``; ``caching`` (its tools/list hints pass, but it also asks
  prompts/list, resources/list, resources/templates/list and resources/read) and
  ``input-required-result-non-tool-request`` (a prompt that asks for input, via prompts/get);
- 2025-11-25 only: logging, sampling and elicitation requests to the client, SSE resumption;
- ``json-schema-2020-12``: a tool whose schema keeps ``$schema``/``$defs`` (define_tool serves
  the sanitized schema, references inlined).

``NOT_TESTABLE`` names the checks a run scenario reports "Not testable" for the same reason (a
diagnostic tool exercising a feature not offered); every other check must pass. Exit status 1 if
any scenario failed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

HERE = pathlib.Path(__file__).resolve().parent
SUITE = HERE


def node() -> str:
    return str(SUITE / "node_modules" / "node" / "bin" / "node")


def cli() -> str:
    return str(SUITE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist"
               / "index.js")

SCENARIOS = (
    "server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-image",
    "tools-call-audio", "tools-call-embedded-resource", "tools-call-mixed-content",
    "tools-call-error", "tools-call-with-progress", "dns-rebinding-protection",
    "server-sse-multiple-streams",
)
# Checks the suite reports "Not testable" because they need a diagnostic tool exercising a
# feature bindloop's server does not offer; every other check of the scenario must pass.
NOT_TESTABLE: dict[str, dict[str, str]] = {
    "server-stateless": {
        "sep-2575-server-no-log-without-loglevel":
            "needs a tool that logs (MCP logging, deprecated in 2026-07-28, is not offered)"},
}
SCENARIOS_2026 = (
    "server-stateless", "tools-list", "tools-call-simple-text", "tools-call-image",
    "tools-call-audio", "tools-call-embedded-resource", "tools-call-mixed-content",
    "tools-call-error", "tools-call-with-progress", "server-sse-multiple-streams",
    "dns-rebinding-protection", "http-header-validation",
    "http-custom-header-server-validation", "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling", "input-required-result-basic-list-roots",
    "input-required-result-request-state", "input-required-result-multiple-input-requests",
    "input-required-result-multi-round", "input-required-result-missing-input-response",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods", "input-required-result-tampered-state",
    "input-required-result-capability-check", "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
)


@contextmanager
def serve() -> Iterator[str]:
    import uvicorn

    sys.path.insert(0, str(HERE))
    from server_tools import app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app(), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def run_one(name: str, url: str, spec_version: str | None) -> tuple[bool, int, str]:
    extra = [] if spec_version is None else ["--spec-version", spec_version]
    with tempfile.TemporaryDirectory(prefix="mcp-server-conformance-") as out:
        proc = subprocess.run([node(), cli(), "server", "--url", url, "--scenario", name,
                               "-o", out, *extra], capture_output=True, text=True, timeout=120)
        checks: list[dict[str, object]] = []
        for path in sorted(pathlib.Path(out).glob("**/checks.json")):
            checks += json.loads(path.read_text())
    bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    allowed = NOT_TESTABLE.get(name, {})
    untestable = [c for c in bad if c.get("id") in allowed
                  and str(c.get("errorMessage", "")).startswith("Not testable")]
    failed = [f"{c.get('id')}: {c.get('errorMessage')}" for c in bad if c not in untestable]
    note = "; ".join(failed[:3])
    if proc.returncode != 0 and not bad:
        note = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    if not failed and untestable:
        note = "; ".join(f"{c.get('id')} not testable: {allowed[str(c.get('id'))]}"
                         for c in untestable)
    # The CLI exits 1 for any failed check: with only the allowed not-testable ones left, the
    # checks decide.
    ok = not failed and (proc.returncode == 0 or bool(untestable))
    return ok, len(checks), note


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", action="append")
    parser.add_argument("--suite", help="the package directory of the suite (default: this one)")
    parser.add_argument("--spec-version", help="the revision the scenarios speak")
    parser.add_argument("--retry", action="store_true",
                        help="run a failed scenario once more before counting it")
    args = parser.parse_args()
    global SUITE
    if args.suite is not None:
        SUITE = (HERE / args.suite).resolve() if not pathlib.Path(args.suite).is_absolute() \
            else pathlib.Path(args.suite)
    names = args.scenario or list(SCENARIOS_2026 if args.spec_version == "2026-07-28"
                                  else SCENARIOS)
    passed = 0
    with serve() as url:
        for name in names:
            began = time.monotonic()
            ok, checks, note = run_one(name, url, args.spec_version)
            if not ok and args.retry:
                ok, checks, note = run_one(name, url, args.spec_version)
            passed += ok
            print(f"{'PASS' if ok else 'FAIL'} {name} ({checks} checks, "
                  f"{time.monotonic() - began:.1f} s){': ' + note if note else ''}", flush=True)
    print(f"{passed}/{len(names)} server scenarios passed")
    return 0 if passed == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
