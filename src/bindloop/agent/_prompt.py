"""``prompt_agent`` / ``prompt_chat`` / ``resume_chat``: one generation's prompt as ONE
``run_tool_loop``, on the loop's ports.

- ``call_model``: :class:`~bindloop.agent._turns.TurnPort` (the one fold, priced inside it; the
  stream, traces, journal and replay observe it);
- ``run_tool_call`` / ``run_tool_batch``: :class:`~bindloop.agent._calls.ToolPort` (each call's
  tool onion; the tool-call-loop middleware around the loop's own batch runner);
- ``on_turn_would_end``: :class:`~bindloop.agent._reask.Reasks` (the schema and the validators'
  verdict: accept, or re-ask in the same loop);
- ``is_final_call``: the output tool's call ends the run (tool-mode structured output).

``resume_chat`` is parse, apply the reply, then the same loop from the checkpoint's position.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

import msgspec

from ..textstream import TurnStreamSink, TurnTextStream, create_turn_text_stream
from .._awaitable import resolve
from ..clock import monotonic_ms
from ..contracts import (
    Message,
    RunStats,
    StopReason,
    SystemMessage,
    ToolCall,
    ToolError,
    ToolOutcome,
    ToolSuspend,
    UserMessage,
    accumulate_run,
    accumulate_tool_call,
    tool_outcome_message,
)
from ..errors import PortContractError, RunCancelledError, UsageError
from ..loop import OpenSuspend, ToolLoopParams, ToolLoopState, run_tool_loop
from ..lowlevel import tool_exception_error
from ..session import CheckpointReply, CheckpointWake, DecidedCall, LoopCheckpoint, \
    apply_checkpoint_input, parse_loop_checkpoint
from ._approvals import (
    ApprovalDecision,
    PendingApproval,
    check_decisions,
    is_conflict,
    last_calls,
    pending_approvals,
    record_of,
)
from ._errors import (
    AfterPromptAgentError,
    ApprovalAlreadyDecidedError,
    BudgetExceededError,
    LoopMissingToolOutputError,
    NoAgentContextError,
    PromptAgentAlreadyCalledError,
    PromptSuspendedError,
    SnapshotDivergenceError,
)
from ._calls import ToolPort
from ._context import Frame, Generation, current_frame
from ._middleware import ToolCallLoopContext
from ._observe import reporter
from ._reask import Reasks
from ._saves import Position, SaveFn, refuse_saves, resumed
from ..schema import OutputSpec, output_spec
from ._stream import StreamHub, with_consumers
from ._turns import ToolChoiceArg, TurnPort, choice_policy, model_surface, resolve_model

__all__ = ("ChatResult", "prompt_agent", "prompt_chat", "resume_chat")

T = TypeVar("T")

_JSON_ENCODE = msgspec.json.Encoder().encode

_FATAL = (LoopMissingToolOutputError, PortContractError, NoAgentContextError,
          AfterPromptAgentError, SnapshotDivergenceError, BudgetExceededError, RunCancelledError)


def _fatal(exc: BaseException) -> bool:
    # Contract breaks and run-level stops end the prompt; any other raise is a tool error the
    # model reads (the loop's default).
    return isinstance(exc, _FATAL)


class ChatResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``prompt_chat`` / ``resume_chat`` return.

    ``data`` is the final answer text (``""`` when the chat stopped without one); ``delta`` the
    messages this prompt added (persist them to continue the chat); ``stop_reason`` ``done`` or a
    suspend's ``waiting_for_reply`` / ``resuming_later``, in which case ``checkpoint`` is the settled
    position :func:`resume_chat` continues (in this process or another); ``stats`` the prompt's
    model turns, tool calls and tokens. A ``done`` chat that saves (``on_checkpoint``) or was
    resumed carries its ``finished`` checkpoint too (the one saved last). ``approvals`` are the
    calls waiting for a decision (``equip_tool(needs_approval=)``), with their tokens when an
    ``approval_secret`` is in use."""

    data: str
    delta: list[Message]
    stop_reason: StopReason
    stats: RunStats
    checkpoint: LoopCheckpoint | None = None
    approvals: tuple[PendingApproval, ...] = ()


