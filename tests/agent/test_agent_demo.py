"""The agent half of ``make demo``: structured output over real HTTP to the scripted provider."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from bindloop.schema import strict_json_schema
from examples.demos.agent_demo import Forecast, main, run_agent_demo
from harness.fixtures.scripted_server import RecordedRequest


def test_agent_demo_re_asks_then_returns_the_typed_forecast() -> None:
    lines: list[str] = []
    requests: list[RecordedRequest] = []
    forecast = anyio.run(run_agent_demo, lines.append, "Lisbon", requests)
    assert forecast == Forecast(city="Lisbon", high_c=24, conditions="sunny", umbrella=False)
    text = "\n".join(lines)
    assert "tool call weather" in text
    assert "re-ask: the answer does not match the schema" in text
    assert "structured error (valid=False)" in text and "structured complete (valid=True)" in text
    assert "invoke_agent forecaster" in text and "execute_tool weather" in text
    bodies = [msgspec.json.decode(r.body) for r in requests]
    assert len(bodies) == 3
    fmt = bodies[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == strict_json_schema(Forecast)
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["weather"]
    assert bodies[2]["messages"][-1]["role"] == "user"  # the re-ask


def test_agent_demo_main_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "result: Forecast(city='Lisbon', high_c=24" in capsys.readouterr().out
