"""A :data:`~bindloop.hosts.asgi.chat.Runner` over bindloop's agent API: one ``prompt_chat`` per request,
its run events (``on_stream``: the model's stream, the tools' outcomes, the approvals) fed to the
protocol encoder, and nothing else.

- the request's transcript is the history (``equip_history``); the server's tools are equipped as
  they are (each outcome reaches the client as the run's ``tool_finished`` event);
- a tool named in ``needs_approval`` is equipped with ``equip_tool(needs_approval=True)``: when the
  model calls it, the chat suspends with the call in ``ChatResult.approvals``, reported as the
  run's ``approval_requested`` event (id ``approval-<call id>``). The client's answer comes back on the next request
  (an AI SDK ``approval-responded`` part, an AG-UI resume entry): the transcript is then the
  position that chat suspended at, and ``resume_chat(decisions=...)`` continues it -- an approved
  call runs as the resumed loop's first batch (its pool, signal, middleware, ``on_tool_error``,
  stats), a denied one is answered with the denial the model reads (the run's ``approval_decided``
  event tells the client); calls the transcript already answers keep their answers;
- a tool the client declared (AG-UI ``tools``) is offered to the model and left for the client to
  run: its call suspends as ``resuming_later`` (AG-UI ``pendingToolCallIds``; in the AI SDK the call
  stays ``input-available`` for the client's ``onToolCall``) and the result arrives as a tool message
  on the next request.

The server keeps no conversation (the client sends it back each time), but it keeps the calls
each chat waits to have approved (``approvals=``, :class:`~bindloop.stores.PendingApprovals`): a decision applies
only to a call the model made in this chat, with its own tool and arguments, once -- a forged
call, changed arguments or a replayed decision is refused and runs nothing. (The decisions'
once-only commit across processes is ``on_checkpoint``'s and a shared record's to make.)

A host that can lose a run midway (a process killed) passes ``on_checkpoint``: it gets the ``ready``
checkpoint of every settled boundary of the prompt -- the first one (the loop's) right after the
approved calls ran, before the model is called -- with the encoder fed everything before it (the
run's events reach it through ``run_with(on_event=)``, synchronously); a
:class:`~bindloop.hosts.asgi.chat.ChatInput` carrying one of them goes on from there (``resume_chat``),
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
    CheckpointSavedEvent,
    WrappedModel,
    approve,
    create_agent,
    deny,
    edit_arguments,
    equip_history,
    equip_tool,
    on_event,
    prompt_chat,
    resume_chat,
)
from bindloop.completion import StreamEvent
from bindloop.contracts import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSuspend,
    UserMessage,
)
from bindloop.loop import LoopCounters, OpenSuspend
from bindloop.model import Model, ModelRequest
from bindloop.tools import Tool
from bindloop.session import (
    ApprovalRecord,
    LoopCheckpoint,
    serialize_loop_checkpoint,
)
from bindloop.protocols import StateSnapshotEvent, agent_event_input
from bindloop.stores import MemoryPendingApprovals, PendingApprovals

from bindloop.hosts.asgi.chat import ChatInput, Emit, Runner

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


def _client_tool(definition: Any) -> Tool[_AnyArgs, Any]:
    def later(_args: _AnyArgs, _ctx: object) -> ToolSuspend:
        return ToolSuspend(mode="resuming_later", detail="the client runs this tool")

    return Tool(name=definition.name, description=definition.description, args_type=_AnyArgs,
                parameters=definition.parameters, execute=later)


def _check_recorded(chat: ChatInput, live: Sequence[Any], calls: dict[str, ToolCall],
                    pending: PendingApprovals, allow_edits: bool) -> None:
    """Every decision names a call the server recorded for this chat, whose tool and arguments
    the client's transcript has unchanged; each is taken (a second decision is refused)."""
    for a in live:
        recorded = pending.take(chat.chat_id, a.tool_call_id)
        if recorded is None:
            raise ApprovalError(f"call {a.tool_call_id!r} is not waiting for approval in this "
                                "chat (never asked, or decided already)")
        sent = calls[a.tool_call_id]
        if (sent.name, sent.arguments) != (recorded.name, recorded.arguments):
            raise ApprovalError(f"call {a.tool_call_id!r} in the request is not the call the "
                                "model made (its tool or arguments differ)")
        if a.approved and a.arguments != recorded.arguments and not allow_edits:
            raise ApprovalError(f"call {a.tool_call_id!r}: this server does not take edited "
                                "arguments with an approval")