def _spec_for(frame: Frame, schema: Any) -> OutputSpec:
    """The schema's :class:`OutputSpec`, converted once per agent (the agent keeps the cache, so
    a reused agent does not convert again, and nothing is cached at module level)."""
    try:
        key: Any = ("dict", _JSON_ENCODE(schema)) if isinstance(schema, Mapping) else schema
        hash(key)
    except (TypeError, msgspec.EncodeError):
        return output_spec(schema)
    cached = frame.specs.get(key)
    if cached is None:
        cached = frame.specs[key] = output_spec(schema)
    return cached


def _begin(hook: str) -> tuple[Frame, Generation]:
    frame = current_frame(hook)
    gen = frame.generation
    assert gen is not None
    if gen.prompted:
        raise PromptAgentAlreadyCalledError(
            f"{hook}() was called twice in one generation of agent {frame.agent_id!r}: one "
            "generation makes one prompt; return reborn() to prompt again in a new generation")
    gen.prompted = True
    return frame, gen


def _messages(frame: Frame, gen: Generation, hook: str) -> list[Message]:
    out: list[Message] = []
    if gen.system:
        out.append(SystemMessage(content="\n\n".join(gen.system)))
    out.extend(gen.history)
    if gen.instructions:
        out.append(UserMessage(content="\n\n".join(gen.instructions)))
    if not gen.instructions and not gen.history:
        raise UsageError(f"{hook}() in agent {frame.agent_id!r} has nothing to ask: call "
                         "equip_instruction(...) (or equip_history(...)) before it")
    return out


def _budgets(max_turn_steps: int, max_total_turns: int | None, retries: int) -> int:
    if isinstance(max_turn_steps, bool) or not isinstance(max_turn_steps, int) or \
            max_turn_steps < 1:
        raise UsageError(f"max_turn_steps must be a positive int, got {max_turn_steps!r}")
    total = max_turn_steps * (retries + 1) if max_total_turns is None else max_total_turns
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise UsageError(f"max_total_turns must be a positive int, got {max_total_turns!r}")
    return total


def _check_secret(secret: object) -> None:
    if not (isinstance(secret, (bytes, str)) and secret):
        raise UsageError("approval_secret must be non-empty bytes or str")


def _execution_id(frame: Frame) -> str:
    """A fresh id for this conversation from the agent's id port (checked: a non-empty str)."""
    port = frame.new_execution_id
    if port is None:  # a frame made outside create_agent (the run's root never prompts)
        raise PortContractError(f"agent {frame.agent_id!r} has no execution id port")
    ident = port()
    if not isinstance(ident, str) or not ident:
        raise PortContractError(f"agent {frame.agent_id!r}: create_agent(execution_ids=...) "
                                f"returned {ident!r}, not a non-empty string")
    return ident


