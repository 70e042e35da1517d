"""The checkpoint store port: where a host keeps the latest checkpoint of each execution.

A store is *single-writer fenced on the revision*: :meth:`CheckpointStore.save` lands a checkpoint
only when it is exactly one revision after the stored one (any revision when the execution has
none stored, so the first write of a new execution lands once), atomically with respect to every
other writer of the same backend, in this process or another. The loser gets
:class:`CheckpointConflictError` and must stop: the execution goes on from the stored checkpoint,
in whichever process owns it. :class:`MemoryCheckpointStore` is the reference and
``bindloop.testing.store_kit`` the conformance suite every store passes.
"""

from __future__ import annotations

from typing import Protocol

from ..errors import UsageError
from ..loop import BoundaryDecision
from ..checkpoints import LoopCheckpoint, parse_loop_checkpoint, serialize_loop_checkpoint
from ._errors import CheckpointConflictError

__all__ = ("CheckpointStore", "MemoryCheckpointStore")


class CheckpointStore(Protocol):
    """The latest checkpoint per execution.

    ``load(execution_id)`` returns the stored checkpoint, parsed and validated, or ``None``.
    ``save(checkpoint)`` stores it under the revision fence above (raising
    :class:`CheckpointConflictError`, naming both revisions, when the fence refuses; nothing is
    written then). ``delete(execution_id)`` removes it and says whether there was one; a later
    ``save`` of any revision lands again. A store with a size bound refuses a larger checkpoint
    with :class:`~bindloop.errors.UsageError` before writing, and a larger stored one with
    :class:`~bindloop.checkpoints.CheckpointFormatError` before decoding it.
    """

    async def load(self, execution_id: str) -> LoopCheckpoint | None: ...

    async def save(self, checkpoint: LoopCheckpoint) -> None: ...

    async def delete(self, execution_id: str) -> bool: ...


class MemoryCheckpointStore:
    """A :class:`CheckpointStore` in this process's memory: checkpoints as their stored bytes in a
    dict, fenced on the revision like every store.

    It keeps the *serialized* form, so a round trip checks what a real store would: what is read
    back is what :func:`~bindloop.checkpoints.parse_loop_checkpoint` makes of the stored bytes.
    ``max_checkpoint_bytes`` bounds writes and reads as in the real stores. One instance is one
    backend: share it between the "handles" of a test.
    """

    def __init__(self, *, max_checkpoint_bytes: int | None = None) -> None:
        if max_checkpoint_bytes is not None and (
                isinstance(max_checkpoint_bytes, bool) or not isinstance(max_checkpoint_bytes, int)
                or max_checkpoint_bytes < 1):
            raise UsageError(f"max_checkpoint_bytes must be a positive int or None, "
                             f"got {max_checkpoint_bytes!r}")
        self.max_checkpoint_bytes = max_checkpoint_bytes
        self.rows: dict[str, tuple[int, bytes]] = {}

    async def load(self, execution_id: str) -> LoopCheckpoint | None:
        row = self.rows.get(execution_id)
        if row is None:
            return None
        return parse_loop_checkpoint(row[1], max_bytes=self.max_checkpoint_bytes,
                                     execution_id=execution_id)

    async def save(self, checkpoint: LoopCheckpoint) -> None:
        body = serialize_loop_checkpoint(checkpoint)
        if self.max_checkpoint_bytes is not None and len(body) > self.max_checkpoint_bytes:
            raise UsageError(f"checkpoint {checkpoint.execution_id!r} is {len(body)} bytes, over "
                             f"max_checkpoint_bytes={self.max_checkpoint_bytes}")
        row = self.rows.get(checkpoint.execution_id)
        if row is not None and row[0] + 1 != checkpoint.revision:
            raise CheckpointConflictError(checkpoint.execution_id, checkpoint.revision, row[0])
        self.rows[checkpoint.execution_id] = (checkpoint.revision, body)

    async def delete(self, execution_id: str) -> bool:
        return self.rows.pop(execution_id, None) is not None

    async def commit(self, checkpoint: LoopCheckpoint) -> BoundaryDecision:
        """A :data:`~bindloop.checkpoints.CommitFn`: save, then ``"continue"``."""
        await self.save(checkpoint)
        return "continue"
