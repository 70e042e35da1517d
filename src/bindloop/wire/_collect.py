"""Folding a wire's events into a turn, keeping what :func:`~bindloop.completion.collect_turn` has
no field for: the id of an OpenAI Responses reasoning item, which the next request must echo."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from ..completion import ExtraEvent, ReasoningEvent, StreamEvent, TurnCollector
from ..contracts import ModelTurnResult, TurnUsage

__all__ = ("REASONING_ID_KEY", "WireTurnCollector", "collect_wire_turn")

REASONING_ID_KEY = "reasoning_item_id"
"""Key of the :class:`~bindloop.completion.ExtraEvent` an adapter emits to name a reasoning block's
provider id: ``{"reasoning_item_id": {"index": <block index>, "id": "<id>"}}``."""


class WireTurnCollector:
    """A :class:`~bindloop.completion.TurnCollector` that also attaches reasoning-item ids."""

    __slots__ = ("_ids", "_inner", "_nonempty")

    def __init__(self, *, price: Callable[[TurnUsage], int] | None = None) -> None:
        self._inner = TurnCollector(price=price)
        self._ids: dict[int, str] = {}
        self._nonempty: set[int] = set()

    def observe(self, event: StreamEvent) -> None:
        if isinstance(event, ReasoningEvent):
            # Mirrors which blocks TurnCollector keeps, so ids can be matched to parts afterwards.
            if (event.content or event.signature or event.data or event.encrypted_content
                    or event.redacted):
                self._nonempty.add(event.index)
        elif isinstance(event, ExtraEvent):
            tag = event.extra.get(REASONING_ID_KEY)
            if isinstance(tag, dict) and isinstance(tag.get("index"), int) \
                    and isinstance(tag.get("id"), str):
                self._ids[tag["index"]] = tag["id"]
        self._inner.observe(event)

    def result(self) -> ModelTurnResult:
        turn = self._inner.result()
        if not self._ids or not turn.reasoning:
            return turn
        order = sorted(self._nonempty)
        parts = tuple(
            msgspec.structs.replace(part, id=self._ids[index]) if index in self._ids else part
            for index, part in zip(order, turn.reasoning)
        )
        return msgspec.structs.replace(turn, reasoning=parts)


def collect_wire_turn(events: Iterable[StreamEvent], *,
                      price: Callable[[TurnUsage], int] | None = None) -> ModelTurnResult:
    """:func:`~bindloop.completion.collect_turn` plus reasoning-item ids (see
    :data:`REASONING_ID_KEY`). Raises as :meth:`~bindloop.completion.TurnCollector.observe` does."""
    collector = WireTurnCollector(price=price)
    for event in events:
        collector.observe(event)
    return collector.result()
