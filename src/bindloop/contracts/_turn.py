"""One model turn, its spend, the run's stop reason, and the run-statistics folds.

Money is an integer in a unit the host chooses (cents, micro-dollars, credits): floats drift when
summed and a bill must not. Times are milliseconds as read from the injected clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, TypeAlias

import msgspec

from ..errors import UsageError

from ._messages import (
    AssistantMessage,
    Content,
    ContentPart,
    Message,
    ProviderItemPart,
    ReasoningPart,
    TextPart,
    ToolCall,
)

__all__ = (
    "STOP_REASONS",
    "AuxiliarySpend",
    "CompactionApplied",
    "ModelTurnResult",
    "RunStats",
    "StopReason",
    "ToolTime",
    "TurnTimings",
    "TurnUsage",
    "UsageIteration",
    "accumulate_auxiliary_spend",
    "accumulate_run",
    "accumulate_tool_call",
    "accumulate_turn",
    "add_usage",
    "empty_run_stats",
    "price_by_model",
)

StopReason: TypeAlias = Literal[
    "done", "waiting_for_reply", "resuming_later", "iteration_limit", "aborted", "deadline"
]
"""Why a run ended.

``deadline`` is never returned by the loop: the wall-clock port raises
:class:`~bindloop.errors.RunTimeoutError`, and a host that classifies that exception maps it here.
A fired signal returns ``aborted``: once a deadline and a cancellation share one signal the loop cannot
tell which fired.
"""

STOP_REASONS: tuple[StopReason, ...] = (
    "done", "waiting_for_reply", "resuming_later", "iteration_limit", "aborted", "deadline",
)


class UsageIteration(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One sampling pass of a single model call that the provider itemises (Anthropic's
    server-side compaction summarises the conversation in a pass of its own before the answer).
    ``kind`` is the provider's name for the pass (``"compaction"``, ``"message"``,
    ``"advisor_message"``); the token fields mean what they mean on :class:`TurnUsage`.

    ``model`` is set only on a pass that **another model** ran (Anthropic's advisor tool, a
    server-side fallback model): its tokens are billed at that model's rate, so they are kept
    here and left out of the call's totals (price them with :func:`price_by_model`). ``None``
    is the call's own model."""

    kind: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None

    def as_usage(self) -> TurnUsage:
        """This pass alone, as the usage of a call (what a price function reads)."""
        return TurnUsage(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                         cached_input_tokens=self.cached_input_tokens,
                         cache_write_tokens=self.cache_write_tokens)


# Untracked by the cyclic collector (``gc=False``): numbers only, held by every turn.
class TurnUsage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Tokens one model call consumed, as the provider bills them.

    The details are parts of the two totals, never additions to them: ``cached_input_tokens``
    (cache reads) and ``cache_write_tokens`` (input written to a prompt cache, which Anthropic
    bills at a premium) are parts of ``input_tokens``; ``reasoning_tokens`` (thinking the model
    did not show) is a part of ``output_tokens``. A provider that does not report a detail leaves it
    0. ``iterations`` keeps the split of a call the provider ran in several passes; the totals are
    then the sum of the passes of the call's own model (``model`` ``None``). A pass another model
    ran (``UsageIteration.model`` set) is in ``iterations`` only: a price of the call's model
    applied to the totals bills the call's model's tokens, and :func:`price_by_model` adds the
    other models' passes at their own rates."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    iterations: tuple[UsageIteration, ...] = ()


_NO_TOKENS = TurnUsage()

def _passes(usage: TurnUsage) -> tuple[UsageIteration, ...]:
    if usage.iterations or usage == _NO_TOKENS:
        return usage.iterations
    return (UsageIteration(kind="message", input_tokens=usage.input_tokens,
                           output_tokens=usage.output_tokens,
                           cached_input_tokens=usage.cached_input_tokens,
                           cache_write_tokens=usage.cache_write_tokens),)


def price_by_model(own: Callable[[TurnUsage], int],
                   others: Mapping[str, Callable[[TurnUsage], int]] | None = None, *,
                   default: Callable[[TurnUsage], int] | None = None,
                   ) -> Callable[[TurnUsage], int]:
    """A price for ``ModelAdapter(price=...)`` that bills each model at its own rate: ``own``
    prices the call's totals (its own model's passes), and every pass another model ran
    (:attr:`UsageIteration.model`: an advisor, a fallback model) is priced by ``others[model]``
    on that pass alone (:meth:`UsageIteration.as_usage`). A model ``others`` does not name is
    priced by ``default``; without one it raises :class:`~bindloop.errors.UsageError` naming the
    model, rather than billing its tokens at a wrong rate."""
    table = dict(others or {})

    def price(usage: TurnUsage) -> int:
        total = own(usage)
        for step in usage.iterations:
            if step.model is None:
                continue
            rate = table.get(step.model, default)
            if rate is None:
                raise UsageError(
                    f"usage holds a {step.kind!r} pass of model {step.model!r}, which "
                    "price_by_model has no price for (pass it in `others`, or a `default`)")
            total += rate(step.as_usage())
        return total

    return price


