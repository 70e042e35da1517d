"""``prompt_agent`` / ``prompt_chat`` / ``resume_chat``: one generation's prompt, run through
``run_tool_loop`` with the equipped tools, the agent's model, its stream consumers, budget and
journal.

A prompt is one or more tool loops over one live transcript: the first loop, then one more per
re-ask (an answer that did not decode or that a validator refused gets a user message naming the
problem). ``max_turn_steps`` bounds each loop; ``max_total_turns`` bounds them all together.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

import anyio
import msgspec

from ..completion import (
    ExtraEvent,
    FinishEvent,
    PartialJsonParser,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallEvent,
    TurnCollector,
    TurnStreamSink,
    TurnTextStream,
    UsageEvent,
    create_turn_text_stream,
)
from ..contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    RunStats,
    StopReason,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolOutcome,
    UserMessage,
    accumulate_run,
    content_text,
    empty_run_stats,
)
from ..errors import PortContractError, RunCancelledError, UsageError
from ._errors import (
    AfterPromptAgentError,
    BudgetExceededError,
    LoopMissingToolOutputError,
    ModelRegistryNotFoundError,
    NoAgentContextError,
    PromptAgentAlreadyCalledError,
    PromptSuspendedError,
    SnapshotDivergenceError,
    StructuredOutputError,
    ToolLoopExceededError,
    TurnBudgetExceededError,
)
from ..loop import BoundaryDecision, ToolLoopParams, ToolLoopState, run_tool_loop
from ..lowlevel import tool_exception_error
from .._awaitable import resolve
from ..session import (
    CheckpointReply,
    CheckpointWake,
    LoopCheckpoint,
    RestoredLoop,
    apply_checkpoint_input,
    parse_loop_checkpoint,
    run_from_checkpoint,
)
from ..wire import ForcedTool, ToolChoice
from ._context import Frame, Generation, current_frame
from ._middleware import ToolCallLoopContext, ToolContext, ToolOutput, run_loop_chain
from ._model import AgentModel, ModelStreamOptions, turn_events
from ._saves import ChatRecord, Origin, Saves, SaveFn, read_record, refuse_saves
from ..schema import InvalidOutputError, OutputSpec, output_spec
from ._snapshot import PromptHasher
from ._stream import (
    ErrorStreamEvent,
    ExtraStreamEvent,
    ReasoningStreamEvent,
    StreamHub,
    StructuredDataEvent,
    TextStreamEvent,
    ToolCallDoneEvent,
    ToolCallStreamEvent,
    TurnDoneEvent,
    TurnStartEvent,
    UsageStreamEvent,
)
from ._tools import AgentTool

__all__ = ("ChatResult", "prompt_agent", "prompt_chat", "resume_chat")

T = TypeVar("T")

_JSON_ENCODE = msgspec.json.Encoder().encode
_JSON_DECODE = msgspec.json.Decoder().decode

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
    model turns, tool calls and tokens."""

    data: str
    delta: list[Message]
    stop_reason: StopReason
    stats: RunStats
    checkpoint: LoopCheckpoint | None = None


def resolve_model(frame: Frame) -> AgentModel:
    node: Frame | None = frame
    while node is not None:
        if node.model is not None:
            return node.model
        node = node.parent
    if frame.run.model is not None:
        return frame.run.model
    raise ModelRegistryNotFoundError(
        f"agent {frame.agent_id!r} has no model: pass create_agent(model=...), give a parent "
        "agent one, or pass run_with(model=...)")


class _Batch:
    __slots__ = ("done", "error", "ids", "outcomes", "started")

    def __init__(self, calls: Sequence[ToolCall]) -> None:
        self.ids = {c.id for c in calls}
        self.done = anyio.Event()
        self.started = False
        self.outcomes: dict[str, ToolOutcome] = {}
        self.error: BaseException | None = None


