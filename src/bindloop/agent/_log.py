"""The one module of the core that makes log records: a tool call that failed, as a WARNING on the
``bindloop.agent.tools`` logger, by default (:func:`log_tool_error`).

The core configures nothing — no handler, level, filter, formatter or ``basicConfig``: whether the
record is shown, where, and how is the host's (a program without logging configuration sees it on
stderr through Python's last-resort handler). tests/test_fences.py allows ``logging`` here alone,
and only to get a logger and emit.

Nothing in a record shows a credential: the message and the ``exc_info`` pass the wire's shape
rule (``Bearer`` / ``Basic`` tokens, secret query parameters and URL user info blanked). The
``exc_info`` is the failure's type and traceback with a stand-in value whose text is redacted —
its chained causes and contexts and its notes too — so a formatter printing the traceback prints no
more than the message does (bar the source lines it reads from your files, as for any traceback:
keep credentials out of code); the exception itself is the host's on the
:class:`~bindloop.agent.ToolErrorReport` (``ChatResult.tool_failures``).
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from ..wire import Redactor
from ._observe import ToolErrorReport

__all__ = ("TOOL_LOGGER", "log_tool_error", "redacted_exc_info")

TOOL_LOGGER = "bindloop.agent.tools"
_SHAPES = Redactor()  # no known secret: the credential-shape rule alone


def _text(exc: BaseException) -> str:
    try:
        return _SHAPES.text(str(exc))
    except Exception:  # a __str__ that raises must not turn a report into a crash
        return "<exception str() failed>"


def _stand_in(exc: BaseException, seen: dict[int, BaseException]) -> BaseException:
    """An exception that prints like ``exc`` in a traceback — same type name and module,
    traceback, chain and notes — with every text redacted."""
    made = seen.get(id(exc))
    if made is not None:
        return made
    cls = type(exc)
    names = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    if isinstance(exc, BaseExceptionGroup):
        group = type(cls.__name__, (ExceptionGroup,), names)
        inner = [_stand_in(e, seen) for e in exc.exceptions]
        copy: BaseException = group(_SHAPES.text(exc.message), inner)
    else:
        copy = type(cls.__name__, (Exception,), names)(_text(exc))
    seen[id(exc)] = copy
    copy.__traceback__ = exc.__traceback__
    if exc.__cause__ is not None:
        copy.__cause__ = _stand_in(exc.__cause__, seen)
    if exc.__context__ is not None:
        copy.__context__ = _stand_in(exc.__context__, seen)
    copy.__suppress_context__ = exc.__suppress_context__
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        for note in notes:
            copy.add_note(_SHAPES.text(str(note)))
    return copy


def redacted_exc_info(exc: BaseException) -> tuple[type[BaseException], BaseException, Any]:
    """``exc_info`` for a record about ``exc``: its type and traceback, a redacted stand-in value."""
    return type(exc), _stand_in(exc, {}), exc.__traceback__


def log_tool_error(failure: ToolErrorReport, *, logger: logging.Logger | None = None,
                   level: int = logging.WARNING, include_traceback: bool = False) -> None:
    """The default ``on_tool_error``: one record — a WARNING on the ``bindloop.agent.tools``
    logger unless ``logger`` / ``level`` say otherwise — naming the tool, the call, the agent and
    the error (type and message, redacted), with the redacted ``exc_info`` and the structured
    fields in its ``bindloop`` extra (``call_id``, ``tool_name``, ``agent_id``, ``session_id``,
    ``trace_id``, ``error_type``). ``include_traceback`` writes the redacted traceback into the
    message instead of ``exc_info`` (for a formatter that drops ``exc_info``).

    A hook passed to ``run_with(on_tool_error=)`` replaces it (no second record); call this from
    yours to keep it."""
    log = logger if logger is not None else logging.getLogger(TOOL_LOGGER)
    if not log.isEnabledFor(level):
        return
    error = failure.error
    fields: dict[str, object] = {
        "call_id": failure.call_id, "tool_name": failure.tool_name,
        "agent_id": failure.agent_id, "session_id": failure.session_id,
        "trace_id": failure.trace_id, "error_type": type(error).__name__}
    message = "tool %s (call %s) of agent %s failed: %s"
    args = (failure.tool_name, failure.call_id, failure.agent_id,
            _SHAPES.text(f"{type(error).__name__}: {_text(error)}"))
    if include_traceback:
        # As text, the whole traceback passes the rule: its source lines too.
        trace = _SHAPES.text("".join(traceback.format_exception(error)).rstrip())
        log.log(level, message + "\n%s", *args, trace, extra={"bindloop": fields})
        return
    log.log(level, message, *args, exc_info=redacted_exc_info(error), extra={"bindloop": fields})
