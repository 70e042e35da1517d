"""A :data:`~bindloop.hosts.chat.run.Runner` over bindloop's agent API: one ``prompt_chat`` per request,
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

A host that can lose a run midway (a process killed) keeps its boundaries: for a
``continuable`` chat each is handed to the host as a
:class:`~bindloop.agent.events.CheckpointSavedEvent` through ``emit`` (what
:class:`~bindloop.hosts.asgi.chat.ChatApp` stores with continuable logs), and to ``on_checkpoint``
when given (the ``ready`` ones) -- every settled boundary of the prompt, the first one (the
loop's) right after the approved calls ran, before the model is called, with the encoder fed
everything before it (the run's events reach it through ``run_with(on_event=)``, synchronously).
The host also gets the commit of a request's decisions, saved before the approved calls run. A
:class:`~bindloop.hosts.chat.run.ChatInput` carrying one of them goes on from there
(``resume_chat``): from a commit, with the same decisions again. With ``receipts`` a call that had
run (an approved one included) is answered from its receipt and not run again; without, a run
lost between an approved call and the save after it runs the call again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import anyio
import msgspec

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_history,
    equip_tool,
    on_event,
    prompt_chat,
    resume_chat,
)
from bindloop.agent.approvals import (
    ApprovalDecision,
    ApprovalError,
    approve,
    deny,
    edit_arguments,
)
from bindloop.agent.events import (
    AgentStreamEvent,
    ApprovalDecidedEvent,
    CheckpointSavedEvent,
)
from bindloop.agent.middleware import (
    ToolMiddleware,
    WrappedModel,
)
from bindloop.completion import StreamEvent
from bindloop.clock import epoch_ms
from bindloop.contracts import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolError,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    UserMessage,
)
from bindloop.loop import LoopCounters, OpenSuspend
from bindloop.model import Model, ModelRequest
from bindloop.run import (
    CanonicalJsonError,
    ReceiptAmbiguous,
    ReceiptReplay,
    ReceiptWait,
    ToolCallReceiptKey,
    decide_tool_call_receipt,
    tool_call_args_hash,
)
from bindloop.stores import MemoryPendingApprovals, PendingApprovals, ToolCallReceiptStore
from bindloop.tools import Tool, ToolContext
from bindloop.checkpoints import (
    ApprovalRecord,
    LoopCheckpoint,
    validate_loop_checkpoint,
)
from bindloop.protocols import StateSnapshotEvent, agent_event_input

from bindloop.hosts.chat.run import ChatInput, Emit, Runner

__all__ = ("AgentRunner", "PacedModel", "RunSaver", "agent_runner")

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
        recorded = pending.take(chat.key, a.tool_call_id)
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
    # A transcript no run could have left is refused here; the validated copy is what resumes,
    # so resume_chat does not check the request's transcript whole again.
    checkpoint = validate_loop_checkpoint(checkpoint)
    decisions: list[ApprovalDecision] = []
    for a in live:
        if not a.approved:
            decisions.append(deny(a.tool_call_id, a.reason or "the user denied this tool call"))
        elif a.arguments != calls[a.tool_call_id].arguments:
            decisions.append(edit_arguments(a.tool_call_id, a.arguments))
        else:
            decisions.append(approve(a.tool_call_id))
    return checkpoint, decisions


_MAY_HAVE_RUN = ("this call was running when its process died: it may or may not have taken "
                 "effect, and it was not run again")


def _recorded(outcome: ToolResult | ToolError) -> Any:
    return msgspec.to_builtins(outcome)


def _receipted(receipts: ToolCallReceiptStore, chat: ChatInput,
               lease_ms: float) -> ToolMiddleware:
    """Each call of a server tool claimed in ``receipts`` before it runs and its outcome
    recorded there -- the receipt's run is the chat (:attr:`ChatInput.key`, so deleting the chat
    deletes them), its hash that of the call's id with its arguments: a call that completed is
    answered with the recorded outcome and not run again, one whose process died while it ran is
    answered as maybe run (an opaque effect), a live claim is waited for."""

    async def handler(ctx: ToolContext, run: Callable[[], Awaitable[ToolOutcome]]) -> ToolOutcome:
        try:
            raw = ctx.input
            args = msgspec.json.decode(raw) if isinstance(raw, (str, bytes)) else raw
            key = ToolCallReceiptKey(tenant_id=chat.identity, run_id=chat.key,
                                     tool_name=ctx.tool_name,
                                     args_hash=tool_call_args_hash([ctx.call_id, args]))
        except (msgspec.DecodeError, CanonicalJsonError):
            return await run()  # arguments no tool takes: refused before anything runs
        attempt = 1  # a call seen first has no receipt: claimed in one round trip
        while not await receipts.claim(key, attempt, lease_ms):
            decision = decide_tool_call_receipt(state=await receipts.read(key), effect="opaque")
            if isinstance(decision, ReceiptReplay):
                return msgspec.convert(decision.result, ToolResult | ToolError)
            if isinstance(decision, ReceiptWait):
                await anyio.sleep(max(0.0, decision.lease_expires_at_ms - epoch_ms()) / 1000)
                continue
            if isinstance(decision, ReceiptAmbiguous):
                return ToolError(error=_MAY_HAVE_RUN, kind="error")
            attempt = decision.attempt  # refused again: another attempt came first, read again
        try:
            outcome = await run()
        except Exception as exc:  # the tool's own report: nothing landed
            await receipts.fail(key, attempt, type(exc).__name__)
            raise
        if isinstance(outcome, ToolSuspend):  # nothing ran: a later call may
            await receipts.fail(key, attempt, "suspended")
        else:
            await receipts.complete(key, attempt, _recorded(outcome))
        return outcome

    return ToolMiddleware(name="receipts", handler=handler)


def _redecided(checkpoint: LoopCheckpoint) -> tuple[LoopCheckpoint, list[ApprovalDecision]]:
    """A checkpoint saved when decisions were committed, before their calls ran (a continuation
    of a run lost then): the position before the commit and the same decisions, so the approved
    calls go through their receipts (a call that completed is not run again)."""
    record = checkpoint.approvals
    if not isinstance(record, ApprovalRecord) or not record.decided:
        return checkpoint, []
    decisions: list[ApprovalDecision] = []
    for d in record.decided:
        if d.decision == "deny":
            decisions.append(deny(d.call_id, d.reason or "the user denied this tool call"))
        elif d.arguments is not None:
            decisions.append(edit_arguments(d.call_id, d.arguments))
        else:
            decisions.append(approve(d.call_id))
    undecided = ApprovalRecord(pending=(*record.pending, *(d.call_id for d in record.decided)),
                               signed=record.signed)
    return msgspec.structs.replace(checkpoint, approvals=undecided), decisions


async def _uncommitted(_checkpoint: LoopCheckpoint) -> None:
    """Where the decisions are committed when nothing keeps the run's boundaries: nowhere (the
    client holds the conversation; see the module docstring)."""


RunSaver = Callable[[ChatInput, LoopCheckpoint], Awaitable[None]]
"""``on_checkpoint(chat, checkpoint)``: store a run's boundary before it goes on (a raise fails
the run there). :class:`~bindloop.hosts.asgi.chat.ChatApp` needs none: it keeps the boundaries the
runner hands it."""


_TRUST_THE_CLIENT: Any = object()


def agent_runner(model: Model, *, tools: Iterable[Tool[Any, Any]] = (),
                 needs_approval: Iterable[str] = (), max_turn_steps: int = 8,
                 on_checkpoint: RunSaver | None = None,
                 approvals: PendingApprovals | None = _TRUST_THE_CLIENT,
                 allow_edits: bool = False, instructions: str | None = None,
                 trust_system_messages: bool = False,
                 receipts: ToolCallReceiptStore | None = None,
                 receipt_lease_ms: float = 10_000) -> AgentRunner:
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
    already did both to the transcript it hands over (the Worker's own routes).

    ``receipts`` (a :class:`~bindloop.stores.ToolCallReceiptStore` every process of the host shares,
    e.g. :class:`~bindloop.hosts.stores.sqlite.SqliteStore`): each call of a server tool is
    claimed there before it runs and its outcome recorded, keyed by the chat, the call's id and
    its arguments (the chat is the receipt's run: ``run_id`` is :attr:`ChatInput.key`), so a run continued after its process died (the host's
    :class:`~bindloop.hosts.asgi.chat.ChatApp` with continuable logs) gets the recorded outcome of a
    call that had run and does not run it again -- an approved call included; a call lost while
    it ran is answered as maybe run, not run again. The claim's lease is ``receipt_lease_ms``
    (on the wall clock, the stores' default).

    Deleting a chat (:meth:`AgentRunner.forget_chat`, which
    :class:`~bindloop.hosts.asgi.chat.ChatApp` calls on ``DELETE``) drops its pending approvals
    and its receipts."""
    server_tools = {t.name: t for t in tools}
    approval = frozenset(needs_approval)
    pending: PendingApprovals | None = (MemoryPendingApprovals() if approvals is _TRUST_THE_CLIENT
                                        else approvals)

    async def run(chat: ChatInput, emit: Emit) -> Any:
        start, decisions = chat.checkpoint, list[ApprovalDecision]()
        if start is not None:  # a continuation: its decisions, if it was lost with them, again
            start, decisions = _redecided(start)
        redecided = {d.call_id for d in decisions}
        if start is None:
            if not trust_system_messages:
                chat = _operators(chat, instructions)
            if chat.state is not None:
                emit(None, StateSnapshotEvent(state=chat.state))  # the state this run starts from
            position = _suspended_at(chat, approval, max_turn_steps, pending, allow_edits)
            if position is not None:
                start, decisions = position
        # Checkpoints are made only for a host or a saver that keeps them (decisions always
        # commit through one: see _uncommitted).
        saver = (_saver(on_checkpoint, chat) if on_checkpoint is not None or chat.continuable
                 else None)

        def forward(event: AgentStreamEvent) -> None:
            # Called as each event is emitted: by a save, the encoder was fed all that preceded it.
            turn, item = agent_event_input(event)
            if isinstance(item, ApprovalDecidedEvent) and item.call_id in redecided:
                return  # the lost run reported it already
            if not isinstance(item, CheckpointSavedEvent) or item.checkpoint.status == "ready" \
                    or (isinstance(item.checkpoint.approvals, ApprovalRecord)
                        and item.checkpoint.approvals.decided):
                # A settled boundary, or decisions committed before their calls run: the
                # host's to keep (never the client's).
                emit(turn, item)

        async def handler(_: None) -> ChatResult:
            middleware = () if receipts is None else (
                _receipted(receipts, chat, receipt_lease_ms),)
            for tool in server_tools.values():
                equip_tool(tool, needs_approval=tool.name in approval, middleware=middleware)
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
            pending.record(chat.key, [made[p.call_id] for p in result.approvals
                                      if p.call_id in made])
        return result.data or None

    return AgentRunner(run, pending, receipts)


