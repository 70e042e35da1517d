"""The prompt's tool ports: one call through its tool's onion (journaled, replayed), and
the tool-call-loop middleware chain and the approval gate around the loop's own batch runner.
(Each call's start and finish -- the stream's events, its trace span -- are reported around this
port: :mod:`bindloop.agent._run_events`.)

The loop decides what runs and how (serial calls alone and in order, the rest pooled per tool,
nothing new once the signal fires, which raises are fatal): a tool-call-loop middleware wraps the
loop's ``run_tool_batch`` port and its ``next(calls)`` is the loop's runner (behind the
:class:`~bindloop.agent._approvals.ApprovalGate`), so equipping one changes what is asked, never
how it runs; an approved call runs through that same runner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from inspect import isawaitable
from types import CoroutineType
from typing import Any


from ..contracts import ToolCall, ToolError, ToolOutcome, ToolResult, ToolSuspend
from ..loop import BatchRunner
from ..tools import Tool
from ._approvals import ApprovalGate
from ._context import Frame, Generation
from ._middleware import ToolCallLoopContext, ToolContext, ToolOutput, ToolTurn, run_loop_chain
from ._tools import AgentTool

__all__ = ("ToolPort",)

_RECEIVED = ToolResult(content="Answer received.")
_OUTCOMES = (ToolResult, ToolError, ToolSuspend)
_OUTCOME_TYPES = frozenset(_OUTCOMES)


class ToolPort:
    """``run_tool_call`` (and, with tool-call-loop middleware or a ``gate``, ``run_tool_batch``)
    for one prompt.

    ``output`` names the output tool of a tool-mode structured prompt: its call is the answer, so
    it runs nothing and returns a plain receipt (the loop's ``is_final_call`` then ends the run on
    it). ``context(calls, done)`` builds the middleware's :class:`ToolCallLoopContext`."""

    __slots__ = ("agent_id", "context", "direct", "done", "frame", "gate", "gen", "journaled",
                 "output", "record", "recording", "session_id", "tools", "trace_id")

    def __init__(self, frame: Frame, gen: Generation, *, output: str | None,
                 context: Callable[[tuple[ToolCall, ...], tuple[ToolTurn, ...]],
                                   ToolCallLoopContext],
                 recording: bool, gate: ApprovalGate | None = None) -> None:
        self.frame = frame
        self.gen = gen
        self.output = output
        self.context = context
        self.done: list[ToolTurn] = []  # the finished rounds (ToolCallLoopContext.tool_turns)
        run = frame.run
        self.recording = recording
        # Nothing to replay: a tool without middleware is called straight (its outcome journaled
        # when recording).
        plain = frame.cursor is None
        tools: dict[str, tuple[AgentTool, Any]] = {}
        direct: dict[str, Tool[Any, Any]] = {}
        for entry in gen.tools:  # one pass: this runs once per prompt
            t, mw = entry
            name = t.name
            tools[name] = entry
            if plain and not mw and not t.middleware and name != output:
                direct[name] = t.tool
        self.tools = tools
        self.direct = direct
        self.journaled = recording
        self.record = frame.journal.record_tool
        self.agent_id, self.session_id, self.trace_id = frame.agent_id, run.session_id, \
            run.trace_id
        self.gate = gate

    def is_final_call(self, call: ToolCall, outcome: ToolOutcome) -> bool:
        return call.name == self.output and outcome is _RECEIVED

    def run_tool_call(self, call: ToolCall) -> ToolOutcome | Awaitable[ToolOutcome]:
        """The loop's port. A plain function handing back the call's outcome or awaitable: on
        the common path (nothing to replay, record or trace; a tool without middleware) that is
        what the tool body returned (:meth:`~bindloop.tools.Tool.invoke`), with no frame of ours
        around it."""
        tool = self.direct.get(call.name)
        if tool is not None:
            # invoke, not execute: the driver awaits the body and the machine checks its outcome
            raw = call.arguments
            out = tool.invoke(raw, ToolContext(tool.name, tool.description, tool.parameters,
                                                raw, call.id, self.agent_id, self.session_id,
                                                self.trace_id))
            if not self.journaled:
                return out
            if type(out) is CoroutineType or isawaitable(out):
                return self._journal(call.id, out)
            if isinstance(out, _OUTCOMES):  # anything else: the machine refuses it, unjournaled
                self.record(call.id, out)
            return out
        return self._call(call, self.tools.get(call.name))

    async def _journal(self, call_id: str, body: Awaitable[ToolOutcome]) -> ToolOutcome:
        """A direct call's outcome, journaled once the body returns one (as :meth:`_call`
        journals what :meth:`~bindloop.tools.Tool.execute` accepted)."""
        outcome = await body
        if type(outcome) in _OUTCOME_TYPES or isinstance(outcome, _OUTCOMES):
            self.record(call_id, outcome)
        return outcome

    async def _call(self, call: ToolCall, entry: tuple[AgentTool, Any] | None) -> ToolOutcome:
        frame = self.frame
        if call.name == self.output:
            return _RECEIVED
        if frame.cursor is not None:
            served = frame.cursor.tool_outcome(call.id)
            if served is not None:
                if self.recording:
                    self.record(call.id, served)
                return served
        outcome = await self._run(call, entry)
        if self.recording:
            self.record(call.id, outcome)
        return outcome

    async def _run(self, call: ToolCall, entry: tuple[AgentTool, Any] | None) -> ToolOutcome:
        if entry is None:
            return ToolError(error=f"no tool named {call.name!r} is equipped", kind="not_found")
        tool, dynamic = entry
        # Its trace span is read off the run's tool events (_run_events, _trace.ToolSpans).
        return await tool.run(call.arguments, call_id=call.id, dynamic=dynamic,
                              agent_id=self.frame.agent_id)

    async def run_tool_batch(self, calls: Sequence[ToolCall],
                             run: BatchRunner) -> list[ToolOutcome]:
        """The loop's batch port: the batch through this generation's tool-call-loop middleware
        and the approval gate down to ``run``, the loop's own runner."""
        gate = self.gate

        async def execute(current: Sequence[ToolCall]) -> list[ToolOutput]:
            answered, todo = gate.split(current) if gate is not None else ({}, current)
            if todo:
                answered.update(zip((c.id for c in todo), await run(todo)))
            return [ToolOutput(call_id=c.id, outcome=answered[c.id]) for c in current]

        layers = self.gen.loop_middleware
        if not layers:  # the gate alone: nothing for a middleware to see or journal
            return [o.outcome for o in await execute(calls)]
        ctx = self.context(tuple(calls), tuple(self.done))
        got = await run_loop_chain(layers, ctx, execute)
        self.done.append(ToolTurn(step=ctx.step, calls=ctx.original_calls, outputs=tuple(
            ToolOutput(call_id=c.id, outcome=got[c.id]) for c in calls)))
        if self.recording:  # what a layer answered itself is the call's outcome too
            for call in calls:
                if call.name != self.output:  # the receipt is not journaled (it never ran)
                    self.record(call.id, got[call.id])
        return [got[c.id] for c in calls]
