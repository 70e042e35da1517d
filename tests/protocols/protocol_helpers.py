"""Helpers the protocol tests share."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from bindloop.agent.events import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnStartEvent,
)
from bindloop.completion import FinishEvent, ReasoningEvent, TextEvent, ToolCallChunk, ToolCallEvent
from bindloop.contracts import ReasoningPart, ToolCall, ToolError, ToolResult


def agent_kind(cls: Any, turn_index: int, **fields: Any) -> Any:
    """An agent-only stream kind (turn start, assembled call, ...) built for whichever shape the
    agent has: today each kind carries ``turn_index``; inside the ``{turn_index, event}`` envelope
    it does not, and the encoders never read it (they take the turn from ``feed(turn_index=)``)."""
    if "turn_index" in cls.__struct_fields__:
        fields["turn_index"] = turn_index
    return cls(**fields)


_OPS = st.lists(st.one_of(
    st.builds(lambda t: ("text", t), st.text(min_size=1, max_size=5)),
    st.builds(lambda t, i: ("reasoning", t, i), st.text(max_size=5), st.integers(0, 2)),
    st.builds(lambda i, a: ("call", i, a), st.integers(0, 2), st.text(max_size=4)),
    st.just(("turn",)), st.just(("finish",)), st.just(("done",)),
    # the run's own kinds beyond the turn: a turn started again (a reset), a call's start and
    # outcome, an approval asked for and a denial (each about a call that may not be complete)
    st.just(("restart",)), st.builds(lambda i: ("tool", i), st.integers(0, 2)),
    st.builds(lambda i: ("approval", i), st.integers(0, 2)),
    st.builds(lambda i: ("denied", i), st.integers(0, 2)),
), max_size=40)


@st.composite
def run_events(draw: st.DrawFn) -> list[tuple[int | None, Any]]:
    """Arbitrary ``(turn_index, event)`` sequences of a run: text, reasoning blocks, tool-call
    fragments (ids per turn and index), assembled calls (possibly never streamed, or twice),
    turn starts and ends, turns started again (resets), and -- with turn index ``None``, as
    ``agent_event_input`` gives them -- calls started and finished, approvals asked for and
    denials of requested calls, in any order."""
    out: list[tuple[int | None, Any]] = []
    done: list[str] = []  # the calls requested so far
    turn = 0
    for op in draw(_OPS):
        if op[0] == "turn":
            turn += 1
            out.append((turn, agent_kind(TurnStartEvent, turn)))
        elif op[0] == "text":
            out.append((turn, TextEvent(content=op[1])))
        elif op[0] == "reasoning":
            out.append((turn, ReasoningEvent(part=ReasoningPart(text=op[1]), index=op[2])))
        elif op[0] == "call":
            out.append((turn, ToolCallEvent(tool_call=ToolCallChunk(
                index=op[1], id=f"c{turn}-{op[1]}", name="t", arguments=op[2]))))
        elif op[0] == "done":
            out.append((turn, agent_kind(ToolCallDoneEvent, turn,
                                         tool_call=ToolCall(id=f"c{turn}-0", name="t"))))
            done.append(f"c{turn}-0")
        elif op[0] == "restart":
            out.append((turn, TurnStartEvent()))
        elif op[0] in ("tool", "approval", "denied") and done:
            # About a call the run requested (what the agent reports is always about one).
            call = ToolCall(id=done[op[1] % len(done)], name="t")
            if op[0] == "tool":
                out.append((None, ToolStartedEvent(call=call)))
                out.append((None, ToolFinishedEvent(
                    call=call, outcome=ToolResult(content="r") if op[1] else ToolError(error="e"))))
            elif op[0] == "approval":
                out.append((None, ApprovalRequestedEvent(call_id=call.id, tool="t",
                                                         arguments="{}")))
            else:
                out.append((None, ApprovalDecidedEvent(call_id=call.id, approved=False,
                                                       reason="no")))
        elif op[0] == "finish":
            out.append((turn, FinishEvent(finish_reason="stop")))
    return out


def feed_all(encoder: Any, events: list[tuple[int | None, Any]]) -> list[Any]:
    """Every event through ``encoder.feed``, the chunks in order."""
    out: list[Any] = []
    for turn, event in events:
        out += encoder.feed(event, turn_index=turn)
    return out
