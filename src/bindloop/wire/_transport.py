"""The host's HTTP port: what a :class:`~bindloop.wire.ModelAdapter` asks of a transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ..errors import UsageError
from ._types import HttpRequest

__all__ = ("Transport", "TransportResponse", "request_url", "transport_settings")


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

    A transport may offer a ``redactor`` attribute (a ``Redactor`` built by
    ``Redactor.for_credentials(base_url, headers)``, as the shipped transports do): then every
    error :class:`ModelAdapter` makes from a response, and every exception the transport raises,
    has those credentials blanked before anyone sees it. Without one only what is a credential by
    its shape (``Bearer`` tokens, ``key=`` query parameters, URL user info) is blanked.

    :class:`ModelAdapter` enters and leaves the context in the same task and cancel scope, so
    ``open()`` may hold a task group or cancel scope across its ``yield`` (a body-pump task, say).
    When the watchdog tore the call down, the context is left inside that cancelled scope."""

    def open(self, request: HttpRequest) -> AbstractAsyncContextManager[TransportResponse]: ...


def transport_settings(owner: str, base_url: object, headers: object,
                       ) -> tuple[str, str, tuple[tuple[str, str], ...], str]:
    """A host transport's ``base_url`` and ``headers`` checked once, at construction: returns the
    base without a trailing slash or query, the same base as it may be shown in messages (no user
    info, no query: either may carry a credential), the headers as a tuple of pairs, and the base's
    query (``key=...`` for Gemini's query-parameter auth), which :func:`request_url` appends to
    every request. Anything else raises :class:`~bindloop.errors.UsageError` naming the argument
    and what is accepted."""
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
    without_fragment = base_url.split("#", 1)[0]
    base, _, query = without_fragment.partition("?")
    base = base.rstrip("/")
    scheme, _, rest = base.partition("://")
    host, slash, path = rest.partition("/")
    shown = f"{scheme}://{host.rpartition('@')[2]}{slash}{path}"
    return base, shown, pairs, query


def request_url(base: str, path: str, query: str) -> str:
    """``base`` joined with a request's ``path`` (which may carry its own query), and the base's
    ``query`` appended to it."""
    if not query:
        return base + path
    return f"{base}{path}{'&' if '?' in path else '?'}{query}"
