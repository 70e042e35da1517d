"""``add_usage``: the usage of two calls billed together."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import TurnUsage, UsageIteration, add_usage

_n = st.integers(0, 10**5)
_passes = st.lists(st.builds(UsageIteration, kind=st.sampled_from(["compaction", "message"]),
                             input_tokens=_n, output_tokens=_n, cached_input_tokens=_n,
                             cache_write_tokens=_n), max_size=3)
_SPLIT = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens")


@st.composite
def _usage(draw: st.DrawFn) -> TurnUsage:
    """A call's usage: unitemised, or itemised with totals that are the sum of its passes."""
    passes = draw(_passes)
    if not passes:
        return TurnUsage(input_tokens=draw(_n), output_tokens=draw(_n),
                         cached_input_tokens=draw(_n), cache_write_tokens=draw(_n),
                         reasoning_tokens=draw(_n))
    return TurnUsage(reasoning_tokens=draw(_n), iterations=tuple(passes), **{
        f: sum(getattr(p, f) for p in passes) for f in _SPLIT})


@given(_usage(), _usage())
def test_add_usage_sums_every_count_and_keeps_the_split_summing_to_the_totals(
        a: TurnUsage, b: TurnUsage) -> None:
    total = add_usage(a, b)
    for field in (*_SPLIT, "reasoning_tokens"):
        assert getattr(total, field) == getattr(a, field) + getattr(b, field), field
    if a.iterations or b.iterations:
        for field in _SPLIT:
            assert sum(getattr(p, field) for p in total.iterations) == getattr(total, field)
        assert total.iterations[-len(b.iterations) or len(total.iterations):] == b.iterations
    else:
        assert total.iterations == ()


def test_add_usage_of_nothing_is_nothing() -> None:
    assert add_usage(TurnUsage(), TurnUsage()) == TurnUsage()