async def _drive(frame: Frame, gen: Generation, spec: OutputSpec | None, pos: Position, *,
                 hub: StreamHub | None, text: TurnTextStream | None, saver: SaveFn | None,
                 additional_options: Mapping[str, Any] | None,
                 start_len: int, resuming: bool = False,
                 settle: Sequence[tuple[ToolCall, DecidedCall, bool]] = (),
                 secret: bytes | str | None = None) -> tuple[Any, ChatResult | None]:
    """The prompt's one tool loop from ``pos``, and what its stop reason means to the caller.

    ``settle`` answers decided approval suspends first: ``(call, decision, live)``, where a live
    approval runs the call now (through the tool's onion, once) and one decided by an earlier,
    interrupted invocation is answered without running (it may have run already)."""
    model = resolve_model(frame)
    options, tool_mode = model_surface(frame, gen, model, spec, additional_options)
    output = spec.name if tool_mode and spec is not None else None
    chat = spec is None
    reasks = Reasks(frame, gen, spec, pos, output=output, text=text, chat=chat)
    turns = TurnPort(frame, model, options, spec=spec, tool_mode=tool_mode, hub=hub, text=text,
                     limit=pos.attempt_start + pos.steps - pos.iterations,
                     out_of_steps=reasks.out_of_steps, choose=gen.tool_choice)

    def new_attempt() -> None:  # its turns count from the re-ask on
        turns.limit = turns.turns + pos.steps

    reasks.on_reask = new_attempt
    system, instruction = "\n\n".join(gen.system), "\n\n".join(gen.instructions)

    def context(calls: tuple[Any, ...], done: tuple[Any, ...]) -> ToolCallLoopContext:
        return ToolCallLoopContext(step=turns.turns, system=system, instruction=instruction,
                                   tools=options.tools, original_calls=calls,
                                   agent_id=frame.agent_id, tool_turns=done)

    tools = ToolPort(frame, gen, output=output, context=context, recording=turns.recording)
    decided_stats = await _settle(pos, tools, settle) if settle else None
    serial = frozenset(gen.serial)
    run, hook = frame.run, frame.run.on_tool_error
    params = ToolLoopParams(
        call_model=turns.call_model, run_tool_call=tools.run_tool_call, state=pos.state,
        max_iterations=max(pos.total_end - pos.iterations, 0), signal=frame.signal,
        is_fatal_tool_error=_fatal,
        runs_serially=(lambda call: call.name in serial) if serial else None,
        on_turn_would_end=reasks if spec is not None or gen.validators else None,
        run_tool_batch=tools.run_tool_batch if gen.loop_middleware else None,
        is_final_call=tools.is_final_call if output is not None else None,
        on_tool_call_rejected=None if hook is None else reporter(
            hook, lambda: pos.state.messages, frame.agent_id, run.session_id, run.trace_id))
    result = await (run_tool_loop(params) if saver is None else
                    run_tool_loop(params, pos.control(saver)))
    gen.stats = result.stats  # prompt_stats() reads it, whichever way the prompt returns
    reason = result.stop_reason
    stats = result.stats if decided_stats is None else accumulate_run(decided_stats, result.stats)
    if reason == "done":
        turn = result.final_turn
        data = turn.text or "" if turn is not None else ""
        value = reasks.value if params.on_turn_would_end is not None else data
        if not chat:  # prompt_agent returns the value alone: no ChatResult to build
            return value, None
        finished = None
        if saver is not None or resuming:  # the store (and the caller) learn the chat ended
            finished = pos.checkpoint("finished")
            if saver is not None:
                await resolve(saver(finished))
        return value, ChatResult(data=data, delta=pos.state.messages[start_len:],
                                 stop_reason="done", stats=stats, checkpoint=finished)
    if reason == "iteration_limit":
        error = reasks.out_of_steps() if pos.attempt_spent() else reasks.out_of_turns()
        spent = getattr(error, "checkpoint", None)
        if saver is not None and isinstance(spent, LoopCheckpoint):
            await resolve(saver(spent))
        raise error
    if reason in ("waiting_for_reply", "resuming_later"):
        open_ids = {s.tool_call_id for s in pos.state.open_suspends}
        asked = set(tools.awaiting)
        pos.approvals_pending = tuple(
            c for c in last_calls(pos.state.messages)
            if c in open_ids and (c in asked or c in pos.approvals_pending))
        if tools.awaiting:  # once signed, a suspension's approvals stay signed
            pos.approvals_signed = pos.approvals_signed or secret is not None
        checkpoint = pos.checkpoint(reason)
        if saver is not None:  # the suspend is the chat's last save
            await resolve(saver(checkpoint))
        if not chat:
            raise PromptSuspendedError(
                f"agent {frame.agent_id!r}: a tool suspended ({reason}) inside prompt_agent; "
                "structured output cannot wait: continue the checkpoint with resume_chat",
                checkpoint)
        return None, ChatResult(data="", delta=pos.state.messages[start_len:],
                                stop_reason=reason, stats=stats, checkpoint=checkpoint,
                                approvals=pending_approvals(checkpoint, secret=secret))
    raise RunCancelledError(f"agent {frame.agent_id!r}: the prompt was aborted ({reason})")


