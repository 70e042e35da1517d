"""The session's typed errors: an unreadable checkpoint, an unknown schema version, and input a
checkpoint cannot take in its current status."""

from __future__ import annotations

from ..errors import UsageError

__all__ = (
    "CheckpointFormatError",
    "CheckpointInputError",
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
