from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import (
    AuxiliarySpend,
    RunStats,
    TurnUsage,
    accumulate_auxiliary_spend,
    accumulate_run,
    accumulate_tool_call,
    accumulate_turn,
    empty_run_stats,
)
from bindloop.testing.strategies import usages

_ms = st.integers(0, 10_000).map(float)
_names = st.sampled_from(["add", "search", "read"])


@st.composite
def stats(draw: st.DrawFn) -> RunStats:
    s = empty_run_stats()
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.integers(0, 2))
        if op == 0:
            s = accumulate_turn(s, draw(usages()), cost=draw(st.integers(0, 99)), model_ms=draw(_ms))
        elif op == 1:
            s = accumulate_tool_call(s, draw(_names), draw(_ms))
        else:
            s = accumulate_auxiliary_spend(s, AuxiliarySpend(usage=draw(usages()), cost=3,
                                                             model_ms=draw(_ms)))
    return s


def _norm(s: RunStats) -> RunStats:
    return accumulate_run(empty_run_stats(), s)  # sorts the per-tool breakdown


@given(stats(), stats(), stats())
def test_accumulate_run_is_associative_with_identity(a: RunStats, b: RunStats, c: RunStats) -> None:
    assert accumulate_run(accumulate_run(a, b), c) == accumulate_run(a, accumulate_run(b, c))
    assert accumulate_run(a, empty_run_stats()) == _norm(a)
    assert accumulate_run(empty_run_stats(), a) == _norm(a)


def test_folds_add_exactly() -> None:
    s = accumulate_turn(empty_run_stats(), TurnUsage(input_tokens=10, output_tokens=5,
                                                     cached_input_tokens=4), cost=7, model_ms=12.0)
    s = accumulate_tool_call(s, "add", 3.0)
    s = accumulate_tool_call(s, "add", 2.0)
    s = accumulate_auxiliary_spend(s, AuxiliarySpend(usage=TurnUsage(input_tokens=100), cost=1,
                                                     model_ms=5.0))
    assert (s.turns, s.tool_calls, s.input_tokens, s.output_tokens, s.cached_input_tokens) == (
        1, 2, 110, 5, 4)
    assert (s.cost, s.model_ms, s.tool_ms) == (8, 17.0, 5.0)
    assert s.tools["add"].calls == 2 and s.tools["add"].ms == 5.0


def test_auxiliary_spend_is_not_a_turn() -> None:
    s = accumulate_auxiliary_spend(empty_run_stats(), AuxiliarySpend(cost=5))
    assert s.turns == 0 and s.cost == 5
