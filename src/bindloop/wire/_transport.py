"""The host's HTTP port: what a :class:`~bindloop.wire.ModelAdapter` asks of a transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ..errors import UsageError
from ._types import HttpRequest

__all__ = ("Transport", "TransportResponse", "transport_settings")


class TransportResponse(Protocol):
    """An open HTTP response. ``headers`` are (name, value) pairs as received. ``aiter_bytes()``
    yields the body decoded from its ``content-encoding``; :class:`ModelAdapter` calls it once and,
    when the iterator has an ``aclose()``, closes it before it leaves the transport's context."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Sequence[tuple[str, str]]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


class Transport(Protocol):
    """The host's HTTP port. ``open`` sends ``request`` (adding base URL and credentials) and yields
    the response once its status and headers arrived; leaving the context — normally, by an
    exception, or by cancellation — closes the connection. Entering it may be cancelled too (the
    watchdog's budgets and the caller's signal run while headers are awaited): a cancelled entry
    must abandon the request and release its connection. Failures before a status exists raise
    :class:`~bindloop.wire.TransportError`, whose message must not carry the credentials.

    :class:`ModelAdapter` enters and leaves the context in the same task and cancel scope, so
    ``open()`` may hold a task group or cancel scope across its ``yield`` (a body-pump task, say).
    When the watchdog tore the call down, the context is left inside that cancelled scope."""

    def open(self, request: HttpRequest) -> AbstractAsyncContextManager[TransportResponse]: ...


def transport_settings(owner: str, base_url: object, headers: object,
                       ) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A host transport's ``base_url`` and ``headers`` checked once, at construction: returns the
    base without a trailing slash, the same base as it may be shown in messages (no user info, no
    query: either may carry a credential), and the headers as a tuple of pairs. Anything else
    raises :class:`~bindloop.errors.UsageError` naming the argument and what is accepted."""
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        shown = type(base_url).__name__ if not isinstance(base_url, str) else "a str without a scheme"
        raise UsageError(f"{owner}(base_url=...) must be the provider's base URL as a str starting "
                         f"with http:// or https://, got {shown}")
    try:
        items = headers.items() if isinstance(headers, Mapping) else headers
        pairs = tuple((name, value) for name, value in items)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pairs = None
    if pairs is None or isinstance(headers, (str, bytes)) or not all(
            isinstance(n, str) and isinstance(v, str) for n, v in pairs):
        raise UsageError(f"{owner}(headers=...) must be (name, value) pairs of str, such as an "
                         f"adapter's auth_headers(key), got {type(headers).__name__}")
    base = base_url.rstrip("/")
    scheme, _, rest = base.partition("://")
    host, slash, path = rest.partition("/")
    shown = f"{scheme}://{host.rpartition('@')[2]}{slash}{path.split('?', 1)[0].split('#', 1)[0]}"
    return base, shown, pairs