def add_usage(a: TurnUsage, b: TurnUsage) -> TurnUsage:
    """The usage of two model calls billed together (a call and its retry): every count and
    detail summed. ``iterations`` stays empty when neither call was itemised; otherwise it lists
    both calls' passes in order, an unitemised call as one ``"message"`` pass, so the totals stay
    the sum of the passes."""
    iterations = (*_passes(a), *_passes(b)) if a.iterations or b.iterations else ()
    return TurnUsage(input_tokens=a.input_tokens + b.input_tokens,
                     output_tokens=a.output_tokens + b.output_tokens,
                     cached_input_tokens=a.cached_input_tokens + b.cached_input_tokens,
                     reasoning_tokens=a.reasoning_tokens + b.reasoning_tokens,
                     cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
                     iterations=iterations)


class TurnTimings(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where one turn's wall time went, in milliseconds of the injected clock."""

    model_ms: float = 0.0
    tool_ms: float = 0.0


# Untracked by the cyclic collector (``gc=False``), as the messages are: text, tool calls, parts and
# numbers cannot form a cycle, and a journaled run (a snapshot, a trace) keeps every turn alive.
class ModelTurnResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What a model returns for one completion (``Model.complete``).

    ``accept_message=False`` keeps a tolerated empty completion out of the transcript while its spend
    is still folded; the loop refuses the discard for a turn that requested tools.
    ``provider_items`` are the wire's own output items the turn carries opaquely (see
    :class:`~bindloop.contracts.ProviderItemPart`); they are never dispatched as tool calls.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: tuple[ReasoningPart, ...] = ()
    usage: TurnUsage = TurnUsage()
    cost: int = 0
    finish_reason: str | None = None
    accept_message: bool = True
    provider_items: tuple[ProviderItemPart, ...] = ()

    def to_message(self) -> AssistantMessage:
        """The assistant message this turn appends: reasoning parts, then provider items, ahead of
        the text when present."""
        content: Content | None
        if self.reasoning or self.provider_items:
            parts: list[ContentPart] = [*self.reasoning, *self.provider_items]
            if self.text:
                parts.append(TextPart(text=self.text))
            content = tuple(parts)
        else:
            content = self.text if self.text else None
        return AssistantMessage(content=content, tool_calls=self.tool_calls)


