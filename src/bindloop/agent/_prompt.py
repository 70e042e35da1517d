"""``prompt_agent`` / ``prompt_chat``: one generation's prompt as ONE ``run_tool_loop``, on the
loop's ports (:func:`drive`, which ``resume_chat`` runs too).

- ``model``: :class:`~bindloop.agent._turns.TurnPort` (the one fold, priced inside it; the
  stream, traces, journal and replay observe it);
- ``runner``: ``run_tool_call`` / ``run_tool_batch`` from :class:`~bindloop.agent._calls.ToolPort`
  (each call's tool onion; the tool-call-loop middleware and the approval gate around the loop's
  own batch runner), ``is_final_call`` (the output tool's call ends the run: tool-mode structured
  output), the serial tools and the fatal-raise rule;
- ``hooks``: ``on_turn_would_end`` from :class:`~bindloop.agent._reask.Reasks` (the schema and the
  validators' verdict: accept, or re-ask in the same loop) and ``on_tool_call_rejected`` (every
  failed call reported);
- ``signal``: the run's;
- ``resume_calls``: a resumed chat's decided approvals, the run's first batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

import msgspec

from ..textstream import TurnStreamSink, TurnTextStream, create_turn_text_stream
from .._awaitable import resolve
from ..contracts import (
    Message,
    RunStats,
    StopReason,
    SystemMessage,
    ToolCall,
    ToolOutcome,
    UserMessage,
)
from ..errors import PortContractError, RunCancelledError, UsageError, is_infrastructure_error
from ..loop import LoopHooks, MaybeAwaitable, ToolLoopParams, ToolLoopState, ToolRunner, \
    run_tool_loop
from ..checkpoints import LoopCheckpoint
from ._approvals import ApprovalGate, PendingApproval, check_secret, note_suspended, \
    pending_approvals
from ._errors import (
    AfterPromptAgentError,
    BudgetExceededError,
    LoopMissingToolOutputError,
    NoAgentContextError,
    PromptSuspendedError,
    SnapshotDivergenceError,
)
from ._calls import ToolPort
from ._context import Frame, Generation, current_frame
from ._middleware import ToolCallLoopContext
from ._log import log_tool_error
from ._observe import ToolErrorReport, reporter, settled_failures
from ._reask import Reasks
from ._run_events import RunEvents
from ._trace import ToolSpans
from ._saves import Position, SaveFn, refuse_saves
from ..schema import OutputSpec, output_spec
from ..checkpoints import DecidedCall
from ._stream import AgentStreamEvent, StreamHub, Watcher, with_consumers
from ._turns import ToolChoiceArg, TurnPort, choice_policy, model_surface, resolve_model

__all__ = ("ChatResult", "begin", "begin_chat", "budgets", "drive", "prompt_agent",
           "prompt_chat", "run_watcher")

T = TypeVar("T")

_JSON_ENCODE = msgspec.json.Encoder().encode

_FATAL = (LoopMissingToolOutputError, PortContractError, NoAgentContextError,
          AfterPromptAgentError, SnapshotDivergenceError, BudgetExceededError, RunCancelledError)


def _fatal(exc: BaseException) -> bool:
    # Contract breaks, run-level stops and bindloop's own store failing (a receipt's claim: the
    # prompt stops and resumes from its last save, as the loop's default has it) end the prompt;
    # any other raise is a tool error the model reads.
    return isinstance(exc, _FATAL) or is_infrastructure_error(exc)


class ChatResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``prompt_chat`` / ``resume_chat`` return.

    ``data`` is the final answer text (``""`` when the chat stopped without one); ``delta`` the
    messages this prompt added (persist them to continue the chat); ``stop_reason`` ``done`` or a
    suspend's ``waiting_for_reply`` / ``resuming_later``, in which case ``checkpoint`` is the settled
    position :func:`resume_chat` continues (in this process or another); ``stats`` the prompt's
    model turns, tool calls and tokens. A ``done`` chat that saves (``on_checkpoint``) or was
    resumed carries its ``finished`` checkpoint too (the one saved last). ``approvals`` are the
    calls waiting for a decision (``equip_tool(needs_approval=)``), with their tokens when an
    ``approval_secret`` is in use. ``tool_failures`` are this prompt's tool calls that raised (or
    were not run), in order: a :class:`~bindloop.agent.ToolErrorReport` each, with the exception
    itself and ``model_read``, the text the model got instead — the host's to read; the chat went
    on."""

    data: str
    delta: list[Message]
    stop_reason: StopReason
    stats: RunStats
    checkpoint: LoopCheckpoint | None = None
    approvals: tuple[PendingApproval, ...] = ()
    tool_failures: tuple[ToolErrorReport, ...] = ()


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


def begin(hook: str) -> tuple[Frame, Generation]:
    frame = current_frame(hook)
    gen = frame.generation
    assert gen is not None
    if gen.prompted:
        raise UsageError(
            f"{hook}() was called twice in one generation of agent {frame.agent_id!r}: one "
            "generation makes one prompt; return reborn() to prompt again in a new generation")
    gen.prompted = True
    return frame, gen


