"""Requests a server sends the client, answered through ports the host fills: ``roots/list`` (a
host-given list), ``sampling/createMessage`` (a model the host passes, behind a policy the host
can refuse with), ``elicitation/create`` (surfaced to the host). ``ping`` is answered by the
session itself; a method with no port gets JSON-RPC "method not found".

Pure: the ports are the host's callables; nothing here performs I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import msgspec

from ._elicit import ElicitationRequest, ElicitationResult, fill_defaults
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


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], Awaitable[ElicitationResult]]
SamplingHandler: TypeAlias = Callable[[SamplingRequest], Awaitable[Mapping[str, Any]]]
"""A raw sampling port: returns the ``CreateMessageResult`` object itself."""


class ServerRequestHandlers(msgspec.Struct, frozen=True, kw_only=True):
    """The ports that answer a server's requests; each one given is declared as a client
    capability in ``initialize``.

    ``roots``: the host's list (or a function returning it, asked on every ``roots/list``).
    ``sampling``: an :class:`McpSampling` or any :data:`SamplingHandler`. ``elicitation``: the
    host's :data:`ElicitationHandler` for form-mode requests — in an agent, the place to ask the
    user (or :class:`~bindloop.mcp.server_requests.PendingElicitations`, which lets the host answer later).
    ``url_elicitation``: the handler for URL-mode requests (2025-11-25): show the user the URL
    and, with their consent, open it; answer ``accept`` (no content), ``decline`` or ``cancel``.
    ``tasks``: also run task-augmented sampling and elicitation requests as tasks the server polls
    (declares ``tasks.requests``, ``tasks.list`` and ``tasks.cancel``; see docs/mcp.md).
    """

    roots: Sequence[McpRoot] | Callable[[], Sequence[McpRoot]] | None = None
    sampling: SamplingHandler | None = None
    elicitation: ElicitationHandler | None = None
    url_elicitation: ElicitationHandler | None = None
    tasks: bool = False

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        if self.sampling is not None:
            caps["sampling"] = {"tools": {}} if _samples_tools(self.sampling) else {}
        modes: dict[str, Any] = {}
        if self.elicitation is not None:
            modes["form"] = {}
        if self.url_elicitation is not None:
            modes["url"] = {}
        if modes:
            caps["elicitation"] = modes
        requests: dict[str, Any] = {}
        if self.tasks and self.sampling is not None:
            requests["sampling"] = {"createMessage": {}}
        if self.tasks and modes:
            requests["elicitation"] = {"create": {}}
        if requests:
            caps["tasks"] = {"list": {}, "cancel": {}, "requests": requests}
        return caps

    def serves(self) -> frozenset[str]:
        methods = set()
        if self.roots is not None:
            methods.add("roots/list")
        if self.sampling is not None:
            methods.add("sampling/createMessage")
        if self.elicitation is not None or self.url_elicitation is not None:
            methods.add("elicitation/create")
        if "tasks" in self.capabilities():
            methods.update(("tasks/get", "tasks/result", "tasks/list", "tasks/cancel"))
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
        if request.method == "elicitation/create":
            asked = _convert(params, ElicitationRequest)
            answer = await elicit(handlers, asked)
            shown: dict[str, Any] = msgspec.to_builtins(answer)
            return shown
    except McpRequestRefused:
        raise
    except Exception as exc:  # the host's port failed: the server hears that, not the details
        raise McpRequestRefused(f"the client failed to answer {request.method}: "
                                f"{type(exc).__name__}", _INTERNAL) from exc
    raise McpRequestRefused(f"client does not support {request.method}", -32601)


async def elicit(handlers: ServerRequestHandlers,
                 asked: ElicitationRequest) -> ElicitationResult:
    """Ask the handler for ``asked``'s mode; form answers get the schema's defaults.

    Raises
    ------
    McpRequestRefused
        (invalid params) a mode this client has no handler for, a URL request without its URL or
        id; (internal) a handler answering something else than an :class:`ElicitationResult`, or
        content for a URL-mode request (whose interaction happens out of band).
    """
    if asked.mode == "url":
        handler = handlers.url_elicitation
        if handler is None:
            raise McpRequestRefused("this client does not do URL-mode elicitation",
                                    _INVALID_PARAMS)
        if not asked.url or not asked.elicitation_id:
            raise McpRequestRefused("a URL-mode elicitation needs a url and an elicitationId",
                                    _INVALID_PARAMS)
    elif asked.mode == "form":
        handler = handlers.elicitation
        if handler is None:
            raise McpRequestRefused("this client does not do form-mode elicitation",
                                    _INVALID_PARAMS)
    else:
        raise McpRequestRefused(f"unknown elicitation mode {asked.mode!r}", _INVALID_PARAMS)
    answer = await handler(asked)
    if not isinstance(answer, ElicitationResult):
        raise McpRequestRefused("the client's elicitation handler returned "
                                f"{type(answer).__name__}, not an ElicitationResult", _INTERNAL)
    if asked.mode == "url":
        if answer.content is not None:
            raise McpRequestRefused("a URL-mode elicitation is answered without content",
                                    _INTERNAL)
        return answer
    return _with_defaults(answer, asked)


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
    content = fill_defaults(dict(answer.content or {}), asked.requested_schema)
    return ElicitationResult(action="accept", content=content)
