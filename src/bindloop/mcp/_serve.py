"""Requests a server sends the client, answered through ports the host fills: ``roots/list`` (a
host-given list), ``sampling/createMessage`` (a model the host passes, behind a policy the host
can refuse with), ``elicitation/create`` (surfaced to the host). ``ping`` is answered by the
session itself; a method with no port gets JSON-RPC "method not found".

Pure: the ports are the host's callables; nothing here performs I/O.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import msgspec

from ..contracts import (
    AssistantMessage,
    ContentPart,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    UserMessage,
)
from ..contracts import ModelTurnResult
from ..errors import UsageError
from ._errors import McpRequestRefused
from ._session import McpServerRequest

__all__ = (
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResult",
    "McpRoot",
    "McpSampling",
    "SamplingHandler",
    "SamplingRequest",
    "ServerRequestHandlers",
    "serve_request",
)

_INVALID_PARAMS = -32602
_INTERNAL = -32603
_REFUSED = -1  # what the SDKs answer when the user (here: the host's policy) declines sampling


class McpRoot(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One root the host offers the server (``roots/list``): a ``file://`` URI and a name."""

    uri: str
    name: str | None = None


class ElicitationRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``elicitation/create``: the server asks the user for input. In ``form`` mode
    ``requested_schema`` is a flat object schema of primitive fields; in ``url`` mode the user is
    sent to ``url``."""

    message: str
    requested_schema: dict[str, Any] | None = None
    mode: str = "form"
    url: str | None = None
    elicitation_id: str | None = None


class ElicitationResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The user's answer: ``accept`` (with ``content`` for a form), ``decline`` or ``cancel``.
    Fields of the form the user left out are filled with the schema's ``default`` values."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class SamplingRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``sampling/createMessage``: the server asks for a completion. ``messages`` stay raw MCP
    sampling messages (``role``, ``content``)."""

    messages: list[Any]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    model_preferences: dict[str, Any] | None = None
    include_context: str | None = None
    metadata: dict[str, Any] | None = None


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], Awaitable[ElicitationResult]]
SamplingHandler: TypeAlias = Callable[[SamplingRequest], Awaitable[Mapping[str, Any]]]
"""A raw sampling port: returns the ``CreateMessageResult`` object itself."""
SamplingPolicy: TypeAlias = Callable[[SamplingRequest], "bool | str | Awaitable[bool | str]"]
CallModel: TypeAlias = Callable[[list[Message], list[Any]], Awaitable[ModelTurnResult]]


