"""The prompt's model port: every model call of a prompt through one fold.

A turn is folded exactly once, priced inside that fold: by the model's own
:meth:`~bindloop.model.Model.complete` (``ModelAdapter``'s fold, each candidate's for a route, a
:class:`~bindloop.model.StreamModel`'s fold of its stream). Whoever watches — ``on_stream``
consumers, a text sink, the partial structured view — is one observer of that fold's events; a trace and a journal take the folded turn; a replay feeds
the journaled turn in as it is. Unwatched, the same call runs with no observer at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import msgspec

from ..completion import StreamEvent, TextEvent, ToolCallEvent
from ..textstream import TurnTextStream
from ._partial_json import PartialJsonParser
from ..contracts import Message, ModelTurnResult, ToolDefinition, TurnUsage
from ..errors import PortContractError, UsageError
from ._errors import BudgetExceededError
from ..model import ForcedTool, Model, ModelRequest, StreamModel, StructuredOutputMode, \
    ToolChoice, fold_events, unpriced
from ._context import Frame, Generation
from ..schema import InvalidOutputError, OutputSpec
from ._snapshot import PromptHasher
from ._stream import (
    RETRY_START,
    AgentStreamEvent,
    StreamHub,
    StructuredDataEvent,
    ToolCallDoneEvent,
    TurnDoneEvent,
    TurnStartEvent,
    turn_done,
    turn_failed,
)
from ._trace import ChatSpans

__all__ = ("ToolChoiceArg", "ToolChoiceContext", "ToolChoicePolicy", "TurnPort", "choice_policy",
           "model_surface", "resolve_model")

_JSON_ENCODE = msgspec.json.Encoder().encode
_JSON_DECODE = msgspec.json.Decoder().decode
_START = TurnStartEvent()


class ToolChoiceContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a chat's tool-choice policy sees before each model call: the prompt's ``turn_index``
    (0-based, as on the stream envelope) and the transcript so far (read it, never mutate it)."""

    turn_index: int
    messages: Sequence[Message]


ToolChoicePolicy: TypeAlias = Callable[[ToolChoiceContext], ToolChoice | None]
"""``prompt_chat(tool_choice=)``: the tool choice of each turn (``None``: the model decides)."""

ToolChoiceArg: TypeAlias = ToolChoice | ToolChoicePolicy | None
"""What ``prompt_chat`` / ``resume_chat(tool_choice=)`` take: a fixed choice or a policy."""

_CHOICES = ("auto", "none", "required")


def _checked_choice(choice: object) -> ToolChoice | None:
    if choice is None or isinstance(choice, ForcedTool) or (
            isinstance(choice, str) and choice in _CHOICES):
        return choice  # type: ignore[return-value]
    raise PortContractError(f"the tool_choice policy returned {choice!r}; it must return 'auto', "
                            "'none', 'required', ForcedTool(name=...) or None")


def resolve_model(frame: Frame) -> Model:
    """The agent's model: its own, the nearest ancestor's, or the run's."""
    node: Frame | None = frame
    while node is not None:
        if node.model is not None:
            return node.model
        node = node.parent
    if frame.run.model is not None:
        return frame.run.model
    raise UsageError(
        f"agent {frame.agent_id!r} has no model: pass create_agent(model=...), give a parent "
        "agent one, or pass run_with(model=...)")


def model_surface(frame: Frame, gen: Generation, model: Model, spec: OutputSpec | None,
                  additional_options: Mapping[str, Any] | None) -> tuple[ModelRequest, bool]:
    """The options every model call of the prompt is sent, and whether the answer comes as the
    output tool's call (a structured prompt over a model without native JSON-schema mode)."""
    defs = [t.definition for t, _ in gen.tools]
    tool_mode = spec is not None and model.structured_output != "json_schema"
    schema: dict[str, Any] | None = None
    choice: ToolChoice | None = None
    if spec is not None:
        if tool_mode:
            if any(t.name == spec.name for t, _ in gen.tools):
                raise UsageError(f"prompt_agent: a tool named {spec.name!r} is equipped; it "
                                 "clashes with the output tool: rename the tool")
            defs.append(ToolDefinition(name=spec.name, parameters=spec.schema,
                                       description="Give your final answer by calling this "
                                                   "tool with it as the arguments."))
            choice = ForcedTool(name=spec.name) if len(defs) == 1 else "required"
        else:
            schema = spec.schema
    return ModelRequest(schema=schema, schema_name=spec.name if spec else "final_result",
                        tools=tuple(defs), tool_choice=choice, signal=frame.signal,
                        additional_options=dict(additional_options)
                        if additional_options else None), tool_mode