_LOST = ("approved, but the run stopped while this call was running: it may or may not have "
         "taken effect, and it was not run again")


async def _settle(pos: Position, tools: ToolPort,
                  settle: Sequence[tuple[ToolCall, DecidedCall, bool]]) -> RunStats:
    """Answer the decided approval suspends in ``pos.state`` (see :func:`_drive`); the stats of
    the calls that ran."""
    state = pos.state
    spent = RunStats()
    for call, decided, live in settle:
        outcome: ToolOutcome
        if decided.decision == "deny":
            outcome = ToolError(error=decided.reason or "denied", kind="denied")
        elif not live:
            outcome = ToolError(error=_LOST, kind="error")
        else:
            tools.approved.add(call.id)
            args = decided.arguments if decided.arguments is not None else call.arguments
            started = monotonic_ms()
            try:
                outcome = await tools.run_tool_call(ToolCall(id=call.id, name=call.name,
                                                             arguments=args))
            except Exception as exc:
                if _fatal(exc):
                    raise
                outcome = tool_exception_error(exc)
            spent = accumulate_tool_call(spent, call.name, monotonic_ms() - started)
        if isinstance(outcome, ToolSuspend):  # the approved tool itself waits now
            state.open_suspends = [
                OpenSuspend(tool_call_id=call.id, tool_name=call.name, mode=outcome.mode,
                            detail=outcome.detail) if s.tool_call_id == call.id else s
                for s in state.open_suspends]
        else:
            state.messages.append(tool_outcome_message(call.id, outcome, call.name))
            state.open_suspends = [s for s in state.open_suspends if s.tool_call_id != call.id]
    pos.approvals_decided = ()
    # Only this leg's stats count the run: the execution's totals already counted the call when
    # it suspended (one call, one count).
    return spent


async def _run_prompt(frame: Frame, gen: Generation, spec: OutputSpec | None, *,
                      max_turn_steps: int, max_total_turns: int | None,
                      text_sink: TurnStreamSink | None, hook: str,
                      additional_options: Mapping[str, Any] | None,
                      on_checkpoint: SaveFn | None = None,
                      secret: bytes | str | None = None) -> tuple[Any, ChatResult | None]:
    total = _budgets(max_turn_steps, max_total_turns, frame.max_retries)
    initial = _messages(frame, gen, hook)
    text = None
    if text_sink is not None:
        text = create_turn_text_stream(
            turn_id=f"{frame.agent_id}:{'.'.join(map(str, frame.path))}:{gen.index}",
            sink=text_sink)
        text.begin_attempt(None)
    pos = Position(ToolLoopState(messages=initial), execution_id=_execution_id(frame),
                   steps=max_turn_steps, total_end=total)

    async def body(hub: StreamHub | None) -> tuple[Any, ChatResult | None]:
        return await _drive(frame, gen, spec, pos, hub=hub, text=text, saver=on_checkpoint,
                            additional_options=additional_options, start_len=len(initial),
                            secret=secret)

    def finish(ok: bool) -> None:
        if text is not None:
            text.finish("succeeded" if ok else "failed")

    return await with_consumers(frame.run, gen.streams, body, finish, gen.consumers)


@overload
async def prompt_agent(schema: type[T], *, max_turn_steps: int = 10,
                       max_total_turns: int | None = None,
                       text_sink: TurnStreamSink | None = None,
                       additional_options: Mapping[str, Any] | None = None,
                       on_checkpoint: None = None) -> T: ...


