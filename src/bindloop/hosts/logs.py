"""stdlib ``logging`` for hosts: the core's one record, on a logger and at a level you choose.

A prompt already reports every failed tool call as a WARNING on the ``bindloop.agent.tools``
logger (``bindloop.agent.log_tool_error``, the default ``run_with(on_tool_error=)``).
:func:`log_tool_errors` is a hook making the same record with your logger, your level, and the
traceback written into the message instead of ``exc_info`` if you ask (for a formatter that drops
``exc_info``); installed, it replaces the default, so each failure is logged once. Every text that
goes into a record passes the wire path's shape rule (``Bearer`` / ``Basic`` tokens, secret query
parameters and URL user info are blanked), so a credential a tool's exception carries does not
reach a log. The record's ``bindloop`` extra holds the structured fields (call id, tool, agent,
session, trace, error type) for a JSON formatter.
"""

from __future__ import annotations

import logging
import traceback

from bindloop.agent import TOOL_LOGGER, ToolErrorHook, ToolErrorReport
from bindloop.agent._log import redacted_exc_info, tool_error_record_args
from bindloop.wire import Redactor

__all__ = ("LOGGER_NAME", "log_tool_errors")

_SHAPES = Redactor()  # no known secret: the credential-shape rule alone

LOGGER_NAME = TOOL_LOGGER


def log_tool_errors(logger: logging.Logger | None = None, *, level: int = logging.WARNING,
                    include_traceback: bool = False) -> ToolErrorHook:
    """A ``run_with(on_tool_error=)`` hook logging each failed tool call at ``level``, in place of
    the default WARNING record (the same record otherwise).

    The message names the tool, the call, the agent and the error (type and message, redacted);
    ``exc_info`` carries the traceback with a redacted stand-in value. ``include_traceback`` writes
    the formatted traceback, redacted the same way, into the message instead (and no
    ``exc_info``)."""
    log = logger if logger is not None else logging.getLogger(LOGGER_NAME)

    def report(failure: ToolErrorReport) -> None:
        if not log.isEnabledFor(level):
            return
        message, args, fields = tool_error_record_args(failure)
        if include_traceback:
            trace = _SHAPES.text("".join(traceback.format_exception(failure.error)).rstrip())
            log.log(level, message + "\n%s", *args, trace, extra={"bindloop": fields})
            return
        log.log(level, message, *args, exc_info=redacted_exc_info(failure.error),
                extra={"bindloop": fields})

    return report
