"""The model protocol the agent API calls, and adapters for the wire's models.

:class:`AgentModel` is the seed's model adapter in Python: an ``id``, a ``provider``, ``stream(messages,
options)`` yielding :mod:`bindloop.completion` events and ``calculate_cost(usage)`` in integer units.
:func:`as_agent_model` turns a :class:`~bindloop.wire.ModelAdapter` or
:class:`~bindloop.wire.RoutedModel` into one without forking them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

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
from ..contracts import Message, ModelTurnResult, ToolDefinition, TurnUsage
from ..errors import UsageError
from ..signal import AbortSignal
from ..wire import JsonSchemaFormat, ModelAdapter, RoutedModel, ToolChoice, WireOptions

__all__ = (
    "AgentModel",
    "ModelStreamOptions",
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
    :class:`~bindloop.completion.ErrorEvent` or a raise fails the turn. ``calculate_cost`` returns
    integer spend per billing unit (``{"micro_usd": 120}``); ``{}`` when the model is free or
    unpriced. ``messages`` is the prompt's live transcript: read it, copy what you keep, never
    mutate it.

    Optional extras a model may carry: ``structured_output`` (:data:`StructuredOutputMode`,
    ``"tool"`` when absent) says whether it honours ``options.schema`` natively;
    ``async complete_turn(messages, options) -> ModelTurnResult`` gives the same turn whole, and is
    used instead of ``stream`` when nothing observes the stream (no ``on_stream``, trace, journal or
    text sink).
    """

    @property
    def id(self) -> str: ...

    @property
    def provider(self) -> str | None: ...

    def stream(self, messages: Sequence[Message],
               options: ModelStreamOptions) -> AsyncIterator[StreamEvent]: ...

    def calculate_cost(self, usage: TurnUsage) -> dict[str, int]: ...


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


CostFn: TypeAlias = Callable[[TurnUsage], Mapping[str, int]]


class _WireModel:
    """A :class:`ModelAdapter` as an :class:`AgentModel`: its own options, with the call's schema as
    ``response_format``, its tool choice, and ``additional_options`` replacing option fields."""

    __slots__ = ("_cost", "_inner", "id", "provider")
    structured_output: StructuredOutputMode = "json_schema"

    def __init__(self, inner: ModelAdapter, *, id: str | None, provider: str | None,
                 cost: CostFn | None) -> None:
        self._inner = inner
        self._cost = cost
        self.id = id or inner.options.model
        self.provider = provider or inner.adapter.wire

    def stream(self, messages: Sequence[Message],
               options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        wire = self._wire_options(options)
        return self._inner.stream(messages, options.tools, options=wire, signal=options.signal)

    def _wire_options(self, options: ModelStreamOptions) -> WireOptions:
        wire = self._inner.options
        changes: dict[str, Any] = dict(options.additional_options or {})
        if options.schema is not None:
            changes["response_format"] = JsonSchemaFormat(name=options.schema_name,
                                                          schema=options.schema)
        if options.tool_choice is not None:
            changes["tool_choice"] = options.tool_choice
        try:
            wire = msgspec.structs.replace(wire, **changes) if changes else wire
        except TypeError as exc:
            raise UsageError(f"additional_options for model {self.id!r} name a field WireOptions "
                             f"does not have: {exc}") from exc
        return wire

    async def complete_turn(self, messages: Sequence[Message],
                            options: ModelStreamOptions) -> ModelTurnResult:
        wire = self._wire_options(options)
        return await self._inner.complete(messages, options.tools, options=wire,
                                          signal=options.signal)

    def calculate_cost(self, usage: TurnUsage) -> dict[str, int]:
        return dict(self._cost(usage)) if self._cost is not None else {}


class _RoutedAgentModel:
    """A :class:`RoutedModel` as an :class:`AgentModel`. A route's candidates carry their own
    options, so a schema or a tool choice cannot be passed per call: structured output goes
    through the output tool (offered, not forced) and the turn arrives whole, as events."""

    __slots__ = ("_cost", "_inner", "id", "provider")
    structured_output: StructuredOutputMode = "tool"

    def __init__(self, inner: RoutedModel, *, id: str | None, provider: str | None,
                 cost: CostFn | None) -> None:
        self._inner = inner
        self._cost = cost
        self.id = id or "routed"
        self.provider = provider

    async def stream(self, messages: Sequence[Message],
                     options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        turn = await self.complete_turn(messages, options)
        for event in turn_events(turn):
            yield event

    async def complete_turn(self, messages: Sequence[Message],
                            options: ModelStreamOptions) -> ModelTurnResult:
        return await self._inner.call_model(list(messages), list(options.tools))

    def calculate_cost(self, usage: TurnUsage) -> dict[str, int]:
        return dict(self._cost(usage)) if self._cost is not None else {}


_MODEL_ATTRS = ("id", "provider")
_MODEL_METHODS = ("stream", "calculate_cost")


def is_agent_model(obj: object) -> bool:
    """``isinstance(obj, AgentModel)`` without the runtime-checkable Protocol's cost (it walks the
    protocol's members on every call; ``run_with(model=)`` checks once per run): every member
    present, the methods not ``None``."""
    return all(hasattr(obj, name) for name in _MODEL_ATTRS) and all(
        getattr(obj, name, None) is not None for name in _MODEL_METHODS)


def as_agent_model(model: object, *, id: str | None = None, provider: str | None = None,
                   calculate_cost: CostFn | None = None) -> AgentModel:
    """``model`` as an :class:`AgentModel`: an AgentModel is returned as it is; a
    :class:`~bindloop.wire.ModelAdapter` or :class:`~bindloop.wire.RoutedModel` is wrapped (``id``
    defaults to the adapter's ``options.model`` / ``"routed"``, ``calculate_cost`` to no cost).

    Raises :class:`~bindloop.errors.UsageError` for anything else, naming what an agent model needs.
    """
    if isinstance(model, ModelAdapter):
        return _WireModel(model, id=id, provider=provider, cost=calculate_cost)
    if isinstance(model, RoutedModel):
        return _RoutedAgentModel(model, id=id, provider=provider, cost=calculate_cost)
    if is_agent_model(model):
        return model  # type: ignore[return-value]
    raise UsageError(
        f"{type(model).__name__} is not a model: pass an AgentModel (id, provider, stream(messages, "
        "options), calculate_cost(usage)), a bindloop.wire.ModelAdapter or a RoutedModel, or a "
        "model-registry id string")
