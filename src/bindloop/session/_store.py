"""The checkpoint store port: where a host keeps the latest checkpoint of each execution.

A store is *single-writer fenced on the revision*: :meth:`CheckpointStore.save` lands a checkpoint
only when it is exactly one revision after the stored one (any revision when the execution has
none stored, so the first write of a new execution lands once), atomically with respect to every
other writer of the same backend, in this process or another. The loser gets
:class:`CheckpointConflictError` and must stop: the execution goes on from the stored checkpoint,
in whichever process owns it. ``bindloop.testing.InMemoryCheckpointStore`` is the reference and
``bindloop.testing.store_kit`` the conformance suite every store passes.
"""

from __future__ import annotations

from typing import Protocol

from ._schema import LoopCheckpoint

__all__ = ("CheckpointStore",)


class CheckpointStore(Protocol):
    """The latest checkpoint per execution.

    ``load(execution_id)`` returns the stored checkpoint, parsed and validated, or ``None``.
    ``save(checkpoint)`` stores it under the revision fence above (raising
    :class:`CheckpointConflictError`, naming both revisions, when the fence refuses; nothing is
    written then). ``delete(execution_id)`` removes it and says whether there was one; a later
    ``save`` of any revision lands again. A store with a size bound refuses a larger checkpoint
    with :class:`~bindloop.errors.UsageError` before writing, and a larger stored one with
    :class:`~bindloop.session.CheckpointFormatError` before decoding it.
    """

    async def load(self, execution_id: str) -> LoopCheckpoint | None: ...

    async def save(self, checkpoint: LoopCheckpoint) -> None: ...

    async def delete(self, execution_id: str) -> bool: ...
