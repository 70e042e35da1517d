"""The conformance runner: play every scenario in a directory through ``bindloop.run_tool_loop`` and
return one JSON report.

Pure on purpose: no threads, no subprocess, no network, no wall clock (time is a
:func:`bindloop.testing.stepping_clock` that scripted models and tools advance). The same
:func:`report_for` is awaited on CPython (through :func:`main` / ``anyio.run``) and inside Pyodide
(``harness/wasm/run_conformance.mjs`` awaits it directly: a loop is already running there), and the two
reports must be byte-identical. So a report is built only from values whose text does not depend on
the runtime: msgspec-encoded builtins with sorted keys, exception *type names*, and messages of
exceptions whose wording this suite or bindloop controls.

The scenario format is documented in ``harness/conformance/README.md`` (schema: ``conformance._schema``).

Command line (CPython)::

    python -m harness.conformance.runner [SCENARIOS_DIR] [--out FILE]

prints the report (or writes it to FILE), lists failing scenarios on stderr, and exits 1 when any
scenario failed its expectations (or there were none).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import msgspec

import bindloop
from bindloop import ToolLoopState
from bindloop.contracts import messages_to_openai
from bindloop.errors import TranscriptFormatError
from bindloop.testing import loop_harness

from ._ports import ScenarioRun
from ._schema import ExpectSpec, ScenarioError, decode_scenario
from ._agent import run_agent_scenario
from ._session import run_checkpointed

__all__ = ("main", "report_for", "run_scenario")

REPORT_FORMAT = 1
_MAX_MISMATCHES = 20


# ---- running and judging -----------------------------------------------------------------------

def _state_report(state: ToolLoopState) -> dict[str, Any]:
    return {
        "input_tokens": state.input_tokens,
        "output_tokens": state.output_tokens,
        "cached_input_tokens": state.cached_input_tokens,
        "cost": state.cost,
        "tool_calls": state.requested_tool_calls,
        "last_prompt_tokens": state.last_prompt_tokens,
        "last_output_tokens": state.last_output_tokens,
        "has_fresh_token_count": state.has_fresh_token_count,
        "open_suspends": msgspec.to_builtins(state.open_suspends),
    }


def _diff(path: str, expected: Any, observed: Any, out: list[dict[str, Any]]) -> None:
    """Append one mismatch per differing leaf (bool and number are different kinds; 1 == 1.0)."""
    if len(out) >= _MAX_MISMATCHES:
        return
    if isinstance(expected, dict) and isinstance(observed, dict):
        for key in sorted(set(expected) | set(observed)):
            at = f"{path}.{key}"
            if key not in observed:
                out.append({"at": at, "expected": expected[key], "observed": "<missing>"})
            elif key not in expected:
                out.append({"at": at, "expected": "<absent>", "observed": observed[key]})
            else:
                _diff(at, expected[key], observed[key], out)
        return
    if isinstance(expected, list) and isinstance(observed, list):
        for i in range(max(len(expected), len(observed))):
            if i >= len(observed):
                out.append({"at": f"{path}[{i}]", "expected": expected[i], "observed": "<missing>"})
            elif i >= len(expected):
                out.append({"at": f"{path}[{i}]", "expected": "<absent>", "observed": observed[i]})
            else:
                _diff(f"{path}[{i}]", expected[i], observed[i], out)
        return
    same_kind = isinstance(expected, bool) == isinstance(observed, bool)
    if not same_kind or expected != observed:
        out.append({"at": path, "expected": expected, "observed": observed})


def _judge(expect: ExpectSpec, observed: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    want = expect.outcome
    got = observed["outcome"]
    if want.stop_reason is not None:
        _diff("outcome", {"stop_reason": want.stop_reason}, got, out)
    else:
        wanted: dict[str, Any] = {"error": want.error}
        if want.message is not None:
            wanted["message"] = want.message
        _diff("outcome", wanted, {k: got.get(k) for k in wanted}, out)
    _diff("stats", expect.stats, observed["stats"], out)
    state_seen = observed["state"]
    # Only the state fields a scenario names are compared (each one exactly).
    _diff("state", expect.state, {k: state_seen.get(k, "<no such field>") for k in expect.state},
          out)
    _diff("transcript", expect.transcript, observed["transcript"], out)
    _diff("events", expect.events, observed["events"], out)
    for field in ("ran", "side_effects"):
        wanted_list = getattr(expect, field)
        if wanted_list is not None:
            _diff(field, wanted_list, observed[field], out)
    return out


async def run_scenario(name: str, data: bytes) -> dict[str, Any]:
    """Run one scenario (its JSON bytes) and return its report entry."""
    if _is_agent_scenario(data):
        return await run_agent_scenario(name, data, _diff)
    entry: dict[str, Any] = {"name": name}
    try:
        sc = decode_scenario(data)
        run = ScenarioRun(sc)
        state = run.initial_state()
    except (msgspec.ValidationError, msgspec.DecodeError, ScenarioError,
            TranscriptFormatError) as exc:
        entry.update(passed=False, outcome={"scenario_error": f"{type(exc).__name__}: {exc}"},
                     mismatches=[])
        return entry
    stats: dict[str, Any] | None = None
    ran: list[str] = []
    side_effects: list[str] = []
    checkpoint: dict[str, Any] | None = None
    checkpoint_mismatches: list[dict[str, Any]] = []
    try:
        # Building the ports builds the kit's ScriptedModel, whose own contract (a duplicate
        # tool-call id raises at construction) is part of what a scenario may observe.
        harness = loop_harness([], **run.params(state))
        ran, side_effects = harness.ran, harness.side_effects
        if sc.checkpoint is not None:
            result, state, checkpoint, checkpoint_mismatches = await run_checkpointed(
                sc.checkpoint, harness.params)
        else:
            result = await bindloop.run_tool_loop(harness.params)
    except Exception as exc:
        outcome: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
    else:
        outcome = {"stop_reason": result.stop_reason}
        stats = msgspec.to_builtins(result.stats)
    observed = {
        "outcome": outcome,
        "stats": stats,
        "state": _state_report(state),
        "transcript": messages_to_openai(state.messages),
        "ran": list(ran),
        "side_effects": list(side_effects),
        "events": run.events,
    }
    if checkpoint is not None:
        observed["checkpoint"] = checkpoint
    mismatches = checkpoint_mismatches + _judge(sc.expect, observed)
    entry.update(observed)
    entry.update(description=sc.description, passed=not mismatches, mismatches=mismatches)
    return entry


def _is_agent_scenario(data: bytes) -> bool:
    """``"kind": "agent"`` scenarios go to ``conformance._agent`` (the agent API)."""
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return isinstance(value, dict) and value.get("kind") == "agent"


def _scenario_files(scenarios_dir: str) -> list[str]:
    return sorted(f for f in os.listdir(scenarios_dir) if f.endswith(".json"))


async def report_for(scenarios_dir: str) -> str:
    """Run every ``*.json`` scenario in ``scenarios_dir`` (by file name) and return the report: one
    JSON document, keys sorted, two-space indented, ending in a newline — the same bytes on every
    runtime."""
    entries: list[dict[str, Any]] = []
    for filename in _scenario_files(scenarios_dir):
        with open(os.path.join(scenarios_dir, filename), "rb") as fh:
            data = fh.read()
        entries.append(await run_scenario(filename[: -len(".json")], data))
    failed = [e["name"] for e in entries if not e["passed"]]
    report = {
        "format": REPORT_FORMAT,
        "suite": "bindloop loop conformance",
        "scenario_count": len(entries),
        "passed_count": len(entries) - len(failed),
        "failed": failed,
        "stop_reasons": sorted({e["outcome"]["stop_reason"] for e in entries
                                if "stop_reason" in e["outcome"]}),
        "scenarios": entries,
    }
    encoded = msgspec.json.encode(report, order="sorted")
    return msgspec.json.format(encoded, indent=2).decode() + "\n"


# ---- command line ------------------------------------------------------------------------------

def _default_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios")


def _failures(report: str) -> tuple[int, list[str]]:
    """The scenario count and a short human summary of every failing scenario."""
    data = msgspec.json.decode(report)
    lines: list[str] = []
    for entry in data["scenarios"]:
        if entry["passed"]:
            continue
        outcome = msgspec.json.encode(entry["outcome"]).decode()
        lines.append(f"FAIL {entry['name']}: outcome {outcome}")
        for m in entry["mismatches"][:5]:
            lines.append(f"    at {m['at']}: expected {msgspec.json.encode(m['expected']).decode()}"
                         f", observed {msgspec.json.encode(m['observed']).decode()}")
    return data["scenario_count"], lines


_USAGE = "usage: python -m harness.conformance.runner [SCENARIOS_DIR] [--out FILE]\n"


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m harness.conformance.runner [SCENARIOS_DIR] [--out FILE]`` (CPython only: it calls
    ``anyio.run``). Exits 1 when a scenario failed or none was found, 2 on bad arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    out: str | None = None
    if "--out" in args:
        k = args.index("--out")
        if k + 1 >= len(args):
            sys.stderr.write(_USAGE)
            raise SystemExit(2)
        out = args[k + 1]
        del args[k:k + 2]
    if len(args) > 1 or any(a.startswith("-") for a in args):
        sys.stderr.write(_USAGE)
        raise SystemExit(2)
    scenarios_dir = args[0] if args else _default_dir()
    report = anyio.run(report_for, scenarios_dir)
    if out is None:
        sys.stdout.write(report)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w", encoding="utf-8", newline="") as fh:
            fh.write(report)
    count, lines = _failures(report)
    failed = sum(1 for line in lines if line.startswith("FAIL "))
    if lines:
        sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.write(f"conformance: {count - failed}/{count} scenarios passed\n")
    if count == 0:
        sys.stderr.write(f"conformance: no scenarios in {scenarios_dir}\n")
    if failed or count == 0:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
