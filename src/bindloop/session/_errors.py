"""The session's typed errors: unreadable storage, an unknown schema version, and input a checkpoint
cannot take in its current status."""

from __future__ import annotations

from ..errors import InfrastructureError, UsageError

__all__ = (
    "CheckpointConflictError",
    "CheckpointFormatError",
    "CheckpointInputError",
    "StoreError",
    "UnsupportedCheckpointVersionError",
)


def _encodable(text: str) -> str:
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


class CheckpointFormatError(UsageError):
    """A stored document could not be read: wrong version, shape or type, or an impossible state.
    The one format error for saved runs: a loop checkpoint (``document="checkpoint"``) and an agent
    snapshot or trace (``document="snapshot"``) alike.

    ``field`` is the dotted path of the offending field (``"stats.turns"``, ``"messages[3].role"``,
    ``""`` for the document itself); the message starts with it (or with ``document``).
    """

    def __init__(self, field: str, problem: str, *, document: str = "checkpoint") -> None:
        # Stored text may hold lone surrogates; the message must stay encodable (a UTF-8 log
        # handler would raise on it), so such characters are kept as backslash escapes.
        field, problem = _encodable(field), _encodable(problem)
        super().__init__(f"{field or document}: {problem}")
        self.field = field
        self.problem = problem
        self.document = document


class UnsupportedCheckpointVersionError(CheckpointFormatError):
    """The document declares a schema ``version`` this bindloop does not read. Nothing is guessed:
    migrate it with the bindloop that wrote it, or keep that version around to finish the run."""

    def __init__(self, version: object, supported: tuple[int, ...]) -> None:
        super().__init__("version", f"unsupported checkpoint version {version!r} "
                                    f"(this bindloop reads {', '.join(map(str, supported))})")
        self.version = version
        self.supported = supported


class CheckpointInputError(UsageError):
    """The input does not fit the checkpoint's status: a reply to a checkpoint that awaits nobody, a
    wake for a call that waits for a person, a new message while a suspend is open, any input to a
    ``ready`` checkpoint. ``status`` is the checkpoint's; the message says what it accepts instead."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class CheckpointConflictError(UsageError):
    """A checkpoint at ``revision`` of ``execution_id`` cannot land over the stored revision
    ``stored`` (it needs ``revision - 1`` stored). ``case`` says which mistake it is:

    - ``"another_conversation"``: ``revision`` is 0, the first checkpoint of a new execution, yet
      the id is already stored — two conversations were given the same ``execution_id`` (give
      each its own: ``create_agent(execution_ids=...)``);
    - ``"another_writer"``: two processes resumed the same execution and the other committed
      first. Stop this invocation; the execution goes on from the stored checkpoint, in whichever
      process owns it."""

    def __init__(self, execution_id: str, revision: int, stored: int) -> None:
        if revision == 0:
            self.case = "another_conversation"
            why = ("revision 0 starts a new execution, so another conversation already uses this "
                   "execution_id (give each conversation its own id)")
        else:
            self.case = "another_writer"
            why = "another writer committed first (single-writer fence)"
        super().__init__(
            f"checkpoint {execution_id!r} revision {revision} does not follow the stored revision "
            f"{stored}: {why}")
        self.execution_id = execution_id
        self.revision = revision
        self.stored = stored


class StoreError(InfrastructureError):
    """A storage backend failed an operation: ``store`` names the backend (``"postgres"``,
    ``"redis"``...), ``operation`` the call (``"save"``, ``"claim"``...). Whether the write landed
    is unknown unless the message says so; every write the stores ship is one transaction or one
    atomic script, so a checkpoint is either wholly stored or not at all. Retrying is the caller's
    choice: a fenced write retried after an unknown outcome is refused, never doubled. Raised inside
    a tool (a receipt's claim or completion), it ends the run by default: see
    :class:`~bindloop.errors.InfrastructureError`."""

    def __init__(self, store: str, operation: str, problem: str) -> None:
        super().__init__(f"{store} store: {operation} failed: {problem}")
        self.store = store
        self.operation = operation
        self.problem = problem