class McpSampling:
    """Sampling answered by a model the host passes, behind a policy the host decides with.

    ``model(messages, tools)`` is a loop ``call_model`` port (bindloop messages in, a
    :class:`~bindloop.contracts.ModelTurnResult` out), called with no tools. ``policy(request)``
    returns ``True`` to allow, ``False`` or a reason (``str``) to refuse — the server then gets a
    JSON-RPC error saying so; without a policy every request is allowed. ``model_name`` is what
    the result's ``model`` field reports.
    """

    __slots__ = ("model", "model_name", "policy")

    def __init__(self, model: CallModel, *, policy: SamplingPolicy | None = None,
                 model_name: str = "bindloop") -> None:
        if not callable(model):
            raise UsageError("McpSampling(model=...) must be a call_model port")
        self.model = model
        self.policy = policy
        self.model_name = model_name

    async def __call__(self, request: SamplingRequest) -> Mapping[str, Any]:
        if self.policy is not None:
            verdict = self.policy(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict is not True:
                reason = verdict if isinstance(verdict, str) and verdict else "refused by policy"
                raise McpRequestRefused(f"sampling refused: {reason}")
        messages: list[Message] = []
        if request.system_prompt:
            messages.append(SystemMessage(content=request.system_prompt))
        for raw in request.messages:
            messages.append(_message(raw))
        turn = await self.model(messages, [])
        return {"role": "assistant", "content": {"type": "text", "text": turn.text or ""},
                "model": self.model_name,
                "stopReason": "maxTokens" if turn.finish_reason == "length" else "endTurn"}


def _message(raw: Any) -> Message:
    if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant"):
        raise McpRequestRefused("a sampling message needs role user or assistant",
                                _INVALID_PARAMS)
    blocks = raw.get("content")
    parts: list[ContentPart] = []
    for block in blocks if isinstance(blocks, list) else [blocks]:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(
                block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif isinstance(block, dict) and block.get("type") == "image" and isinstance(
                block.get("data"), str):
            mime = block.get("mimeType")
            parts.append(ImagePart(data=block["data"],
                                   media_type=mime if isinstance(mime, str) else None))
        else:
            raise McpRequestRefused("this client samples text and image content only",
                                    _INVALID_PARAMS)
    content: str | tuple[ContentPart, ...] = (
        parts[0].text if len(parts) == 1 and isinstance(parts[0], TextPart) else tuple(parts))
    if raw["role"] == "user":
        return UserMessage(content=content)
    return AssistantMessage(content=content)


class ServerRequestHandlers(msgspec.Struct, frozen=True, kw_only=True):
    """The ports that answer a server's requests; each one given is declared as a client
    capability in ``initialize``.

    ``roots``: the host's list (or a function returning it, asked on every ``roots/list``).
    ``sampling``: an :class:`McpSampling` or any :data:`SamplingHandler`. ``elicitation``: the
    host's :data:`ElicitationHandler` — in an agent, the place to ask the user; bindloop's
    agent-level suspend for it comes with approvals (see docs/mcp.md).
    """

    roots: Sequence[McpRoot] | Callable[[], Sequence[McpRoot]] | None = None
    sampling: SamplingHandler | None = None
    elicitation: ElicitationHandler | None = None

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.elicitation is not None:
            caps["elicitation"] = {"form": {}}
        return caps

    def serves(self) -> frozenset[str]:
        methods = set()
        if self.roots is not None:
            methods.add("roots/list")
        if self.sampling is not None:
            methods.add("sampling/createMessage")
        if self.elicitation is not None:
            methods.add("elicitation/create")
        return frozenset(methods)


async def serve_request(handlers: ServerRequestHandlers,
                        request: McpServerRequest) -> dict[str, Any]:
    """The result for ``request``, or :class:`McpRequestRefused` (the error to answer with).
    A handler's own exception, or an answer of the wrong type, is answered as an internal error
    naming the type only: the server always gets an answer, and the call or stream it came on
    goes on."""
    params = request.params or {}
    try:
        if request.method == "roots/list" and handlers.roots is not None:
            roots = handlers.roots() if callable(handlers.roots) else handlers.roots
            return {"roots": [msgspec.to_builtins(r) for r in roots]}
        if request.method == "sampling/createMessage" and handlers.sampling is not None:
            return dict(await handlers.sampling(_convert(params, SamplingRequest)))
        if request.method == "elicitation/create" and handlers.elicitation is not None:
            asked = _convert(params, ElicitationRequest)
            answer = await handlers.elicitation(asked)
            if not isinstance(answer, ElicitationResult):
                raise McpRequestRefused("the client's elicitation handler returned "
                                        f"{type(answer).__name__}, not an ElicitationResult",
                                        _INTERNAL)
            shown: dict[str, Any] = msgspec.to_builtins(_with_defaults(answer, asked))
            return shown
    except McpRequestRefused:
        raise
    except Exception as exc:  # the host's port failed: the server hears that, not the details
        raise McpRequestRefused(f"the client failed to answer {request.method}: "
                                f"{type(exc).__name__}", _INTERNAL) from exc
    raise McpRequestRefused(f"client does not support {request.method}", -32601)


def _convert(params: Mapping[str, Any], kind: type[Any]) -> Any:
    try:
        return msgspec.convert(dict(params), kind)
    except msgspec.ValidationError as exc:
        raise McpRequestRefused(f"invalid params: {exc}", _INVALID_PARAMS) from exc


def _with_defaults(answer: ElicitationResult, asked: ElicitationRequest) -> ElicitationResult:
    if answer.action != "accept" or asked.requested_schema is None:
        return answer
    properties = asked.requested_schema.get("properties")
    if not isinstance(properties, dict):
        return answer
    content = dict(answer.content or {})
    for name, schema in properties.items():
        if name not in content and isinstance(schema, dict) and "default" in schema:
            content[name] = schema["default"]
    return ElicitationResult(action="accept", content=content)
