"""How an attempt's failure is classified and what each class does.

:func:`classify_attempt_error` turns what a transport raised into an
:class:`~bindloop.routing.AttemptError` of one :data:`FailureCategory` (cancellation first, then a
prompt too long, the host's ``as_transport_failure`` port, the ``categorize_status`` override, the
neutral HTTP mapping). :func:`failure_disposition` -- one table, :data:`FAILURE_DISPOSITIONS` --
turns a category into what the executor does next and what the circuit breaker learns. A
``Retry-After`` header is read with :func:`parse_retry_after` / :func:`retry_after_ms_from_headers`
and bounded with :func:`clamp_retry_after_ms`. See docs/routing.md.
"""

from ._classify import (
    AttemptClassification as AttemptClassification,
    TransportFailure as TransportFailure,
    TransportFailureKind as TransportFailureKind,
    classify_attempt_error as classify_attempt_error,
    is_cancellation as is_cancellation,
    neutral_status_category as neutral_status_category,
)
from ._failure import (
    FAILURE_DISPOSITIONS as FAILURE_DISPOSITIONS,
    BreakerEffect as BreakerEffect,
    DispositionAction as DispositionAction,
    FailureDisposition as FailureDisposition,
    failure_disposition as failure_disposition,
)
from ._errors import (
    FAILURE_CATEGORIES as FAILURE_CATEGORIES,
    FailureCategory as FailureCategory,
)
from ._retry_after import (
    clamp_retry_after_ms as clamp_retry_after_ms,
    parse_retry_after as parse_retry_after,
    retry_after_ms_from_headers as retry_after_ms_from_headers,
)

__all__ = (
    "FAILURE_CATEGORIES",
    "FAILURE_DISPOSITIONS",
    "AttemptClassification",
    "BreakerEffect",
    "DispositionAction",
    "FailureCategory",
    "FailureDisposition",
    "TransportFailure",
    "TransportFailureKind",
    "clamp_retry_after_ms",
    "classify_attempt_error",
    "failure_disposition",
    "is_cancellation",
    "neutral_status_category",
    "parse_retry_after",
    "retry_after_ms_from_headers",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