class _Prompt:
    """One prompt's ports for ``run_tool_loop`` and the state they share."""

    def __init__(self, frame: Frame, gen: Generation, spec: OutputSpec | None,
                 hub: StreamHub | None, text: TurnTextStream | None,
                 additional_options: Mapping[str, Any] | None = None) -> None:
        self.frame = frame
        self.gen = gen
        self.spec = spec
        self.hub = hub if hub is not None and hub.active else None
        self.text = text
        self.model = resolve_model(frame)
        self.tools: dict[str, tuple[AgentTool, Any]] = {t.name: (t, mw) for t, mw in gen.tools}
        serial = frozenset(gen.serial)
        self.serial = serial
        # The loop's port, unwired when nothing is serial (the loop then skips the per-call check).
        self.runs_serially: Callable[[ToolCall], bool] | None = (
            (lambda call: call.name in serial) if serial else None)
        defs = [t.definition for t, _ in gen.tools]
        self.tool_mode = spec is not None and getattr(
            self.model, "structured_output", "tool") != "json_schema"
        schema: dict[str, Any] | None = None
        choice: ToolChoice | None = None
        if spec is not None:
            if self.tool_mode:
                if spec.name in self.tools:
                    raise UsageError(f"prompt_agent: a tool named {spec.name!r} is equipped; it "
                                     "clashes with the output tool: rename the tool")
                defs.append(ToolDefinition(name=spec.name, parameters=spec.schema,
                                           description="Give your final answer by calling this "
                                                       "tool with it as the arguments."))
                choice = ForcedTool(name=spec.name) if len(defs) == 1 else "required"
            else:
                schema = spec.schema
        self.defs = tuple(defs)
        self.options = ModelStreamOptions(schema=schema,
                                          schema_name=spec.name if spec else "final_result",
                                          tools=self.defs, tool_choice=choice,
                                          signal=frame.signal,
                                          additional_options=None if not additional_options
                                          else dict(additional_options))
        run = frame.run
        self.tracer = run.tracer
        self.recording = run.enable_snapshot or run.tracer.enabled or frame.cursor is not None
        self.observed = (self.recording or self.hub is not None or self.tool_mode)
        # Prompt hashes for the journal and the trace, each call hashing only the new messages.
        self.hasher = PromptHasher(self.defs, schema, choice) if self.recording else None
        # An optional whole-turn call (AgentModel.complete_turn), used when nobody watches the
        # stream: the same turn without a generator per call.
        self.complete = getattr(self.model, "complete_turn", None)
        self.plain_tools = (not self.recording and not gen.loop_middleware
                            and not run.tracer.enabled)
        self.turn_index = -1
        self.batch: _Batch | None = None
        self.last_turn: ModelTurnResult | None = None
        self.system = "\n\n".join(gen.system)
        self.instruction = "\n\n".join(gen.instructions)

    # -- budget -----------------------------------------------------------------------------------
    def _check_budget(self) -> None:
        node: Frame | None = self.frame
        while node is not None:
            g = node.generation
            if g is not None and g.budget:
                over = {k: node.spent.get(k, 0) for k, limit in g.budget.items()
                        if node.spent.get(k, 0) >= limit}
                if over:
                    raise BudgetExceededError(
                        f"agent {node.agent_id!r} spent {over} of its budget {g.budget}; no "
                        "further model call is made (raise the limit with equip_budget)",
                        spent=dict(node.spent), limits=dict(g.budget))
            node = node.parent

    def _charge(self, turn: ModelTurnResult) -> None:
        costs = self.model.calculate_cost(turn.usage)
        if type(costs) is dict and not costs:
            return
        if not isinstance(costs, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                for k, v in costs.items()):
            raise PortContractError(f"model {self.model.id!r}: calculate_cost() returned "
                                    f"{costs!r}; it must return a dict of unit -> int")
        if not costs:
            return
        node: Frame | None = self.frame
        while node is not None:
            for k, v in costs.items():
                node.spent[k] = node.spent.get(k, 0) + v
            node = node.parent

    # -- the model port ---------------------------------------------------------------------------
    async def call_model(self, messages: list[Message],
                         _tools: list[ToolDefinition]) -> ModelTurnResult:
        self._check_budget()
        self.turn_index += 1
        if self.observed:
            return await self._call_model_observed(messages)
        # The common path (no consumer, trace, journal or output tool): fold and charge. The
        # live transcript is passed as it is: an AgentModel reads it and copies what it keeps.
        text = self.text
        complete = self.complete
        if complete is not None and text is None:
            turn = await complete(messages, self.options)
            if not isinstance(turn, ModelTurnResult):
                raise PortContractError(f"model {self.model.id!r}: complete_turn() returned "
                                        f"{type(turn).__name__}, not a ModelTurnResult")
        else:
            events = self.model.stream(messages, self.options)
            collector = TurnCollector()
            observe = collector.observe
            try:
                if text is None:
                    async for event in events:
                        observe(event)
                else:
                    async for event in events:
                        observe(event)
                        if isinstance(event, TextEvent):
                            text.observe(event.content)
            except BaseException:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
                raise
            turn = collector.result()
        self._charge(turn)
        self.last_turn = turn
        self.batch = None
        return turn

    async def _call_model_observed(self, messages: list[Message]) -> ModelTurnResult:
        index = self.turn_index
        frame = self.frame
        hub = self.hub
        hash_ = self.hasher(messages) if self.hasher is not None else ""
        span = None
        if self.tracer.enabled:
            span = self.tracer.start(f"chat {self.model.id}", frame.span, {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": self.model.id,
                "gen_ai.provider.name": self.model.provider or "unknown",
                "bindloop.turn_index": index})
        if hub is not None:
            hub.emit(TurnStartEvent(turn_index=index))
        try:
            replayed = None
            if frame.cursor is not None:
                replayed = frame.cursor.next_turn(hash_, f"agent {frame.agent_id!r}")
            if replayed is not None:
                turn = await self._fold(_aiter(turn_events(replayed.turn)), index)
                turn = replayed.turn
            elif hub is None and self.text is None and self.complete is not None:
                # A trace, a journal or the output tool needs the turn, not its deltas: the whole
                # turn, as on the common path (and a route in "live" streaming mode keeps its
                # fallbacks, since nothing is shown mid-attempt).
                turn = await self.complete(messages, self.options)
                if not isinstance(turn, ModelTurnResult):
                    raise PortContractError(f"model {self.model.id!r}: complete_turn() returned "
                                            f"{type(turn).__name__}, not a ModelTurnResult")
            else:
                turn = await self._fold(self.model.stream(messages, self.options), index)
            if not isinstance(turn, ModelTurnResult):
                raise PortContractError("the model's stream did not fold into a turn")
        except BaseException as exc:
            if hub is not None and isinstance(exc, Exception):
                hub.emit(ErrorStreamEvent(turn_index=index, error=f"{type(exc).__name__}: {exc}"))
            if span is not None:
                self.tracer.end(span, f"chat {self.model.id}", error=exc)
            raise
        if self.recording:
            frame.journal.record_turn(hash_, turn)
        self._charge(turn)
        if span is not None:
            self.tracer.end(span, f"chat {self.model.id}", {
                "gen_ai.usage.input_tokens": turn.usage.input_tokens,
                "gen_ai.usage.output_tokens": turn.usage.output_tokens,
                "gen_ai.response.finish_reasons": [turn.finish_reason or "stop"],
                "bindloop.prompt_hash": hash_,
                "bindloop.turn": msgspec.to_builtins(turn)})
        if hub is not None:
            hub.emit(TurnDoneEvent(turn_index=index,
                                   finish_reason=turn.finish_reason or "stop"))  # type: ignore[arg-type]
        if self.tool_mode and self.spec is not None:
            answer = next((c for c in turn.tool_calls if c.name == self.spec.name), None)
            if answer is not None:
                # The output tool's arguments are the answer: the turn ends the loop as text.
                turn = msgspec.structs.replace(turn, text=answer.arguments, tool_calls=(),
                                               finish_reason="stop")
        self.last_turn = turn
        self.batch = None
        return turn

    async def _fold(self, events: Any, index: int) -> ModelTurnResult:
        collector = TurnCollector()
        try:
            return await self._fold_events(events, index, collector)
        finally:  # close the model's stream here, however the fold ends
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _fold_events(self, events: Any, index: int,
                           collector: TurnCollector) -> ModelTurnResult:
        hub = self.hub
        text = self.text
        parser = PartialJsonParser() if hub is not None and self.spec is not None else None
        output_index: int | None = None
        fed = False
        spec_name = self.spec.name if self.spec is not None else None
        async for event in events:
            collector.observe(event)
            if text is not None and isinstance(event, TextEvent):
                text.observe(event.content)
            if hub is None:
                continue
            self._emit(hub, event, index)
            if parser is not None:
                chunk: str | None = None
                if isinstance(event, TextEvent) and not self.tool_mode:
                    chunk = event.content
                elif isinstance(event, ToolCallEvent) and self.tool_mode:
                    tc = event.tool_call
                    if tc.name == spec_name:
                        output_index = tc.index
                    if tc.index == output_index:
                        chunk = tc.arguments
                if chunk:
                    partial = parser.feed(chunk)
                    # Text that cannot start a JSON document (narration before a tool call) is
                    # not a structured view: it stays plain text.
                    if partial.state != "invalid":
                        fed = True
                        hub.emit(StructuredDataEvent(turn_index=index, status="partial",
                                                     data=self._unwrap(partial.value),
                                                     is_valid=False))
        turn = collector.result()
        if hub is not None:
            for call in turn.tool_calls:
                hub.emit(ToolCallDoneEvent(turn_index=index, tool_call=call))
            # A turn that asks for tools is not the answer (its text is narration); the final
            # structured status belongs to the answer turn.
            answer_turn = output_index is not None if self.tool_mode else not turn.tool_calls
            if parser is not None and fed and answer_turn:
                final = parser.result()
                source = next((c.arguments for c in turn.tool_calls if c.name == spec_name),
                              None) if self.tool_mode else turn.text
                ok = False
                if source is not None and self.spec is not None:
                    try:
                        self.spec.decode(source)
                        ok = True
                    except InvalidOutputError:
                        ok = False
                hub.emit(StructuredDataEvent(turn_index=index,
                                             status="complete" if ok else "error",
                                             data=self._unwrap(final.value), is_valid=ok))
        return turn

    def _unwrap(self, value: Any) -> Any:
        # The parser grows one live structure in place: each event gets its own copy, so an
        # event a consumer holds never changes under it.
        if isinstance(value, (dict, list)):
            value = _JSON_DECODE(_JSON_ENCODE(value))
        if self.spec is not None and self.spec.wrapped and isinstance(value, dict):
            return value.get("result")
        return value

    @staticmethod
    def _emit(hub: StreamHub, event: StreamEvent, index: int) -> None:
        if isinstance(event, TextEvent):
            if event.content:
                hub.emit(TextStreamEvent(turn_index=index, delta=event.content))
        elif isinstance(event, ToolCallEvent):
            hub.emit(ToolCallStreamEvent(turn_index=index, chunk=event.tool_call))
        elif isinstance(event, ReasoningEvent):
            if event.content:
                hub.emit(ReasoningStreamEvent(turn_index=index, delta=event.content))
        elif isinstance(event, UsageEvent):
            hub.emit(UsageStreamEvent(turn_index=index, usage=event.usage))
        elif isinstance(event, ExtraEvent):
            hub.emit(ExtraStreamEvent(turn_index=index, extra=event.extra))
        elif isinstance(event, FinishEvent) and event.usage is not None:
            hub.emit(UsageStreamEvent(turn_index=index, usage=event.usage))

    # -- the tool port ----------------------------------------------------------------------------
    async def run_tool_call(self, call: ToolCall) -> ToolOutcome:
        frame = self.frame
        if self.plain_tools:
            # Nothing to replay, record, trace or batch: straight to the tool (the same steps
            # as _run_one -> AgentTool.run without their frames).
            entry = self.tools.get(call.name)
            if entry is not None and not entry[1] and not entry[0].middleware:
                tool = entry[0].tool
                return await tool.execute(call.arguments, ToolContext(
                    tool.name, tool.description, tool.parameters, call.arguments, call.id,
                    frame.agent_id))
        if frame.cursor is not None:
            served = frame.cursor.tool_outcome(call.id)
            if served is not None:
                if self.recording:
                    frame.journal.record_tool(call.id, served)
                return served
        if self.gen.loop_middleware:
            outcome = await self._from_batch(call)
        else:
            outcome = await self._run_one(call)
        if self.recording:
            frame.journal.record_tool(call.id, outcome)
        return outcome

    async def _run_one(self, call: ToolCall) -> ToolOutcome:
        entry = self.tools.get(call.name)
        if entry is None:
            return ToolError(error=f"no tool named {call.name!r} is equipped", kind="not_found")
        tool, dynamic = entry
        if not self.tracer.enabled:
            return await tool.run(call.arguments, call_id=call.id, dynamic=dynamic,
                                  agent_id=self.frame.agent_id)
        name = f"execute_tool {call.name}"
        span = self.tracer.start(name, self.frame.span, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id})
        try:
            outcome = await tool.run(call.arguments, call_id=call.id, dynamic=dynamic,
                                     agent_id=self.frame.agent_id)
        except BaseException as exc:
            self.tracer.end(span, name, error=exc)
            raise
        self.tracer.end(span, name, {"gen_ai.tool.call.id": call.id,
                                     "bindloop.tool.outcome": msgspec.to_builtins(outcome)})
        return outcome

    async def _from_batch(self, call: ToolCall) -> ToolOutcome:
        batch = self.batch
        turn = self.last_turn
        if batch is None or call.id not in batch.ids:
            calls = turn.tool_calls if turn is not None else (call,)
            batch = self.batch = _Batch(calls)
            batch.started = True
            try:
                ctx = ToolCallLoopContext(step=self.turn_index + 1, system=self.system,
                                          instruction=self.instruction, tools=self.defs,
                                          original_calls=tuple(calls),
                                          agent_id=self.frame.agent_id)
                batch.outcomes = await run_loop_chain(self.gen.loop_middleware, ctx,
                                                      self._execute_calls)
            except BaseException as exc:
                batch.error = exc
                raise
            finally:
                batch.done.set()
        else:
            await batch.done.wait()
            if batch.error is not None:
                raise batch.error
        return batch.outcomes[call.id]

    async def _execute_calls(self, calls: Sequence[ToolCall]) -> list[ToolOutput]:
        results: dict[str, ToolOutcome] = {}

        async def one(c: ToolCall) -> None:
            try:
                results[c.id] = await self._run_one(c)
            except Exception as exc:
                if _fatal(exc):
                    raise
                # The loop's rule, so a batch middleware does not leak a message the loop hides.
                results[c.id] = tool_exception_error(exc)

        # The loop's order: serial calls alone in the model's order, then the rest concurrently.
        serial = self.serial
        pooled = [c for c in calls if c.name not in serial] if serial else list(calls)
        if serial:
            for c in calls:
                if c.name in serial:
                    await one(c)
        if len(pooled) == 1:
            await one(pooled[0])
        elif pooled:
            async with anyio.create_task_group() as tg:
                for c in pooled:
                    tg.start_soon(one, c)
        return [ToolOutput(call_id=c.id, outcome=results[c.id]) for c in calls]