def choice_policy(value: ToolChoiceArg, hook: str) -> ToolChoicePolicy | None:
    """``tool_choice=`` as a per-turn policy: a fixed choice applies to every turn."""
    if value is None or callable(value) and not isinstance(value, ForcedTool):
        return value
    try:
        fixed = _checked_choice(value)
    except PortContractError:
        raise UsageError(f"{hook}(tool_choice=) takes 'auto', 'none', 'required', "
                         f"ForcedTool(name=...) or a function of the turn, got {value!r}") from None
    return lambda _: fixed


class _Watch:
    """One turn's observer: the envelope for ``on_stream``, the text sink, and the partial
    structured view (JSON text in schema mode, the output tool's arguments in tool mode)."""

    __slots__ = ("fed", "hub", "index", "output", "output_index", "parser", "spec", "text",
                 "tool_mode")

    def __init__(self, index: int, hub: StreamHub | None, text: TurnTextStream | None,
                 spec: OutputSpec | None, tool_mode: bool) -> None:
        self.index = index
        self.hub = hub
        self.text = text
        self.spec = spec
        self.tool_mode = tool_mode
        self.parser = PartialJsonParser() if hub is not None and spec is not None else None
        self.output = spec.name if spec is not None else None
        self.output_index: int | None = None
        self.fed = False

    def __call__(self, event: StreamEvent) -> None:
        hub = self.hub
        if hub is not None:
            hub.emit(AgentStreamEvent(turn_index=self.index, event=event))
        if self.text is not None and type(event) is TextEvent:
            self.text.observe(event.content)
        if self.parser is None:
            return
        chunk: str | None = None
        if type(event) is TextEvent and not self.tool_mode:
            chunk = event.content
        elif type(event) is ToolCallEvent and self.tool_mode:
            tc = event.tool_call
            if tc.name == self.output:
                self.output_index = tc.index
            if tc.index == self.output_index:
                chunk = tc.arguments
        if chunk:
            partial = self.parser.feed(chunk)
            # Text that cannot start a JSON document (narration before a tool call) is not a
            # structured view: it stays plain text.
            if partial.state != "invalid":
                self.fed = True
                self._emit(StructuredDataEvent(status="partial", data=self._copy(partial.value),
                                               is_valid=False))

    def restart(self) -> None:
        """The model took back what it sent (a route's fallback took the turn over): the turn
        starts again — a second ``turn_start`` of the same index, and the views afresh."""
        if self.hub is not None:
            self.hub.emit(AgentStreamEvent(turn_index=self.index, event=RETRY_START))
        if self.text is not None:
            self.text.begin_attempt("attempt_failed")
        if self.parser is not None:
            self.parser = PartialJsonParser()
        self.output_index = None
        self.fed = False

    def _emit(self, event: Any) -> None:
        assert self.hub is not None
        self.hub.emit(AgentStreamEvent(turn_index=self.index, event=event))

    def _copy(self, value: Any) -> Any:
        # The parser grows one live structure in place: each event gets its own copy, so an
        # event a consumer holds never changes under it.
        if isinstance(value, (dict, list)):
            value = _JSON_DECODE(_JSON_ENCODE(value))
        spec = self.spec
        if spec is not None and spec.wrapped and isinstance(value, dict):
            return value.get("result")
        return value

    def replayed(self, turn: ModelTurnResult) -> None:
        """A journaled turn arrives whole (nothing streamed): the text sink gets its text, and
        :meth:`finish` reports the answer's structured view from the whole source."""
        if self.text is not None and turn.text:
            self.text.observe(turn.text)
        self.fed = self.parser is not None
        source = self._source(turn)
        if self.parser is not None and source is not None:
            self.parser.feed(source)

    def _source(self, turn: ModelTurnResult) -> str | None:
        # A turn that asks for tools is not the answer (its text is narration); the final
        # structured status belongs to the answer: the output tool's call, or a text-only turn.
        if self.tool_mode:
            return next((c.arguments for c in turn.tool_calls if c.name == self.output), None)
        return turn.text if not turn.tool_calls else None

    def finish(self, turn: ModelTurnResult, done: TurnDoneEvent) -> None:
        """The turn's closing events: its calls done, the answer's structured view, ``done``."""
        if self.hub is None:
            return
        for call in turn.tool_calls:
            self._emit(ToolCallDoneEvent(tool_call=call))
        spec = self.spec
        source = self._source(turn)
        if self.parser is not None and spec is not None and self.fed and source is not None:
            try:
                spec.decode(source)
                ok = True
            except InvalidOutputError:
                ok = False
            self._emit(StructuredDataEvent(status="complete" if ok else "error",
                                           data=self._copy(self.parser.result().value),
                                           is_valid=ok))
        self._emit(done)


