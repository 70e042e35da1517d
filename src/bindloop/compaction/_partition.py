"""What a compaction summarizes: scope partitioning, prompt-too-long shrinking, attachment stripping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple, TypeAlias

import msgspec

from ..contracts import (
    AssistantMessage,
    Content,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
    content_text,
    encode_message,
)
from ._errors import CompactInvalidInputError

__all__ = (
    "CompactScope",
    "FromScope",
    "Partition",
    "TailScope",
    "UpToScope",
    "partition_for_compaction",
    "round_starts",
    "shrink_for_prompt_too_long",
    "strip_attachments",
)


class TailScope(msgspec.Struct, frozen=True, kw_only=True, tag="tail"):
    """Summarize everything before the last ``keep_turns`` turns. A turn is a user message, or an
    assistant message with the tool results that answer it (see ``_turn_starts``), so a tool
    block always stays with its assistant turn. ``keep_turns=0`` summarizes everything."""

    keep_turns: int


class FromScope(msgspec.Struct, frozen=True, kw_only=True, tag="from"):
    """Summarize from the message at ``index`` (moved back to its assistant turn if it is a tool
    result) to the end."""

    index: int


class UpToScope(msgspec.Struct, frozen=True, kw_only=True, tag="up_to"):
    """Summarize up to and including ``index`` (extended over the tool block that follows it)."""

    index: int


CompactScope: TypeAlias = Literal["full"] | TailScope | FromScope | UpToScope


class Partition(NamedTuple):
    """``messages[start:stop]`` is summarized; ``head`` and ``tail`` are preserved by reference."""

    head: Sequence[Message]
    to_summarize: Sequence[Message]
    tail: Sequence[Message]
    start: int
    stop: int


def _text_bearing(m: Message) -> bool:
    if isinstance(m, SystemMessage):
        return False
    if isinstance(m, AssistantMessage) and m.tool_calls:
        return True
    return content_text(m.content) != ""


def partition_for_compaction(messages: Sequence[Message], scope: CompactScope) -> Partition:
    """Split ``messages`` into what to summarize and what to keep verbatim.

    Cuts never separate a tool block from its assistant turn. Raises
    :class:`CompactInvalidInputError` (before any model call) for an empty transcript, a tail scope
    keeping every turn (or a count that is not a non-negative int), an anchor index out of range, or a slice with no
    text-bearing message (only system messages or empty content). Pure.
    """
    n = len(messages)
    if n == 0:
        raise CompactInvalidInputError("nothing to compact: the transcript is empty")
    if scope == "full":
        start, stop = 0, n
    elif isinstance(scope, TailScope):
        keep = scope.keep_turns
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise CompactInvalidInputError(
                f"tail scope keep_turns must be a non-negative int, got {keep!r}")
        starts = _turn_starts(messages)
        if keep and keep >= len(starts):
            raise CompactInvalidInputError(
                f"tail scope keeps {keep} of {len(starts)} turns: nothing older to summarize")
        start, stop = 0, (starts[-keep] if keep else n)
    elif isinstance(scope, (FromScope, UpToScope)):
        if not 0 <= scope.index < n:
            raise CompactInvalidInputError(f"anchor index {scope.index} is not in 0..{n - 1}")
        if isinstance(scope, FromScope):
            start, stop = scope.index, n
            while start > 0 and isinstance(messages[start], ToolMessage):
                start -= 1
        else:
            start, stop = 0, scope.index + 1
            while stop < n and isinstance(messages[stop], ToolMessage):
                stop += 1
    else:
        raise CompactInvalidInputError(f"unknown compaction scope {scope!r}")
    chunk = messages[start:stop]
    if not any(_text_bearing(m) for m in chunk):
        raise CompactInvalidInputError("the slice to summarize has no text-bearing content")
    return Partition(messages[:start], chunk, messages[stop:], start, stop)


def _turn_starts(messages: Sequence[Message]) -> list[int]:
    """Positions where a turn begins: every user message and every assistant message. A tool result
    belongs to the assistant turn before it and a system message to the turn it follows (leading
    ones to the first turn), so cutting at a turn start never splits a tool block from its call.
    Every :func:`round_starts` position except a leading non-turn message is also a turn start;
    a round is coarser (a user message and the assistant reply to it are one round)."""
    return [i for i, m in enumerate(messages) if isinstance(m, (UserMessage, AssistantMessage))]


def round_starts(messages: Sequence[Message]) -> list[int]:
    """Positions where a round begins: the first message, every user message, and every assistant
    turn that follows a tool result (the next step of an agentic chain). Cutting only at these keeps
    every tool block with its assistant turn."""
    starts = [0] if messages else []
    for i in range(1, len(messages)):
        m = messages[i]
        if isinstance(m, UserMessage) or (isinstance(m, AssistantMessage)
                                          and isinstance(messages[i - 1], ToolMessage)):
            starts.append(i)
    return starts


def shrink_for_prompt_too_long(messages: Sequence[Message]) -> Sequence[Message]:
    """Drop whole rounds from the head until at most half the bytes remain (always at least one
    round, never the last). Halving makes the retry budget geometric: a long session converges in a
    few retries where dropping one round at a time never would.

    Returns a suffix (a new list) starting at a round boundary, so tool adjacency holds in it whenever
    it held in the input. Returns the input object itself when it has one round or fewer — the
    caller's signal that it cannot shrink further. Byte sizes are canonical JSON lengths.
    """
    starts = round_starts(messages)
    if len(starts) <= 1:
        return messages
    sizes = [len(encode_message(m)) for m in messages]
    total = sum(sizes)
    remaining = total
    cut = 0
    for k in range(1, len(starts)):
        remaining -= sum(sizes[starts[k - 1]:starts[k]])
        cut = starts[k]
        if remaining * 2 <= total:
            break
    return list(messages[cut:])


def _strip_content(content: Content | None) -> Content | None:
    if content is None or isinstance(content, str):
        return content
    if not any(isinstance(p, (ImagePart, FilePart)) for p in content):
        return content
    parts: list[ContentPart] = []
    for p in content:
        if isinstance(p, ImagePart):
            parts.append(TextPart(text="[image]"))
        elif isinstance(p, FilePart):
            parts.append(TextPart(text="[document]"))
        else:
            parts.append(p)
    return tuple(parts)


def strip_attachments(messages: Sequence[Message]) -> Sequence[Message]:
    """Replace every image with ``[image]`` and every file with ``[document]`` text, in every role
    (tool results included). The summary call cannot use raw bytes later and they are what pushes an
    image-heavy session past the window. Pure; returns the input object itself when there is none."""
    out: list[Message] | None = None
    for i, m in enumerate(messages):
        new = _strip_content(m.content)
        if new is not m.content:
            if out is None:
                out = list(messages[:i])
            out.append(msgspec.structs.replace(m, content=new))
        elif out is not None:
            out.append(m)
    return messages if out is None else out
