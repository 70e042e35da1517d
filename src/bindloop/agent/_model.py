"""The model protocol the agent API calls, and adapters for the wire's models.

:class:`AgentModel` is rejelly's model adapter in Python: an ``id`` and
``stream(messages, options)`` yielding :mod:`bindloop.completion` events, with an optional ``provider``, ``price`` and whole-turn
``complete_turn``.
:func:`as_agent_model` turns a :class:`~bindloop.wire.ModelAdapter` or
:class:`~bindloop.wire.RoutedModel` into one without forking them.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal, Protocol, TypeAlias, cast, runtime_checkable

import anyio
import msgspec

from ..completion import (
    FinishEvent,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallEvent,
    UsageEvent,
)
from ..contracts import Message, ModelTurnResult, ToolDefinition
from ..errors import RunCancelledError, UsageError
from ..routing import AttemptError
from ..signal import AbortSignal
from ..wire import JsonSchemaFormat, ModelAdapter, RoutedModel, ToolChoice, WireOptions
from ._stream import RETRY_START

__all__ = (
    "AgentModel",
    "ModelStreamOptions",
    "RouteStreaming",
    "StructuredOutputMode",
    "as_agent_model",
    "is_agent_model",
    "turn_events",
)

StructuredOutputMode: TypeAlias = Literal["json_schema", "tool"]
"""How a model takes a structured-output request: the provider's native JSON-schema mode, or a
forced output tool whose arguments are the answer."""


class ModelStreamOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What one model call is asked for besides the messages.

    ``schema`` (already strict-converted) asks for JSON text matching it, named ``schema_name``;
    ``tools`` and ``tool_choice`` are the turn's tool surface; ``signal`` cancels the call;
    ``additional_options`` are forwarded to the adapter untouched (``WireOptions`` field names for
    the wire adapters)."""

    schema: dict[str, Any] | None = None
    schema_name: str = "final_result"
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice | None = None
    signal: AbortSignal | None = None
    additional_options: dict[str, Any] | None = None


@runtime_checkable
class AgentModel(Protocol):
    """A model the agent API can call.

    ``stream`` returns an async iterator of stream events for one completion; an
    :class:`~bindloop.completion.ErrorEvent` or a raise fails the turn. ``messages`` is the prompt's
    live transcript: read it, copy what you keep, never mutate it.

    Optional extras a model may carry (read with ``getattr``; absent means the default):

    - ``provider`` (``str | None``): for traces (``gen_ai.provider.name``).
    - ``price`` (``(TurnUsage) -> int``): the turn's cost in the host's unit. The agent folds
      ``stream`` with it, so it lands in the turn's ``cost``, ``RunStats.cost`` and the budgets
      (``equip_budget``); absent, turns cost 0.
    - ``structured_output`` (:data:`StructuredOutputMode`, ``"tool"`` when absent): whether the
      model honours ``options.schema`` natively.
    - ``async complete_turn(messages, options, on_event) -> ModelTurnResult``: the model's own fold
      of the same turn, already priced; ``on_event`` (``None`` when nobody watches) must be called
      with every event folded, in order. When present the agent calls it instead of ``stream``
      (one fold per turn, whoever watches).
    """

    @property
    def id(self) -> str: ...

    def stream(self, messages: Sequence[Message],
               options: ModelStreamOptions) -> AsyncIterator[StreamEvent]: ...


def turn_events(turn: ModelTurnResult) -> list[StreamEvent]:
    """A whole turn as the events a streaming provider would have sent (one fragment each), so a
    non-streaming model (a routed call, a journal replay) feeds the same fold and stream events."""
    events: list[StreamEvent] = []
    for index, part in enumerate(turn.reasoning):
        events.append(ReasoningEvent(part=part, index=index))
    if turn.text:
        events.append(TextEvent(content=turn.text))
    for index, call in enumerate(turn.tool_calls):
        events.append(ToolCallEvent(tool_call=ToolCallChunk(index=index, id=call.id,
                                                            name=call.name,
                                                            arguments=call.arguments)))
    events.append(UsageEvent(usage=turn.usage))
    events.append(FinishEvent(finish_reason=turn.finish_reason or "stop"))  # type: ignore[arg-type]
    return events


RouteStreaming: TypeAlias = Literal["settled", "live"]
"""How :func:`as_agent_model` streams a route's events (see :class:`_RoutedAgentModel`)."""

_MODES = ("json_schema", "tool")
_ROUTE_STREAMING = ("settled", "live")


def _option_changes(options: ModelStreamOptions) -> dict[str, Any]:
    """The call's ``WireOptions`` field changes: ``additional_options``, then the schema as
    ``response_format`` and the tool choice (these two win: the agent asked for them)."""
    changes: dict[str, Any] = dict(options.additional_options or {})
    if options.schema is not None:
        changes["response_format"] = JsonSchemaFormat(name=options.schema_name,
                                                      schema=options.schema)
    if options.tool_choice is not None:
        changes["tool_choice"] = options.tool_choice
    return changes


