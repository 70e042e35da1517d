"""The body bounds both chat-host bindings apply (bindloop.hosts.chat.bodies): a body is kept
whole while it stays within the bound and refused (413) the moment it passes it, whatever its
chunking; a declared length over the bound is refused before any chunk."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.hosts.chat.bodies import BodyBound, BodyRefused


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
