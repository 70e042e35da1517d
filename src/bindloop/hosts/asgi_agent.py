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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import anyio
import msgspec

from bindloop.agent import (
    AgentModel,
    AgentStreamEvent,
    ModelStreamOptions,
    ToolContext,
    ToolMiddleware,
    create_agent,
    equip_history,
    equip_tool,
    on_stream,
    prompt_chat,
)
from bindloop.completion import StreamEvent
from bindloop.contracts import (
    Message,
    ToolError,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    TurnUsage,
    tool_error_message,
    tool_outcome_message,
)
from bindloop.plugins import Tool
from bindloop.protocols import (
    StateSnapshotEvent,
    ToolDeniedEvent,
    ToolOutputEvent,
    agent_event_input,
)

from .asgi import ChatInput, Emit, Runner

__all__ = ("PacedModel", "agent_runner")

ModelFor = Callable[[ChatInput], AgentModel]


class _AnyArgs(msgspec.Struct):
    """A client-declared tool's arguments: the client validates them (the server never runs it)."""


class PacedModel:
    """``inner`` with a pause of ``delay_s`` before each stream event: a provider's pace, for demos
    and for tests that must act while a response is still streaming."""

    def __init__(self, inner: AgentModel, delay_s: float) -> None:
        self._inner = inner
        self._delay = delay_s
        self.structured_output = getattr(inner, "structured_output", "tool")

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def provider(self) -> str | None:
        provider: str | None = getattr(self._inner, "provider", None)
        return provider

    def calculate_cost(self, usage: TurnUsage) -> dict[str, int]:
        # Read through getattr: not every agent model shape carries a cost function.
        cost = getattr(self._inner, "calculate_cost", None)
        return {} if cost is None else dict(cost(usage))

    async def stream(self, messages: Sequence[Message],
                     options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(messages, options):
            await anyio.sleep(self._delay)
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


def agent_runner(model: AgentModel | ModelFor, *, tools: Iterable[Tool[Any, Any]] = (),
                 needs_approval: Iterable[str] = (), max_turn_steps: int = 8) -> Runner:
    """A runner that answers each request with one ``prompt_chat`` over ``model`` (an agent model,
    or a function of the request that makes one) and ``tools``. Returns the chat's final text as
    the run's result."""
    server_tools = {t.name: t for t in tools}
    approval = frozenset(needs_approval)

    async def run(chat: ChatInput, emit: Emit) -> Any:
        transcript = await _apply_approvals(chat, server_tools, emit)
        agent_model = model(chat) if callable(model) and not hasattr(model, "stream") else model
        reporting = _reporting(emit, approval)
        if chat.state is not None:
            emit(None, StateSnapshotEvent(state=chat.state))  # the state this run starts from

        async def forward(stream: AsyncIterator[AgentStreamEvent]) -> None:
            async for event in stream:
                turn, item = agent_event_input(event)
                emit(turn, item)

        async def handler(_: None) -> Any:
            for tool in server_tools.values():
                equip_tool(tool, middleware=[reporting])
            for definition in chat.tools:
                if definition.name not in server_tools:
                    equip_tool(_client_tool(definition), middleware=[reporting])
            equip_history(transcript)
            on_stream(forward)
            return await prompt_chat(max_turn_steps=max_turn_steps)

        result = await create_agent(id=f"chat-{chat.protocol}", handler=handler,
                                    model=agent_model)(None)
        return result.data or None

    return run