class _WireModel:
    """A :class:`ModelAdapter` as an :class:`AgentModel`: its own options, with the call's schema as
    ``response_format``, its tool choice, and ``additional_options`` replacing option fields."""

    __slots__ = ("_inner", "id", "price", "provider", "structured_output")

    def __init__(self, inner: ModelAdapter, *, id: str | None, provider: str | None,
                 structured_output: StructuredOutputMode) -> None:
        self._inner = inner
        self.id = id or inner.options.model
        self.provider = provider or inner.adapter.wire
        self.structured_output = structured_output
        self.price = inner.price  # what the adapter's own fold charges (complete_turn)

    def stream(self, messages: Sequence[Message],
               options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        wire = self._wire_options(options)
        return self._inner.stream(messages, options.tools, options=wire, signal=options.signal)

    def _wire_options(self, options: ModelStreamOptions) -> WireOptions:
        wire = self._inner.options
        changes = _option_changes(options)
        try:
            wire = msgspec.structs.replace(wire, **changes) if changes else wire
        except TypeError as exc:
            raise UsageError(f"additional_options for model {self.id!r} name a field WireOptions "
                             f"does not have: {exc}") from exc
        return wire

    async def complete_turn(self, messages: Sequence[Message], options: ModelStreamOptions,
                            on_event: Callable[[StreamEvent], None] | None = None,
                            ) -> ModelTurnResult:
        wire = self._wire_options(options)
        inner = self._inner
        sink = on_event
        if on_event is not None and inner.on_event is not None:
            own, theirs = inner.on_event, on_event  # the call's sink replaces the adapter's: keep both

            def sink(event: StreamEvent) -> None:
                own(event)
                theirs(event)
        return await inner.complete(messages, options.tools, options=wire,
                                    signal=options.signal, on_event=sink)


def _route_error(exc: Exception) -> Exception:
    """What a route's failure is to the agent: a cancelled attempt is the cancellation itself
    (``RunCancelledError``, as from any other model), everything else the route's own error."""
    if isinstance(exc, AttemptError) and exc.category == "cancelled" and isinstance(
            exc.__cause__, RunCancelledError):
        return exc.__cause__
    return exc


class _End:
    """The route task's last word on the channel: the exception that ended the route."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _RoutedAgentModel:
    """A :class:`RoutedModel` as an :class:`AgentModel`.

    Every call's options (``additional_options``, the schema as ``response_format``, the tool
    choice) are applied on top of each candidate's own ``WireOptions`` for its attempt, so a
    forced output tool is forced on every candidate and a schema goes out natively on each.
    ``structured_output`` is ``"json_schema"`` when every candidate of the plan is bound to a
    ``ModelAdapter`` (every built-in wire sends ``response_format`` natively), else ``"tool"``.

    ``stream`` yields the events of the attempt that serves the turn, as the route task hands
    them over. The agent stream cannot take an event back (its fold keeps every delta, and so may
    its consumers), so a failed attempt must never have been yielded unless its failure ends the
    turn. ``"live"`` (the default) streams every attempt at once: ``complete_turn`` (what the
    agent calls) treats its observer as a retractable surface and sends it
    :data:`~bindloop.agent._stream.RETRY_START` before a fallback takes over from an attempt it
    saw; ``stream`` (a plain iterator, which cannot retract — what a stream-only wrapper such as
    ``create_limit_middleware`` reads) is settled unless ``"live"`` was asked explicitly, and then
    lets the first content delta clamp the route, so a failure after it fails the turn. ``"settled"`` holds an attempt's events
    while a fallback could still follow it and streams live from the moment none can (the plan's
    last possible attempt, or a permanent text surface already clamped the route).
    """

    __slots__ = ("_inner", "_live", "_stream_live", "id", "provider", "structured_output")

    def __init__(self, inner: RoutedModel, *, id: str | None, provider: str | None,
                 structured_output: StructuredOutputMode | None,
                 streaming: RouteStreaming | None) -> None:
        self._inner = inner
        self._live = streaming != "settled"  # complete_turn: live (retractable) by default
        # stream() cannot retract: it commits on the first content only when "live" was asked.
        self._stream_live = streaming == "live"
        self.id = id or "routed"
        self.provider = provider
        if structured_output is None:
            bound = inner.models
            native = all(c.provider_id in bound
                         for stage in inner.plan.stages for c in stage.candidates)
            structured_output = "json_schema" if native else "tool"
        self.structured_output = structured_output

    async def stream(self, messages: Sequence[Message],
                     options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        changes = _option_changes(options)
        send, receive = anyio.create_memory_object_stream[StreamEvent | _End](math.inf)

        def hand_over(event: StreamEvent) -> None:
            try:
                send.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the consumer closed the stream; the task is being cancelled

        async def route() -> None:
            with send:
                try:
                    await self._inner.call_model(
                        list(messages), list(options.tools), options=changes,
                        signal=options.signal, on_event=hand_over,
                        events_are_output=self._stream_live)
                except Exception as exc:  # raised from the generator, in the consumer's task
                    send.send_nowait(_End(exc))

        error: Exception | None = None
        async with anyio.create_task_group() as tg, receive:
            tg.start_soon(route)
            try:
                async for item in receive:
                    if isinstance(item, _End):
                        error = item.error
                        break
                    yield item
            except GeneratorExit:
                # Closed early (aclose): stop the route and return. Letting GeneratorExit through
                # the task group would turn it into an exception group the close cannot accept.
                tg.cancel_scope.cancel()
                return
        if error is not None:  # outside the task group: raised as itself, not in a group
            raise _route_error(error)

    async def complete_turn(self, messages: Sequence[Message], options: ModelStreamOptions,
                            on_event: Callable[[StreamEvent], None] | None = None,
                            ) -> ModelTurnResult:
        # Each candidate's ModelAdapter folds and prices its own attempt. "live": ``on_event``
        # is a retractable surface — every attempt streams at once, and when a fallback takes
        # over from an attempt it already saw, it gets RETRY_START first (the agent's observer
        # then starts the turn's views again). "settled": it gets the events of the attempt that
        # serves the turn, held while a fallback could follow.
        on_reset = None
        if self._live and on_event is not None:
            restart = cast(StreamEvent, RETRY_START)
            sink = on_event

            def on_reset() -> None:
                sink(restart)
        try:
            return await self._inner.call_model(list(messages), list(options.tools),
                                                options=_option_changes(options),
                                                signal=options.signal, on_event=on_event,
                                                on_reset=on_reset)
        except AttemptError as exc:
            unwrapped = _route_error(exc)
            if unwrapped is exc:
                raise
            raise unwrapped from None  # the cancellation itself, already the route error's cause


def is_agent_model(obj: object) -> bool:
    """``isinstance(obj, AgentModel)`` without the runtime-checkable Protocol's cost (it walks the
    protocol's members on every call; ``run_with(model=)`` checks once per run): an ``id`` and a
    ``stream`` that is not ``None``."""
    return hasattr(obj, "id") and getattr(obj, "stream", None) is not None


def as_agent_model(model: object, *, id: str | None = None, provider: str | None = None,
                   structured_output: StructuredOutputMode | None = None,
                   route_streaming: RouteStreaming | None = None) -> AgentModel:
    """``model`` as an :class:`AgentModel`: an AgentModel is returned as it is; a
    :class:`~bindloop.wire.ModelAdapter` or :class:`~bindloop.wire.RoutedModel` is wrapped (``id``
    defaults to the adapter's ``options.model`` / ``"routed"``). The price is the adapter's
    ``ModelAdapter(price=)`` (a route's: each candidate adapter's), charged by its own fold.

    ``structured_output`` overrides how the wrapped model takes a schema (``"tool"``: a forced
    output tool, for a provider model without native JSON-schema output); by default a
    ``ModelAdapter`` is ``"json_schema"``, and a route is too when every candidate is bound.
    ``route_streaming`` (a route only) is ``"live"`` (default: every attempt streams at once, so a
    healthy primary's deltas arrive as the provider sends them; when a fallback takes over from an
    attempt whose events were seen, the observer first gets a second ``turn_start`` of the same
    turn — the reset contract of a retractable surface) or ``"settled"`` (an attempt's events are
    held while a fallback could still follow it, so no failed attempt is ever seen, at the price
    of the primary's deltas arriving together when its attempt ends).

    Raises :class:`~bindloop.errors.UsageError` for anything else, naming what an agent model needs.
    """
    if structured_output is not None and structured_output not in _MODES:
        raise UsageError(f"as_agent_model(structured_output=) must be 'json_schema', 'tool' or "
                         f"None, got {structured_output!r}")
    if route_streaming is not None and route_streaming not in _ROUTE_STREAMING:
        raise UsageError(f"as_agent_model(route_streaming=) must be 'settled', 'live' or None, "
                         f"got {route_streaming!r}")
    if isinstance(model, RoutedModel):
        return _RoutedAgentModel(model, id=id, provider=provider,
                                 structured_output=structured_output,
                                 streaming=route_streaming)
    if route_streaming is not None:
        raise UsageError("as_agent_model(route_streaming=) applies to a RoutedModel only, got "
                         f"{type(model).__name__}")
    if isinstance(model, ModelAdapter):
        return _WireModel(model, id=id, provider=provider,
                          structured_output=structured_output or "json_schema")
    if structured_output is not None and is_agent_model(model):
        raise UsageError("as_agent_model(structured_output=) applies to a ModelAdapter or a "
                         "RoutedModel; an AgentModel declares its own structured_output")
    if is_agent_model(model):
        return model  # type: ignore[return-value]
    raise UsageError(
        f"{type(model).__name__} is not a model: pass an AgentModel (id and stream(messages, "
        "options)), a bindloop.wire.ModelAdapter or a RoutedModel, or a model-registry id string")
