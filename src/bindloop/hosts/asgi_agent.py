"""A :data:`~bindloop.hosts.asgi.Runner` over bindloop's agent API: one ``prompt_chat`` per request,
its stream events and tool outcomes fed to the protocol encoder.

- the request's transcript is the history (``equip_history``); the server's tools are equipped with a
  middleware that reports each outcome (``ToolOutputEvent``);
- a tool named in ``needs_approval`` does not run when the model calls it: the call suspends with an
  approval request (id ``approval-<call id>``). The client's answer comes back on the next request
  (an AI SDK ``approval-responded`` part, an AG-UI resume entry): approved, the tool runs then, once
  for that request, and its result goes into the transcript; denied, the model reads the refusal;
- a tool the client declared (AG-UI ``tools``) is offered to the model and left for the client to
  run: its call suspends as ``resuming_later`` (AG-UI ``pendingToolCallIds``; in the AI SDK the call
  stays ``input-available`` for the client's ``onToolCall``) and the result arrives as a tool message
  on the next request.

The server keeps no conversation: the client sends it back each time, so an approval answered twice
by a client that replays its request runs the tool twice -- pair such tools with ``bindloop.run``
receipts.

A host that can lose a run midway (a process killed) passes ``on_checkpoint``: it gets a ``ready``
checkpoint once the approvals ran, and at every settled boundary of the prompt after that; a
:class:`~bindloop.hosts.asgi.ChatInput` carrying one of them goes on from there (``resume_chat``),
its approvals not run again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, cast

import anyio
import msgspec

from bindloop.agent import (
    AgentModel,
    AgentStreamEvent,
    ModelStreamOptions,
    TurnDoneEvent,
    TurnFailedEvent,
    ToolContext,
    ToolMiddleware,
    WrappedModel,
    create_agent,
    equip_history,
    equip_tool,
    on_stream,
    prompt_chat,
    resume_chat,
)
from bindloop.completion import StreamEvent
from bindloop.contracts import (
    Message,
    ModelTurnResult,
    ToolError,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    tool_error_message,
    tool_outcome_message,
)
from bindloop.plugins import Tool
from bindloop.session import LoopCheckpoint, create_loop_checkpoint
from bindloop.protocols import (
    StateSnapshotEvent,
    ToolDeniedEvent,
    ToolOutputEvent,
    agent_event_input,
)

from .asgi import ChatInput, Emit, Runner

__all__ = ("PacedModel", "RunSaver", "agent_runner")

ModelFor = Callable[[ChatInput], AgentModel]


class _AnyArgs(msgspec.Struct):
    """A client-declared tool's arguments: the client validates them (the server never runs it)."""


