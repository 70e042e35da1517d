"""A :data:`~bindloop.hosts.asgi.Runner` over bindloop's agent API: one ``prompt_chat`` per request,
its stream events and tool outcomes fed to the protocol encoder.

- the request's transcript is the history (``equip_history``); the server's tools are equipped with a
  middleware that reports each outcome (``ToolOutputEvent``);
- a tool named in ``needs_approval`` is equipped with ``equip_tool(needs_approval=True)``: when the
  model calls it, the chat suspends with the call in ``ChatResult.approvals``, reported as an
  approval request (id ``approval-<call id>``). The client's answer comes back on the next request
  (an AI SDK ``approval-responded`` part, an AG-UI resume entry): the transcript is then the
  position that chat suspended at, and ``resume_chat(decisions=...)`` continues it -- an approved
  call runs as the resumed loop's first batch (its pool, signal, middleware, ``on_tool_error``,
  stats), a denied one is answered with the denial the model reads; calls the transcript already
  answers keep their answers;
- a tool the client declared (AG-UI ``tools``) is offered to the model and left for the client to
  run: its call suspends as ``resuming_later`` (AG-UI ``pendingToolCallIds``; in the AI SDK the call
  stays ``input-available`` for the client's ``onToolCall``) and the result arrives as a tool message
  on the next request.

The server keeps no conversation: the client sends it back each time, so an approval answered twice
by a client that replays its request runs the tool twice -- pair such tools with ``bindloop.run``
receipts. (The decisions' once-only commit is ``on_checkpoint``'s to make: without one the runner
commits them nowhere.)

A host that can lose a run midway (a process killed) passes ``on_checkpoint``: it gets the ``ready``
checkpoint of every settled boundary of the prompt -- the first one (the loop's) right after the
approved calls ran, before the model is called -- once the stream consumer has fed what came
before it; a
:class:`~bindloop.hosts.asgi.ChatInput` carrying one of them goes on from there (``resume_chat``),
its approvals not run again. A run lost between an approved call and that save runs it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import anyio
import msgspec

from bindloop.agent import (
    AgentStreamEvent,
    ApprovalDecision,
    ApprovalError,
    ChatResult,
    DenyCall,
    TurnDoneEvent,
    TurnFailedEvent,
    ToolContext,
    ToolMiddleware,
    WrappedModel,
    approve,
    create_agent,
    deny,
    edit_arguments,
    equip_history,
    equip_tool,
    on_stream,
    prompt_chat,
    resume_chat,
)
from bindloop.completion import StreamEvent
from bindloop.contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    ToolMessage,
    ToolOutcome,
    ToolSuspend,
)
from bindloop.loop import LoopCounters, OpenSuspend
from bindloop.model import Model, ModelRequest
from bindloop.lowlevel import tool_exception_error
from bindloop.plugins import Tool
from bindloop.session import (
    ApprovalRecord,
    LoopCheckpoint,
    serialize_loop_checkpoint,
)
from bindloop.protocols import (
    StateSnapshotEvent,
    ToolDeniedEvent,
    ToolOutputEvent,
    agent_event_input,
)

from .asgi import ChatInput, Emit, Runner

__all__ = ("PacedModel", "RunSaver", "agent_runner")

class _AnyArgs(msgspec.Struct):
    """A client-declared tool's arguments: the client validates them (the server never runs it)."""


class PacedModel(WrappedModel):
    """``inner`` with a pause of ``delay_s`` before each stream event: a provider's pace, for demos
    and for tests that must act while a response is still streaming. Its extras are read through;
    its own fold is hidden, so every turn streams at that pace."""

    __slots__ = ("_delay",)

    def __init__(self, inner: Model, delay_s: float) -> None:
        self._delay = delay_s
        super().__init__(inner)

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(messages, request):
            await anyio.sleep(self._delay)
            yield event


class _Counted(WrappedModel):
    """``inner`` as it is -- its extras read through, its own fold (``complete``) kept --
    counting the turns started through it."""

    __slots__ = ("_turns",)

    def __init__(self, inner: Model, turns: _FedTurns) -> None:
        self._turns = turns
        super().__init__(inner)

    def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 on_reset: Callable[[], None] | None = None) -> Awaitable[ModelTurnResult]:
        self._turns.starting()
        return self._inner.complete(messages, request, on_event, on_reset)

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        self._turns.starting()
        async for event in self._inner.stream(messages, request):
            yield event


