from __future__ import annotations

import anyio
import pytest

from examples.demos.demo import DEFAULT_PROMPT, _expressions, calculate, main, run_demo


def test_demo_runs_to_done_with_real_tool_results() -> None:
    lines: list[str] = []
    result = anyio.run(run_demo, DEFAULT_PROMPT, lines.append)
    text = "\n".join(lines)
    assert result.stop_reason == "done"
    assert result.stats.turns == 3 and result.stats.tool_calls == 5
    assert "calculator({\"expression\":\"(17 * 23) + 4\"}) → 395" in text
    assert "(17 * 23) + 4 = 395" in text and "2 ** 10 / 8 = 128" in text
    assert "You have 2 note(s)" in text
    assert "stop reason: done" in text


def test_demo_iteration_limit_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["What is 1+1?", "--max-iterations", "1"]) == 1
    assert "iteration_limit" in capsys.readouterr().out


@pytest.mark.parametrize(("expr", "value"), [("1+2*3", 7), ("2 ** 10 / 8", 128), ("-3 % 2", 1),
                                              ("7/2", 3.5)])
def test_calculator(expr: str, value: float) -> None:
    assert calculate(expr) == value


@pytest.mark.parametrize("expr", ["__import__('os')", "2 ** 1000", "a + 1", "1" * 300])
def test_calculator_refuses_unsafe_input(expr: str) -> None:
    with pytest.raises((ValueError, SyntaxError)):
        calculate(expr)


def test_expression_extraction() -> None:
    assert _expressions("What is (1 + 2) and 3*4?") == ["(1 + 2)", "3*4"]
