"""Folding a normalized event stream into the loop's :class:`~bindloop.contracts.ModelTurnResult`."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable

from ..contracts import ModelTurnResult, ProviderItemPart, ReasoningPart, TurnUsage
from ..errors import PortContractError
from ._accumulator import ToolCallAccumulator, finished_call, plain_chunk
from ._events import (
    ErrorEvent,
    ExtraEvent,
    FinishEvent,
    FinishReason,
    ProviderItemEvent,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallEvent,
    UsageEvent,
)
from ._errors import ModelStreamError

__all__ = ("TurnCollector", "collect_turn", "collect_turn_async", "fold_usage")


_PROVENANCE = ("signature", "data", "encrypted_content", "provider", "model", "id")


class _ReasoningBlock:
    __slots__ = ("data", "encrypted_content", "id", "model", "provider", "redacted", "signature",
                 "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.signature: str | None = None
        self.redacted = False
        self.data: str | None = None
        self.encrypted_content: str | None = None
        self.provider: str | None = None
        self.model: str | None = None
        self.id: str | None = None

    def merge(self, part: ReasoningPart) -> None:
        if part.text:
            self.text.append(part.text)
        self.redacted = self.redacted or part.redacted
        # Provenance arrives whole (a signature is minted once per block): last one wins.
        for name in _PROVENANCE:
            value = getattr(part, name)
            if value is not None:
                setattr(self, name, value)

    def part(self) -> ReasoningPart | None:
        text = "".join(self.text)
        # An id alone is worth keeping: a stored Responses reasoning item without a summary is
        # continued by sending its id back. Provider and model alone describe nothing.
        if not (text or self.signature or self.data or self.encrypted_content or self.redacted
                or self.id):
            return None
        return ReasoningPart(text=text, provider=self.provider, model=self.model,
                             signature=self.signature, redacted=self.redacted, data=self.data,
                             encrypted_content=self.encrypted_content, id=self.id)


_NO_USAGE = TurnUsage()


def fold_usage(a: TurnUsage, b: TurnUsage) -> TurnUsage:
    """One turn's usage so far (``a``) with its next report ``b`` folded in, as
    :class:`TurnCollector` folds the ``UsageEvent`` reports of a turn that are not snapshots: they are
    cumulative and may each carry only some fields (input at the start, output at the end), so
    the field-wise maximum is their union and a repeated report changes nothing; ``b``'s
    ``iterations`` win when it has any."""
    if a is _NO_USAGE and min(b.input_tokens, b.output_tokens, b.cached_input_tokens) >= 0:
        return b  # the first report of a turn (the common case): nothing to merge
    return TurnUsage(
        input_tokens=max(a.input_tokens, b.input_tokens),
        output_tokens=max(a.output_tokens, b.output_tokens),
        cached_input_tokens=max(a.cached_input_tokens, b.cached_input_tokens),
        reasoning_tokens=max(a.reasoning_tokens, b.reasoning_tokens),
        cache_write_tokens=max(a.cache_write_tokens, b.cache_write_tokens),
        iterations=b.iterations or a.iterations,
    )


class TurnCollector:
    """An incremental :func:`collect_turn`: ``observe`` each event as it arrives (forwarding it
    elsewhere meanwhile), then read ``result()``.

    ``observe`` raises on an :class:`ErrorEvent` (the event's exception itself, or
    :class:`ModelStreamError`), on a tool-call delta that cannot be merged
    (:class:`ToolCallDeltaError`), and on a value that is not a stream event
    (:class:`~bindloop.errors.PortContractError`). Extra events are ignored: the canonical turn has no
    place for them. Provider items become ``provider_items``.
    """

    __slots__ = ("_finish_reason", "_first_call", "_items", "_mint_id", "_price", "_reasoning",
                 "_text", "_tool_calls", "_usage")

    def __init__(self, *, price: Callable[[TurnUsage], int] | None = None,
                 mint_id: Callable[[int], str] | None = None) -> None:
        # The reasoning blocks and the tool-call accumulator are made on their first event: most
        # turns have neither, and this runs once per model turn.
        self._text: list[str] = []
        self._reasoning: dict[int, _ReasoningBlock] | None = None
        self._tool_calls: ToolCallAccumulator | None = None
        # A turn's first tool-call chunk waits here: a call that arrives whole (one chunk, the
        # common case for many providers) needs no accumulator; a second chunk makes one.
        self._first_call: ToolCallChunk | None = None
        self._mint_id = mint_id
        self._usage = _NO_USAGE
        self._finish_reason: FinishReason | None = None
        self._price = price
        self._items: dict[int, ProviderItemPart] | None = None  # made on the first item

    def observe(self, event: StreamEvent) -> None:
        """Fold one event."""
        # The exact event types first, by one type lookup (this runs for every event of every
        # stream); a subclass, a rarer kind or a non-event takes the isinstance chain below.
        kind = type(event)
        if kind is TextEvent:
            if event.content:  # type: ignore[union-attr]
                self._text.append(event.content)  # type: ignore[union-attr]
            return
        if kind is ToolCallEvent:
            chunk = event.tool_call  # type: ignore[union-attr]
            if self._tool_calls is None and self._first_call is None and plain_chunk(chunk):
                self._first_call = chunk
            else:
                self._accumulator().observe(chunk)
            return
        if kind is UsageEvent:
            usage: TurnUsage = event.usage  # type: ignore[union-attr,assignment]
            if event.snapshot:  # type: ignore[union-attr]
                self._usage = usage
            elif self._usage is _NO_USAGE and type(usage) is TurnUsage and \
                    usage.input_tokens >= 0 and usage.output_tokens >= 0 and \
                    usage.cached_input_tokens >= 0:
                self._usage = usage  # the turn's first report (the common case): nothing to merge
            else:
                self._usage = fold_usage(self._usage, usage)
            return
        if kind is FinishEvent:
            self._finish_reason = event.finish_reason  # type: ignore[union-attr]
            final: TurnUsage | None = event.usage  # type: ignore[union-attr]
            if final is not None:
                self._usage = fold_usage(self._usage, final)
            return
        self._observe_any(event)

    def _observe_any(self, event: StreamEvent) -> None:
        # Ordered by frequency: text and tool-call deltas are nearly every event of a stream.
        if isinstance(event, TextEvent):
            if event.content:
                self._text.append(event.content)
        elif isinstance(event, ToolCallEvent):
            self._accumulator().observe(event.tool_call)
        elif isinstance(event, ReasoningEvent):
            blocks = self._reasoning
            if blocks is None:
                blocks = self._reasoning = {}
            block = blocks.get(event.index)
            if block is None:
                block = blocks[event.index] = _ReasoningBlock()
            block.merge(event.part)
        elif isinstance(event, UsageEvent):
            self._usage = event.usage if event.snapshot else fold_usage(self._usage, event.usage)
        elif isinstance(event, FinishEvent):
            self._finish_reason = event.finish_reason
            if event.usage is not None:
                self._usage = fold_usage(self._usage, event.usage)
        elif isinstance(event, ExtraEvent):
            pass
        elif isinstance(event, ProviderItemEvent):
            if self._items is None:
                self._items = {}
            self._items[event.index] = event.part  # an item arrives whole: the last one stands
        elif isinstance(event, ErrorEvent):
            if isinstance(event.error, Exception):
                raise event.error
            raise ModelStreamError(event.error)
        else:
            raise PortContractError(
                f"a model stream yielded {type(event).__name__}, which is not a stream event"
            )

    def _accumulator(self) -> ToolCallAccumulator:
        calls = self._tool_calls
        if calls is None:
            calls = self._tool_calls = ToolCallAccumulator(mint_id=self._mint_id)
            first = self._first_call
            if first is not None:
                self._first_call = None
                calls.observe(first)
        return calls

    def result(self) -> ModelTurnResult:
        """The turn so far: text (``None`` when empty), reasoning parts ordered by block index,
        tool calls ordered by provider index, usage, ``price(usage)`` as cost, finish reason.

        A reasoning block becomes a part (carrying its ``id`` and other provenance) when it has
        text, a signature, redacted data, encrypted content or an id; a block with nothing but
        ``provider``/``model`` is dropped."""
        blocks = self._reasoning
        reasoning = () if blocks is None else tuple(
            part for index in sorted(blocks) if (part := blocks[index].part()) is not None)
        texts = self._text
        calls = self._tool_calls
        first = self._first_call
        usage = self._usage
        items = self._items
        return ModelTurnResult(
            text=(texts[0] if len(texts) == 1 else "".join(texts)) if texts else None,
            tool_calls=calls.assembled() if calls is not None else () if first is None else (
                finished_call(first.index, first.id or None, first.name or "",
                              first.arguments or "", self._mint_id),),
            reasoning=reasoning,
            usage=usage,
            cost=self._price(usage) if self._price is not None else 0,
            finish_reason=self._finish_reason,
            provider_items=tuple(items[i] for i in sorted(items)) if items else (),
        )


def collect_turn(events: Iterable[StreamEvent], *, price: Callable[[TurnUsage], int] | None = None,
                 mint_id: Callable[[int], str] | None = None) -> ModelTurnResult:
    """Fold a whole stream into one :class:`~bindloop.contracts.ModelTurnResult`.

    ``price`` turns the final usage into the turn's integer cost (0 without it); ``mint_id`` is
    passed to the tool-call accumulator. Raises as :meth:`TurnCollector.observe` does.
    """
    collector = TurnCollector(price=price, mint_id=mint_id)
    for event in events:
        collector.observe(event)
    return collector.result()


async def collect_turn_async(
    events: AsyncIterable[StreamEvent], *, price: Callable[[TurnUsage], int] | None = None,
    mint_id: Callable[[int], str] | None = None,
) -> ModelTurnResult:
    """:func:`collect_turn` over an async stream (an adapter's ``stream()``)."""
    collector = TurnCollector(price=price, mint_id=mint_id)
    async for event in events:
        collector.observe(event)
    return collector.result()
