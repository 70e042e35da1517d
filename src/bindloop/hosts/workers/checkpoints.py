"""bindloop's ``CheckpointStore`` port over the ``Session`` Durable Objects (sessions.py).

One object per execution (``idFromName(prefix + execution_id)``): with the default empty prefix
the same object a Worker session of that id lives in, so this store reads what the chat routes
wrote and the other way round. The revision fence runs inside the object (``store_checkpoint``
reads the stored revision and writes in one call, which the object serialises), so two isolates
saving the same execution at once get one landing and one :class:`CheckpointConflictError`.

A save here is lease-free: ``run_from_checkpoint(..., commit=store.commit)`` in any isolate works
without the routes' run lease; a route run that holds the session's lease meanwhile finds its next
save refused as stale. ``max_checkpoint_bytes`` bounds writes (before the call) and reads (before
decoding), as in the other stores; a checkpoint past Durable Object storage's 2 MB per value is
refused before the call too (``StoreError``), since workerd does not enforce that limit but
Cloudflare does. Failures of the object itself (unreachable, storage refused,
a value past Durable Object storage's size limit) are ``StoreError("durable_object", ...)``.

``bindloop.testing.store_kit``'s checkpoint cases run against this store in workerd
(stores_kit_route.py, tests/worker/test_workerd_store_kit.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, TypeVar

from bindloop.hosts.stores._common import check_max_bytes, encode_checkpoint
from bindloop.loop import BoundaryDecision
from bindloop.checkpoints import (
    LoopCheckpoint,
    parse_loop_checkpoint,
)
from bindloop.stores import (
    CheckpointConflictError,
    StoreError,
)

__all__ = ("DurableCheckpointStore",)

T = TypeVar("T")
STORE = "durable_object"
MAX_VALUE_BYTES = 2_000_000
"""Cloudflare's limit for one key and value of SQLite-backed Durable Object storage (2 MB;
workerd itself does not enforce it: it stored 3 MB here)."""


def stored_size(body: str) -> int:
    """An upper bound of what storing ``body`` as a JS string takes: V8 keeps a string of
    Latin-1 characters one byte each, any other two bytes per UTF-16 unit."""
    if body.isascii() or max(body) <= "\xff":
        return len(body)
    return len(body.encode("utf-16-le"))


async def _call(operation: str, pending: Awaitable[T]) -> T:
    try:
        return await pending
    except Exception as exc:  # a JS error from the RPC: named by type only (it may echo data)
        raise StoreError(STORE, operation, f"the Session object failed ({type(exc).__name__})"
                         ) from exc


class DurableCheckpointStore:
    """The ``CheckpointStore`` port (``load`` / ``save`` / ``delete``, ``commit`` as a
    ``CommitFn``) over the ``SESSION`` namespace."""

    def __init__(self, namespace: Any, *, prefix: str = "",
                 max_checkpoint_bytes: int | None = None) -> None:
        self._namespace = namespace
        self.prefix = prefix
        self.max_checkpoint_bytes = check_max_bytes(max_checkpoint_bytes)

    def __repr__(self) -> str:
        return f"DurableCheckpointStore(prefix={self.prefix!r})"

    def _stub(self, execution_id: str) -> Any:
        ns = self._namespace
        return ns.get(ns.idFromName(self.prefix + execution_id))

    async def load(self, execution_id: str) -> LoopCheckpoint | None:
        data = await _call("load", self._stub(execution_id).load())
        if data is None:
            return None
        return parse_loop_checkpoint(str(data).encode("utf-8"), max_bytes=self.max_checkpoint_bytes,
                                     execution_id=execution_id)

    async def save(self, checkpoint: LoopCheckpoint) -> None:
        body = encode_checkpoint(checkpoint, self.max_checkpoint_bytes).decode("utf-8")
        if (size := stored_size(body)) > MAX_VALUE_BYTES:
            raise StoreError(STORE, "save", f"checkpoint {checkpoint.execution_id!r} takes {size} "
                             f"bytes of storage, over Durable Object storage's {MAX_VALUE_BYTES} "
                             "per value; nothing was written (compact the transcript)")
        stub = self._stub(checkpoint.execution_id)
        answer = json.loads(str(await _call("save", stub.store_checkpoint(checkpoint.revision,
                                                                          body))))
        if not answer["ok"]:
            raise CheckpointConflictError(checkpoint.execution_id, checkpoint.revision,
                                          int(answer["stored"]))

    async def delete(self, execution_id: str) -> bool:
        return bool(await _call("delete", self._stub(execution_id).delete_checkpoint()))

    async def commit(self, checkpoint: LoopCheckpoint) -> BoundaryDecision:
        """A ``CommitFn``: save, then ``"continue"``."""
        await self.save(checkpoint)
        return "continue"