async def _aiter(events: list[StreamEvent]) -> Any:
    for e in events:
        yield e


def _final_text(messages: Sequence[Message]) -> str:
    for m in reversed(messages):
        if isinstance(m, AssistantMessage):
            return content_text(m.content) if m.content is not None else ""
    return ""


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


def _check_validator_answer(verdict: object, validator: object) -> str | None:
    if verdict is True:
        return None
    if isinstance(verdict, str):
        return verdict or "the validator refused the answer"
    raise PortContractError(
        f"validator {getattr(validator, '__name__', validator)!r} returned {verdict!r}; a "
        "validator returns True to accept or an error string to re-ask")


async def _validate(gen: Generation, value: Any) -> str | None:
    for validator in gen.validators:
        try:
            verdict = await resolve(validator(value))
        except Exception as exc:  # a raising validator is a failed attempt, not a crash
            return f"validator raised {type(exc).__name__}: {exc}"
        reason = _check_validator_answer(verdict, validator)
        if reason is not None:
            return reason
    return None

R = TypeVar("R")


async def _with_consumers(frame: Frame, gen: Generation,
                          body: Callable[[StreamHub | None], Awaitable[R]],
                          on_end: Callable[[bool], None] | None = None) -> R:
    """Run ``body(hub)`` with this generation's stream consumers as tasks; the hub is closed
    (every consumer sees its end) however ``body`` ends. Without consumers there is no task
    group at all: a prompt nobody watches pays nothing for streaming. ``await_on_end=False``
    consumers run in the run root's task group, so the prompt returns without waiting for them
    (they still see the end of their stream, and the run's root waits for them)."""
    run = frame.run
    background = run.background
    if not gen.streams or background is not None and not any(
            c.await_on_end for c in gen.streams):
        # No consumer the prompt waits for: no task group of its own (fire-and-forget ones run
        # in the run root's).
        hub = None if not gen.streams else StreamHub(gen.streams, None, background,
                                                     run.background_errors)
        ok = False
        try:
            out = await body(hub)
            ok = True
            return out
        finally:
            if on_end is not None:
                on_end(ok)
            if hub is not None:
                hub.close()
    result: list[R] = []
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        hub = StreamHub(gen.streams, tg, background, run.background_errors)
        try:
            result.append(await body(hub))
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # re-raised outside the task group, never wrapped
            failure = exc
        finally:
            if on_end is not None:
                on_end(failure is None and bool(result))
            hub.close()
    if failure is not None:
        raise failure
    return result[0]


