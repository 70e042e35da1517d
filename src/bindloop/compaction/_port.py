"""Wiring compaction into the tool loop's ``compact`` port, and into a marker-carrying session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from ..contracts import CompactionApplied, Message, SystemMessage
from ..model import Model
from ..signal import AbortSignal
from ._errors import CompactInvalidInputError
from ._markers import CompactMarker, SessionItem, WireView, render_summary, summary_to_turn
from ._partition import TailScope
from ._policy import (
    DEFAULT_AUTO_COMPACT_THRESHOLD,
    DEFAULT_MIN_GROWTH_FRACTION,
    AutoCompactDecision,
    AutoCompactInput,
    should_auto_compact,
)
from ._runner import CompactResult, compact_conversation

__all__ = ("DEFAULT_KEEP_TURNS", "PromptSizeSource", "append_compaction", "compaction_port")


class PromptSizeSource(Protocol):
    """Where the port reads the latest prompt size: the loop's ``ToolLoopState`` satisfies it."""

    @property
    def last_prompt_tokens(self) -> int: ...

    @property
    def has_fresh_token_count(self) -> bool: ...

DEFAULT_KEEP_TURNS = 6


def append_compaction(items: Sequence[SessionItem], view: WireView, result: CompactResult, *,
                      id: str | None = None, model: str | None = None) -> list[SessionItem]:
    """Append the marker for ``result`` — a compaction of ``view.messages`` — to the session.

    Wire indices ``result.start:result.stop`` are mapped back to session positions through
    ``view.sources``; system messages in that range are not replaced (they are instructions, not
    conversation, and stay on the wire). Returns a new list; ``items`` is not modified.
    """
    positions = [view.sources[k] for k in range(result.start, result.stop)
                 if not isinstance(view.messages[k], SystemMessage)]
    marker = summary_to_turn(summary=result.summary, replaces=positions, id=id, model=model,
                             usage=result.usage)
    return [*items, marker]


def compaction_port(
    *,
    state: PromptSizeSource,
    model: Model,
    context_window: int | None,
    threshold: float = DEFAULT_AUTO_COMPACT_THRESHOLD,
    keep_turns: int = DEFAULT_KEEP_TURNS,
    min_growth_fraction: float | None = DEFAULT_MIN_GROWTH_FRACTION,
    enabled: bool = True,
    signal: AbortSignal | None = None,
    max_retries: int = 3,
    on_decision: Callable[[AutoCompactDecision], None] | None = None,
) -> Callable[[list[Message]], Awaitable[CompactionApplied | None]]:
    """A ``LoopHooks.compact`` hook (``LoopHooks(compact=...)``) that auto-compacts with :func:`compact_conversation`.

    Before each model call it asks :func:`should_auto_compact` with the latest fresh prompt size from
    ``state`` (the run's live state). When it fires, everything older than the last ``keep_turns``
    turns (see :class:`~bindloop.compaction.TailScope`) is summarized and the transcript becomes: the head a prompt-too-long retry left
    verbatim, the summarized slice's system messages, the summary as user text, the kept tail. The
    loop folds the summary call's usage and cost into the run's spend but not its turn count. The first
    prompt size measured after a compaction becomes the hysteresis baseline. A transcript too short to
    compact is left alone. Each port keeps its own baseline: make one per run.
    """
    baseline: int | None = None
    awaiting_baseline = False
    compacting = False

    async def compact(messages: list[Message]) -> CompactionApplied | None:
        nonlocal baseline, awaiting_baseline, compacting
        last = state.last_prompt_tokens if state.has_fresh_token_count else None
        if awaiting_baseline and last is not None:
            baseline, awaiting_baseline = last, False
        decision = should_auto_compact(AutoCompactInput(
            enabled=enabled, context_window=context_window, last_input_tokens=last,
            threshold=threshold, baseline_input_tokens=baseline,
            min_growth_fraction=min_growth_fraction, compacting=compacting))
        if on_decision is not None:
            on_decision(decision)
        if not decision.compact:
            return None
        compacting = True
        try:
            result = await compact_conversation(model=model, messages=messages,
                                                scope=TailScope(keep_turns=keep_turns),
                                                signal=signal, max_retries=max_retries)
        except CompactInvalidInputError:
            return None
        finally:
            compacting = False
        kept_system = [m for m in messages[result.start:result.stop] if isinstance(m, SystemMessage)]
        summary = render_summary(CompactMarker(summary=result.summary))
        new = (*messages[:result.start], *kept_system, summary, *messages[result.stop:])
        baseline, awaiting_baseline = None, True
        return CompactionApplied(messages=new, usage=result.usage, cost=result.cost)

    return compact
