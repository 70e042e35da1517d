"""The conformance suite on CPython: every scenario meets its expectations, the suite covers every
stop reason the loop can return and every port, and the report is deterministic bytes."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `pytest` (unlike `python -m pytest`) does not put the root on it
    sys.path.insert(0, str(ROOT))

from bindloop import STOP_REASONS  # noqa: E402
from harness.conformance import runner  # noqa: E402
from harness.conformance._schema import PortsSpec, decode_scenario  # noqa: E402

SCENARIOS = ROOT / "harness" / "conformance" / "scenarios"
RETURNABLE = tuple(r for r in STOP_REASONS if r != "deadline")  # the loop raises instead


@pytest.fixture(scope="module")
def report_text() -> str:
    return anyio.run(runner.report_for, str(SCENARIOS))


@pytest.fixture(scope="module")
def report(report_text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(report_text)
    return data


def _scenario_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.json"))


def test_every_scenario_meets_its_expectations(report: dict[str, Any]) -> None:
    failures = [
        f"{s['name']}: outcome={s['outcome']} mismatches={json.dumps(s['mismatches'], indent=1)}"
        for s in report["scenarios"] if not s["passed"]
    ]
    assert not failures, "\n".join(failures)
    assert report["failed"] == []
    assert report["passed_count"] == report["scenario_count"]


def test_at_least_34_scenarios_one_per_file(report: dict[str, Any]) -> None:
    files = _scenario_files()
    assert len(files) >= 34
    assert report["scenario_count"] == len(files)
    assert [s["name"] for s in report["scenarios"]] == [f.stem for f in files]
    names = [f.stem for f in files]
    assert all(n[:3].isdigit() and n[3] == "_" for n in names), names
    assert len({n[:3] for n in names}) == len(names), "scenario numbers must be unique"


def test_every_returnable_stop_reason_is_covered(report: dict[str, Any]) -> None:
    assert report["stop_reasons"] == sorted(RETURNABLE)
    seen = {s["outcome"].get("stop_reason") for s in report["scenarios"]}
    assert set(RETURNABLE) <= seen
    assert "deadline" not in seen


def test_errors_raised_out_of_the_loop_are_covered(report: dict[str, Any]) -> None:
    errors = {s["outcome"].get("error") for s in report["scenarios"]} - {None}
    assert {
        "PersistenceError",          # a fatal tool error
        "RunCancelledError",         # thrown by a tool, and as a signal check's reason
        "RunTimeoutError",           # a deadline: a signal check's reason
        "CommitError",               # before_tool_message_accepted raising
        "InvalidModelTurnError",     # a malformed model turn
        "ScriptExhaustedError",      # a script that runs out
        "ProviderError",             # a model call that raises
    } <= errors


def test_every_port_is_wired_by_some_scenario() -> None:
    default = PortsSpec()
    wired: set[str] = set()
    for path in _scenario_files():
        if json.loads(path.read_bytes()).get("kind") == "agent":
            continue  # agent-API scenarios (harness/conformance/_agent.py) have no loop ports
        ports = decode_scenario(path.read_bytes()).ports
        for field in msgspec.structs.fields(PortsSpec):
            if getattr(ports, field.name) != getattr(default, field.name):
                wired.add(field.name)
    # A field at its default in every scenario would be a port (or an unwiring) never exercised.
    expected = {f.name for f in msgspec.structs.fields(PortsSpec)}
    assert expected <= wired, sorted(expected - wired)


def test_report_is_deterministic_bytes(report_text: str) -> None:
    again = anyio.run(runner.report_for, str(SCENARIOS))
    assert again == report_text
    assert report_text.endswith("}\n")
    # Sorted keys at every level: re-encoding with sorted keys changes nothing.
    canonical = msgspec.json.format(
        msgspec.json.encode(json.loads(report_text), order="sorted"), indent=2
    ).decode() + "\n"
    assert canonical == report_text


def _scenario_bytes(name: str, edit: Any = None) -> bytes:
    data = json.loads((SCENARIOS / f"{name}.json").read_text())
    if edit is not None:
        edit(data)
    return json.dumps(data).encode()


def test_a_wrong_expectation_is_reported_with_its_path() -> None:
    def wrong(data: dict[str, Any]) -> None:
        data["expect"]["stats"]["turns"] = 7
        data["expect"]["transcript"][1]["content"] = "Goodbye."

    entry = anyio.run(runner.run_scenario, "001_final_answer_done",
                      _scenario_bytes("001_final_answer_done", wrong))
    assert entry["passed"] is False
    assert {m["at"] for m in entry["mismatches"]} == {"stats.turns", "transcript[1].content"}
    by_path = {m["at"]: m for m in entry["mismatches"]}
    assert by_path["stats.turns"] == {"at": "stats.turns", "expected": 7, "observed": 1}


def test_a_bool_is_not_a_number_when_judging() -> None:
    def as_int(data: dict[str, Any]) -> None:
        data["expect"]["state"]["has_fresh_token_count"] = 1

    entry = anyio.run(runner.run_scenario, "001_final_answer_done",
                      _scenario_bytes("001_final_answer_done", as_int))
    assert [m["at"] for m in entry["mismatches"]] == ["state.has_fresh_token_count"]


def test_a_wrong_error_outcome_is_reported() -> None:
    def other_error(data: dict[str, Any]) -> None:
        data["expect"]["outcome"] = {"error": "RunTimeoutError"}

    entry = anyio.run(runner.run_scenario, "019_cancelled_error_always_fatal",
                      _scenario_bytes("019_cancelled_error_always_fatal", other_error))
    assert entry["passed"] is False
    assert entry["outcome"] == {"error": "RunCancelledError", "message": "user pressed stop"}
    assert entry["mismatches"][0]["at"] == "outcome.error"


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d.update(surprise=1), "Object contains unknown field `surprise`"),
    (lambda d: d["expect"].pop("transcript"), "missing required field `transcript`"),
    (lambda d: d["expect"]["outcome"].update(error="X"), "exactly one of stop_reason / error"),
    (lambda d: d["tools"]["by_name"]["lookup"].update(error="x"), "choose one of"),
    (lambda d: d["model"][0]["tool_calls"][0].update(id=""), "need explicit ids"),
    (lambda d: d["tools"]["by_name"]["lookup"].update(
        **{"raise": {"type": "KeyboardInterrupt"}}, result=None), "unknown exception type"),
])
def test_inconsistent_scenarios_are_scenario_errors(edit: Any, needle: str) -> None:
    entry = anyio.run(runner.run_scenario, "008_text_alongside_tool_calls",
                      _scenario_bytes("008_text_alongside_tool_calls", edit))
    assert entry["passed"] is False
    assert needle in entry["outcome"]["scenario_error"]


def test_main_writes_the_report_and_exits_by_verdict(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "sub" / "report.json"
    runner.main([str(SCENARIOS), "--out", str(out)])  # no SystemExit: everything passed
    assert out.read_bytes() == anyio.run(runner.report_for, str(SCENARIOS)).encode()
    assert f"{len(_scenario_files())}/{len(_scenario_files())} scenarios passed" in (
        capsys.readouterr().err)

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "001_wrong.json").write_bytes(_scenario_bytes(
        "003_iteration_limit", lambda d: d["expect"]["outcome"].update(stop_reason="done")))
    with pytest.raises(SystemExit) as exc:
        runner.main([str(broken)])
    assert exc.value.code == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["failed"] == ["001_wrong"]
    assert "FAIL 001_wrong" in captured.err and "outcome.stop_reason" in captured.err

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit) as exc:
        runner.main([str(empty)])
    assert exc.value.code == 1
    with pytest.raises(SystemExit) as exc:
        runner.main(["--out"])
    assert exc.value.code == 2


def _runner_modules() -> Iterator[Path]:
    yield from sorted((ROOT / "harness" / "conformance").glob("*.py"))


@pytest.mark.parametrize("path", list(_runner_modules()), ids=lambda p: p.name)
def test_runner_is_pure(path: Path) -> None:
    """Same bytes on every runtime needs the same inputs: no threads, processes, network, wall
    clock or randomness (time is the stepping clock the scenarios advance)."""
    allowed = {"__future__", "os", "sys", "json", "collections", "types", "typing",
               "anyio", "msgspec", "bindloop"}
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots = {(node.module or "").split(".")[0]}
        else:
            continue
        assert roots <= allowed, f"{path.name}:{node.lineno} imports {sorted(roots - allowed)}"