def _suspended_at(chat: ChatInput, approval: frozenset[str], max_turn_steps: int,
                  pending: PendingApprovals | None = None, allow_edits: bool = False,
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
    if pending is not None:
        _check_recorded(chat, live, calls, pending, allow_edits)
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


_TRUST_THE_CLIENT: Any = object()


def agent_runner(model: Model, *, tools: Iterable[Tool[Any, Any]] = (),
                 needs_approval: Iterable[str] = (), max_turn_steps: int = 8,
                 on_checkpoint: RunSaver | None = None,
                 approvals: PendingApprovals | None = _TRUST_THE_CLIENT,
                 allow_edits: bool = False, instructions: str | None = None,
                 trust_system_messages: bool = False) -> Runner:
    """A runner that answers each request with one ``prompt_chat`` over ``model`` (a
    :class:`~bindloop.model.Model`) and ``tools`` -- or one ``resume_chat``: of the
    request's ``checkpoint``, or, when its approvals answer calls of its transcript, of the
    position the chat suspended at, with those decisions. Returns the chat's final text as the
    run's result. ``on_checkpoint`` gets each settled boundary (see the module docstring).

    ``approvals`` is the server's record of the calls waiting for approval (a
    :class:`~bindloop.stores.MemoryPendingApprovals` of this runner by default): a decision is applied only to a
    call the model made in this chat and the server recorded, with its tool and arguments
    unchanged, and only once -- anything else ends the run with the approval refused and nothing
    run. An approval with edited arguments is refused unless ``allow_edits``. ``approvals=None``
    trusts the client's transcript (a host that cannot keep the record, e.g. one runner per
    request with no shared store): then a client can approve calls the model never made.

    The operator's instructions stay the operator's: a system message in the client's transcript
    is carried as user content (it can ask, never instruct), and ``instructions`` (the host's
    system prompt) opens every conversation. ``trust_system_messages=True`` is for a host that
    already did both to the transcript it hands over (the Worker's own routes)."""
    server_tools = {t.name: t for t in tools}
    approval = frozenset(needs_approval)
    pending: PendingApprovals | None = (MemoryPendingApprovals() if approvals is _TRUST_THE_CLIENT
                                        else approvals)

    async def run(chat: ChatInput, emit: Emit) -> Any:
        start, decisions = chat.checkpoint, list[ApprovalDecision]()
        if start is None:
            if not trust_system_messages:
                chat = _operators(chat, instructions)
            if chat.state is not None:
                emit(None, StateSnapshotEvent(state=chat.state))  # the state this run starts from
            position = _suspended_at(chat, approval, max_turn_steps, pending, allow_edits)
            if position is not None:
                start, decisions = position
        saver = None if on_checkpoint is None else _saver(on_checkpoint, chat)

        def forward(event: AgentStreamEvent) -> None:
            # Called as each event is emitted: by a save, the encoder was fed all that preceded it.
            turn, item = agent_event_input(event)
            if not isinstance(item, CheckpointSavedEvent):  # the host's own save: not the client's
                emit(turn, item)

        async def handler(_: None) -> ChatResult:
            for tool in server_tools.values():
                equip_tool(tool, needs_approval=tool.name in approval)
            for definition in chat.tools:
                if definition.name not in server_tools:
                    equip_tool(_client_tool(definition),
                               needs_approval=definition.name in approval)
            on_event(forward)
            if start is None:
                equip_history(chat.transcript)
                return await prompt_chat(max_turn_steps=max_turn_steps, on_checkpoint=saver)
            if decisions:
                return await resume_chat(start, decisions=decisions, max_turn_steps=max_turn_steps,
                                         on_checkpoint=saver or _uncommitted)
            return await resume_chat(start, on_checkpoint=saver)

        result = await create_agent(id=f"chat-{chat.protocol}", handler=handler,
                                    model=model)(None)
        if pending is not None and result.approvals:
            made = {c.id: c for m in result.delta if isinstance(m, AssistantMessage)
                    for c in m.tool_calls}
            made.update((c.id, c) for m in (start.messages if start else chat.transcript)
                        if isinstance(m, AssistantMessage) for c in m.tool_calls
                        if c.id not in made)
            pending.record(chat.chat_id, [made[p.call_id] for p in result.approvals
                                          if p.call_id in made])
        return result.data or None

    return run


def _operators(chat: ChatInput, instructions: str | None) -> ChatInput:
    """The client's transcript with its system messages as user content, after ``instructions``."""
    transcript: tuple[Message, ...] = tuple(
        UserMessage(content=m.content) if isinstance(m, SystemMessage) else m
        for m in chat.transcript)
    if instructions is not None:
        transcript = (SystemMessage(content=instructions), *transcript)
    return msgspec.structs.replace(chat, transcript=transcript)


def _saver(save: RunSaver, chat: ChatInput) -> Callable[[LoopCheckpoint], Awaitable[None]]:
    async def on_checkpoint(checkpoint: LoopCheckpoint) -> None:
        if checkpoint.status == "ready":  # a suspend or the end: the run's outcome, no save
            await save(chat, checkpoint)

    return on_checkpoint
