"""The body bounds both chat-host bindings apply (bindloop.hosts.chat.bodies): a body is kept
whole while it stays within the bound and refused (413) the moment it passes it, whatever its
chunking; a declared length over the bound is refused before any chunk; the deadlines of body
reads that start together are spread over the last quarter of the timeout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.hosts.chat.bodies import STAGGER, BodyBound, BodyRefused, staggered_timeout


@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(0, 200))
def test_a_body_is_kept_whole_or_refused_the_moment_it_passes_the_bound(
        chunks: list[bytes], max_bytes: int) -> None:
    bound = BodyBound(max_bytes=max_bytes, timeout_s=1)
    kept = 0
    for i, chunk in enumerate(chunks):
        if kept + len(chunk) > max_bytes:
            with pytest.raises(BodyRefused) as refused:
                bound.add(chunk)
            assert (refused.value.status, refused.value.code) == (413, "body_too_large")
            assert b"".join(chunks[:i]) == bound.body()  # nothing past the bound was kept
            return
        bound.add(chunk)
        kept += len(chunk)
    assert bound.body() == b"".join(chunks)


@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_a_declared_length_over_the_bound_is_refused_before_reading(length: int,
                                                                    max_bytes: int) -> None:
    bound = BodyBound(max_bytes=max_bytes, timeout_s=1)
    for declared in (str(length), str(length).encode()):
        if length > max_bytes:
            with pytest.raises(BodyRefused, match=f"over {max_bytes} bytes"):
                bound.declared(declared)
        else:
            bound.declared(declared)
    bound.declared(None)
    bound.declared("chunked")  # not a number: left to the streamed count


def test_the_refusals_name_their_status_and_code() -> None:
    bound = BodyBound(max_bytes=1, timeout_s=2.5)
    late, gone = bound.timed_out(), bound.gone()
    assert (late.status, late.code, str(late)) == (
        408, "body_timeout", "the request body took longer than 2.5 s")
    assert (gone.status, gone.code) == (400, "disconnected")
    with pytest.raises(ValueError):
        BodyRefused(500, "not a body refusal")
    with pytest.raises(ValueError):
        BodyBound(max_bytes=1, timeout_s=0)


@given(st.floats(0.01, 3600), st.integers(0, 2**40), st.integers(2, 600))
def test_consecutive_body_deadlines_spread_evenly_over_the_last_quarter(
        timeout_s: float, first: int, count: int) -> None:
    """Any run of consecutive reads (a crowd of stalled connections opened at once) gets
    deadlines within [(1 - STAGGER) * timeout_s, timeout_s] leaving no gap wider than 2/N of
    that range: they do not all run out in one instant."""
    deadlines = sorted(staggered_timeout(timeout_s, n) for n in range(first, first + count))
    low, span = timeout_s * (1 - STAGGER), timeout_s * STAGGER
    assert low - 1e-9 * timeout_s <= deadlines[0] and deadlines[-1] <= timeout_s
    edges = [low, *deadlines, timeout_s]
    widest = max(b - a for a, b in zip(edges, edges[1:]))
    assert widest <= span * 2 / count + 1e-9 * timeout_s


def test_the_first_read_gets_the_whole_timeout_and_bad_arguments_are_refused() -> None:
    assert staggered_timeout(15.0, 0) == 15.0
    assert staggered_timeout(15.0, 1) != staggered_timeout(15.0, 2)
    for timeout_s, n in ((0.0, 1), (-1.0, 1), (1.0, -1)):
        with pytest.raises(ValueError):
            staggered_timeout(timeout_s, n)
