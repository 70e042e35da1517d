"""``sampling/createMessage`` answered by a model the host passes (:class:`McpSampling`), behind a
policy the host decides with, including sampling with tools (2025-11-25): the server's ``tools``
become tool definitions the model is shown, ``tool_use`` / ``tool_result`` blocks in the server's
messages become assistant tool calls and tool messages, and tool calls the model makes come back
as ``tool_use`` blocks with ``stopReason: "toolUse"``. The model never runs those tools: the
server does, and sends their results in its next request.

Pure: the model and the policy are the host's callables.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import msgspec

from ..contracts import (
    AssistantMessage,
    ContentPart,
    ImagePart,
    Message,
    ModelTurnResult,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from ..errors import UsageError
from ..model import Model, ModelRequest
from ..tools import ParsedArguments, read_tool_arguments
from ..schema import SchemaSanitizeError, sanitize_tool_schema
from ._content import map_content_block
from ._errors import McpRequestRefused

__all__ = ("McpSampling", "SamplingPolicy", "SamplingRequest")

_INVALID_PARAMS = -32602
_INTERNAL = -32603
_TOOL_CHOICES = ("auto", "none", "required")


class SamplingRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``sampling/createMessage``: the server asks for a completion. ``messages`` stay raw MCP
    sampling messages (``role``, ``content``: one block or a list). ``tools`` (MCP tool entries:
    ``name``, ``description``, ``inputSchema``) and ``tool_choice`` (``{"mode": "auto" | "none" |
    "required"}``) are the 2025-11-25 sampling with tools."""

    messages: list[Any]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    model_preferences: dict[str, Any] | None = None
    include_context: str | None = None
    metadata: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None

    @property
    def tool_mode(self) -> str:
        """``auto`` (the default), ``none`` or ``required``."""
        mode = (self.tool_choice or {}).get("mode")
        return mode if isinstance(mode, str) else "auto"


SamplingPolicy: TypeAlias = Callable[[SamplingRequest], "bool | str | Awaitable[bool | str]"]


class McpSampling:
    """Sampling answered by a model the host passes, behind a policy the host decides with.

    ``model`` is a :class:`~bindloop.model.Model` (a ``ModelAdapter``, a ``RoutedModel``, what
    ``create_agent(model=)`` takes), called through its own fold, ``complete``, with the request's
    ``toolChoice`` as its ``tool_choice`` (``required``). It is shown the server's tools as
    :class:`~bindloop.contracts.ToolDefinition` (schemas sanitized as every tool's are; none with
    ``toolChoice: none``); its tool calls are answered as ``tool_use`` blocks. ``policy(request)``
    returns ``True`` to allow, ``False`` or a reason (``str``) to refuse — the server then gets a
    JSON-RPC error saying so; without a policy every request is allowed. ``model_name`` is what the
    result's ``model`` field reports. Declares the ``sampling.tools`` capability.
    """

    __slots__ = ("model", "model_name", "policy")
    supports_tools = True

    def __init__(self, model: Model, *, policy: SamplingPolicy | None = None,
                 model_name: str = "bindloop") -> None:
        if not callable(getattr(model, "complete", None)):
            raise UsageError("McpSampling(model=...) must be a bindloop.model.Model (a "
                             f"ModelAdapter, a RoutedModel, ...), got {type(model).__name__}")
        self.model = model
        self.policy = policy
        self.model_name = model_name

    async def __call__(self, request: SamplingRequest) -> Mapping[str, Any]:
        mode = request.tool_mode
        if mode not in _TOOL_CHOICES:
            raise McpRequestRefused(f"toolChoice mode {mode!r} is not one of "
                                    f"{', '.join(_TOOL_CHOICES)}", _INVALID_PARAMS)
        if mode == "required" and not request.tools:
            raise McpRequestRefused("toolChoice is required but no tools were given",
                                    _INVALID_PARAMS)
        tools = [_definition(raw) for raw in request.tools or ()]
        messages = sampling_messages(request)
        if self.policy is not None:
            verdict = self.policy(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict is not True:
                reason = verdict if isinstance(verdict, str) and verdict else "refused by policy"
                raise McpRequestRefused(f"sampling refused: {reason}")
        turn = await self._turn(messages, [] if mode == "none" else tools, mode)
        calls = turn.tool_calls if tools and mode != "none" else ()
        if mode == "required" and not calls:
            raise McpRequestRefused("the model answered without a tool call, and toolChoice "
                                    "is required", _INTERNAL)
        if not calls:
            return {"role": "assistant", "content": {"type": "text", "text": turn.text or ""},
                    "model": self.model_name,
                    "stopReason": "maxTokens" if turn.finish_reason == "length" else "endTurn"}
        offered = {t.name for t in tools}
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for call in calls:
            if call.name not in offered:
                raise McpRequestRefused(f"the model called {call.name!r}, a tool the server did "
                                        "not offer", _INTERNAL)
            parsed = read_tool_arguments(call.arguments)
            if not isinstance(parsed, ParsedArguments):
                raise McpRequestRefused(f"the model's arguments for {call.name!r} are not a JSON "
                                        f"object: {parsed.detail}", _INTERNAL)
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                           "input": dict(parsed.arguments)})
        return {"role": "assistant", "content": blocks, "model": self.model_name,
                "stopReason": "toolUse"}


    async def _turn(self, messages: list[Message], tools: list[ToolDefinition],
                    mode: str) -> ModelTurnResult:
        request = ModelRequest(tools=tuple(tools),
                               tool_choice="required" if mode == "required" else None)
        return await self.model.complete(messages, request)


