"""What a tool's raise means: fatal or not (:func:`is_fatal_raise`), and what the model reads for a
non-fatal one (:func:`tool_exception_error`) and for any tool answer (:func:`answer_outcome`). The one rule, used by the driver, which evaluates
both where the raise happens and hands the machine only the result (a fatal raise never reaches
it; a non-fatal one arrives as a :class:`~bindloop.lowlevel.ToolRaised` of plain data)."""

from __future__ import annotations

from collections.abc import Callable

from ..contracts import ToolCall, ToolError, ToolOutcome
from ..errors import (
    AbortedToolCallError,
    PortContractError,
    RunCancelledError,
    ToolFailure,
    is_infrastructure_error,
)
from ._checks import check_bool, check_outcome
from ._effects import ToolAnswer, ToolRaised, ToolReturned

__all__ = ("answer_outcome", "default_tool_exception_error", "is_fatal_raise",
           "tool_exception_error")


def is_fatal_raise(error: BaseException,
                   is_fatal_tool_error: Callable[[BaseException], bool] | None = None) -> bool:
    """Whether a tool's raise must end the run instead of becoming a tool error the model reads:
    :class:`~bindloop.errors.RunCancelledError` always; otherwise ``is_fatal_tool_error``'s answer
    (a :class:`~bindloop.errors.PortContractError` unless it is a bool), or, unwired,
    :func:`~bindloop.errors.is_infrastructure_error` — bindloop's own store failing inside a tool
    (a receipt's claim or completion) stops the run, to resume from its last checkpoint, rather
    than losing the effect. A host's predicate replaces that default. A driver asks it the moment
    a call raises, so a fatal raise can cancel its batch."""
    if isinstance(error, RunCancelledError):
        return True
    if is_fatal_tool_error is None:
        return is_infrastructure_error(error)
    return check_bool(is_fatal_tool_error(error), "is_fatal_tool_error")


def default_tool_exception_error(exc: Exception) -> ToolError:
    """What the model reads for a tool's raise when ``format_tool_exception`` is unwired: the type's
    name and a fixed text. The message stays with the host — it may hold a secret."""
    return ToolError(error=f"{type(exc).__name__}: the tool failed")


def tool_exception_error(error: Exception,
                         format_tool_exception: Callable[[Exception], ToolError] | None = None
                         ) -> ToolError:
    """The one rule for what the model reads when a tool raises (non-fatally): a
    :class:`~bindloop.errors.ToolFailure` keeps its message and kind; anything else goes through
    ``format_tool_exception``, or :func:`default_tool_exception_error` when that is unwired. The
    driver builds :class:`~bindloop.lowlevel.ToolRaised` with it; anyone turning a raise into a tool
    error outside the loop (a batch middleware runner) uses this too."""
    if isinstance(error, ToolFailure):
        return ToolError(error=error.message, kind=error.kind)
    if format_tool_exception is None:
        return default_tool_exception_error(error)
    formatted = format_tool_exception(error)
    if not isinstance(formatted, ToolError) or not isinstance(formatted.error, str):
        raise PortContractError(
            f"format_tool_exception returned {type(formatted).__name__}; expected a ToolError")
    return formatted


def answer_outcome(call: ToolCall, answer: ToolAnswer) -> ToolOutcome:
    """What the model reads for ``answer`` to ``call``: the outcome it returned, the tool error a
    raise carries (each checked), or the ``not_run`` error for a call that never started. Pure:
    the machine applies it to every answer, and the loop's batch runner to the outcomes it hands
    ``run_tool_batch`` (``LoopMachine.outcome_of``)."""
    if isinstance(answer, ToolReturned):
        check_outcome(answer.outcome, call)
        return answer.outcome
    if isinstance(answer, ToolRaised):
        error = answer.error
        if type(error) is not ToolError:
            raise PortContractError(
                f"ToolRaised for call {call.id!r} carries {type(error).__name__}; expected the "
                "ToolError the model reads (tool_exception_error's)")
        check_outcome(error, call, "format_tool_exception")
        return error
    return ToolError(error=str(AbortedToolCallError(call.id, answer.reason)), kind="not_run")
