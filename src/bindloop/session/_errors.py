"""The session's typed errors: unreadable storage, an unknown schema version, and input a checkpoint
cannot take in its current status."""

from __future__ import annotations

from ..errors import UsageError

__all__ = ("CheckpointFormatError", "CheckpointInputError", "UnsupportedCheckpointVersionError")


def _encodable(text: str) -> str:
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


class CheckpointFormatError(UsageError):
    """A stored checkpoint could not be read: wrong shape, a wrong type, or an impossible state.

    ``field`` is the dotted path of the offending field (``"stats.turns"``, ``"messages[3].role"``,
    ``""`` for the document itself); the message starts with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        # Stored text may hold lone surrogates; the message must stay encodable (a UTF-8 log
        # handler would raise on it), so such characters are kept as backslash escapes.
        field, problem = _encodable(field), _encodable(problem)
        super().__init__(f"{field or 'checkpoint'}: {problem}")
        self.field = field
        self.problem = problem


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
