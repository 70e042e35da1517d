"""Who is asking, the same for every binding: the request an ``authorize`` hook sees
(:class:`ChatRequest`; the ASGI app builds it with
:func:`~bindloop.hosts.asgi.chat.chat_request`), its refusal (:class:`ChatRefused`), the hook's
shape (:data:`Authorize`) and the key that scopes a chat to the identity that owns it
(:func:`scoped_chat_id`, what the ASGI app's logs and the Worker's Durable Object names use)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec

__all__ = ("Authorize", "ChatRefused", "ChatRequest", "scoped_chat_id")


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What ``authorize`` sees of a request: ``headers`` lower-cased names with their values
    (latin-1 decoded, in order), ``client`` the peer's ``(host, port)`` when the server says."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    client: tuple[str, int] | None = None

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


class ChatRefused(Exception):
    """Raised by ``authorize`` to refuse a request: ``status`` (401 or 403) and a ``message`` the
    client may read."""

    def __init__(self, message: str = "not authorized", *, status: int = 401) -> None:
        if status not in (401, 403):
            raise ValueError(f"ChatRefused(status=) must be 401 or 403, got {status}")
        super().__init__(message)
        self.status = status


Authorize = Callable[[ChatRequest], Awaitable[str]]
"""``await authorize(request)`` -> the caller's identity (a non-empty str), or raise
:class:`ChatRefused`."""


def scoped_chat_id(identity: str, chat_id: str) -> str:
    """The chat's key for the logs and the runner: the client's id within its identity's space
    (length-prefixed, so no two (identity, id) pairs meet); the id itself in single-user mode."""
    return chat_id if not identity else f"{len(identity)}:{identity}:{chat_id}"
