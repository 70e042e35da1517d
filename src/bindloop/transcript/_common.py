"""Small shared pieces: the lazy copy-on-write list builder and message predicates.

Every pass in this package walks the transcript once and must hand back the *input object itself*
when it changed nothing. :class:`_Rewriter` makes that cheap: it copies nothing until the first edit,
then copies the untouched prefix once and appends from there on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from ..contracts import AssistantMessage, Message, TextPart

__all__ = (
    "EMPTY_TURN_PLACEHOLDER",
    "Rewriter",
    "is_empty_assistant",
)

EMPTY_TURN_PLACEHOLDER: Final = "(no content)"
"""Neutral text that stands in for an assistant turn whose content is empty, so role boundaries stay
where they were (providers reject empty assistant messages; dropping one can merge two user turns)."""


def is_empty_assistant(message: AssistantMessage) -> bool:
    """True when the assistant message carries nothing a provider would accept: no tool calls, and no
    content part other than empty text."""
    if message.tool_calls:
        return False
    content = message.content
    if content is None:
        return True
    if isinstance(content, str):
        return content == ""
    for part in content:
        if not isinstance(part, TextPart) or part.text:
            return False
    return True


class Rewriter:
    """Copy-on-write output for a single left-to-right pass over ``source``.

    Call :meth:`keep` for each untouched input position (a no-op until the first edit) and
    :meth:`edit` to replace the input at ``index`` with zero or more messages. :meth:`result` returns
    ``source`` itself when nothing was edited.
    """

    __slots__ = ("out", "source")

    def __init__(self, source: Sequence[Message]) -> None:
        self.source = source
        self.out: list[Message] | None = None

    def keep(self, index: int) -> None:
        if self.out is not None:
            self.out.append(self.source[index])

    def keep_range(self, start: int, stop: int) -> None:
        if self.out is not None and start < stop:
            self.out.extend(self.source[start:stop])

    def edit(self, index: int, replacement: Iterable[Message]) -> None:
        """Replace ``source[index]`` (everything before ``index`` must already be kept or edited)."""
        if self.out is None:
            self.out = list(self.source[:index])
        self.out.extend(replacement)

    def insert(self, index: int, messages: Iterable[Message]) -> None:
        """Insert before ``source[index]`` (which is then kept or edited separately)."""
        if self.out is None:
            self.out = list(self.source[:index])
        self.out.extend(messages)

    @property
    def changed(self) -> bool:
        return self.out is not None

    def result(self) -> Sequence[Message]:
        return self.source if self.out is None else self.out