async def _run_prompt(frame: Frame, gen: Generation, spec: OutputSpec | None, *,
                      max_turn_steps: int, max_total_turns: int | None,
                      text_sink: TurnStreamSink | None, hook: str,
                      additional_options: Mapping[str, Any] | None,
                      on_checkpoint: SaveFn | None = None) -> tuple[Any, ChatResult | None]:
    retries = frame.max_retries
    total = _budgets(max_turn_steps, max_total_turns, retries)
    initial = _messages(frame, gen, hook)
    stream = None
    if text_sink is not None:
        stream = create_turn_text_stream(
            turn_id=f"{frame.agent_id}:{'.'.join(map(str, frame.path))}:{gen.index}",
            sink=text_sink)

    async def body(hub: StreamHub | None) -> tuple[Any, ChatResult | None]:
        prompt = _Prompt(frame, gen, spec, hub, stream, additional_options)
        saves = Saves(on_checkpoint, Origin(execution_id=_execution_id(frame, gen)))
        return await _drive(prompt, initial, spec, retries=retries,
                            max_turn_steps=max_turn_steps, total=total, stream=stream,
                            saves=saves)

    def finish(ok: bool) -> None:
        if stream is not None:
            stream.finish("succeeded" if ok else "failed")

    return await _with_consumers(frame, gen, body, finish)