def _definition(raw: Any) -> ToolDefinition:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise McpRequestRefused("a sampling tool needs a name", _INVALID_PARAMS)
    schema = raw.get("inputSchema", {"type": "object", "properties": {}})
    try:
        parameters = sanitize_tool_schema(schema if isinstance(schema, (dict, bool)) else {})
    except SchemaSanitizeError as exc:
        raise McpRequestRefused(f"sampling tool {raw['name']!r} has an unusable inputSchema: "
                                f"{exc}", _INVALID_PARAMS) from exc
    description = raw.get("description")
    return ToolDefinition(name=raw["name"], parameters=parameters,
                          description=description if isinstance(description, str) else "")


def sampling_messages(request: SamplingRequest) -> list[Message]:
    """The server's system prompt and messages as bindloop messages: text and images as parts,
    an assistant's ``tool_use`` blocks as its tool calls, a user's ``tool_result`` blocks as tool
    messages (one per result, content mapped as a tool result's).

    Raises
    ------
    McpRequestRefused
        (invalid params) a message of another role, a block of a kind not sampled here (audio),
        a ``tool_result`` mixed with other content or answering no ``tool_use`` of the message
        before it.
    """
    out: list[Message] = []
    if request.system_prompt:
        out.append(SystemMessage(content=request.system_prompt))
    open_uses: set[str] = set()
    for raw in request.messages:
        if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant"):
            raise McpRequestRefused("a sampling message needs role user or assistant",
                                    _INVALID_PARAMS)
        blocks = raw.get("content")
        items = blocks if isinstance(blocks, list) else [blocks]
        results = [b for b in items if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            out.extend(_tool_results(raw["role"], items, results, open_uses))
            open_uses = set()
            continue
        parts: list[ContentPart] = []
        calls: list[ToolCall] = []
        for block in items:
            if not isinstance(block, dict):
                raise McpRequestRefused("a sampling content block must be an object",
                                        _INVALID_PARAMS)
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(TextPart(text=block["text"]))
            elif kind == "image" and isinstance(block.get("data"), str):
                mime = block.get("mimeType")
                parts.append(ImagePart(data=block["data"],
                                       media_type=mime if isinstance(mime, str) else None))
            elif kind == "tool_use" and raw["role"] == "assistant":
                calls.append(_tool_call(block))
            else:
                raise McpRequestRefused("this client samples text, image, tool_use and "
                                        "tool_result content only", _INVALID_PARAMS)
        content: str | tuple[ContentPart, ...] = (
            parts[0].text if len(parts) == 1 and isinstance(parts[0], TextPart)
            else tuple(parts))
        open_uses = {c.id for c in calls}
        if raw["role"] == "user":
            out.append(UserMessage(content=content))
        else:
            out.append(AssistantMessage(content=content if parts else None,
                                        tool_calls=tuple(calls)))
    return out


def _tool_call(block: dict[str, Any]) -> ToolCall:
    ident, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not (isinstance(ident, str) and ident and isinstance(name, str) and name
            and isinstance(arguments, dict)):
        raise McpRequestRefused("a tool_use block needs an id, a name and an input object",
                                _INVALID_PARAMS)
    return ToolCall(id=ident, name=name,
                    arguments=msgspec.json.encode(arguments).decode())


def _tool_results(role: str, items: list[Any], results: list[dict[str, Any]],
                  open_uses: set[str]) -> list[Message]:
    # SEP-1577: a message with tool results holds nothing else, and answers the tool uses of the
    # message before it.
    if role != "user" or len(results) != len(items):
        raise McpRequestRefused("tool_result blocks go alone in a user message",
                                _INVALID_PARAMS)
    out: list[Message] = []
    for block in results:
        ident = block.get("toolUseId")
        if not isinstance(ident, str) or ident not in open_uses:
            raise McpRequestRefused(f"tool_result {ident!r} answers no tool_use of the message "
                                    "before it", _INVALID_PARAMS)
        raw_content = block.get("content")
        mapped = [map_content_block(b) for b in
                  (raw_content if isinstance(raw_content, list) else [])]
        structured = block.get("structuredContent")
        if not mapped and structured is not None:
            mapped = [TextPart(text=msgspec.json.encode(structured).decode())]
        content: str | tuple[ContentPart, ...] = (
            mapped[0].text if len(mapped) == 1 and isinstance(mapped[0], TextPart)
            else tuple(mapped))
        out.append(ToolMessage(tool_call_id=ident, content=content,
                               is_error=block.get("isError") is True))
    return out
