"""docs/checkpoints.md's example runs as written and prints what it claims, and its input table says
what the code does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bindloop import AssistantMessage, RunStats, ToolCall, UserMessage
from bindloop.loop import OpenSuspend
from bindloop.checkpoints import (
    CheckpointInputError,
    CheckpointReply,
    CheckpointWake,
    LoopCheckpoint,
    apply_checkpoint_input,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "checkpoints.md"


def test_the_example_runs(capsys: Any) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {})
    assert capsys.readouterr().out.split() == ["checkpointed", "done", "2"]


def _input_table(text: str) -> dict[str, tuple[str, str]]:
    """The rows of the 'Input' section's table: status cell -> (accepts, becomes)."""
    section = text.split("## Input", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            status, accepts, becomes = (cell.strip() for cell in line.strip().strip("|").split("|"))
            rows[status] = (accepts, becomes)
    return rows


def _statuses(cell: str) -> list[str]:
    return re.findall(r"`(\w+)`", cell)


def test_the_input_table_says_what_an_aborted_checkpoint_becomes() -> None:
    """Drive apply_checkpoint_input on aborted checkpoints and hold the table's aborted rows to
    what happened: the statuses each answer leads to, and where a UserMessage is accepted."""
    calls = AssistantMessage(tool_calls=(ToolCall(id="q", name="ask"), ToolCall(id="w", name="wait")))
    opened = LoopCheckpoint(
        execution_id="e", revision=1, status="aborted", max_iterations=3, iterations=1,
        messages=(UserMessage(content="go"), calls), stats=RunStats(turns=1),
        open_suspends=(OpenSuspend(tool_call_id="q", tool_name="ask", mode="waiting_for_reply"),
                       OpenSuspend(tool_call_id="w", tool_name="wait", mode="resuming_later")))
    one = apply_checkpoint_input(opened, CheckpointReply(tool_call_id="q", content="a"))
    both = apply_checkpoint_input(one, CheckpointWake(tool_call_id="w", content="b"))
    with pytest.raises(CheckpointInputError):
        apply_checkpoint_input(opened, UserMessage(content="x"))
    closed = LoopCheckpoint(execution_id="e", revision=1, status="aborted", max_iterations=3,
                            iterations=1, messages=(UserMessage(content="go"),),
                            stats=RunStats(turns=1))
    resumed = apply_checkpoint_input(closed, UserMessage(content="on"))

    rows = {k: v for k, v in _input_table(DOC.read_text()).items() if k.startswith("`aborted`")}
    with_open = [v for k, v in rows.items() if "open" in k and "none" not in k]
    none_open = [v for k, v in rows.items() if "none open" in k]
    assert len(with_open) == 1 and len(none_open) == 1, rows
    accepts, becomes = with_open[0]
    assert "UserMessage" not in accepts  # refused while a suspend is open
    assert "CheckpointReply" in accepts and "CheckpointWake" in accepts
    assert _statuses(becomes) == [one.status, both.status] == ["aborted", "ready"]
    accepts, becomes = none_open[0]
    assert "UserMessage" in accepts and _statuses(becomes) == [resumed.status]
