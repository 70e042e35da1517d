"""The run's accounting: this invocation's part, folded from zero, and the live totals beside it.

The machine tells the ledger what happened (a turn, a tool call that ran, auxiliary spend) and the
ledger folds it with the ``accumulate_*`` folds of :mod:`bindloop.contracts` twice: into ``part``,
which starts at ``RunStats()``, and into ``state.totals``, which starts at the seed. So with
nothing else folding into ``state.totals``, it is ``seed + part``; whatever a host folds there
itself stays there and never enters ``part``. A run from a plain zero seed (the common case) folds
once: part and totals are one value until somebody else replaces ``state.totals``.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

from ..contracts import (
    AuxiliarySpend,
    RunStats,
    TurnUsage,
    accumulate_auxiliary_spend,
    accumulate_tool_call,
    accumulate_turn,
)
from ._types import ToolLoopState

__all__ = ("RunLedger",)

_ZERO: Final = RunStats()


class RunLedger:
    """This invocation's :class:`~bindloop.contracts.RunStats` (``part``), kept beside
    ``state.totals``."""

    __slots__ = ("_part", "_state")

    def __init__(self, state: ToolLoopState) -> None:
        self._state = state
        # Shared with the totals only when the seed is exactly RunStats(): a seed of -0.0, 0 (int)
        # or False would otherwise come back in the part, where a fold from zero gives 0.0 and 0.
        self._part = state.totals if _is_plain_zero(state.totals) else RunStats()

    @property
    def part(self) -> RunStats:
        """This invocation's part so far, with a ``tools`` dict of its own."""
        part = self._part
        return msgspec.structs.replace(part, tools=dict(part.tools))

    def turn(self, usage: TurnUsage, cost: int, ms: float) -> None:
        """A model turn: one turn, its tokens and cost, ``ms`` of model time."""
        st, part = self._state, self._part
        if st.totals is part:
            st.totals = self._part = accumulate_turn(part, usage, cost=cost, model_ms=ms)
        else:
            self._part = accumulate_turn(part, usage, cost=cost, model_ms=ms)
            st.totals = accumulate_turn(st.totals, usage, cost=cost, model_ms=ms)

    def tool_call(self, name: str, ms: float) -> None:
        """A tool call that ran for ``ms``."""
        st, part = self._state, self._part
        if st.totals is part:
            st.totals = self._part = accumulate_tool_call(part, name, ms)
        else:
            self._part = accumulate_tool_call(part, name, ms)
            st.totals = accumulate_tool_call(st.totals, name, ms)

    def auxiliary(self, spend: AuxiliarySpend) -> None:
        """Spend that is not a turn (a compaction's model call)."""
        st, part = self._state, self._part
        if st.totals is part:
            st.totals = self._part = accumulate_auxiliary_spend(part, spend)
        else:
            self._part = accumulate_auxiliary_spend(part, spend)
            st.totals = accumulate_auxiliary_spend(st.totals, spend)


def _is_plain_zero(stats: RunStats) -> bool:
    # Exactly RunStats(), not merely equal to it.
    return (stats == _ZERO and not stats.tools
            and type(stats.turns) is int and type(stats.tool_calls) is int
            and type(stats.input_tokens) is int and type(stats.output_tokens) is int
            and type(stats.cached_input_tokens) is int and type(stats.cost) is int
            and type(stats.model_ms) is float and type(stats.tool_ms) is float
            and math.copysign(1.0, stats.model_ms) > 0 and math.copysign(1.0, stats.tool_ms) > 0)
