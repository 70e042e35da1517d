"""The normalized stream-event union every wire adapter produces and everything downstream consumes.

One shape for every provider: an adapter translates its wire chunks into these events and nothing
after it knows which provider streamed them. The events are frozen msgspec Structs tagged on
``type``, so they are immutable values that encode to plain JSON (a recorded fixture, a conformance
scenario) and decode back with ``msgspec.json.decode(data, type=list[StreamEvent])``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from ..contracts import ProviderItemPart, ReasoningPart, TurnUsage

__all__ = (
    "FINISH_REASONS",
    "ErrorEvent",
    "ExtraEvent",
    "FinishEvent",
    "FinishReason",
    "ProviderItemEvent",
    "ReasoningEvent",
    "StreamEvent",
    "TextEvent",
    "ToolCallChunk",
    "ToolCallEvent",
    "UsageEvent",
)

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter", "error", "unknown"]
"""Why the provider ended the completion. An adapter maps a wire value it does not recognise to
``"unknown"`` rather than inventing a new one, so a consumer can switch on this set exhaustively."""

FINISH_REASONS: tuple[FinishReason, ...] = (
    "stop", "length", "tool_calls", "content_filter", "error", "unknown",
)


class ToolCallChunk(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One streamed fragment of a tool call, OpenAI-shaped: merged with the other fragments that
    carry the same ``index``.

    ``index`` is the provider's slot number and the only merge key. ``id`` may arrive on any fragment
    (not only the first); ``name`` and ``arguments`` are fragments to concatenate, never values to
    assign. ``extra`` carries provider metadata the accumulator does not interpret.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    extra: dict[str, Any] | None = None


class TextEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="text"):
    """A fragment of the answer text."""

    content: str


class ReasoningEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="reasoning",
                     omit_defaults=True):
    """A fragment of a reasoning (thinking) block, carried as the transcript's own
    :class:`~bindloop.contracts.ReasoningPart`, so a block's provenance has one shape from the
    wire to the stored message.

    ``index`` numbers the block within the turn (a provider may stream several). The ``part.text``
    of events sharing an index is concatenated; the provenance fields (``signature``, ``data``,
    ``encrypted_content``, ``provider``, ``model``, ``id``) arrive whole, so the last non-``None``
    value per block wins; ``redacted`` is sticky once any fragment says so. ``id`` is the
    provider's handle for the block (an OpenAI Responses reasoning item id), which the next
    request must send back to continue the reasoning.
    """

    part: ReasoningPart
    index: int = 0

    @property
    def content(self) -> str:
        """This fragment's text (``part.text``)."""
        return self.part.text


class ToolCallEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="tool_call"):
    """A tool-call fragment; see :class:`ToolCallChunk`."""

    tool_call: ToolCallChunk


class UsageEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="usage",
                 omit_defaults=True):
    """Token usage so far. May appear several times; each is cumulative, never an increment.

    How snapshots combine is the wire's to say. By default each one may carry only some fields
    (Anthropic reports input tokens at the start and output tokens at the end), so the fold takes
    the field-wise maximum. ``snapshot=True`` marks a complete count that replaces everything
    before it (Gemini's ``usageMetadata``, whose prompt count can go *down* in the final chunk):
    there the last one wins."""

    usage: TurnUsage
    snapshot: bool = False


class FinishEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="finish",
                  omit_defaults=True):
    """The provider ended the completion. Usually last, but a usage snapshot may still follow
    (OpenAI sends its usage chunk after the finish chunk), so it does not end the fold."""

    finish_reason: FinishReason
    usage: TurnUsage | None = None


class ProviderItemEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                        tag="provider_item", omit_defaults=True):
    """A whole output item of the wire that the canonical turn carries opaquely (a
    :class:`~bindloop.contracts.ProviderItemPart`): folded into
    ``ModelTurnResult.provider_items`` in ``index`` order, never a tool call."""

    part: ProviderItemPart
    index: int = 0


class ExtraEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="extra"):
    """Adapter or model metadata with no place in the canonical turn (request ids, safety ratings)."""

    extra: dict[str, Any]


class ErrorEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="error"):
    """The stream failed. ``error`` is normally the exception the adapter classified; anything else
    is wrapped by the consumer. Folding stops here: a turn that errored has no result."""

    error: Any


StreamEvent: TypeAlias = (
    TextEvent | ReasoningEvent | ToolCallEvent | UsageEvent | FinishEvent | ExtraEvent | ErrorEvent
    | ProviderItemEvent
)
