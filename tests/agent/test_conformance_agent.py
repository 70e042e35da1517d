"""The agent scenarios in harness/conformance/ (kind "agent"): each meets its expectations, the four the
issue names exist, and a broken scenario file is reported rather than crashing the suite."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.conformance import runner  # noqa: E402

SCENARIOS = ROOT / "harness" / "conformance" / "scenarios"


def _agent_files() -> list[Path]:
    return [p for p in sorted(SCENARIOS.glob("*.json"))
            if json.loads(p.read_bytes()).get("kind") == "agent"]


def test_agent_scenarios_pass_and_cover_the_four_programs() -> None:
    files = _agent_files()
    programs = [json.loads(p.read_bytes())["program"] for p in files]
    assert {"structured_reask", "reborn_memory", "sub_agent_scope"} <= set(programs)
    assert any(json.loads(p.read_bytes()).get("replay") for p in files)
    for path in files:
        entry = anyio.run(runner.run_scenario, path.stem, path.read_bytes())
        assert entry["passed"], (path.name, entry["outcome"], entry["mismatches"])
        assert entry["snapshot_bytes"] and entry["requests"]


def test_replayed_scenario_makes_no_model_call() -> None:
    (path,) = [p for p in _agent_files() if json.loads(p.read_bytes()).get("replay")]
    entry = anyio.run(runner.run_scenario, path.stem, path.read_bytes())
    assert entry["replay"]["model_calls"] == 0 and entry["replay"]["same_snapshot"] is True


def test_a_wrong_expectation_fails_and_a_bad_file_is_reported() -> None:
    path = _agent_files()[0]
    data = json.loads(path.read_bytes())
    data["expect"]["model_calls"] = 99
    entry = anyio.run(runner.run_scenario, "x", json.dumps(data).encode())
    assert not entry["passed"] and entry["mismatches"][0]["at"] == "model_calls"
    data["program"] = "nope"
    entry = anyio.run(runner.run_scenario, "x", json.dumps(data).encode())
    assert not entry["passed"] and "unknown program" in entry["outcome"]["scenario_error"]
