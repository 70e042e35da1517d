"""What the model reads when a tool raises: the one rule, used by the machine and the batch runner."""

from __future__ import annotations

from collections.abc import Callable

from ..contracts import ToolError
from ..errors import PortContractError, ToolFailure

__all__ = ("default_tool_exception_error", "tool_exception_error")


def default_tool_exception_error(exc: Exception) -> ToolError:
    """What the model reads for a tool's raise when ``format_tool_exception`` is unwired: the type's
    name and a fixed text. The message stays with the host — it may hold a secret."""
    return ToolError(error=f"{type(exc).__name__}: the tool failed")


def tool_exception_error(error: Exception,
                         format_tool_exception: Callable[[Exception], ToolError] | None = None
                         ) -> ToolError:
    """The one rule for what the model reads when a tool raises (non-fatally): a
    :class:`~bindloop.errors.ToolFailure` keeps its message and kind; anything else goes through
    ``format_tool_exception``, or :func:`default_tool_exception_error` when that is unwired. Anyone
    turning a raise into a tool error outside the loop (a batch middleware runner) uses this too."""
    if isinstance(error, ToolFailure):
        return ToolError(error=error.message, kind=error.kind)
    if format_tool_exception is None:
        return default_tool_exception_error(error)
    formatted = format_tool_exception(error)
    if not isinstance(formatted, ToolError) or not isinstance(formatted.error, str):
        raise PortContractError(
            f"format_tool_exception returned {type(formatted).__name__}; expected a ToolError")
    return formatted
