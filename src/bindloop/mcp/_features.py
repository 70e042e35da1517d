"""Resources, prompts and argument completion: the server features beside tools, as functions over
an :class:`~bindloop.mcp.McpHttpClient` (listing with pagination, reading, subscribing, getting a
prompt, completing an argument), and their contents as bindloop content parts and messages, so
an agent can put a resource or a prompt into its own prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

import msgspec

from ..contracts import AssistantMessage, ContentPart, Message, TextPart, UserMessage
from ._content import map_content_block
from ._errors import McpProtocolError
from ._http import McpHttpClient

__all__ = (
    "CompletionResult",
    "McpPrompt",
    "McpPromptArgument",
    "McpResource",
    "McpResourceTemplate",
    "PromptResult",
    "ResourceContents",
    "complete",
    "get_prompt",
    "list_prompts",
    "list_resource_templates",
    "list_resources",
    "prompt_messages",
    "read_resource",
    "resource_parts",
    "subscribe_resource",
    "unsubscribe_resource",
)

_T = TypeVar("_T")


class McpResource(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One entry of ``resources/list``."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None


class McpResourceTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One entry of ``resources/templates/list``: an RFC 6570 ``uri_template``."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


class ResourceContents(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One item of a ``resources/read`` result: ``text`` or base64 ``blob``."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class McpPromptArgument(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str | None = None
    required: bool = False


class McpPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``prompts/list``."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[McpPromptArgument] = msgspec.field(default_factory=list)


class PromptResult(msgspec.Struct, frozen=True, kw_only=True):
    """``prompts/get``: the prompt's ``messages`` stay raw (role and one content block); see
    :func:`prompt_messages`."""

    messages: list[Any]
    description: str | None = None


class CompletionResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``completion/complete``: up to 100 ``values``; ``total`` and ``has_more`` when known."""

    values: list[str]
    total: int | None = None
    has_more: bool | None = None


def _convert(client: McpHttpClient, value: Any, kind: type[_T], method: str) -> _T:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise McpProtocolError(client.server, f"answered {method} with a malformed result: "
                                              f"{exc}") from exc


async def _pages(client: McpHttpClient, method: str, key: str, kind: type[_T],
                 max_pages: int) -> list[_T]:
    out: list[_T] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(max_pages):
        page = await client.request(method, None if cursor is None else {"cursor": cursor})
        if not isinstance(page, dict) or not isinstance(page.get(key), list):
            raise McpProtocolError(client.server, f"answered {method} without a {key!r} list")
        out.extend(_convert(client, item, kind, method) for item in page[key])
        cursor = page.get("nextCursor")
        if not cursor:
            return out
        if not isinstance(cursor, str) or cursor in seen:
            raise McpProtocolError(client.server, f"{method} repeated cursor {cursor!r}")
        seen.add(cursor)
    raise McpProtocolError(client.server, f"{method} has more than {max_pages} pages")


async def list_resources(client: McpHttpClient, *, max_pages: int = 100) -> list[McpResource]:
    """Every resource, page by page (a repeated cursor or too many pages is an
    :class:`~bindloop.mcp.McpProtocolError`)."""
    return await _pages(client, "resources/list", "resources", McpResource, max_pages)


async def list_resource_templates(client: McpHttpClient, *,
                                  max_pages: int = 100) -> list[McpResourceTemplate]:
    return await _pages(client, "resources/templates/list", "resourceTemplates",
                        McpResourceTemplate, max_pages)


async def read_resource(client: McpHttpClient, uri: str) -> list[ResourceContents]:
    """``resources/read``: the resource's contents (one or more items)."""
    result = await client.request("resources/read", {"uri": uri})
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list):
        raise McpProtocolError(client.server, "answered resources/read without contents")
    return [_convert(client, item, ResourceContents, "resources/read") for item in contents]


async def subscribe_resource(client: McpHttpClient, uri: str) -> None:
    """``resources/subscribe``: the server then sends ``notifications/resources/updated`` for
    ``uri`` (an :class:`~bindloop.mcp.session.McpServerNotification` on ``on_event``, usually on the
    GET stream the client opens by default); read the resource again to see the change."""
    await client.request("resources/subscribe", {"uri": uri})


async def unsubscribe_resource(client: McpHttpClient, uri: str) -> None:
    await client.request("resources/unsubscribe", {"uri": uri})


async def list_prompts(client: McpHttpClient, *, max_pages: int = 100) -> list[McpPrompt]:
    return await _pages(client, "prompts/list", "prompts", McpPrompt, max_pages)


async def get_prompt(client: McpHttpClient, name: str,
                     arguments: Mapping[str, str] | None = None) -> PromptResult:
    """``prompts/get`` with string ``arguments``."""
    params: dict[str, Any] = {"name": name}
    if arguments:
        params["arguments"] = dict(arguments)
    return _convert(client, await client.request("prompts/get", params), PromptResult,
                    "prompts/get")


async def complete(client: McpHttpClient, *, ref: Literal["prompt", "resource"], name: str,
                   argument: str, value: str,
                   context: Mapping[str, str] | None = None) -> CompletionResult:
    """``completion/complete`` for ``argument`` of a prompt (``name`` is the prompt's) or a
    resource template (``name`` is its URI template), given what was typed (``value``) and the
    arguments chosen so far (``context``)."""
    reference = ({"type": "ref/prompt", "name": name} if ref == "prompt"
                 else {"type": "ref/resource", "uri": name})
    params: dict[str, Any] = {"ref": reference, "argument": {"name": argument, "value": value}}
    if context:
        params["context"] = {"arguments": dict(context)}
    result = await client.request("completion/complete", params)
    completion = result.get("completion") if isinstance(result, dict) else None
    return _convert(client, completion, CompletionResult, "completion/complete")


def resource_parts(contents: list[ResourceContents]) -> tuple[ContentPart, ...]:
    """A resource's contents as content parts to attach to a prompt: text headed by its URI,
    an image or another blob as an inline part (the same mapping as a tool's embedded
    resource)."""
    parts: list[ContentPart] = []
    for item in contents:
        block: dict[str, Any] = {"uri": item.uri}
        if item.mime_type:
            block["mimeType"] = item.mime_type
        if item.text is not None:
            block["text"] = item.text
        elif item.blob is not None:
            if (item.mime_type or "").startswith("image/"):
                parts.append(map_content_block({"type": "image", "data": item.blob,
                                                "mimeType": item.mime_type}))
                continue
            block["blob"] = item.blob
        parts.append(map_content_block({"type": "resource", "resource": block}))
    return tuple(parts)


def prompt_messages(result: PromptResult) -> list[Message]:
    """A prompt's messages as bindloop messages (user and assistant; each content block mapped
    as a tool result's would be), ready for ``equip_history`` or a loop's transcript."""
    out: list[Message] = []
    for raw in result.messages:
        role = raw.get("role") if isinstance(raw, dict) else None
        block = raw.get("content") if isinstance(raw, dict) else None
        part = map_content_block(block)
        content: str | tuple[ContentPart, ...] = (part.text if isinstance(part, TextPart)
                                                  else (part,))
        out.append(AssistantMessage(content=content) if role == "assistant"
                   else UserMessage(content=content))
    return out
