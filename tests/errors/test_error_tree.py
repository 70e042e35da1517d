"""The exception tree: one predicate for prompt-too-long, and every class under a documented branch."""

from __future__ import annotations

from hypothesis import given, strategies as st

from bindloop.errors import BindloopError, PromptTooLongError, ProviderError, is_prompt_too_long


def _chain(depth: int, leaf: BaseException) -> BaseException:
    exc = leaf
    for k in range(depth):
        outer = ProviderError(f"wrapper {k}")
        outer.__cause__ = exc
        exc = outer
    return exc


@given(st.integers(min_value=0, max_value=20))
def test_prompt_too_long_is_found_at_any_depth_of_the_cause_chain(depth: int) -> None:
    assert is_prompt_too_long(_chain(depth, PromptTooLongError("too long")))
    assert not is_prompt_too_long(_chain(depth, ProviderError("503")))


def test_the_implicit_context_is_not_a_cause() -> None:
    # `raise X` inside `except PromptTooLongError` sets __context__ only: a different failure.
    try:
        try:
            raise PromptTooLongError("too long")
        except PromptTooLongError:
            raise ProviderError("then the connection dropped")  # noqa: B904
    except ProviderError as exc:
        assert exc.__context__ is not None
        assert not is_prompt_too_long(exc)


def test_a_cause_cycle_terminates() -> None:
    a, b = BindloopError("a"), BindloopError("b")
    a.__cause__, b.__cause__ = b, a
    assert not is_prompt_too_long(a)
