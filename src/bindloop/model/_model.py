"""The one shape every model has, and the fold of its stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Protocol, cast


from ..completion import (
    FinishEvent,
    ProviderItemEvent,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallEvent,
    TurnCollector,
    UsageEvent,
)
from ..contracts import Message, ModelTurnResult, TurnUsage
from ._request import ModelRequest, StructuredOutputMode

__all__ = ("Model", "StreamModel", "fold_events", "turn_events", "unpriced")

EventSink = Callable[[StreamEvent], None]


class Model(Protocol):
    """A model: what the agent, compaction's summaries, MCP sampling and the loop
    (``ToolLoopPorts.model``) call. ``ModelAdapter``, ``RoutedModel``, a wrapped model
    (``augment_model``), the scripted models of ``bindloop.testing`` and :class:`StreamModel`
    subclasses are all one.

    Its capabilities are declared, never probed: ``id`` (traces, errors), ``provider`` (traces'
    ``gen_ai.provider.name``; ``None`` when unknown), ``structured_output`` (whether
    ``request.schema`` is honoured natively, ``"json_schema"``, or the caller must force an output
    tool, ``"tool"``) and ``price(usage)``, the turn's cost in the host's unit (``0`` for a model
    that charges nothing).

    ``stream(messages, request)`` yields one completion's events; an
    :class:`~bindloop.completion.ErrorEvent` or a raise fails it. ``complete(messages, request,
    on_event, on_reset)`` is the model's own fold of the same turn, priced by it; ``on_event``
    (``None`` when nobody watches) is called with every event folded, in order, and a model
    streams its provider's answer whenever it is given. ``on_reset`` (``None``: the caller cannot
    take events back) is called by a model that hands over events it may later replace (a route
    whose fallback takes over from an attempt that was seen): the caller drops what ``on_event``
    got so far. Without ``on_reset`` such a model must hold events it might still replace.

    ``messages`` is the caller's live transcript: read it, copy what you keep, never mutate it.
    """

    @property
    def id(self) -> str: ...

    @property
    def provider(self) -> str | None: ...

    @property
    def structured_output(self) -> StructuredOutputMode: ...

    def price(self, usage: TurnUsage, /) -> int: ...

    def stream(self, messages: Sequence[Message],
               request: ModelRequest, /) -> AsyncIterator[StreamEvent]: ...

    def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                 on_event: EventSink | None = None,
                 on_reset: Callable[[], None] | None = None) -> Awaitable[ModelTurnResult]: ...


async def fold_events(events: AsyncIterator[StreamEvent], price: Callable[[TurnUsage], int] | None,
                      on_event: EventSink | None = None) -> ModelTurnResult:
    """Fold a model's stream into its turn, priced by ``price``; ``on_event`` sees every event
    first. The stream is closed (``aclose``, when it has one) if the fold fails.

    A stream that is also an :class:`~collections.abc.Iterable` has its events at hand (a script,
    a replayed journal; ``bindloop.testing``'s scripted stream model returns one): it is read as
    one, the same events folded the same way without an await for each."""
    collector = TurnCollector(price=price)
    observe = collector.observe
    try:
        if hasattr(type(events), "__iter__"):  # at hand (an Iterable), as _awaitable tests
            at_hand = cast(Iterable[StreamEvent], events)
            if on_event is None:
                for event in at_hand:
                    observe(event)
            else:
                for event in at_hand:
                    on_event(event)
                    observe(event)
        elif on_event is None:
            async for event in events:
                observe(event)
        else:
            async for event in events:
                on_event(event)
                observe(event)
    except BaseException:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        raise
    return collector.result()


class StreamModel:
    """A base for a model written as a stream: subclass it, set ``id`` (and ``provider``,
    ``structured_output`` when they differ from the defaults), write :meth:`stream`, and override
    :meth:`price` (in the class, or as an instance attribute) for a model that costs something.
    :meth:`complete` folds :meth:`stream` with :meth:`price`; ``on_reset`` is never called (a
    stream cannot take an event back)."""

    id: str = "model"
    provider: str | None = None
    structured_output: StructuredOutputMode = "tool"

    def price(self, usage: TurnUsage, /) -> int:
        return 0

    def stream(self, messages: Sequence[Message],
               request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError(f"{type(self).__name__} must define stream(messages, request)")

    def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                 on_event: EventSink | None = None,
                 on_reset: Callable[[], None] | None = None) -> Awaitable[ModelTurnResult]:
        # A model that charges nothing keeps the fold from calling price() every turn.
        price = None if unpriced(self) else self.price
        return fold_events(self.stream(messages, request), price, on_event)


def unpriced(model: object) -> bool:
    """Whether ``model``'s price is :class:`StreamModel`'s own, neither overridden in its class
    nor set on the instance: it charges nothing, so a fold need not ask it."""
    return getattr(getattr(model, "price", None), "__func__", None) is StreamModel.price


def turn_events(turn: ModelTurnResult) -> list[StreamEvent]:
    """A whole turn as the events a streaming provider would have sent (one fragment each), so a
    model holding whole turns (a script, a journal replay) feeds the same fold and stream events.
    Folding them gives ``turn`` back, provider items included (its cost is the fold's price)."""
    events: list[StreamEvent] = []
    for index, part in enumerate(turn.reasoning):
        events.append(ReasoningEvent(part=part, index=index))
    for index, item in enumerate(turn.provider_items):
        events.append(ProviderItemEvent(part=item, index=index))
    if turn.text:
        events.append(TextEvent(content=turn.text))
    for index, call in enumerate(turn.tool_calls):
        events.append(ToolCallEvent(tool_call=ToolCallChunk(index=index, id=call.id,
                                                            name=call.name,
                                                            arguments=call.arguments)))
    events.append(UsageEvent(usage=turn.usage))
    events.append(FinishEvent(finish_reason=turn.finish_reason or "stop"))  # type: ignore[arg-type]
    return events