async def _drive(prompt: _Prompt, initial: list[Message], spec: OutputSpec | None, *,
                 retries: int, max_turn_steps: int, total: int,
                 stream: TurnTextStream | None, saves: Saves,
                 prior_attempts: Sequence[tuple[str, str]] = ()) -> tuple[Any, ChatResult | None]:
    """The prompt's tool loops, re-asks included. Every checkpoint it makes comes from ``saves``
    (its execution, its revisions); with ``saves.fn`` set each loop runs under a control that
    hands ``fn`` the checkpoint of every non-final boundary (unset: no control, no added work)."""
    frame, gen = prompt.frame, prompt.gen
    state = ToolLoopState(messages=list(initial))
    stats = empty_run_stats()
    used = 0
    attempts: list[tuple[str, str]] = list(prior_attempts)
    for attempt in range(retries + 1):
        left = total - used
        if left <= 0:
            raise _out_of_turns(frame, total)
        if stream is not None:
            stream.begin_attempt("structured_output_retry" if attempt else None)
        steps = min(max_turn_steps, left)
        params = ToolLoopParams(
            call_model=prompt.call_model, run_tool_call=prompt.run_tool_call, state=state,
            max_iterations=steps, signal=frame.signal, is_fatal_tool_error=_fatal,
            runs_serially=prompt.runs_serially)
        outcome = (await run_tool_loop(params) if saves.fn is None else
                   await run_tool_loop(params, saves.control(
                       used=used, budget=used + steps, stats=stats, attempts=attempts,
                       max_turn_steps=max_turn_steps, max_total_turns=total)))
        stats = outcome.stats if attempt == 0 else accumulate_run(stats, outcome.stats)
        used += outcome.stats.turns
        reason = outcome.stop_reason
        if reason == "iteration_limit":
            if steps < max_turn_steps:
                raise _out_of_turns(frame, total)
            # A chat can go on from here (resume_chat); a prompt_agent attempt has no such road.
            checkpoint = (None if spec is not None else saves.checkpoint(
                state, stats, status="iteration_limit", used=used, budget=used,
                record=ChatRecord(attempts=tuple(attempts), max_turn_steps=max_turn_steps,
                                  max_total_turns=saves.origin.iterations + total)))
            raise ToolLoopExceededError(
                f"agent {frame.agent_id!r}: {max_turn_steps} model turns without a final "
                "answer; raise max_turn_steps or check why the model keeps calling tools",
                max_turn_steps=max_turn_steps, checkpoint=checkpoint)
        if reason == "aborted":
            raise RunCancelledError(f"agent {frame.agent_id!r}: the prompt was aborted")
        if reason in ("waiting_for_reply", "resuming_later"):
            delta = state.messages[len(initial):]
            # Resumed, the suspend's loop runs to the prompt's total; running out of it stays a
            # ToolLoopExceededError, whose checkpoint goes on (cut=False).
            checkpoint = saves.checkpoint(
                state, stats, status=reason, used=used, budget=total,
                record=ChatRecord(attempts=tuple(attempts), max_turn_steps=max_turn_steps,
                                  max_total_turns=saves.origin.iterations + total))
            chat = ChatResult(data="", delta=list(delta), stop_reason=reason, stats=stats,
                              checkpoint=checkpoint)
            if spec is not None:
                raise PromptSuspendedError(
                    f"agent {frame.agent_id!r}: a tool suspended ({reason}) inside prompt_agent; "
                    "structured output cannot wait: continue the checkpoint with resume_chat",
                    checkpoint)
            return None, chat
        text = _final_text(state.messages)
        value: Any = text
        problem: str | None = None
        if spec is not None:
            try:
                value = spec.decode(text)
            except InvalidOutputError as exc:
                problem = exc.reason
        if problem is None and gen.validators:
            problem = await _validate(gen, value)
        if problem is None:
            if spec is not None:  # prompt_agent returns the value alone: no ChatResult to build
                return value, None
            return value, ChatResult(data=text, delta=state.messages[len(initial):],
                                     stop_reason="done", stats=stats)
        attempts.append((text, problem))
        if prompt.tracer.enabled:
            prompt.tracer.event(frame.span, "bindloop.structured_output.retry",
                                {"bindloop.attempt": attempt + 1, "bindloop.reason": problem})
        if attempt < retries:
            state.messages.append(_reask(prompt, spec, problem))
    raise _no_answer(frame, attempts)