@overload
async def prompt_agent(schema: dict[str, Any], *, max_turn_steps: int = 10,
                       max_total_turns: int | None = None,
                       text_sink: TurnStreamSink | None = None,
                       additional_options: Mapping[str, Any] | None = None,
                       on_checkpoint: None = None) -> Any: ...


async def prompt_agent(schema: Any, *, max_turn_steps: int = 10,
                       max_total_turns: int | None = None,
                       text_sink: TurnStreamSink | None = None,
                       additional_options: Mapping[str, Any] | None = None,
                       on_checkpoint: None = None) -> Any:
    """Ask this generation's prompt for a value of ``schema`` and return it decoded.

    ``schema`` is any type msgspec can decode (Struct, dataclass, TypedDict, ``list[...]``,
    unions) or a JSON Schema dict (returned as plain JSON data). The strict form of the schema goes
    to the provider's native JSON-schema mode when the model has one, else as a forced output tool
    (whose call ends the run: it stays in the transcript with a receipt as its result). An answer
    that is not valid JSON, does not match, or that an ``expect_validator`` refuses is re-asked
    with the reason in the same tool loop, up to the agent's ``max_retries``; then
    :class:`~bindloop.errors.StructuredOutputError` carries every attempt. ``max_turn_steps``
    bounds each attempt (:class:`~bindloop.errors.ToolLoopExceededError`); ``max_total_turns``
    (default ``max_turn_steps * (max_retries + 1)``) all model turns of the prompt
    (:class:`~bindloop.errors.TurnBudgetExceededError`). ``text_sink`` receives the answer text as
    a retractable turn text stream (a re-ask opens ``begin_attempt("structured_output_retry")``).
    ``additional_options`` go to the model with every call (``WireOptions`` fields such as
    ``temperature`` for the wire adapters).

    ``on_checkpoint`` is refused (:class:`~bindloop.errors.UsageError`): a structured prompt's
    saves could only be resumed by :func:`resume_chat`, which answers with text, not the decoded
    value, so a resumed run would not end the way this one would. Save a chat instead, or make the
    tools idempotent (``bindloop.run`` receipts).
    """
    if on_checkpoint is not None:
        raise UsageError(
            "prompt_agent(on_checkpoint=...) is not supported: a structured prompt cannot be "
            "resumed from a save (resume_chat returns text, not the decoded value); use "
            "prompt_chat(on_checkpoint=...) and decode the answer yourself, or make the tools "
            "idempotent")
    frame, gen = _begin("prompt_agent")
    spec = _spec_for(frame, schema)
    value, _ = await _run_prompt(frame, gen, spec, max_turn_steps=max_turn_steps,
                                 max_total_turns=max_total_turns, text_sink=text_sink,
                                 hook="prompt_agent", additional_options=additional_options)
    return value


async def prompt_chat(*, max_turn_steps: int = 10, max_total_turns: int | None = None,
                      text_sink: TurnStreamSink | None = None,
                      additional_options: Mapping[str, Any] | None = None,
                      tool_choice: ToolChoiceArg = None,
                      on_checkpoint: Callable[[LoopCheckpoint], object] | None = None,
                      approval_secret: bytes | str | None = None,
                      ) -> ChatResult:
    """Run the chat policy with the equipped system, history, instruction and tools: model turns
    and tool rounds until a final answer (validated by any ``expect_validator``, which gets the
    text) or a suspend. See :class:`ChatResult` and :func:`prompt_agent` for the budgets.
    ``tool_choice`` is the chat's policy for each turn: a fixed choice (``"required"``,
    ``ForcedTool(name=)``, ...) for every turn, or ``policy(ToolChoiceContext) -> choice | None``
    called before each model call (``None``: the model decides, the default).

    ``on_checkpoint(checkpoint)`` (sync or async; its return value is ignored) is awaited at every
    settled boundary of the chat — after each finished tool round, before the next model call,
    re-asks included — with a ``ready`` :class:`~bindloop.session.LoopCheckpoint` that
    :func:`resume_chat` continues to the same outcome (the re-asks left and the turn budgets travel
    in its ``reask`` field). Store it before returning: a raise fails the prompt there, and nothing
    after it runs. The chat's checkpoints share one ``execution_id`` and their revisions increase
    by one; the suspend's, out-of-turns or ``finished`` checkpoint is the last save. Unset, the
    loop runs without a boundary hook.

    ``approval_secret`` signs the approvals of a suspend (``ChatResult.approvals`` carry tokens,
    and :func:`resume_chat` then refuses a decision without a valid one).
    """
    choose = choice_policy(tool_choice, "prompt_chat")
    saver = refuse_saves(on_checkpoint, "prompt_chat")
    if approval_secret is not None:
        _check_secret(approval_secret)
    frame, gen = _begin("prompt_chat")
    gen.tool_choice = choose
    _, chat = await _run_prompt(frame, gen, None, max_turn_steps=max_turn_steps,
                                max_total_turns=max_total_turns, text_sink=text_sink,
                                hook="prompt_chat", additional_options=additional_options,
                                on_checkpoint=saver, secret=approval_secret)
    assert chat is not None  # without a schema _drive always builds the ChatResult
    return chat