class AuxiliarySpend(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Spend that is not a turn (a compaction summary, a classifier call): tokens, cost, model time."""

    usage: TurnUsage = TurnUsage()
    cost: int = 0
    model_ms: float = 0.0


class CompactionApplied(msgspec.Struct, frozen=True, kw_only=True):
    """A compaction's outcome: the transcript that replaces ``state.messages`` and what producing it
    cost. It contributes tokens, cost and model time to the stats, but never a turn."""

    messages: tuple[Message, ...]
    usage: TurnUsage = TurnUsage()
    cost: int = 0


# Untracked by the cyclic collector (``gc=False``; two numbers), as RunStats below.
class ToolTime(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Per-tool breakdown: how many calls of this tool ran and the milliseconds they took."""

    calls: int = 0
    ms: float = 0.0


def _tool_times() -> dict[str, ToolTime]:
    # Not ``dict`` itself: msgspec omits an empty dict whose factory is ``dict``.
    return {}


# Untracked by the cyclic collector (``gc=False``): counts and per-tool figures cannot form a cycle,
# and every checkpoint a run keeps across its awaits holds one.
class RunStats(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What a run (or one invocation of it) did. Immutable; the ``accumulate_*`` folds return new values.

    ``turns`` counts model turns (never compactions), so it stays comparable with ``max_iterations``;
    ``tool_calls`` counts calls that ran (not ones an aborted batch prevented). ``tools`` is shared
    between successive folds: treat it as read-only. ``reasoning_tokens`` and
    ``cache_write_tokens`` sum the turns' :class:`TurnUsage` details (parts of ``output_tokens``
    and ``input_tokens``, as there).
    """

    # The fields of the first release are always encoded (a factory default is never omitted),
    # so reports and checkpoints keep their bytes; the usage details that came later are omitted
    # while zero, so a run that never saw them encodes as it always did.
    turns: int = msgspec.field(default_factory=int)
    tool_calls: int = msgspec.field(default_factory=int)
    input_tokens: int = msgspec.field(default_factory=int)
    output_tokens: int = msgspec.field(default_factory=int)
    cached_input_tokens: int = msgspec.field(default_factory=int)
    cost: int = msgspec.field(default_factory=int)
    model_ms: float = msgspec.field(default_factory=float)
    tool_ms: float = msgspec.field(default_factory=float)
    tools: dict[str, ToolTime] = msgspec.field(default_factory=_tool_times)
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0



def empty_run_stats() -> RunStats:
    """Statistics of a run that has done nothing."""
    return RunStats()


def accumulate_turn(stats: RunStats, usage: TurnUsage, *, cost: int = 0,
                    model_ms: float = 0.0) -> RunStats:
    """Fold one model turn: a turn, its tokens, its cost and its model time."""
    return RunStats(
        turns=stats.turns + 1,
        tool_calls=stats.tool_calls,
        input_tokens=stats.input_tokens + usage.input_tokens,
        output_tokens=stats.output_tokens + usage.output_tokens,
        cached_input_tokens=stats.cached_input_tokens + usage.cached_input_tokens,
        cost=stats.cost + cost,
        model_ms=stats.model_ms + model_ms,
        tool_ms=stats.tool_ms,
        tools=stats.tools,
        reasoning_tokens=stats.reasoning_tokens + usage.reasoning_tokens,
        cache_write_tokens=stats.cache_write_tokens + usage.cache_write_tokens,
    )


def accumulate_auxiliary_spend(stats: RunStats, spend: AuxiliarySpend) -> RunStats:
    """Fold spend that is not a turn: tokens, cost and model time, but ``turns`` is unchanged."""
    usage = spend.usage
    return RunStats(
        turns=stats.turns,
        tool_calls=stats.tool_calls,
        input_tokens=stats.input_tokens + usage.input_tokens,
        output_tokens=stats.output_tokens + usage.output_tokens,
        cached_input_tokens=stats.cached_input_tokens + usage.cached_input_tokens,
        cost=stats.cost + spend.cost,
        model_ms=stats.model_ms + spend.model_ms,
        tool_ms=stats.tool_ms,
        tools=stats.tools,
        reasoning_tokens=stats.reasoning_tokens + usage.reasoning_tokens,
        cache_write_tokens=stats.cache_write_tokens + usage.cache_write_tokens,
    )


def accumulate_tool_call(stats: RunStats, name: str, ms: float) -> RunStats:
    """Fold one tool call that ran: a call, its time in total and in the per-tool breakdown."""
    tools = dict(stats.tools)
    prev = tools.get(name)
    tools[name] = (ToolTime(calls=1, ms=ms) if prev is None
                   else ToolTime(calls=prev.calls + 1, ms=prev.ms + ms))
    return RunStats(
        turns=stats.turns,
        tool_calls=stats.tool_calls + 1,
        input_tokens=stats.input_tokens,
        output_tokens=stats.output_tokens,
        cached_input_tokens=stats.cached_input_tokens,
        cost=stats.cost,
        model_ms=stats.model_ms,
        tool_ms=stats.tool_ms + ms,
        tools=tools,
        reasoning_tokens=stats.reasoning_tokens,
        cache_write_tokens=stats.cache_write_tokens,
    )


def accumulate_run(a: RunStats, b: RunStats) -> RunStats:
    """The statistics of two runs (or legs of one run) taken together. Associative on the integer
    fields, with :func:`empty_run_stats` as identity; float times are summed in order (fractional
    milliseconds may differ in the last bit between groupings)."""
    tools = dict(a.tools)
    for name, t in b.tools.items():
        prev = tools.get(name)
        tools[name] = t if prev is None else ToolTime(calls=prev.calls + t.calls, ms=prev.ms + t.ms)
    return RunStats(
        turns=a.turns + b.turns,
        tool_calls=a.tool_calls + b.tool_calls,
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cached_input_tokens=a.cached_input_tokens + b.cached_input_tokens,
        cost=a.cost + b.cost,
        model_ms=a.model_ms + b.model_ms,
        tool_ms=a.tool_ms + b.tool_ms,
        tools=dict(sorted(tools.items())),
        reasoning_tokens=a.reasoning_tokens + b.reasoning_tokens,
        cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
    )