class PacedModel(WrappedModel):
    """``inner`` with a pause of ``delay_s`` before each stream event: a provider's pace, for demos
    and for tests that must act while a response is still streaming. Its extras are read through;
    its own fold is hidden, so every turn streams at that pace."""

    __slots__ = ("_delay",)

    def __init__(self, inner: AgentModel, delay_s: float) -> None:
        self._delay = delay_s
        super().__init__(inner)

    async def stream(self, messages: Sequence[Message],
                     options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(messages, options):
            await anyio.sleep(self._delay)
            yield event


class _Counted(WrappedModel):
    """``inner`` as it is -- its extras read through, its own fold (``complete_turn``) kept --
    counting the turns started through it."""

    __slots__ = ("_turns",)

    def __init__(self, inner: AgentModel, turns: _FedTurns) -> None:
        self._turns = turns
        super().__init__(inner)

    async def _complete(self, messages: Sequence[Message], options: ModelStreamOptions,
                        on_event: Callable[[StreamEvent], None] | None = None) -> ModelTurnResult:
        self._turns.started += 1
        result: ModelTurnResult = await self._inner.complete_turn(  # type: ignore[attr-defined]
            messages, options, on_event)
        return result

    async def stream(self, messages: Sequence[Message],
                     options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        self._turns.started += 1
        async for event in self._inner.stream(messages, options):
            yield event


def _reporting(emit: Emit, needs_approval: frozenset[str]) -> ToolMiddleware:
    async def handler(ctx: ToolContext, next_: Callable[[], Awaitable[ToolOutcome]]) -> ToolOutcome:
        call_id = ctx.call_id or ""
        if ctx.tool_name in needs_approval:
            outcome: ToolOutcome = ToolSuspend(mode="waiting_for_reply",
                                               detail=f"approve {ctx.tool_name}?")
            emit(None, ToolOutputEvent(tool_call_id=call_id, outcome=outcome,
                                       approval_id=f"approval-{call_id}"))
            return outcome
        outcome = await next_()
        emit(None, ToolOutputEvent(tool_call_id=call_id, outcome=outcome))
        return outcome

    return ToolMiddleware(name="bindloop.protocols.report", handler=handler)


def _client_tool(definition: Any) -> Tool[_AnyArgs, Any]:
    def later(_args: _AnyArgs, _ctx: object) -> ToolSuspend:
        return ToolSuspend(mode="resuming_later", detail="the client runs this tool")

    return Tool(name=definition.name, description=definition.description, args_type=_AnyArgs,
                parameters=definition.parameters, execute=later)


async def _apply_approvals(chat: ChatInput, tools: dict[str, Tool[Any, Any]],
                           emit: Emit) -> tuple[Message, ...]:
    """The transcript with every answered approval resolved into the tool message it calls for."""
    transcript = list(chat.transcript)
    for approval in chat.approvals:
        tool = tools.get(approval.tool_name)
        if not approval.approved:
            transcript.append(tool_error_message(
                approval.tool_call_id, approval.reason or "the user denied this tool call",
                "rejected", name=approval.tool_name))
            emit(None, ToolDeniedEvent(tool_call_id=approval.tool_call_id, reason=approval.reason))
            continue
        if tool is None:
            outcome: ToolOutcome = ToolError(error=f"no tool {approval.tool_name!r}",
                                             kind="not_found")
        else:
            try:
                outcome = await tool.execute(approval.arguments, None)
            except Exception as exc:  # the model reads the failure, as the loop would show it
                outcome = ToolError(error=f"{type(exc).__name__}: {exc}")
        emit(None, ToolOutputEvent(tool_call_id=approval.tool_call_id, outcome=outcome))
        if isinstance(outcome, (ToolResult, ToolError)):
            transcript.append(tool_outcome_message(approval.tool_call_id, outcome,
                                                   name=approval.tool_name))
        else:
            transcript.append(ToolMessage(tool_call_id=approval.tool_call_id,
                                          content=outcome.detail or "", name=approval.tool_name))
    return tuple(transcript)


RunSaver = Callable[[ChatInput, LoopCheckpoint], Awaitable[None]]
"""``on_checkpoint(chat, checkpoint)``: store a run's boundary before it goes on (a raise fails
the run there)."""


def agent_runner(model: AgentModel | ModelFor, *, tools: Iterable[Tool[Any, Any]] = (),
                 needs_approval: Iterable[str] = (), max_turn_steps: int = 8,
                 on_checkpoint: RunSaver | None = None) -> Runner:
    """A runner that answers each request with one ``prompt_chat`` over ``model`` (an agent model,
    or a function of the request that makes one) and ``tools`` -- or, for a request carrying a
    ``checkpoint``, one ``resume_chat`` of it. Returns the chat's final text as the run's result.
    ``on_checkpoint`` gets each settled boundary (see the module docstring)."""
    server_tools = {t.name: t for t in tools}
    approval = frozenset(needs_approval)

    async def run(chat: ChatInput, emit: Emit) -> Any:
        transcript = chat.transcript
        if chat.checkpoint is None:
            transcript = await _apply_approvals(chat, server_tools, emit)
            if chat.state is not None:
                emit(None, StateSnapshotEvent(state=chat.state))  # the state this run starts from
            if chat.approvals and on_checkpoint is not None:
                # The approved calls ran: a run lost after this must not run them again.
                await on_checkpoint(chat, create_loop_checkpoint(
                    execution_id=f"chat-{chat.chat_id}", messages=transcript,
                    max_iterations=max_turn_steps))
        agent_model = cast(AgentModel, model(chat) if callable(model) and not hasattr(model, "stream")
                           else model)
        reporting = _reporting(emit, approval)
        fed = _FedTurns(agent_model)
        saver = None if on_checkpoint is None else fed.saver(on_checkpoint, chat)

        async def forward(stream: AsyncIterator[AgentStreamEvent]) -> None:
            async for event in stream:
                turn, item = agent_event_input(event)
                emit(turn, item)
                if isinstance(item, (TurnDoneEvent, TurnFailedEvent)):
                    fed.turn_ended()

        async def handler(_: None) -> Any:
            for tool in server_tools.values():
                equip_tool(tool, middleware=[reporting])
            for definition in chat.tools:
                if definition.name not in server_tools:
                    equip_tool(_client_tool(definition), middleware=[reporting])
            on_stream(forward)
            if chat.checkpoint is not None:
                return await resume_chat(chat.checkpoint, on_checkpoint=saver)
            equip_history(transcript)
            return await prompt_chat(max_turn_steps=max_turn_steps, on_checkpoint=saver)

        result = await create_agent(id=f"chat-{chat.protocol}", handler=handler,
                                    model=fed.model if saver is not None else agent_model)(None)
        return result.data or None

    return run


class _FedTurns:
    """Whether every event before a boundary reached ``emit``. The stream consumer runs behind the
    loop (it reads a buffer), so a save at a boundary first waits until it has fed the end of each
    model turn started so far: the checkpoint and what the encoder was fed then describe the same
    point, and a continuation from the one repeats exactly the other."""

    def __init__(self, inner: AgentModel) -> None:
        self.model = _Counted(inner, self)
        self.started = 0
        self.ended = 0
        self._changed = anyio.Event()

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
