"""The host bindings' errors: a checkpoint another writer got to first (``sqlite_store``)."""

from __future__ import annotations

from bindloop.errors import UsageError

__all__ = ("CheckpointConflictError",)


class CheckpointConflictError(UsageError):
    """Another writer got there first: the stored revision of ``execution_id`` is ``stored``, so a
    checkpoint at ``revision`` (which needs ``revision - 1`` stored) cannot land. Stop this
    invocation; the execution goes on from the stored checkpoint, in whichever process owns it."""

    def __init__(self, execution_id: str, revision: int, stored: int) -> None:
        super().__init__(
            f"checkpoint {execution_id!r} revision {revision} does not follow the stored revision "
            f"{stored}: another writer committed first (single-writer fence)")
        self.execution_id = execution_id
        self.revision = revision
        self.stored = stored
