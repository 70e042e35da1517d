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
        if any(p.startswith("_") for p in parts) or parts[1] == "hosts":
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                found[id(obj)] = obj
    return list(found.values())


def render_error_tree() -> str:
    """The real tree: each public exception under its first bindloop base, with its public home
    when that is not ``bindloop.errors`` and any further bindloop bases it also derives from."""
    classes = _public_exception_classes()
    children: dict[type, list[type]] = {}
    for cls in classes:
        if cls is BindloopError:
            continue
        parent = next(b for b in cls.__bases__ if issubclass(b, BindloopError))
        children.setdefault(parent, []).append(cls)
    lines: list[str] = []

    def draw(cls: type, depth: int) -> None:
        label = cls.__name__
        if cls.__module__ != "bindloop.errors":
            label += f" ({cls.__module__})"
        also = [b.__name__ for b in cls.__bases__ if issubclass(b, BindloopError)][1:]
        if also:
            label += f", also {', '.join(also)}"
        lines.append("    " + "  " * depth + label)
        for child in sorted(children.get(cls, []), key=lambda c: c.__name__):
            draw(child, depth + 1)

    draw(BindloopError, 0)
    return "\n".join(lines)


def test_the_docstring_draws_the_real_tree() -> None:
    import bindloop.errors

    doc = bindloop.errors.__doc__ or ""
    drawn = doc.split(".. code-block:: text\n\n", 1)[1].split("\n\n", 1)[0]
    assert drawn == render_error_tree(), "redraw errors.py's tree:\n" + render_error_tree()


def test_every_public_exception_is_under_a_documented_branch() -> None:
    from bindloop.agent.errors import AgentError
    from bindloop.compaction import CompactError
    from bindloop.errors import RunStoppedError, ToolFailure, UsageError

    branches = (UsageError, ProviderError, RunStoppedError, ToolFailure, AgentError)
    # Family roots that group errors of several branches; each concrete member is checked.
    family_roots = {BindloopError, *branches, CompactError}
    classes = _public_exception_classes()
    assert len(classes) > 30
    for cls in classes:
        assert issubclass(cls, BindloopError), f"{cls.__qualname__} is outside the tree"
        if cls in family_roots:
            continue
        assert issubclass(cls, branches), f"{cls.__module__}.{cls.__qualname__} is under no branch"


def test_each_exception_lives_in_errors_py_or_its_packages_errors_module() -> None:
    """The one rule: ``bindloop.errors`` holds the root, the branches and the shared leaves; every
    other public exception is defined in ``bindloop.<package>._errors`` and exported by that
    package (never from a second public module)."""
    import ast
    from pathlib import Path

    import bindloop

    src = Path(bindloop.__file__).resolve().parent
    defined: dict[str, str] = {}
    for path in src.rglob("*.py"):
        rel = path.relative_to(src).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, rel)
    for cls in _public_exception_classes():
        rel = defined[cls.__name__]
        package = cls.__module__.split(".")[1]
        assert rel in ("errors.py", f"{package}/_errors.py"), f"{cls.__name__} is defined in {rel}"


def test_agent_giving_up_is_its_own_branch() -> None:
    from bindloop.agent.errors import (
        AgentError,
        BudgetExceededError,
        PromptSuspendedError,
        RebornLimitExceededError,
        StructuredOutputError,
        ToolLoopExceededError,
        TurnBudgetExceededError,
    )
    from bindloop.agent.limits import RateLimitExceededError
    from bindloop.errors import RunStoppedError, UsageError

    for cls in (StructuredOutputError, RebornLimitExceededError, TurnBudgetExceededError,
                ToolLoopExceededError):
        assert issubclass(cls, AgentError)
        assert not issubclass(cls, (RunStoppedError, UsageError, ProviderError))
    # a limit the host set stops the run; the local limiter is not a provider
    for cls in (BudgetExceededError, RateLimitExceededError, PromptSuspendedError):
        assert issubclass(cls, RunStoppedError) and not issubclass(cls, (AgentError, ProviderError))


def test_errors_py_imports_nothing_of_bindloop() -> None:
    import ast
    from pathlib import Path

    import bindloop.errors

    tree = ast.parse(Path(bindloop.errors.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("bindloop"), node.module
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("bindloop") for a in node.names)


def test_the_loop_reported_errors_sit_where_a_host_expects_them() -> None:
    from bindloop.errors import (
        AbortedToolCallError,
        RunCancelledError,
        RunStoppedError,
        RunTimeoutError,
        UsageError,
    )
    from bindloop.loop import (
        DiscardedTurnWithToolCallsError,
        InputBlockedBySuspendError,
        MissingActivationPortError,
    )

    for cls in (MissingActivationPortError, DiscardedTurnWithToolCallsError,
                InputBlockedBySuspendError):
        assert issubclass(cls, UsageError)
    for cls in (RunTimeoutError, RunCancelledError, AbortedToolCallError):
        assert issubclass(cls, RunStoppedError) and not issubclass(cls, (UsageError, ProviderError))
