"""bindloop's ``ToolCallReceiptStore`` port over Durable Objects: idempotency receipts for tools
with side effects, shared by every isolate.

``Receipts`` is the object: one per ``(tenant_id, run_id)`` (``idFromName``), so one run's
receipts are fenced in one place, different runs never contend, and deleting a run
(``delete_run``) empties its object. Each receipt is one storage
key (the JSON array of the key's four parts, so no two keys collide) holding the JSON of its
``ReceiptState``. Every operation is one RPC whose handler reads the row and writes it back
awaiting nothing but the object's storage, so the object's input gate lets no other call in
between: two isolates claiming one receipt get one ``True``.

``complete_once`` records a call no attempt has touched as completed by attempt 1 in one RPC,
with an optional outbox entry written in the same storage write: the effect of a tool whose effect
is a record of the run (a ledger row, a message to send), read back with ``outbox``. A persisted
tool turn is then two round trips (this write and the checkpoint's save), as on Postgres and Redis.
Outbox entries are keyed apart from receipts (``outbox:<name as JSON>:<sequence>``), in the order
written, and deleted with the run.

``DurableReceiptStore`` is the handle. Leases are measured on its ``now`` (wall-clock ms by
default, ``Date.now()`` of the calling isolate: keep leases far longer than clock skew), sent
with each call. Arguments are checked before the call (``UsageError``), and a failure of the
object is ``StoreError("durable_object", <operation>, ...)``. Not bound in the template by
default (its tools have no side effects): bind ``Receipts`` as ``RECEIPTS`` in wrangler.jsonc
(with a ``new_sqlite_classes`` migration) and pass ``DurableReceiptStore(env.RECEIPTS)`` where a
tool's effect goes through receipts. ``bindloop.testing.store_kit``'s receipt cases run against
it in workerd (tests/worker/test_workerd_store_kit.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import msgspec
from pyodide.ffi import to_js  # type: ignore[import-not-found]
from workers import DurableObject  # type: ignore[import-not-found]

from bindloop.hosts.stores._common import check_attempt, check_lease, key_parts
from bindloop.run import (
    ReceiptCompleted,
    ReceiptFailed,
    ReceiptRunning,
    ReceiptState,
    ToolCallReceiptKey,
)
from bindloop.errors import UsageError
from bindloop.stores import StoreError

__all__ = ("DurableReceiptStore", "Receipts")

STORE = "durable_object"
T = TypeVar("T")
_decoder = msgspec.json.Decoder(ReceiptState)
_OUTBOX = "outbox:"  # receipt keys are JSON arrays ("[..."): the two never collide


def _outbox_prefix(name: str) -> str:
    # The name as a JSON string: its closing quote ends it, so one name is never another's prefix.
    return _OUTBOX + json.dumps(str(name)) + ":"


def _js() -> Any:
    import js  # type: ignore[import-not-found]  # only where it runs: in the Worker

    return js


def _js_obj(value: dict[str, Any]) -> Any:
    return to_js(value, dict_converter=_js().Object.fromEntries)


def _next(row: ReceiptState | None, op: str, attempt: int, lease_ms: float, now: float,
          value: Any) -> ReceiptState | None:
    """The receipt after ``op`` (``None``: refused, nothing changes) — the attempt fence of
    ``bindloop.stores.MemoryToolCallReceiptStore``, whose answers the kit compares op for op."""
    if op == "claim":
        claimable = row is None or isinstance(row, ReceiptFailed) or (
            isinstance(row, ReceiptRunning) and now >= row.lease_expires_at_ms)
        current = 0 if row is None else row.attempt
        if not claimable or current != attempt - 1:
            return None
        return ReceiptRunning(attempt=attempt, lease_expires_at_ms=now + lease_ms)
    if not (isinstance(row, ReceiptRunning) and row.attempt == attempt):
        return None  # only the attempt holding the receipt may renew, complete or fail it
    if op == "renew":
        return ReceiptRunning(attempt=attempt, lease_expires_at_ms=now + lease_ms)
    if op == "complete":
        return ReceiptCompleted(attempt=attempt, result=value)
    return ReceiptFailed(attempt=attempt, error=value)


class Receipts(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """The receipts of one run: ``read`` and ``apply``, each one read and at most one write."""

    async def read(self, key: str) -> str | None:
        raw = await self.ctx.storage.get(str(key))
        return None if raw is None else str(raw)

    async def apply(self, key: str, op: str, attempt: int, lease_ms: float, now: float,
                    value: str) -> bool:
        """``op`` (``claim``, ``renew``, ``complete``, ``fail``) of ``attempt`` on the receipt;
        ``value`` is the JSON of the result or error. Whether it landed."""
        if op not in ("claim", "renew", "complete", "fail"):
            raise ValueError(f"unknown receipt operation {op!r}")
        raw = await self.ctx.storage.get(str(key))
        row = None if raw is None else _decoder.decode(str(raw))
        after = _next(row, str(op), int(attempt), float(lease_ms), float(now),
                      json.loads(str(value)))
        if after is None:
            return False
        await self.ctx.storage.put(str(key), msgspec.json.encode(after).decode("utf-8"))
        return True


    async def once(self, key: str, value: str, outbox: str, item: str) -> str | None:
        """Record the receipt ``key`` completed by attempt 1 with ``value`` (the result's JSON)
        and, when ``outbox`` names one (not ``""``), ``item`` as that outbox's next entry, in one
        storage write;
        ``None``. A receipt that exists (any status) is answered as stored (its JSON), and
        nothing is written."""
        storage = self.ctx.storage
        raw = await storage.get(str(key))
        if raw is not None:
            return str(raw)
        after = ReceiptCompleted(attempt=1, result=json.loads(str(value)))
        values = {str(key): msgspec.json.encode(after).decode("utf-8")}
        if outbox:
            prefix = _outbox_prefix(str(outbox))
            count = await storage.get(prefix + "count")
            seq = 0 if count is None else int(count)
            values[prefix + "count"] = str(seq + 1)
            values[prefix + f"{seq:012d}"] = str(item)
        await storage.put(_js_obj(values))  # several keys, one atomic write
        return None

    async def outbox(self, name: str) -> str:
        """The entries of outbox ``name``, oldest first, as a JSON array of strings."""
        prefix = _outbox_prefix(str(name))
        found = await self.ctx.storage.list(_js_obj({"prefix": prefix}))
        return json.dumps([str(found.get(k)) for k in found.keys() if not str(k).endswith("count")])

    async def delete_all(self) -> int:
        """Forget every receipt of the run, and its outboxes; how many receipts there were."""
        found = await self.ctx.storage.list()
        count = sum(1 for k in found.keys() if not str(k).startswith(_OUTBOX))
        await self.ctx.storage.deleteAll()
        return count


async def _call(operation: str, pending: Awaitable[T]) -> T:
    try:
        return await pending
    except Exception as exc:  # a JS error from the RPC: named by type only (it may echo data)
        raise StoreError(STORE, operation, f"the Receipts object failed ({type(exc).__name__})"
                         ) from exc


def _wall_clock_ms() -> float:
    return float(_js().Date.now())


class DurableReceiptStore:
    """``bindloop.stores.ToolCallReceiptStore`` (plus ``renew``) over ``Receipts`` objects."""

    def __init__(self, namespace: Any, *, prefix: str = "", now: Any = None) -> None:
        self._namespace = namespace
        self.prefix = prefix
        self.now = _wall_clock_ms if now is None else now

    def __repr__(self) -> str:
        return f"DurableReceiptStore(prefix={self.prefix!r})"

    def _target(self, key: ToolCallReceiptKey) -> tuple[Any, str]:
        parts = key_parts(key)
        return self._run_stub(parts[0], parts[1]), json.dumps(parts)

    async def read(self, key: ToolCallReceiptKey) -> ReceiptState | None:
        stub, name = self._target(key)
        raw = await _call("read", stub.read(name))
        if raw is None:
            return None
        try:
            return _decoder.decode(str(raw))
        except msgspec.DecodeError as exc:
            raise StoreError(STORE, "read", f"the stored receipt does not decode: {exc}") from None

    async def _apply(self, op: str, key: ToolCallReceiptKey, attempt: int, lease_ms: float,
                     value: Any) -> bool:
        stub, name = self._target(key)
        body = msgspec.json.encode(value).decode("utf-8")
        return bool(await _call(op, stub.apply(name, op, attempt, lease_ms, float(self.now()),
                                               body)))

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        return await self._apply("claim", key, check_attempt(attempt), check_lease(lease_ms), None)

    async def renew(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        return await self._apply("renew", key, check_attempt(attempt), check_lease(lease_ms), None)

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
        return await self._apply("complete", key, check_attempt(attempt), 1.0, result)

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool:
        return await self._apply("fail", key, check_attempt(attempt), 1.0, error)

    async def complete_once(self, key: ToolCallReceiptKey, result: Any, *,
                            outbox: tuple[str, str] | None = None) -> ReceiptState | None:
        """Record a call no attempt has touched as completed by attempt 1 with ``result`` and, in
        the same storage write, append ``outbox[1]`` to the run's outbox named ``outbox[0]``: one
        round trip, for an effect that is a record of the run (a claim would buy nothing: the
        receipt and the entry land together or not at all). The receipt written is the one
        ``claim(key, 1, ...)`` then ``complete(key, 1, result)`` would leave.

        ``None``: written. A receipt that exists (any status, even a running one whose lease has
        ended) is left alone, the outbox untouched, and returned as :meth:`read` would return it
        -- go on with :func:`~bindloop.run.decide_tool_call_receipt`. A failed call raises
        :class:`~bindloop.stores.StoreError` without a retry (whether it landed is unknown)."""
        if outbox is not None and not (isinstance(outbox, tuple) and len(outbox) == 2
                                       and all(isinstance(p, str) for p in outbox) and outbox[0]):
            raise UsageError("outbox must be a (name, entry) tuple of two str, the name not "
                             f"empty; got {outbox!r}")
        stub, name = self._target(key)
        body = msgspec.json.encode(result).decode("utf-8")
        box, item = outbox if outbox is not None else ("", "")
        raw = await _call("complete_once", stub.once(name, body, box, item))
        if raw is None:
            return None
        try:
            return _decoder.decode(str(raw))
        except msgspec.DecodeError as exc:
            raise StoreError(STORE, "complete_once",
                             f"the stored receipt does not decode: {exc}") from None

    async def outbox(self, tenant_id: str, run_id: str, name: str) -> list[str]:
        """The entries :meth:`complete_once` wrote to outbox ``name`` of run ``run_id`` of
        ``tenant_id``, oldest first (gone with :meth:`delete_run`)."""
        stub = self._run_stub(tenant_id, run_id)
        raw = await _call("outbox", stub.outbox(str(name)))
        return [str(entry) for entry in json.loads(str(raw))]

    def _run_stub(self, tenant_id: str, run_id: str) -> Any:
        ns = self._namespace
        return ns.get(ns.idFromName(self.prefix + json.dumps([str(tenant_id), str(run_id)])))

    async def delete_run(self, tenant_id: str, run_id: str) -> int:
        return int(await _call("delete_run", self._run_stub(tenant_id, run_id).delete_all()))
