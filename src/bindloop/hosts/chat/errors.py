"""What a client is told of a failed run, the same for every binding (:func:`error_text`)."""

from __future__ import annotations

from bindloop.agent.approvals import ApprovalError
from bindloop.errors import ProviderError
from bindloop.routing import AttemptError

from .quota import LogFullError

__all__ = ("error_text",)


def error_text(exc: Exception, ref: str | None = None) -> str:
    """What a client is told of a failed run: a short category, never the exception's message (a
    transport error can name an internal URL, a provider's answer can echo input). A provider
    failure says its failure category and HTTP status; a refused approval says why (it names the
    client's own decision); a run stopped at its log's quota says ``log_full``
    (:class:`~bindloop.hosts.chat.quota.LogFullError`); anything else is ``internal_error``.
    ``ref`` (the run id) is appended, so an operator can find the detail in the host's log."""
    if isinstance(exc, AttemptError):
        status = "" if exc.status_code is None else f" (HTTP {exc.status_code})"
        text = f"the model call failed: {exc.category}{status}"
    elif isinstance(exc, ProviderError):
        text = "the model call failed"
    elif isinstance(exc, ApprovalError):  # about the client's own decisions: it may read them
        text = f"the approval was refused: {exc}"
    elif isinstance(exc, LogFullError):
        text = "the run was stopped: log_full"
    else:
        text = "the run failed: internal_error"
    return text if ref is None else f"{text} [ref {ref}]"
