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


def _public_exception_classes() -> list[type[BaseException]]:
    import importlib
    import inspect
    import pkgutil

    import bindloop

    found: dict[int, type[BaseException]] = {}
    for info in pkgutil.walk_packages(bindloop.__path__, "bindloop."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or parts[1] in ("hosts", "testing"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                found[id(obj)] = obj
    return list(found.values())


def test_every_public_exception_is_under_a_documented_branch() -> None:
    from bindloop.compaction import CompactError
    from bindloop.errors import RunStoppedError, ToolFailure, UsageError

    branches = (UsageError, ProviderError, RunStoppedError, ToolFailure)
    # Family roots that group errors of several branches; each concrete member is checked.
    family_roots = {BindloopError, *branches, CompactError}
    classes = _public_exception_classes()
    assert len(classes) > 30
    for cls in classes:
        assert issubclass(cls, BindloopError), f"{cls.__qualname__} is outside the tree"
        if cls in family_roots:
            continue
        assert issubclass(cls, branches), f"{cls.__module__}.{cls.__qualname__} is under no branch"


def test_the_loop_reported_errors_sit_where_a_host_expects_them() -> None:
    from bindloop.errors import (
        AbortedToolCallError,
        DiscardedTurnWithToolCallsError,
        InputBlockedBySuspendError,
        MissingActivationPortError,
        RunCancelledError,
        RunStoppedError,
        RunTimeoutError,
        UsageError,
    )

    for cls in (MissingActivationPortError, DiscardedTurnWithToolCallsError,
                InputBlockedBySuspendError):
        assert issubclass(cls, UsageError)
    for cls in (RunTimeoutError, RunCancelledError, AbortedToolCallError):
        assert issubclass(cls, RunStoppedError) and not issubclass(cls, (UsageError, ProviderError))