def _reask(prompt: _Prompt, spec: OutputSpec | None, problem: str) -> UserMessage:
    again = ("Answer again with corrected arguments for the "
             f"{spec.name} tool." if prompt.tool_mode and spec is not None else
             "Answer again with JSON matching the schema." if spec is not None else
             "Answer again.")
    return UserMessage(content=f"Your previous answer was rejected: {problem}. {again}")


def _no_answer(frame: Frame, attempts: Sequence[tuple[str, str]]) -> StructuredOutputError:
    return StructuredOutputError(
        f"agent {frame.agent_id!r}: no acceptable answer after {len(attempts)} attempts "
        f"(max_retries={frame.max_retries}); last problem: {attempts[-1][1]}", tuple(attempts))


def _out_of_turns(frame: Frame, total: int) -> TurnBudgetExceededError:
    return TurnBudgetExceededError(
        f"agent {frame.agent_id!r}: the prompt used all {total} model turns (tool steps and "
        "re-asks together) without an accepted answer; raise max_total_turns",
        max_total_turns=total)


def _execution_id(frame: Frame, gen: Generation) -> str:
    return f"{frame.agent_id}-{'.'.join(map(str, frame.path)) or '0'}-{gen.index}"


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
    to the provider's native JSON-schema mode when the model has one, else as a forced output tool.
    An answer that is not valid JSON, does not match, or that an ``expect_validator`` refuses is
    re-asked with the reason, up to the agent's ``max_retries``; then
    :class:`~bindloop.agent.StructuredOutputError` carries every attempt. ``max_turn_steps``
    bounds each tool loop (:class:`~bindloop.agent.ToolLoopExceededError`); ``max_total_turns``
    (default ``max_turn_steps * (max_retries + 1)``) all model turns of the prompt
    (:class:`~bindloop.agent.TurnBudgetExceededError`). ``text_sink`` receives the answer text as
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
                      on_checkpoint: Callable[[LoopCheckpoint], object] | None = None,
                      ) -> ChatResult:
    """Run the chat policy with the equipped system, history, instruction and tools: model turns
    and tool rounds until a final answer (validated by any ``expect_validator``, which gets the
    text) or a suspend. See :class:`ChatResult` and :func:`prompt_agent` for the budgets.

    ``on_checkpoint(checkpoint)`` (sync or async; its return value is ignored) is awaited at every
    settled boundary of the chat — after each finished tool round, before the next model call,
    re-ask loops included — with a ``ready`` :class:`~bindloop.session.LoopCheckpoint` that
    :func:`resume_chat` continues to the same outcome (the re-asks left and the turn budgets travel
    in its ``bindings.config["bindloop.chat"]``). Store it before returning: a raise fails the
    prompt there, and nothing after it runs. The chat's checkpoints share one ``execution_id`` and
    their revisions increase by one, the suspend's or out-of-turns checkpoint last. Unset, the
    loop runs without a boundary hook.
    """
    saver = refuse_saves(on_checkpoint, "prompt_chat")
    frame, gen = _begin("prompt_chat")
    _, chat = await _run_prompt(frame, gen, None, max_turn_steps=max_turn_steps,
                                max_total_turns=max_total_turns, text_sink=text_sink,
                                hook="prompt_chat", additional_options=additional_options,
                                on_checkpoint=saver)
    assert chat is not None  # without a schema _drive always builds the ChatResult
    return chat