class TurnPort:
    """The loop's model for one prompt: a :class:`~bindloop.model.Model` over the agent's, which
    asks it with the prompt's own request (tools, schema, tool choice) and observes the turn (the
    stream, traces, journal, replay, budgets). ``turns`` counts the calls made; once it reaches
    ``limit`` (set by the re-ask logic: where the current attempt's turns run out) the next call
    raises ``out_of_steps()`` instead."""

    __slots__ = ("budgets", "choose", "journaled", "model_complete", "frame", "hasher", "hub",
                 "limit", "model", "options", "out_of_steps", "plain", "record", "record_call",
                 "recording", "spec", "text", "tool_mode", "spans", "turns", "watched")

    def __init__(self, frame: Frame, model: Model, options: ModelRequest, *,
                 spec: OutputSpec | None, tool_mode: bool, hub: StreamHub | None,
                 text: TurnTextStream | None, limit: int,
                 out_of_steps: Callable[[], BaseException],
                 choose: ToolChoicePolicy | None = None) -> None:
        self.frame = frame
        self.choose = choose
        self.model = model
        self.options = options
        self.spec = spec
        self.tool_mode = tool_mode
        self.hub = hub
        self.text = text
        self.limit = limit
        self.out_of_steps = out_of_steps
        # The frames whose generation set a budget, from this agent up (fixed once prompting:
        # budgets are draft hooks, equipped before a generation's prompt and its sub-agents').
        budgets = []
        node: Frame | None = frame
        while node is not None:
            if node.generation is not None and node.generation.budget is not None:
                budgets.append(node)
            node = node.parent
        self.budgets = budgets
        self.model_complete = model.complete
        run = frame.run
        self.spans = (ChatSpans(run.tracer, frame.span, model.id, model.provider)
                      if run.tracer.enabled else None)
        self.recording = run.enable_snapshot or run.tracer.enabled or frame.cursor is not None
        self.hasher = PromptHasher(options.tools, options.schema, options.tool_choice,
                                   run.prompt_hashes) if self.recording else None
        self.record = frame.journal.record_turn
        self.record_call = frame.journal.record_call
        self.watched = self.recording or hub is not None or text is not None
        # Unwatched, a StreamModel that keeps the base's complete and price has nothing to charge
        # (its fold prices nothing): its turn is that fold itself, awaited by the loop directly.
        foldable = type(model).complete is StreamModel.complete and unpriced(model)
        self.plain = not self.watched and foldable
        # Only a snapshot's journal watches (no trace, replay, stream or text sink): the fold
        # is awaited under one frame that journals the turn, its prompt hash computed when the
        # snapshot is taken.
        self.journaled = foldable and run.enable_snapshot and not run.tracer.enabled \
            and frame.cursor is None and hub is None and text is None
        self.turns = 0

    # -- budget -----------------------------------------------------------------------------------
    def _check_budget(self) -> None:
        for node in self.budgets:
            g = node.generation
            if g is not None and g.budget is not None and node.spent >= g.budget:
                raise BudgetExceededError(
                    f"agent {node.agent_id!r} spent {node.spent} of its budget {g.budget}; no "
                    "further model call is made (raise the limit with equip_budget)",
                    spent=node.spent, limit=g.budget)

    def _charge(self, cost: int) -> None:
        node: Frame | None = self.frame
        while node is not None:
            node.spent += cost
            node = node.parent

    # -- the port ---------------------------------------------------------------------------------
    def _checked(self, turn: object) -> ModelTurnResult:
        if type(turn) is not ModelTurnResult and not isinstance(turn, ModelTurnResult):
            raise PortContractError(f"model {self.model.id!r}: complete() returned "
                                    f"{type(turn).__name__}, not a ModelTurnResult")
        return turn

    @property
    def id(self) -> str:
        return self.model.id

    @property
    def provider(self) -> str | None:
        return self.model.provider

    @property
    def structured_output(self) -> StructuredOutputMode:
        return self.model.structured_output

    def price(self, usage: TurnUsage, /) -> int:
        return self.model.price(usage)

    def stream(self, messages: Sequence[Message],
               request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        """The agent's model's stream for the prompt's request (unobserved, uncounted)."""
        return self.model.stream(messages, self.options)

    def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 on_reset: Callable[[], None] | None = None) -> Awaitable[ModelTurnResult]:
        """The loop's call: checks the bounds and hands back the call's awaitable. The loop's
        ``request`` is empty (the agent offers no runner tools); the prompt's own is used. The
        loop passes no ``on_event``: the turn's observers are the prompt's."""
        if self.turns >= self.limit:
            raise self.out_of_steps()
        if self.budgets:
            self._check_budget()
        if self.choose is not None:
            self._choose(messages)
        self.turns += 1
        # The live transcript is passed as it is: a model reads it and copies what it keeps.
        if self.plain:
            return fold_events(self.model.stream(messages, self.options), None)
        if self.journaled:
            return self._journal(messages,
                                 fold_events(self.model.stream(messages, self.options), None))
        return self._call(messages)

    async def _journal(self, messages: Sequence[Message], fold: Awaitable[ModelTurnResult],
                       ) -> ModelTurnResult:
        """The plain fold, journaled once it returns (as :meth:`_watched` journals a turn). The
        call joins the prompt's trail then: nothing appends to ``messages`` while the loop awaits
        the fold, and a call that raised is not journaled."""
        turn = await fold
        assert self.hasher is not None  # journaled runs record
        self.record_call(self.hasher, messages, turn)
        return turn

    def _choose(self, messages: Sequence[Message]) -> None:
        assert self.choose is not None
        choice = _checked_choice(self.choose(ToolChoiceContext(turn_index=self.turns,
                                                               messages=messages)))
        if choice != self.options.tool_choice:
            self.options = msgspec.structs.replace(self.options, tool_choice=choice)
            if self.hasher is not None:  # the choice is part of the request a replay checks
                self.hasher.choose(choice)

    async def _call(self, messages: Sequence[Message]) -> ModelTurnResult:
        if self.watched:
            turn = await self._watched(messages, self.turns - 1)
        else:  # nobody watches: the model's own fold, with no observer
            turn = await self.model_complete(messages, self.options)
            if type(turn) is not ModelTurnResult:
                turn = self._checked(turn)
        if turn.cost:
            self._charge(turn.cost)
        return turn

    async def _watched(self, messages: Sequence[Message], index: int) -> ModelTurnResult:
        frame = self.frame
        hub = self.hub
        spans = self.spans  # the trace reads the turn's events
        pending = self.hasher.defer(messages) if self.hasher is not None else None
        # Read at once where something reads it during the call (a replay's check, the trace,
        # the turn's done event); a journal alone reads it when the snapshot is taken.
        hash_ = pending.value() if pending is not None and (
            frame.cursor is not None or spans is not None or hub is not None
            or self.text is not None) else ""
        if spans is not None:
            spans.observe(index, _START)
        watch = _Watch(index, hub, self.text, self.spec, self.tool_mode) \
            if hub is not None or self.text is not None else None
        if hub is not None:
            hub.emit(AgentStreamEvent(turn_index=index, event=_START))
        try:
            replayed = None
            if frame.cursor is not None:
                replayed = frame.cursor.next_turn(hash_, f"agent {frame.agent_id!r}")
            if replayed is not None:
                turn = replayed.turn  # served as journaled: no model call, no fold
                if watch is not None:
                    watch.replayed(turn)
            else:
                turn = await (self.model_complete(messages, self.options) if watch is None else
                              self.model_complete(messages, self.options, watch, watch.restart))
                if type(turn) is not ModelTurnResult:
                    turn = self._checked(turn)
        except BaseException as exc:
            failed = turn_failed(exc)
            if hub is not None and isinstance(exc, Exception):
                hub.emit(AgentStreamEvent(turn_index=index, event=failed))
            if spans is not None:
                spans.observe(index, failed)
            raise
        if self.recording:
            self.record(hash_ or pending or "", turn)
        if spans is not None or watch is not None:
            done = turn_done(turn, hash_)
            if spans is not None:
                spans.observe(index, done)
            if watch is not None:
                watch.finish(turn, done)
        return turn
