"""Rate and concurrency limits for models: :func:`create_limit_middleware` applies
:class:`RateRule` / :class:`ConcurrencyRule` rules over a :class:`bindloop.stores.LimitStore` (in
one process, :class:`bindloop.stores.MemoryLimitStore`); :func:`create_simple_limit_middleware`
takes ``rpm=``, ``tpm=`` and ``concurrency=``. A rule that may not wait raises :class:`RateLimitExceededError`.
"""

from ._limits import (
    ConcurrencyRule as ConcurrencyRule,
    LimitRule as LimitRule,
    RateRule as RateRule,
    create_limit_middleware as create_limit_middleware,
    create_simple_limit_middleware as create_simple_limit_middleware,
)
from ._errors import (
    RateLimitExceededError as RateLimitExceededError,
)

__all__ = (
    "ConcurrencyRule",
    "LimitRule",
    "RateLimitExceededError",
    "RateRule",
    "create_limit_middleware",
    "create_simple_limit_middleware",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
