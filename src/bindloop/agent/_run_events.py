"""Where a prompt's run events beyond its model turns are emitted, on the loop's ports: a call
started and finished (the runner's ``run_tool_call``, observed), a checkpoint saved (the
prompt's ``on_checkpoint``, observed), approvals decided and requested (at the start of a resumed
chat and at a suspend), to the stream and to the trace (its tool spans read these events). Model
turns are reported by the turn port's observer (:mod:`bindloop.agent._turns`). Nothing here runs
unless someone watches or traces the prompt: the ports are wrapped only then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._awaitable import isawaitable, resolve
from ..contracts import ToolCall, ToolOutcome
from ..loop import MaybeAwaitable
from ..lowlevel import is_fatal_raise, tool_exception_error
from ..checkpoints import DecidedCall, LoopCheckpoint
from ._approvals import PendingApproval
from ._saves import SaveFn
from ._stream import (
    AgentStreamEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    CheckpointSavedEvent,
    RunEvent,
    StreamHub,
    ToolStartedEvent,
    tool_finished,
)
from ._trace import ToolSpans

__all__ = ("RunEvents",)


class RunEvents:
    """A watched or traced prompt's emitter of its tool, approval and checkpoint events, to its
    stream (``hub``) and to its trace (``spans``, which reads the tool events); ``turn()`` is the
    index of the prompt's latest model turn (the envelope's ``turn_index``)."""

    __slots__ = ("fatal", "hub", "output", "spans", "turn")

    def __init__(self, hub: StreamHub | None, turn: Callable[[], int], *, output: str | None,
                 fatal: Callable[[BaseException], bool] | None,
                 spans: ToolSpans | None = None) -> None:
        self.hub = hub
        self.turn = turn
        self.output = output
        self.fatal = fatal
        self.spans = spans

    def emit(self, event: RunEvent) -> None:
        if self.spans is not None:
            self.spans.observe(event)
        if self.hub is not None:
            self.hub.emit(AgentStreamEvent(turn_index=self.turn(), event=event))

    def tool_port(self, inner: Callable[[ToolCall], MaybeAwaitable[ToolOutcome]]
                  ) -> Callable[[ToolCall], MaybeAwaitable[ToolOutcome]]:
        """The runner's ``run_tool_call`` around ``inner``: each call reported as it starts
        and as it finishes -- with what the model reads and, for a raise, the exception (a fatal
        one: no outcome, the run stops). The output tool's call runs nothing: not reported."""
        output = self.output

        async def run(call: ToolCall) -> ToolOutcome:
            self.emit(ToolStartedEvent(call=call))
            try:
                value: Any = inner(call)
                outcome: ToolOutcome = await value if isawaitable(value) else value
            except Exception as exc:
                # The loop's own rule, asked as the driver asks it: what the model reads.
                read = None if is_fatal_raise(exc, self.fatal) else tool_exception_error(exc)
                self.emit(tool_finished(call, read, exc))
                raise
            self.emit(tool_finished(call, outcome))
            return outcome

        def port(call: ToolCall) -> ToolOutcome | Awaitable[ToolOutcome]:
            if call.name == output:
                return inner(call)
            return run(call)

        return port

    def saver(self, inner: SaveFn) -> Callable[[LoopCheckpoint], Awaitable[None]]:
        """``on_checkpoint`` around ``inner``: each checkpoint reported once it is stored."""

        async def save(checkpoint: LoopCheckpoint) -> None:
            await resolve(inner(checkpoint))
            self.emit(CheckpointSavedEvent(checkpoint=checkpoint))

        return save

    def decided(self, decisions: Sequence[DecidedCall], commit: LoopCheckpoint | None) -> None:
        """A resumed chat's decisions, committed (``commit``) before anything runs."""
        for d in decisions:
            approved = d.decision == "approve"
            self.emit(ApprovalDecidedEvent(call_id=d.call_id, approved=approved,
                                           arguments=d.arguments if approved else None,
                                           reason=None if approved else d.reason))
        if commit is not None:
            self.emit(CheckpointSavedEvent(checkpoint=commit))

    def requested(self, approvals: Sequence[PendingApproval]) -> None:
        """The approvals a suspend ends waiting for."""
        for a in approvals:
            self.emit(ApprovalRequestedEvent(call_id=a.call_id, tool=a.tool,
                                             arguments=a.arguments, token=a.token))