def begin_chat(hook: str, tool_choice: ToolChoiceArg, on_checkpoint: object,
               approval_secret: object) -> tuple[Frame, Generation, SaveFn | None]:
    """A chat prompt's arguments checked, then :func:`begin`; the generation gets the chat's tool
    choice policy, the caller the checked ``on_checkpoint``."""
    choose = choice_policy(tool_choice, hook)
    saver = refuse_saves(on_checkpoint, hook)
    if approval_secret is not None:
        check_secret(approval_secret)
    frame, gen = begin(hook)
    gen.tool_choice = choose
    return frame, gen, saver


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


def budgets(max_turn_steps: int, max_total_turns: int | None, retries: int) -> int:
    if isinstance(max_turn_steps, bool) or not isinstance(max_turn_steps, int) or \
            max_turn_steps < 1:
        raise UsageError(f"max_turn_steps must be a positive int, got {max_turn_steps!r}")
    total = max_turn_steps * (retries + 1) if max_total_turns is None else max_total_turns
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise UsageError(f"max_total_turns must be a positive int, got {max_total_turns!r}")
    return total


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


async def drive(frame: Frame, gen: Generation, spec: OutputSpec | None, pos: Position, *,
                hub: StreamHub | None, text: TurnTextStream | None, saver: SaveFn | None,
                additional_options: Mapping[str, Any] | None,
                start_len: int, resuming: bool = False,
                resume_calls: tuple[ToolCall, ...] = (),
                answers: Mapping[str, ToolOutcome | None] | None = None,
                secret: bytes | str | None = None,
                decided: Sequence[DecidedCall] = (),
                commit: LoopCheckpoint | None = None) -> tuple[Any, ChatResult | None]:
    """The prompt's one tool loop from ``pos``, and what its stop reason means to the caller.

    ``resume_calls`` (decided approval suspends) begin the run as its first batch, through the
    same batch port as every other call; ``answers`` are the gate's for them (``None``: run);
    ``decided`` are the decisions committed (as ``commit``) before, reported first to a hub."""
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

    def context(calls: tuple[Any, ...], done: tuple[Any, ...]) -> ToolCallLoopContext:
        # Only a tool-call-loop middleware reads it: built when one runs, not per prompt.
        return ToolCallLoopContext(step=turns.turns, system="\n\n".join(gen.system),
                                   instruction="\n\n".join(gen.instructions),
                                   tools=options.tools, original_calls=calls,
                                   agent_id=frame.agent_id, tool_turns=done)

    gate = ApprovalGate(gen.approvals, answers or {}) if gen.approvals or answers else None
    tools = ToolPort(frame, gen, output=output, context=context, recording=turns.recording,
                     gate=gate)
    serial = frozenset(gen.serial)
    run, hook = frame.run, frame.run.on_tool_error
    failures: list[ToolErrorReport] = []
    run_tool_call: Callable[[ToolCall], MaybeAwaitable[ToolOutcome]] = tools.run_tool_call
    events = None
    tracer = run.tracer
    if hub is not None or tracer.enabled:  # the tool, approval and checkpoint events
        events = RunEvents(hub, lambda: turns.turns - 1, output=output, fatal=_fatal,
                           spans=ToolSpans(tracer, frame.span) if tracer.enabled else None)
        run_tool_call = events.tool_port(run_tool_call)
        if saver is not None and hub is not None:
            saver = events.saver(saver)
        events.decided(decided, commit)
    reasking = spec is not None or bool(gen.validators)
    params = ToolLoopParams(
        model=turns, state=pos.state, max_iterations=max(pos.total_end - pos.iterations, 0),
        signal=frame.signal, resume_calls=resume_calls,
        runner=ToolRunner(
            run_tool_call=run_tool_call, is_fatal_tool_error=_fatal,
            runs_serially=(lambda call: call.name in serial) if serial else None,
            run_tool_batch=tools.run_tool_batch if gen.loop_middleware or gate else None,
            is_final_call=tools.is_final_call if output is not None else None),
        hooks=LoopHooks(
            on_turn_would_end=reasks if reasking else None,
            # Every failed call is reported: to the run's hook, by default a redacted WARNING
            # record.
            on_tool_call_rejected=reporter(
                log_tool_error if hook is None else hook, lambda: pos.state.messages,
                frame.agent_id, run.session_id, run.trace_id, failures)))
    result = await (run_tool_loop(params) if saver is None else
                    run_tool_loop(params, pos.control(saver)))
    stats = gen.stats = result.stats  # prompt_stats() reads it, whichever way the prompt returns
    reason = result.stop_reason
    if reason == "done":
        turn = result.final_turn
        data = turn.text or "" if turn is not None else ""
        value = reasks.value if reasking else data
        if not chat:  # prompt_agent returns the value alone: no ChatResult to build
            return value, None
        finished = None
        if saver is not None or resuming:  # the store (and the caller) learn the chat ended
            finished = pos.checkpoint("finished")
            if saver is not None:
                await resolve(saver(finished))
        return value, ChatResult(data=data, delta=pos.state.messages[start_len:],
                                 stop_reason="done", stats=stats, checkpoint=finished,
                                 tool_failures=settled_failures(failures, pos.state.messages))
    if reason == "iteration_limit":
        error = reasks.out_of_steps() if pos.attempt_spent() else reasks.out_of_turns()
        spent = getattr(error, "checkpoint", None)
        if saver is not None and isinstance(spent, LoopCheckpoint):
            await resolve(saver(spent))
        raise error
    if reason in ("waiting_for_reply", "resuming_later"):
        note_suspended(pos, gate, secret)
        checkpoint = pos.checkpoint(reason)
        approvals = pending_approvals(checkpoint, secret=secret)
        if events is not None:
            events.requested(approvals)
        if saver is not None:  # the suspend is the chat's last save
            await resolve(saver(checkpoint))
        if not chat:
            raise PromptSuspendedError(
                f"agent {frame.agent_id!r}: a tool suspended ({reason}) inside prompt_agent; "
                "structured output cannot wait: continue the checkpoint with resume_chat",
                checkpoint)
        return None, ChatResult(data="", delta=pos.state.messages[start_len:],
                                stop_reason=reason, stats=stats, checkpoint=checkpoint,
                                approvals=approvals,
                                tool_failures=settled_failures(failures, pos.state.messages))
    raise RunCancelledError(f"agent {frame.agent_id!r}: the prompt was aborted ({reason})")


