"""stdlib ``logging`` for hosts: the core does no logging; this turns its hooks into log records.

:func:`log_tool_errors` is a ready ``run_with(on_tool_error=)`` hook: one record per failed tool
call, on the ``bindloop.agent.tools`` logger unless you pass yours. Every text that goes into a
record passes the wire path's shape rule (``Bearer`` / ``Basic`` tokens, secret query parameters
and URL user info are blanked), so a credential a tool's exception carries does not reach a log.
The record's ``bindloop`` extra holds the structured fields (call id, tool, agent, session, trace,
error type) for a JSON formatter.
"""

from __future__ import annotations

import logging
import traceback

from bindloop.agent import ToolErrorHook, ToolErrorReport
from bindloop.wire import Redactor

__all__ = ("LOGGER_NAME", "log_tool_errors")

_SHAPES = Redactor()  # no known secret: the credential-shape rule alone

LOGGER_NAME = "bindloop.agent.tools"


def log_tool_errors(logger: logging.Logger | None = None, *, level: int = logging.WARNING,
                    include_traceback: bool = False) -> ToolErrorHook:
    """A ``run_with(on_tool_error=)`` hook logging each failed tool call at ``level``.

    The message names the tool, the call, the agent and the error (type and message, redacted).
    ``include_traceback`` appends the formatted traceback, redacted the same way (it is not passed
    as ``exc_info``: a formatter would print the exception's message unredacted)."""
    log = logger if logger is not None else logging.getLogger(LOGGER_NAME)

    def report(failure: ToolErrorReport) -> None:
        if not log.isEnabledFor(level):
            return
        error = failure.error
        text = _SHAPES.text(f"{type(error).__name__}: {error}")
        if include_traceback:
            text += "\n" + _SHAPES.text("".join(traceback.format_exception(error)).rstrip())
        log.log(level, "tool %s (call %s) of agent %s failed: %s", failure.tool_name,
                failure.call_id, failure.agent_id, text, extra={"bindloop": {
                    "call_id": failure.call_id, "tool_name": failure.tool_name,
                    "agent_id": failure.agent_id, "session_id": failure.session_id,
                    "trace_id": failure.trace_id, "error_type": type(error).__name__}})

    return report