class AgentRunner:
    """The :data:`~bindloop.hosts.chat.run.Runner` :func:`agent_runner` makes: ``await
    runner(chat, emit)`` runs a request; :meth:`forget_chat` drops what it keeps of a chat."""

    __slots__ = ("_pending", "_receipts", "_run")

    def __init__(self, run: Runner, pending: PendingApprovals | None,
                 receipts: ToolCallReceiptStore | None) -> None:
        self._run, self._pending, self._receipts = run, pending, receipts

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        return await self._run(chat, emit)

    async def forget_chat(self, chat: ChatInput) -> bool:
        """Drop the calls ``chat`` waits to have approved (a decision on one is refused from
        then on) and its receipts (``chat`` names it: its id, protocol and identity; call it
        only when no run of it goes on). Whether there was any."""
        count = 0 if self._pending is None else self._pending.forget(chat.key)
        if self._receipts is not None:
            count += await self._receipts.delete_run(chat.identity, chat.key)
        return count > 0


def _operators(chat: ChatInput, instructions: str | None) -> ChatInput:
    """The client's transcript with its system messages as user content, after ``instructions``."""
    transcript: tuple[Message, ...] = tuple(
        UserMessage(content=m.content) if isinstance(m, SystemMessage) else m
        for m in chat.transcript)
    if instructions is not None:
        transcript = (SystemMessage(content=instructions), *transcript)
    return msgspec.structs.replace(chat, transcript=transcript)


def _saver(save: RunSaver | None,
           chat: ChatInput) -> Callable[[LoopCheckpoint], Awaitable[None]]:
    """The agent's ``on_checkpoint``: ``save`` each settled boundary (a suspend or the end is the
    run's outcome, no save). Given without ``save`` for a continuable chat: each checkpoint is
    then reported as a run event, which the runner hands to the host (``emit``) to keep the run
    where it can go on."""

    async def on_checkpoint(checkpoint: LoopCheckpoint) -> None:
        if save is not None and checkpoint.status == "ready":
            await save(chat, checkpoint)

    return on_checkpoint