async def resume_chat(checkpoint: LoopCheckpoint | bytes | str | Mapping[str, Any], *,
                      reply: str | None = None, tool_call_id: str | None = None,
                      max_turn_steps: int | None = None,
                      on_checkpoint: Callable[[LoopCheckpoint], object] | None = None,
                      ) -> ChatResult:
    """Continue a suspended chat (``ChatResult.checkpoint``, or its stored bytes) as this
    generation's prompt, with the generation's equipped tools and model.

    ``reply`` answers the open suspend (``tool_call_id`` picks one when several are open): a
    ``waiting_for_reply`` suspend gets it as a reply, a ``resuming_later`` one as its wake result.
    Runs through :func:`~bindloop.session.run_from_checkpoint`; ``max_turn_steps`` (default: what
    the checkpoint has left) bounds the model turns. A checkpoint whose turns ran out
    (:attr:`ToolLoopExceededError.checkpoint <bindloop.agent.ToolLoopExceededError>`, status
    ``iteration_limit``) goes on from where it stopped with ``max_turn_steps`` (default 10) more. The final answer goes through the
    generation's ``expect_validator`` s as in :func:`prompt_chat`: a refused one is re-asked
    with the reason (each re-ask a tool loop of ``max_turn_steps`` turns, default 10), up to the
    agent's ``max_retries``, then :class:`~bindloop.agent.StructuredOutputError` carries every
    attempt. A checkpoint a chat made (a save, a suspend, an out-of-turns one) carries the chat's
    refused answers and turn budgets: the re-asks left and their ``max_turn_steps`` are then the
    original prompt's, and so is its ``max_total_turns``
    (:class:`~bindloop.agent.TurnBudgetExceededError`), unless ``max_turn_steps`` is passed.

    A ``ready`` checkpoint (an ``on_checkpoint`` save) runs on from its position: the rounds
    before it are not run again. ``on_checkpoint`` is as in :func:`prompt_chat`: each save is one
    revision after the one before, starting after the checkpoint's own.
    """
    saver = refuse_saves(on_checkpoint, "resume_chat")
    frame, gen = _begin("resume_chat")
    if max_turn_steps is not None:
        _budgets(max_turn_steps, None, 0)  # the same check as prompt_chat's
    cp = checkpoint if isinstance(checkpoint, LoopCheckpoint) else parse_loop_checkpoint(
        checkpoint)
    record = read_record(cp)
    # Out of the prompt's total turns only where the checkpoint's own budget ends at that total
    # (a renewed iteration_limit budget, or one passed here, is this call's, not the prompt's).
    total_cut = (record is not None and record.cut and max_turn_steps is None
                 and cp.status != "iteration_limit")
    start_len = len(cp.messages)  # the reply is part of what this prompt added
    if reply is not None:
        suspends = cp.open_suspends
        if tool_call_id is None:
            if len(suspends) != 1:
                raise UsageError(f"resume_chat(reply=...): the checkpoint has {len(suspends)} "
                                 "open suspends; name the one you answer with tool_call_id=")
            tool_call_id = suspends[0].tool_call_id
        mode = next((s.mode for s in suspends if s.tool_call_id == tool_call_id), None)
        answer = (CheckpointWake(tool_call_id=tool_call_id, content=reply)
                  if mode == "resuming_later" else
                  CheckpointReply(tool_call_id=tool_call_id, content=reply))
        cp = apply_checkpoint_input(cp, answer)
    if cp.status == "iteration_limit":
        # Its budget is spent (ToolLoopExceededError.checkpoint): going on is a new budget from
        # the same position, one revision later.
        cp = msgspec.structs.replace(cp, status="ready", revision=cp.revision + 1,
                                     max_iterations=cp.iterations + (
                                         10 if max_turn_steps is None else max_turn_steps))
    elif max_turn_steps is not None:
        cp = msgspec.structs.replace(cp, max_iterations=cp.iterations + max_turn_steps)

    async def body(hub: StreamHub | None) -> ChatResult:
        prompt = _Prompt(frame, gen, None, hub, None)

        def restore(_: LoopCheckpoint) -> RestoredLoop:
            return RestoredLoop(call_model=prompt.call_model,
                                run_tool_call=prompt.run_tool_call, signal=frame.signal,
                                is_fatal_tool_error=_fatal,
                                runs_serially=prompt.runs_serially,
                                capture_bindings=lambda: cp.bindings)

        async def commit(c: LoopCheckpoint) -> BoundaryDecision:
            # Settled boundaries before a model call are "ready"; the final one is the outcome.
            if saver is not None and c.status == "ready":
                await resolve(saver(c))  # what it returns is ignored
            return "continue"

        run = await run_from_checkpoint(checkpoint=cp, restore=restore, commit=commit)
        stop = run.stop_reason
        if stop == "checkpointed":  # our commit always continues; the loop cannot get here
            raise PortContractError("resume_chat: the run stopped as checkpointed")
        if stop == "iteration_limit":
            if total_cut and record is not None:
                raise _out_of_turns(frame, record.max_total_turns)
            raise ToolLoopExceededError(
                f"agent {frame.agent_id!r}: the resumed chat ran out of model turns without "
                "a final answer; pass a larger max_turn_steps",
                max_turn_steps=cp.max_iterations - cp.iterations, checkpoint=run.checkpoint)
        if stop == "aborted":
            raise RunCancelledError(f"agent {frame.agent_id!r}: the resumed chat was aborted")
        end = run.checkpoint
        delta = list(end.messages[start_len:])
        suspended = stop in ("waiting_for_reply", "resuming_later")
        if suspended:
            return ChatResult(data="", delta=delta, stop_reason=stop, stats=run.stats,
                              checkpoint=end)
        text = _final_text(end.messages)
        problem = await _validate(gen, text)
        if problem is None:
            return ChatResult(data=text, delta=delta, stop_reason=stop, stats=run.stats)
        # A refused answer is re-asked as in prompt_chat: the resumed transcript plus the
        # reason, through more tool loops, up to the agent's max_retries re-asks in all (the
        # ones the chat made before this checkpoint included).
        attempts = [*(record.attempts if record is not None else ()), (text, problem)]
        if prompt.tracer.enabled:
            prompt.tracer.event(frame.span, "bindloop.structured_output.retry",
                                {"bindloop.attempt": len(attempts), "bindloop.reason": problem})
        if len(attempts) > frame.max_retries:
            raise _no_answer(frame, attempts)
        reask = _reask(prompt, None, problem)
        retries = frame.max_retries - len(attempts)
        if max_turn_steps is not None or record is None:
            steps = max_turn_steps if max_turn_steps is not None else 10
            total = steps * (retries + 1)
        else:
            steps, total = record.max_turn_steps, record.max_total_turns - end.iterations
            if total < 1:
                raise _out_of_turns(frame, record.max_total_turns)
        saves = Saves(saver, Origin(execution_id=end.execution_id, revision=end.revision,
                                    iterations=end.iterations, stats=end.stats,
                                    bindings=end.bindings))
        _, chat = await _drive(prompt, [*end.messages, reask], None,
                               retries=retries, max_turn_steps=steps,
                               total=total, stream=None, saves=saves,
                               prior_attempts=attempts)
        assert chat is not None  # without a schema _drive always builds the ChatResult
        return ChatResult(data=chat.data, delta=[*delta, reask, *chat.delta],
                          stop_reason=chat.stop_reason,
                          stats=accumulate_run(run.stats, chat.stats),
                          checkpoint=chat.checkpoint)

    return await _with_consumers(frame, gen, body)