async def resume_chat(checkpoint: LoopCheckpoint | bytes | str | Mapping[str, Any], *,
                      reply: str | None = None, tool_call_id: str | None = None,
                      max_turn_steps: int | None = None,
                      tool_choice: ToolChoiceArg = None,
                      on_checkpoint: Callable[[LoopCheckpoint], object] | None = None,
                      decisions: Sequence[ApprovalDecision] = (),
                      approval_secret: bytes | str | None = None,
                      ) -> ChatResult:
    """Continue a chat's checkpoint (``ChatResult.checkpoint``, an ``on_checkpoint`` save,
    :attr:`ToolLoopExceededError.checkpoint <bindloop.errors.ToolLoopExceededError>`, or their
    stored bytes) as this generation's prompt, with the generation's equipped tools, validators
    and model: parse it, apply ``reply``, and run the same tool loop as :func:`prompt_chat` from
    that position. ``tool_choice`` is as in :func:`prompt_chat` (the policy's ``turn_index``
    counts this call's turns).

    ``reply`` answers the open suspend (``tool_call_id`` picks one when several are open): a
    ``waiting_for_reply`` suspend gets it as a reply, a ``resuming_later`` one as its wake result.
    The checkpoint's ``reask`` record (a chat's own checkpoints carry one) gives the refused
    answers so far, the turns left in the current attempt and in the whole prompt, so the chat
    goes on exactly as it would have uninterrupted. ``max_turn_steps`` replaces that: a fresh
    attempt of ``max_turn_steps`` turns, and as many for each re-ask left. A checkpoint whose
    turns ran out (status ``iteration_limit``) goes on with ``max_turn_steps`` (default 10) more;
    one without a record (another driver's) with the turns it has left (else 10). A refused final
    answer is re-asked as in :func:`prompt_chat`, up to the agent's ``max_retries`` in all
    (:class:`~bindloop.errors.StructuredOutputError` carries every attempt, the recorded ones
    first). ``on_checkpoint`` is as in :func:`prompt_chat`, its revisions following the
    checkpoint's.

    ``decisions`` decide pending approvals (``approve`` / ``deny`` / ``edit_arguments``; the
    pending ones are ``ChatResult.approvals`` or :func:`pending_approvals`). They are committed
    first, through ``on_checkpoint`` (required with decisions), as the next revision; a
    revision-fenced store refusing that save means the checkpoint was decided already:
    :class:`ApprovalAlreadyDecidedError`, and nothing runs. Then the approved calls run (once,
    through the tool's middleware), denied ones are answered with the reason, and the run goes on;
    calls still pending end it again at once (``waiting_for_reply``, a new checkpoint). With
    ``approval_secret`` (required when the approvals were signed) each decision must carry its
    call's token (:class:`ApprovalTokenError`).
    """
    choose = choice_policy(tool_choice, "resume_chat")
    saver = refuse_saves(on_checkpoint, "resume_chat")
    if approval_secret is not None:
        _check_secret(approval_secret)
    frame, gen = _begin("resume_chat")
    gen.tool_choice = choose
    if max_turn_steps is not None:
        _budgets(max_turn_steps, None, 0)  # the same check as prompt_chat's
    cp = checkpoint if isinstance(checkpoint, LoopCheckpoint) else parse_loop_checkpoint(
        checkpoint)
    start_len = len(cp.messages)  # the reply is part of what this prompt added
    record = record_of(cp)
    stored_revision = cp.revision
    decided = check_decisions(cp, decisions, approval_secret) if decisions else []
    if decided and saver is None:
        raise UsageError("resume_chat(decisions=...) needs on_checkpoint= (a revision-fenced "
                         "save, such as SqliteStore.save_checkpoint): the decision is committed "
                         "there first, so a second decision on this checkpoint is refused")
    if reply is not None:
        suspends = [s for s in cp.open_suspends if s.tool_call_id not in record.pending and
                    all(d.call_id != s.tool_call_id for d in record.decided)]
        if tool_call_id is not None and any(
                tool_call_id == c for c in (*record.pending, *(d.call_id for d in record.decided))):
            raise UsageError(f"resume_chat(reply=...): call {tool_call_id!r} waits for an "
                             "approval; decide it with decisions=[approve(...)] or deny(...)")
        if tool_call_id is None:
            if len(suspends) != 1:
                raise UsageError(f"resume_chat(reply=...): the checkpoint has {len(suspends)} "
                                 "open suspends (approvals aside); name the one you answer with "
                                 "tool_call_id=")
            tool_call_id = suspends[0].tool_call_id
        mode = next((s.mode for s in suspends if s.tool_call_id == tool_call_id), None)
        cp = apply_checkpoint_input(cp, CheckpointWake(tool_call_id=tool_call_id, content=reply)
                                    if mode == "resuming_later" else
                                    CheckpointReply(tool_call_id=tool_call_id, content=reply))
    if cp.status not in ("ready", "iteration_limit") and not cp.open_suspends:
        raise UsageError(f"resume_chat: the checkpoint is {cp.status!r}; only a ready, "
                         "suspended or out-of-turns chat checkpoint can be continued")
    pos = resumed(cp, steps=max_turn_steps, retries=frame.max_retries)
    # The applied reply is not saved on its own: the next save follows the stored revision.
    pos.revision = stored_revision
    calls = last_calls(cp.messages)
    # Decisions an interrupted invocation committed are answered without running again.
    settle = [(calls[d.call_id], d, False) for d in pos.approvals_decided]
    if decided:
        now = {d.call_id for _, d in decided}
        pos.approvals_pending = tuple(c for c in pos.approvals_pending if c not in now)
        pos.approvals_decided = (*pos.approvals_decided, *(d for _, d in decided))
        commit = pos.checkpoint("waiting_for_reply")  # the decided calls are still open
        try:
            await resolve(saver(commit))  # type: ignore[misc]  # checked above
        except Exception as exc:
            if is_conflict(exc):
                ids = tuple(sorted(now))
                raise ApprovalAlreadyDecidedError(
                    f"execution {cp.execution_id!r} revision {stored_revision} was decided already "
                    f"(the store holds a later revision); calls {list(ids)} do not run again",
                    ids) from exc
            raise
        settle += [(call, d, True) for call, d in decided]

    async def body(hub: StreamHub | None) -> ChatResult:
        _, chat = await _drive(frame, gen, None, pos, hub=hub, text=None, saver=saver,
                               additional_options=None, start_len=start_len, resuming=True,
                               settle=settle, secret=approval_secret)
        assert chat is not None  # without a schema _drive always builds the ChatResult
        return chat

    return await with_consumers(frame.run, gen.streams, body, None, gen.consumers)


