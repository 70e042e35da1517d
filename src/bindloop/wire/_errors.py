"""The wire layer's exception types.

Two families: :class:`WireRequestError` (a :class:`~bindloop.errors.UsageError`: the transcript or
options cannot be expressed on this wire — fix the input) and everything else, which is a
:class:`~bindloop.errors.ProviderError` (the provider or the connection misbehaved — routing decides).
Each provider-side error maps to exactly one routing category through :func:`wire_error_category`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import PromptTooLongError, ProviderError, UsageError

if TYPE_CHECKING:  # the stall a StreamStalledError carries
    from ._watchdog import StreamStall

__all__ = (
    "IncompleteStreamError",
    "ProviderHttpError",
    "ProviderPromptTooLongError",
    "SseError",
    "SseLimitError",
    "StreamStalledError",
    "TransportError",
    "WireDecodeError",
    "WireRequestError",
)


class WireRequestError(UsageError):
    """The canonical input cannot be encoded for this wire (an image part with neither ``url`` nor
    ``data``, a file URL on a wire that only takes inline files, an option the wire lacks)."""


class StreamStalledError(ProviderError):
    """The abort reason the watchdog's signal carries when it tears a stream down. A transport that
    raises its signal's reason raises this; routing can treat it as retriable."""

    def __init__(self, stall: StreamStall) -> None:
        super().__init__(
            f"the model stream stalled: {stall.kind} budget of {stall.budget_ms:g} ms exceeded "
            f"({stall.elapsed_ms:g} ms)"
        )
        self.stall = stall


class SseError(ProviderError):
    """The byte stream is not usable Server-Sent Events."""


class SseLimitError(SseError):
    """A line or an event exceeded the decoder's configured limit. Raised instead of buffering more,
    so a hostile or broken upstream cannot grow memory without bound. ``limit`` names which bound
    (``"line"`` or ``"event"``) and ``max_bytes`` its value."""

    def __init__(self, limit: str, max_bytes: int) -> None:
        super().__init__(f"SSE {limit} exceeds the configured limit of {max_bytes} bytes")
        self.limit = limit
        self.max_bytes = max_bytes


class WireDecodeError(ProviderError):
    """A response body or stream chunk was not the JSON shape the wire documents. The provider
    answered with something unusable (routing: ``response_defect``)."""


class IncompleteStreamError(WireDecodeError):
    """The stream ended before the wire's terminal event (``[DONE]``, ``message_stop``,
    ``response.completed``, a finish reason): the connection dropped mid-answer (routing:
    ``connection``)."""


class TransportError(ProviderError):
    """A host transport failed before any HTTP status was available. ``kind`` is ``"connection"``
    (refused, reset, dropped mid-body) or ``"timeout"``; hosts raise this so routing need not know
    their HTTP client's exception classes."""

    def __init__(self, message: str, *, kind: str = "connection") -> None:
        if kind not in ("connection", "timeout"):
            raise UsageError(f"TransportError kind must be 'connection' or 'timeout', got {kind!r}")
        super().__init__(message)
        self.kind = kind


class ProviderHttpError(ProviderError):
    """A classified provider error: an HTTP error response, or an error event inside a stream
    (``status_code`` ``None``).

    ``category`` is a routing :data:`~bindloop.routing.failures.FailureCategory`; ``retry_after_ms`` the
    upstream's requested delay (header, or the body's own hint such as Gemini's ``RetryInfo``);
    ``error_type`` / ``error_code`` the provider's own vocabulary (Anthropic ``overloaded_error``,
    OpenAI ``context_length_exceeded``, Gemini ``RESOURCE_EXHAUSTED``) exactly as sent.
    """

    def __init__(
        self,
        message: str,
        *,
        wire: str,
        category: str,
        status_code: int | None = None,
        retry_after_ms: float | None = None,
        error_type: str | None = None,
        error_code: str | None = None,
    ) -> None:
        status = "" if status_code is None else f" HTTP {status_code}"
        kind = "" if error_type is None else f" {error_type}"
        super().__init__(f"{wire}{status}{kind} ({category}): {message}")
        self.wire = wire
        self.category = category
        self.status_code = status_code
        self.retry_after_ms = retry_after_ms
        self.error_type = error_type
        self.error_code = error_code
        self.provider_message = message

    def redacted(self, scrub: Callable[[str], str]) -> ProviderHttpError:
        """The same error (same class, category, status and retry hint) with ``scrub`` applied to
        every text that came from the provider: its message, error type and code."""
        def clean(text: str | None) -> str | None:
            return None if text is None else scrub(text)

        return type(self)(scrub(self.provider_message), wire=self.wire, category=self.category,
                          status_code=self.status_code, retry_after_ms=self.retry_after_ms,
                          error_type=clean(self.error_type), error_code=clean(self.error_code))


class ProviderPromptTooLongError(ProviderHttpError, PromptTooLongError):
    """The provider refused the prompt as longer than the context window. Also a
    :class:`~bindloop.errors.PromptTooLongError`, so compaction's prompt-too-long retry recognises it
    without knowing about wires."""
