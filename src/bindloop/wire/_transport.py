"""The host's HTTP port: what a :class:`~bindloop.wire.ModelAdapter` asks of a transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ._types import HttpRequest

__all__ = ("Transport", "TransportResponse")


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
