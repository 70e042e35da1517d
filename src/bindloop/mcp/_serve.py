"""Requests a server sends the client, answered through ports the host fills: ``roots/list`` (a
host-given list), ``sampling/createMessage`` (a model the host passes, behind a policy the host
can refuse with), ``elicitation/create`` (surfaced to the host). ``ping`` is answered by the
session itself; a method with no port gets JSON-RPC "method not found".

Pure: the ports are the host's callables; nothing here performs I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import msgspec

from ._errors import McpRequestRefused
from ._sampling import McpSampling, SamplingRequest
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


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], Awaitable[ElicitationResult]]
SamplingHandler: TypeAlias = Callable[[SamplingRequest], Awaitable[Mapping[str, Any]]]
"""A raw sampling port: returns the ``CreateMessageResult`` object itself."""
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
            caps["sampling"] = {"tools": {}} if _samples_tools(self.sampling) else {}
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
            sampled = _convert(params, SamplingRequest)
            if (sampled.tools is not None or sampled.tool_choice is not None) and not \
                    _samples_tools(handlers.sampling):
                raise McpRequestRefused("this client's sampling does not take tools (the "
                                        "sampling.tools capability is not declared)",
                                        _INVALID_PARAMS)
            return dict(await handlers.sampling(sampled))
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


def _samples_tools(handler: object) -> bool:
    return getattr(handler, "supports_tools", False) is True


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
