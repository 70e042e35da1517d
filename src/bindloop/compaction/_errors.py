"""Compaction's exceptions."""

from __future__ import annotations

from ..errors import BindloopError, ProviderError, UsageError

__all__ = (
    "CompactEmptySummaryError",
    "CompactError",
    "CompactInvalidInputError",
    "CompactPromptTooLongError",
)


class CompactError(BindloopError):
    """Root of the errors a compaction raises on purpose; each one is also a
    :class:`~bindloop.errors.UsageError` (bad input) or a :class:`~bindloop.errors.ProviderError`
    (the summarizer could not produce a summary)."""


class CompactInvalidInputError(CompactError, UsageError):
    """The inputs make compaction meaningless; raised before any model call so the caller pays for no
    doomed request (empty transcript, nothing older than the kept tail, anchor out of range, nothing
    text-bearing to summarize)."""


class CompactPromptTooLongError(CompactError, ProviderError):
    """The summary prompt stayed too long after every allowed head-drop retry (or could not shrink)."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class CompactEmptySummaryError(CompactError, ProviderError):
    """The model kept answering the summary request with no text."""
