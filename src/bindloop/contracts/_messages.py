"""The canonical, provider-neutral transcript.

OpenAI-chat shaped: four roles, an assistant message carries ``tool_calls``, a tool message carries
``tool_call_id``. Every value is a frozen msgspec Struct, so a transcript is a plain list of immutable
messages whose JSON bytes are stable for equal inputs (prompt caches depend on that).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ..errors import TranscriptFormatError

__all__ = (
    "AssistantMessage",
    "Content",
    "ContentPart",
    "FilePart",
    "ImagePart",
    "Message",
    "ProviderItemPart",
    "ReasoningPart",
    "Role",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "UserMessage",
    "content_text",
)

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


class TextPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="text",
               omit_defaults=True):
    """Plain text."""

    text: str


class ImagePart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="image",
                omit_defaults=True):
    """An image, by URL or inline base64 ``data`` with its ``media_type``. Exactly one of ``url`` /
    ``data`` is expected; adapters refuse a part that has neither."""

    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: Literal["auto", "low", "high"] | None = None


class FilePart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="file",
               omit_defaults=True):
    """A document (e.g. a PDF), by URL, inline base64 ``data``, or a provider ``file_id``."""

    url: str | None = None
    data: str | None = None
    file_id: str | None = None
    media_type: str | None = None
    filename: str | None = None


class ReasoningPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="reasoning",
                    omit_defaults=True):
    """A reasoning (thinking) block with its provenance.

    ``provider`` names the wire that produced it (``"anthropic"``, ``"openai"``, ``"google"``) and
    ``model`` the model, because a signature is only valid where it was minted. ``signature`` is the
    provider's integrity token; ``redacted`` blocks carry opaque ``data`` instead of text;
    ``encrypted_content`` holds OpenAI Responses' encrypted reasoning.
    """

    text: str = ""
    provider: str | None = None
    model: str | None = None
    signature: str | None = None
    redacted: bool = False
    data: str | None = None
    encrypted_content: str | None = None
    id: str | None = None


class ProviderItemPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                       tag="provider_item", omit_defaults=True):
    """An output item of one wire that the canonical model does not model, carried opaquely so it
    goes back to that wire as it came (OpenAI Responses' ``tool_search_call``, ``shell_call``,
    ``custom_tool_call``, ``mcp_approval_request``, ...; Anthropic's ``compaction`` block).

    ``wire`` names the wire that produced it (a :data:`~bindloop.wire.WireName`) and ``kind`` the
    item's own ``type``; ``data`` is the item's JSON text exactly as received, which that wire
    sends back byte for byte. Every other wire leaves the part out. bindloop never dispatches it:
    an item the host must act on (a ``shell_call`` to run, an approval to answer) is the host's to
    find in the assistant message."""

    wire: str
    kind: str
    data: str
    id: str | None = None


ContentPart: TypeAlias = TextPart | ImagePart | FilePart | ReasoningPart | ProviderItemPart
Content: TypeAlias = str | tuple[ContentPart, ...]


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool call the model asked for. ``arguments`` is the raw JSON text exactly as the model sent it
    (parsing is the dispatcher's job, so a malformed payload can be answered rather than lost)."""

    id: str
    name: str
    arguments: str = "{}"


_PARTS = (TextPart, ImagePart, FilePart, ReasoningPart, ProviderItemPart)


def _check_content(owner: str, content: object, *, optional: bool = False) -> None:
    """A message's ``content`` at construction, so a wrong value fails here, naming the field,
    instead of deep inside an encoder (checked cheaply: a str is the common case)."""
    if type(content) is str or (optional and content is None):
        return
    if isinstance(content, (tuple, list)) and all(isinstance(p, _PARTS) for p in content):
        return
    accepted = "a string, None" if optional else "a string"
    raise TranscriptFormatError(
        f"{owner}.content must be {accepted} or a tuple of content parts (TextPart, ImagePart, "
        f"FilePart, ReasoningPart, ProviderItemPart), got {_shown(content)}")


def _check_name(owner: str, field: str, value: object, *, optional: bool = True) -> None:
    if isinstance(value, str) or (optional and value is None):
        return
    raise TranscriptFormatError(
        f"{owner}.{field} must be a string{' or None' if optional else ''}, got {_shown(value)}")


def _shown(value: object) -> str:
    if isinstance(value, (tuple, list)):
        kinds = sorted({type(p).__name__ for p in value if not isinstance(p, _PARTS)})
        return f"a {type(value).__name__} holding {', '.join(kinds)}"
    return type(value).__name__


# The four message types are never tracked by the cyclic garbage collector (``gc=False``): a message
# holds strings and parts, which hold strings, so it cannot be part of a reference cycle, and a run
# keeps its transcript alive across every await, where each tracked message would be walked again
# by every full collection.
class SystemMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="system",
                    omit_defaults=True, gc=False):
    content: Content

    def __post_init__(self) -> None:
        if type(self.content) is not str:  # the common case costs one comparison
            _check_content("SystemMessage", self.content)


class UserMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="user",
                  omit_defaults=True, gc=False):
    content: Content
    name: str | None = None

    def __post_init__(self) -> None:
        name = self.name
        if type(self.content) is not str or (name is not None and type(name) is not str):
            _check_content("UserMessage", self.content)
            _check_name("UserMessage", "name", name)


class AssistantMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role",
                       tag="assistant", omit_defaults=True, gc=False):
    """``content`` is ``None`` for a turn that only called tools; reasoning parts, when kept, sit in a
    content tuple ahead of the text."""

    content: Content | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None

    def __post_init__(self) -> None:
        content, name = self.content, self.name
        if ((content is not None and type(content) is not str)
                or (name is not None and type(name) is not str)):
            _check_content("AssistantMessage", content, optional=True)
            _check_name("AssistantMessage", "name", name)


class ToolMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="tool",
                  omit_defaults=True, gc=False):
    """The answer to one tool call. ``is_error`` marks a failed or refused call (Anthropic's
    ``is_error``); the content then holds the error encoding of :func:`encode_tool_error`."""

    tool_call_id: str
    content: Content
    name: str | None = None
    is_error: bool = False

    def __post_init__(self) -> None:
        name = self.name
        if (type(self.tool_call_id) is not str or type(self.content) is not str
                or (name is not None and type(name) is not str)):
            _check_name("ToolMessage", "tool_call_id", self.tool_call_id, optional=False)
            _check_content("ToolMessage", self.content)
            _check_name("ToolMessage", "name", name)


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


class ToolDefinition(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the model is shown for one tool: a name, a description and a JSON Schema object."""

    name: str
    description: str = ""
    parameters: dict[str, object] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    strict: bool | None = None


def content_text(content: Content | None) -> str:
    """The concatenated text of a content value: the string itself, or every :class:`TextPart` joined.

    Reasoning, images and files contribute nothing.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if isinstance(part, TextPart))