def run_watcher(frame: Frame, gen: Generation) -> Watcher | None:
    """The synchronous observer of a prompt: the generation's ``on_event`` ones, and
    ``run_with(on_event=)``'s for a prompt of the run's top-level agent (a sub-agent's events are
    its caller's business). ``None`` when there is none (nothing to call per event)."""
    run = frame.run
    top = run.watch if run.watch is not None and frame.parent is run.root else None
    if not gen.watchers:  # the common case: nothing, or the run's alone
        return top
    watchers = [*gen.watchers, top] if top is not None else gen.watchers
    if len(watchers) == 1:
        return watchers[0]

    def watch(event: AgentStreamEvent) -> None:
        for w in watchers:
            w(event)

    return watch


def _run_prompt(frame: Frame, gen: Generation, spec: OutputSpec | None, *,
                max_turn_steps: int, max_total_turns: int | None,
                text_sink: TurnStreamSink | None, hook: str,
                additional_options: Mapping[str, Any] | None,
                on_checkpoint: SaveFn | None = None,
                secret: bytes | str | None = None) -> Awaitable[tuple[Any, ChatResult | None]]:
    """The prompt's position and streams set up (a bad argument raises here), and the awaitable
    of its run: :func:`drive` itself when nothing watches the stream."""
    total = budgets(max_turn_steps, max_total_turns, frame.max_retries)
    initial = _messages(frame, gen, hook)
    text = None
    if text_sink is not None:
        text = create_turn_text_stream(
            turn_id=f"{frame.agent_id}:{'.'.join(map(str, frame.path))}:{gen.index}",
            sink=text_sink)
        text.begin_attempt(None)
    pos = Position(ToolLoopState(messages=initial), execution_id=_execution_id(frame),
                   steps=max_turn_steps, total_end=total)
    # The first save knows the stored history's messages (validated when they were read).
    pos.last = gen.history_source

    def body(hub: StreamHub | None) -> Awaitable[tuple[Any, ChatResult | None]]:
        return drive(frame, gen, spec, pos, hub=hub, text=text, saver=on_checkpoint,
                     additional_options=additional_options, start_len=len(initial),
                     secret=secret)

    def finish(ok: bool) -> None:
        assert text is not None
        text.finish("succeeded" if ok else "failed")

    return with_consumers(frame.run, gen.streams, body, None if text is None else finish,
                          gen.consumers, run_watcher(frame, gen))


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
    frame, gen = begin("prompt_agent")
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
    re-asks included — with a ``ready`` :class:`~bindloop.checkpoints.LoopCheckpoint` that
    :func:`resume_chat` continues to the same outcome (the re-asks left and the turn budgets travel
    in its ``reask`` field). Store it before returning: a raise fails the prompt there, and nothing
    after it runs. The chat's checkpoints share one ``execution_id`` and their revisions increase
    by one; the suspend's, out-of-turns or ``finished`` checkpoint is the last save. Unset, the
    loop runs without a boundary hook.

    ``approval_secret`` signs the approvals of a suspend (``ChatResult.approvals`` carry tokens,
    and :func:`resume_chat` then refuses a decision without a valid one).
    """
    frame, gen, saver = begin_chat("prompt_chat", tool_choice, on_checkpoint, approval_secret)
    _, chat = await _run_prompt(frame, gen, None, max_turn_steps=max_turn_steps,
                                max_total_turns=max_total_turns, text_sink=text_sink,
                                hook="prompt_chat", additional_options=additional_options,
                                on_checkpoint=saver, secret=approval_secret)
    assert chat is not None  # without a schema _drive always builds the ChatResult
    return chat