def _reporting(emit: Emit) -> ToolMiddleware:
    async def handler(ctx: ToolContext, next_: Callable[[], Awaitable[ToolOutcome]]) -> ToolOutcome:
        try:
            outcome = await next_()
        except Exception as exc:  # the loop answers it with its tool error: the client sees that
            emit(None, ToolOutputEvent(tool_call_id=ctx.call_id or "",
                                       outcome=tool_exception_error(exc)))
            raise
        emit(None, ToolOutputEvent(tool_call_id=ctx.call_id or "", outcome=outcome))
        return outcome

    return ToolMiddleware(name="bindloop.protocols.report", handler=handler)


def _approval_request(call_id: str, tool: str) -> ToolOutputEvent:
    """What a protocol encoder makes an approval request of (``approval-<call id>``)."""
    return ToolOutputEvent(tool_call_id=call_id, approval_id=f"approval-{call_id}",
                           outcome=ToolSuspend(mode="waiting_for_reply", detail=f"approve {tool}?"))


def _client_tool(definition: Any) -> Tool[_AnyArgs, Any]:
    def later(_args: _AnyArgs, _ctx: object) -> ToolSuspend:
        return ToolSuspend(mode="resuming_later", detail="the client runs this tool")

    return Tool(name=definition.name, description=definition.description, args_type=_AnyArgs,
                parameters=definition.parameters, execute=later)


def _suspended_at(chat: ChatInput, approval: frozenset[str], max_turn_steps: int,
                  ) -> tuple[LoopCheckpoint, list[ApprovalDecision]] | None:
    """The position the client's transcript stands at when ``chat.approvals`` answer calls of its
    last tool-call turn: the checkpoint the chat suspended with (that turn's unanswered calls open,
    the approval tools' ones pending a decision), and the decisions on it. ``None`` when no
    approval is left to apply (an answered call keeps its answer)."""
    messages = chat.transcript
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    live = [a for a in chat.approvals if a.tool_call_id not in answered]
    if not live:
        return None
    turn = next((m for m in reversed(messages)
                 if isinstance(m, AssistantMessage) and m.tool_calls), None)
    calls = {c.id: c for c in turn.tool_calls if c.id not in answered} if turn else {}
    stale = sorted(a.tool_call_id for a in live if a.tool_call_id not in calls)
    if stale:
        raise ApprovalError(f"the request answers approvals for calls {stale}, which do not wait "
                            "in the conversation's last tool-call turn")
    decided = {a.tool_call_id for a in live}
    waiting = tuple(c.id for c in calls.values() if c.id in decided or c.name in approval)
    suspends = tuple(
        OpenSuspend(tool_call_id=c.id, tool_name=c.name, mode="waiting_for_reply",
                    detail=f"approval required: {c.name}") if c.id in waiting else
        OpenSuspend(tool_call_id=c.id, tool_name=c.name, mode="resuming_later")
        for c in calls.values())
    checkpoint = LoopCheckpoint(
        execution_id=f"chat-{chat.chat_id}", revision=0, status="waiting_for_reply",
        max_iterations=max_turn_steps, iterations=0, messages=messages, open_suspends=suspends,
        counters=LoopCounters(requested_tool_calls=len(turn.tool_calls) if turn else 0),
        approvals=ApprovalRecord(pending=waiting))
    serialize_loop_checkpoint(checkpoint)  # a transcript no run could have left is refused here
    decisions: list[ApprovalDecision] = []
    for a in live:
        if not a.approved:
            decisions.append(deny(a.tool_call_id, a.reason or "the user denied this tool call"))
        elif a.arguments != calls[a.tool_call_id].arguments:
            decisions.append(edit_arguments(a.tool_call_id, a.arguments))
        else:
            decisions.append(approve(a.tool_call_id))
    return checkpoint, decisions


async def _uncommitted(_checkpoint: LoopCheckpoint) -> None:
    """Where the decisions are committed without ``on_checkpoint``: nowhere (the client holds the
    conversation; see the module docstring)."""


