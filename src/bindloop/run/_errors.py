"""The run package's errors: a value canonical JSON cannot represent faithfully."""

from __future__ import annotations

from ..errors import UsageError

__all__ = ("CanonicalJsonError",)


def _encodable(text: str) -> str:
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class CanonicalJsonError(UsageError):
    """A value cannot be canonicalized faithfully. ``path`` is a JSON-pointer-like location
    (``""`` for the root, ``"/args/0"`` inside)."""

    def __init__(self, message: str, path: str) -> None:
        # A key with a lone surrogate would make the path (and so the message) unencodable, and a
        # log handler raise on it: both are kept as escaped, valid text.
        path = _encodable(path)
        super().__init__(_encodable(f"{message} at {path or '<root>'!s}"))
        self.path = path
