"""Anthropic Messages requests: the canonical transcript as ``messages`` blocks (tool results
first in their user turn, thinking echoed with its signature, the wire's own opaque items sent
back), ``tool_choice``, and the prompt-cache breakpoints of a :class:`CachePolicy`."""

from __future__ import annotations

from typing import Any

from ..contracts import (
    AssistantMessage,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    ProviderItemPart,
    ReasoningPart,
    TextPart,
    ToolMessage,
    UserMessage,
)
from ._common import decode_arguments, inline_media_type, parts_of
from ._errors import WireRequestError
from ._types import CachePolicy, ForcedTool, WireOptions

__all__ = ("cache_breakpoints", "message_blocks", "results_first", "tool_choice")


def cache_breakpoints(policy: CachePolicy, system: list[dict[str, Any]],
                       tools: list[dict[str, Any]], turns: list[dict[str, Any]]) -> None:
    """Mark the policy's ``cache_control`` breakpoints in place: the last system block, the last
    tool, and the last block of each of the ``policy.turns`` most recent user turns (user blocks
    all accept a mark; thinking blocks, which do not, sit only in assistant turns). At most
    :data:`ANTHROPIC_CACHE_BREAKPOINTS` in all, which the policy checked when it was built; the
    same input always gets the same marks, so equal requests have equal bytes."""
    mark: dict[str, Any] = {"type": "ephemeral"}
    if policy.ttl is not None:
        mark["ttl"] = policy.ttl
    if policy.system and system:
        system[-1] = {**system[-1], "cache_control": mark}
    if policy.tools and tools:
        tools[-1] = {**tools[-1], "cache_control": mark}
    left = policy.turns
    for turn in reversed(turns):
        if left == 0:
            break
        blocks = turn["content"]
        if turn["role"] != "user" or not blocks or not isinstance(blocks[-1], dict):
            continue
        blocks[-1] = {**blocks[-1], "cache_control": mark}
        left -= 1


def tool_choice(options: WireOptions) -> dict[str, Any] | None:
    choice = options.tool_choice
    out: dict[str, Any]
    if choice is None:
        if options.parallel_tool_calls is False:
            return {"type": "auto", "disable_parallel_tool_use": True}
        return None
    if isinstance(choice, ForcedTool):
        out = {"type": "tool", "name": choice.name}
    elif choice == "required":
        out = {"type": "any"}
    else:
        out = {"type": choice}
    if options.parallel_tool_calls is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A merged user turn with its ``tool_result`` blocks moved to the front, each group in its
    own order: the API refuses a turn where text or an image precedes a tool result (user text
    sent between a ``tool_use`` and its result lands in the same turn)."""
    results = [b for b in blocks if b["type"] == "tool_result"]
    if not results or len(results) == len(blocks):
        return blocks
    return results + [b for b in blocks if b["type"] != "tool_result"]


def _tool_input(arguments: str) -> object:
    value = decode_arguments(arguments)
    # The wire needs an object; keep what the model actually sent visible rather than dropping it.
    return value if value is not None else {"_raw_arguments": arguments}


def message_blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(m, UserMessage):
        return "user", [_content_block(p) for p in parts_of(m.content)
                        if not isinstance(p, ReasoningPart)]
    if isinstance(m, AssistantMessage):
        blocks: list[dict[str, Any]] = []
        for p in parts_of(m.content):
            if isinstance(p, ReasoningPart):
                if p.redacted:
                    blocks.append({"type": "redacted_thinking", "data": p.data or ""})
                else:
                    blocks.append({"type": "thinking", "thinking": p.text,
                                   "signature": p.signature or ""})
            elif isinstance(p, TextPart):
                if p.text:  # the API refuses empty text blocks
                    blocks.append({"type": "text", "text": p.text})
            elif isinstance(p, ProviderItemPart):
                if p.wire == "anthropic":  # another wire's item means nothing here
                    blocks.append(_opaque_block(p))
            else:
                raise WireRequestError(
                    f"an assistant message carries only text here, got {type(p).__name__}")
        for call in m.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                           "input": _tool_input(call.arguments)})
        return "assistant", blocks
    if isinstance(m, ToolMessage):
        parts = parts_of(m.content)
        content: str | list[dict[str, Any]]
        if all(isinstance(p, TextPart) for p in parts):
            content = "".join(p.text for p in parts if isinstance(p, TextPart))
        else:
            content = [_content_block(p) for p in parts if not isinstance(p, ReasoningPart)]
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id,
                                 "content": content}
        if m.is_error:
            block["is_error"] = True
        return "user", [block]
    raise WireRequestError(f"not a message: {type(m).__name__}")


def _opaque_block(part: ProviderItemPart) -> dict[str, Any]:
    value = decode_arguments(part.data)  # the one JSON-object reader of the wires
    if not value:
        raise WireRequestError(f"a provider item part ({part.kind!r}) does not hold one JSON "
                               "object, so it cannot be sent back")
    return value


def _source(p: ImagePart | FilePart, missing: str) -> dict[str, Any]:
    """An image's or a document's ``source``: inline bytes first, else the URL."""
    if p.data is not None:
        return {"type": "base64", "media_type": inline_media_type(p), "data": p.data}
    if p.url is not None:
        return {"type": "url", "url": p.url}
    raise WireRequestError(missing)


def _content_block(p: ContentPart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    if isinstance(p, ImagePart):
        return {"type": "image", "source": _source(p, "an image part needs a url or inline data")}
    if isinstance(p, FilePart):
        doc = ({"type": "file", "file_id": p.file_id} if p.file_id is not None
               else _source(p, "a file part needs a file_id, inline data or a url"))
        out: dict[str, Any] = {"type": "document", "source": doc}
        if p.filename:
            out["title"] = p.filename
        return out
    raise WireRequestError(f"cannot send a {type(p).__name__} in a user turn")