RunSaver = Callable[[ChatInput, LoopCheckpoint], Awaitable[None]]
"""``on_checkpoint(chat, checkpoint)``: store a run's boundary before it goes on (a raise fails
the run there)."""


def agent_runner(model: Model, *, tools: Iterable[Tool[Any, Any]] = (),
                 needs_approval: Iterable[str] = (), max_turn_steps: int = 8,
                 on_checkpoint: RunSaver | None = None) -> Runner:
    """A runner that answers each request with one ``prompt_chat`` over ``model`` (a
    :class:`~bindloop.model.Model`) and ``tools`` -- or one ``resume_chat``: of the
    request's ``checkpoint``, or, when its approvals answer calls of its transcript, of the
    position the chat suspended at, with those decisions. Returns the chat's final text as the
    run's result. ``on_checkpoint`` gets each settled boundary (see the module docstring)."""
    server_tools = {t.name: t for t in tools}
    approval = frozenset(needs_approval)

    async def run(chat: ChatInput, emit: Emit) -> Any:
        start, decisions = chat.checkpoint, list[ApprovalDecision]()
        fed = _FedTurns(model)
        if start is None:
            if chat.state is not None:
                emit(None, StateSnapshotEvent(state=chat.state))  # the state this run starts from
            position = _suspended_at(chat, approval, max_turn_steps)
            if position is not None:
                start, decisions = position
                denied = {d.call_id for d in decisions if isinstance(d, DenyCall)}
                for a in chat.approvals:  # a denied call never runs: its refusal is reported now
                    if a.tool_call_id in denied:
                        emit(None, ToolDeniedEvent(tool_call_id=a.tool_call_id, reason=a.reason))
        reporting = _reporting(emit)
        saver = None if on_checkpoint is None else fed.saver(on_checkpoint, chat)

        async def forward(stream: AsyncIterator[AgentStreamEvent]) -> None:
            async for event in stream:
                turn, item = agent_event_input(event)
                emit(turn, item)
                if isinstance(item, (TurnDoneEvent, TurnFailedEvent)):
                    fed.turn_ended()

        async def handler(_: None) -> ChatResult:
            for tool in server_tools.values():
                equip_tool(tool, middleware=[reporting], needs_approval=tool.name in approval)
            for definition in chat.tools:
                if definition.name not in server_tools:
                    equip_tool(_client_tool(definition), middleware=[reporting],
                               needs_approval=definition.name in approval)
            on_stream(forward)
            if start is None:
                equip_history(chat.transcript)
                return await prompt_chat(max_turn_steps=max_turn_steps, on_checkpoint=saver)
            if decisions:
                return await resume_chat(start, decisions=decisions, max_turn_steps=max_turn_steps,
                                         on_checkpoint=saver or _uncommitted)
            return await resume_chat(start, on_checkpoint=saver)

        result = await create_agent(id=f"chat-{chat.protocol}", handler=handler,
                                    model=fed.model if saver is not None else model)(None)
        for pending in result.approvals:  # what the run ends waiting on, asked for before or not
            emit(None, _approval_request(pending.call_id, pending.tool))
        return result.data or None

    return run


class _FedTurns:
    """Whether every event before a boundary reached ``emit``. The stream consumer runs behind the
    loop (it reads a buffer), so a save at a boundary first waits until it has fed the end of each
    model turn started so far: the checkpoint and what the encoder was fed then describe the same
    point, and a continuation from the one repeats exactly the other."""

    def __init__(self, inner: Model) -> None:
        self.model = _Counted(inner, self)
        self.started = 0
        self.ended = 0
        self._changed = anyio.Event()

    def starting(self) -> None:
        self.started += 1

    def turn_ended(self) -> None:
        self.ended += 1
        self._changed.set()
        self._changed = anyio.Event()

    def saver(self, save: RunSaver, chat: ChatInput) -> Callable[[LoopCheckpoint], Awaitable[None]]:
        async def on_checkpoint(checkpoint: LoopCheckpoint) -> None:
            if checkpoint.status != "ready":  # a suspend or the end: the run's outcome, no save
                return
            while self.ended < self.started:
                await self._changed.wait()
            await save(chat, checkpoint)

        return on_checkpoint
