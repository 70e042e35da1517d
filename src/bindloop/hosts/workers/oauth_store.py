"""MCP OAuth tokens in Durable Object storage: ``McpOAuth(store=DurableTokenStore(...))`` in a
Worker keeps the tokens and the client registration where every isolate and every later request
finds them, so a run does not authorize again because it landed in a new isolate.

``McpTokens`` is the object (one per user and MCP server: ``idFromName(name)``; the caller picks
the name, e.g. ``f"{user_id}:{server_url}"``); ``DurableTokenStore`` is bindloop's
:class:`bindloop.stores.SwapTokenStore` over its RPC methods. Its compare-and-swap save is one RPC,
``swap``, whose handler reads the stored tokens, compares and writes awaiting nothing but the
object's storage, so the object's input gate lets no other call in between: two isolates
refreshing one rotated token at once see exactly one swap land. Tokens are secrets: the object stores them
in its own storage only, and nothing here puts them in a ``repr``, a log line or an error
message (a failure names the operation and the error's type, never a value). The object's
storage is the Worker's; whoever can call the namespace can read the tokens, as with any secret
the Worker holds.

Wiring (the template does not use MCP itself, so it is not bound by default): export
``McpTokens`` from the entry module (entry.py does), bind it in wrangler.jsonc
(``{"name": "MCP_TOKENS", "class_name": "McpTokens"}`` and a migration with
``"new_sqlite_classes": ["McpTokens"]``), then pass
``store=DurableTokenStore(env.MCP_TOKENS, name)`` to ``McpOAuth``.
``bindloop.testing.store_kit``'s token cases run against it in workerd
(tests/worker/test_workerd_store_kit.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from workers import DurableObject  # type: ignore[import-not-found]

from bindloop.stores import StoreError

if TYPE_CHECKING:
    from bindloop.stores import OAuthClientInfo, OAuthTokens

__all__ = ("DurableTokenStore", "McpTokens")

KINDS = ("tokens", "client")
STORE = "durable_object"
T = TypeVar("T")


class McpTokens(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """One token store: ``tokens`` and ``client``, each a JSON string or absent. ``read`` and
    ``write`` are one storage call each, so concurrent saves land whole, the last one winning;
    ``swap`` is the compare-and-swap of the tokens, one read and at most one write."""

    async def read(self, kind: str) -> str | None:
        if kind not in KINDS:
            raise ValueError("unknown token store key")
        value = await self.ctx.storage.get(kind)
        return None if value is None else str(value)

    async def write(self, kind: str, data: str) -> None:
        """Store ``data`` under ``kind``; ``""`` removes it."""
        if kind not in KINDS:
            raise ValueError("unknown token store key")
        if data:
            await self.ctx.storage.put(kind, str(data))
        else:
            await self.ctx.storage.delete(kind)

    async def swap(self, expected: str, data: str) -> bool:
        """Store the tokens ``data`` (``""`` removes them) only if the stored tokens are
        ``expected`` (``""``: none stored), compared as JSON values; whether it did."""
        raw = await self.ctx.storage.get("tokens")
        stored = None if raw is None else json.loads(str(raw))
        if stored != (json.loads(str(expected)) if expected else None):
            return False
        if data:
            await self.ctx.storage.put("tokens", str(data))
        else:
            await self.ctx.storage.delete("tokens")
        return True


async def _call(operation: str, pending: Awaitable[T]) -> T:
    try:
        return await pending
    except Exception as exc:  # the message may echo what was sent: name the type only
        raise StoreError(STORE, operation, f"the McpTokens object failed ({type(exc).__name__})"
                         ) from None


def _json(value: msgspec.Struct | None) -> str:
    return "" if value is None else msgspec.json.encode(value).decode("utf-8")


class DurableTokenStore:
    """:class:`bindloop.stores.SwapTokenStore` over one :class:`McpTokens` object of ``namespace``."""

    def __init__(self, namespace: Any, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("DurableTokenStore needs a non-empty name (one per user and server)")
        self._stub = namespace.get(namespace.idFromName(name))
        self._name = name

    def __repr__(self) -> str:  # the name only, never a token
        return f"DurableTokenStore(name={self._name!r})"

    async def _load(self, kind: str, type_: type[T]) -> T | None:
        data = await _call(f"load_{kind}", self._stub.read(kind))
        if data is None:
            return None
        try:
            return msgspec.json.decode(str(data), type=type_)
        except msgspec.DecodeError:
            raise StoreError(STORE, f"load_{kind}", f"the stored {kind} do not decode; save "
                             "new ones") from None  # the message would quote the secret

    async def _save(self, kind: str, value: msgspec.Struct | None) -> None:
        await _call(f"save_{kind}", self._stub.write(kind, _json(value)))

    # bindloop.mcp is imported on first use: a Worker that never authorizes does not pay for it
    # at start-up (the entry module imports McpTokens).
    async def load_tokens(self) -> OAuthTokens | None:
        from bindloop.stores import OAuthTokens

        return await self._load("tokens", OAuthTokens)

    async def save_tokens(self, tokens: OAuthTokens | None) -> None:
        await self._save("tokens", tokens)

    async def swap_tokens(self, tokens: OAuthTokens | None, *,
                          expected: OAuthTokens | None) -> bool:
        landed = await _call("swap_tokens", self._stub.swap(_json(expected), _json(tokens)))
        return bool(landed)

    async def load_client(self) -> OAuthClientInfo | None:
        from bindloop.stores import OAuthClientInfo

        return await self._load("client", OAuthClientInfo)

    async def save_client(self, client: OAuthClientInfo | None) -> None:
        await self._save("client", client)
