from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
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


ROOT = Path(__file__).resolve().parent.parent


def _demo_env() -> dict[str, str]:
    """The environment `make` gives a demo: the repository root (examples, harness) on the path,
    and this checkout's package ahead of any installed one."""
    paths = [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@pytest.mark.parametrize(("name", "last_line"), [
    ("demo", "stop reason: done"),
    ("agent_demo", "HTTP requests served: 3"),
    ("provider_demo", "HTTP requests served: 6"),
    ("mcp_demo", "stop reason: done"),
])
def test_each_demo_runs_from_examples_as_make_runs_it(name: str, last_line: str) -> None:
    """``python -m examples.demos.<name>`` from the repository root, a fresh process (the
    ``make demo``, ``demo-providers`` and ``demo-mcp`` command): it exits 0 having done its run."""
    done = subprocess.run([sys.executable, "-m", f"examples.demos.{name}"], cwd=ROOT,
                          env=_demo_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert last_line in done.stdout


def test_the_ui_demo_serves_from_examples_as_make_demo_ui_runs_it() -> None:
    """``python -m examples.demos.ui_demo --port 0`` serves the demo agent to an AI SDK request
    on the port it prints."""
    proc = subprocess.Popen([sys.executable, "-m", "examples.demos.ui_demo", "--port", "0",
                             "--delay", "0"], cwd=ROOT, env=_demo_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()  # "bindloop protocol host on http://...:PORT ..."
        assert "http://127.0.0.1:" in first, first
        port = int(first.split("http://127.0.0.1:", 1)[1].split()[0])
        assert port != 0
        deadline = time.monotonic() + 60
        while True:
            try:
                reply = httpx.post(f"http://127.0.0.1:{port}/api/chat", timeout=30, json={
                    "id": "c1", "trigger": "submit-message", "messages": [
                        {"id": "m1", "role": "user",
                         "parts": [{"type": "text", "text": "count the words of this"}]}]})
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "ui_demo did not start"
                time.sleep(0.2)
        assert reply.status_code == 200
        assert '"type":"finish"' in reply.text.replace(" ", "")
    finally:
        proc.terminate()  # the PID started here
        proc.wait(timeout=30)
