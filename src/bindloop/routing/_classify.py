"""Turn an exception raised by a transport into an :class:`AttemptError`.

Order matters and is fixed: cancellation first (whatever else the error is), then a prompt that does
not fit (:func:`~bindloop.errors.is_prompt_too_long`: ``context_length``), then the host's
``as_transport_failure`` port, then the ``categorize_status`` override for HTTP statuses, then the
neutral HTTP mapping. Anything the host port does not recognise is a ``client_error``, which
propagates: an exception that escaped the transport without becoming one of its own failures is a bug,
and retrying it across every provider and fallback would only spend the plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import MappingProxyType
from typing import Literal, TypeAlias

import msgspec

from ..errors import PortContractError, RunCancelledError, RunTimeoutError, is_prompt_too_long
from ..signal import AbortSignal
from ._failure import AttemptTarget
from ._errors import FAILURE_CATEGORIES, AttemptError, FailureCategory
from ._ids import ProviderId

__all__ = (
    "AttemptClassification",
    "TransportFailure",
    "TransportFailureKind",
    "classify_attempt_error",
    "is_cancellation",
    "neutral_status_category",
)

TransportFailureKind: TypeAlias = Literal[
    "http", "timeout", "connection", "stream_stall", "response_defect", "cancelled"
]


class TransportFailure(msgspec.Struct, frozen=True, kw_only=True):
    """What the host's transport port says an exception was. ``status_code`` is required for
    ``http``; ``retry_after_ms`` is the parsed upstream delay (see ``retry_after_ms_from_headers``)."""

    kind: TransportFailureKind
    status_code: int | None = None
    retry_after_ms: float | None = None


class AttemptClassification(msgspec.Struct, frozen=True, kw_only=True):
    """The two host ports. ``as_transport_failure(error)`` recognises the host's own error class
    (``None``: not mine). ``categorize_status(status, provider_id)`` overrides the neutral HTTP mapping
    where a provider disagrees with it (``None``: use the neutral mapping)."""

    as_transport_failure: Callable[[BaseException], TransportFailure | None] | None = None
    categorize_status: Callable[[int, ProviderId], FailureCategory | None] | None = None


_KIND_CATEGORY: MappingProxyType[str, FailureCategory] = MappingProxyType({
    "timeout": "timeout",
    "connection": "connection",
    "stream_stall": "stream_stall",
    "response_defect": "response_defect",
    "cancelled": "cancelled",
})
_CANCEL_NAMES = frozenset({"CancelledError", "Cancelled"})
_CANCEL_MODULES = frozenset({"asyncio", "trio", "anyio", "concurrent"})


def is_cancellation(error: BaseException) -> bool:
    """True for the run's own stop errors (:class:`~bindloop.errors.RunCancelledError`,
    :class:`~bindloop.errors.RunTimeoutError`), an asyncio/trio cancellation, and a bridged JS
    ``AbortError`` (recognised by its ``name`` attribute, so the core never imports ``js``)."""
    if isinstance(error, (RunCancelledError, RunTimeoutError)):
        return True
    for cls in type(error).__mro__:
        if cls.__name__ in _CANCEL_NAMES and cls.__module__.partition(".")[0] in _CANCEL_MODULES:
            return True
    name = getattr(error, "name", None)
    return isinstance(name, str) and name in ("AbortError", "TimeoutError") and _is_js_error(error)


def _is_js_error(error: BaseException) -> bool:
    # Pyodide raises JS errors as pyodide.ffi.JsException; match by module, not by import.
    return any(cls.__module__.partition(".")[0] in ("pyodide", "js", "_pyodide")
               for cls in type(error).__mro__) or type(error).__name__ == "JsException"


def neutral_status_category(status: int) -> FailureCategory:
    """The provider-neutral reading of an HTTP status (see the table in docs/routing.md)."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "model_not_found"
    if status == 408:
        return "timeout"
    if status == 413:
        return "context_length"
    if status == 429:
        return "rate_limited"
    if 400 <= status < 500:
        return "invalid_request"
    if 500 <= status < 600:
        return "server_error"
    return "client_error"  # a non-error status reported as a failure is our bug, not the provider's


def classify_attempt_error(
    error: BaseException,
    target: AttemptTarget,
    classification: AttemptClassification = AttemptClassification(),
    *,
    signal: AbortSignal | None = None,
) -> AttemptError:
    """Classify ``error`` raised while calling ``target``.

    Cancellation is checked first: with ``signal`` given and aborted, or for a cancellation error,
    the result is ``cancelled`` — even for an :class:`AttemptError` of another category. Otherwise an
    :class:`AttemptError` passes through unchanged, and an error that is or was caused by a
    :class:`~bindloop.errors.PromptTooLongError` is ``context_length``. A port that returns the wrong type, an unknown category, an ``http`` failure
    without a valid status, or a negative/non-finite ``retry_after_ms`` raises
    :class:`~bindloop.errors.PortContractError`.
    """
    # Cancellation first: an already-classified error still becomes ``cancelled`` once the run
    # stopped, so a stopped run never traverses to the next candidate on a stale category.
    if (signal is not None and signal.aborted) or is_cancellation(error):
        if isinstance(error, AttemptError) and error.category == "cancelled":
            return error
        return AttemptError("cancelled", target, cause=error)
    if isinstance(error, AttemptError):
        return error
    if is_prompt_too_long(error):
        # Whatever raised it (a wire, a host's model, a summarizer), the prompt does not fit.
        return AttemptError("context_length", target, cause=error)
    port = classification.as_transport_failure
    failure = None if port is None else port(error)
    if failure is None:
        return AttemptError("client_error", target, cause=error)
    if not isinstance(failure, TransportFailure):
        raise PortContractError(f"as_transport_failure returned {failure!r}, not a TransportFailure")
    retry_after = failure.retry_after_ms
    if retry_after is not None and (
        isinstance(retry_after, bool) or not isinstance(retry_after, (int, float))
        or not math.isfinite(retry_after) or retry_after < 0
    ):
        raise PortContractError(f"as_transport_failure gave retry_after_ms={retry_after!r}")
    if failure.kind != "http":
        category = _KIND_CATEGORY.get(failure.kind)
        if category is None:
            raise PortContractError(f"unknown transport failure kind {failure.kind!r}")
        return AttemptError(category, target, status_code=failure.status_code,
                            retry_after_ms=retry_after, cause=error)
    status = failure.status_code
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise PortContractError(f"an http transport failure needs a status code, got {status!r}")
    override = None
    if classification.categorize_status is not None:
        override = classification.categorize_status(status, target.provider_id)
        if override is not None and override not in FAILURE_CATEGORIES:
            raise PortContractError(f"categorize_status returned unknown category {override!r}")
    category = override if override is not None else neutral_status_category(status)
    return AttemptError(category, target, status_code=status, retry_after_ms=retry_after, cause=error)
