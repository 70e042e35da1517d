"""One MCP HTTP request answered whole, for hosts that hand over a request and send back a
response (a Worker's ``fetch``, any request/response framework): :func:`answer_mcp_http` checks
the transport's rules (method, ``Content-Type``, ``Accept``, body size), lets
:class:`~bindloop.mcp.server.McpServer` decide, runs a tool call to its end and returns an
:class:`McpHttpAnswer` (status, headers, body). A call that asked for progress, from a client
that takes event streams, is answered as one event stream holding its progress notifications and
then its response (sent when the call ends: no live progress); so is any call from a client
that takes no JSON. The ASGI binding, which streams,
is ``bindloop.hosts.mcp.server.McpServerApp``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from ._server import McpCall, McpReply, McpServer

__all__ = ("McpHttpAnswer", "answer_mcp_http", "mcp_post_refusal")

_JSON = (("content-type", "application/json"),)
_ENCODER = msgspec.json.Encoder()


class McpHttpAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """What to send: ``status``, ``headers`` (lower-case names) and ``body`` (empty for none)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


def _refusal(status: int, message: str,
             headers: tuple[tuple[str, str], ...] = ()) -> McpHttpAnswer:
    body = _ENCODER.encode({"jsonrpc": "2.0", "id": None,
                            "error": {"code": -32000, "message": message}})
    return McpHttpAnswer(status=status, headers=(*_JSON, *headers), body=body)


def mcp_post_refusal(headers: Mapping[str, str]) -> tuple[int, str] | None:
    """Why a POST with these (lower-case) headers is refused before its body is read:
    ``(415, ...)`` for a body that is not ``application/json``, ``(406, ...)`` for an ``Accept``
    with neither JSON nor an event stream; ``None`` when it may go on."""
    kind = (headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if kind != "application/json":
        return 415, "Unsupported Media Type: send application/json"
    accept = (headers.get("accept") or "*/*").lower()
    if not ("*/*" in accept or "application/json" in accept or "text/event-stream" in accept):
        return 406, "Not Acceptable: accept application/json or text/event-stream"
    return None


def mcp_param_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers among ``headers`` (lower-case names), for
    :meth:`McpServer.post`: the name after ``mcp-param-`` to the value (the first of repeats)."""
    found: dict[str, str] = {}
    for name, value in headers:
        if name.startswith("mcp-param-") and len(name) > 10:
            found.setdefault(name[10:], value)
    return found


def _takes(headers: Mapping[str, str], kind: str) -> bool:
    accept = (headers.get("accept") or "*/*").lower()
    return "*/*" in accept or kind in accept


def _reply(reply: McpReply) -> McpHttpAnswer:
    headers: tuple[tuple[str, str], ...] = _JSON if reply.body is not None else ()
    if reply.session_id is not None:
        headers = (*headers, ("mcp-session-id", reply.session_id))
    return McpHttpAnswer(status=reply.status, headers=headers, body=reply.body or b"")


async def answer_mcp_http(server: McpServer, *, method: str, headers: Mapping[str, str],
                          body: bytes, identity: str = "") -> McpHttpAnswer:
    """Answer one request to the MCP endpoint. ``headers`` with lower-case names; ``body`` as
    received (the host bounds its reading by ``server.max_body``: a longer one is a 413 here);
    ``identity`` is what the host's authorization decided. Never raises for anything a client
    sends: every refusal is a JSON-RPC error body with nothing internal in it.

    ``POST``: the message, as :meth:`McpServer.post` decides, a tool call run to its end.
    ``DELETE``: :meth:`McpServer.delete`. Anything else: 405 naming ``POST, DELETE`` (this
    binding opens no stream of the server's own). It is :func:`decide_mcp_http` then, for a
    call, :func:`answer_mcp_call`."""
    decided = decide_mcp_http(server, method=method, headers=headers, body=body,
                              identity=identity)
    if isinstance(decided, McpHttpAnswer):
        return decided
    return await answer_mcp_call(server, decided, headers)


def decide_mcp_http(server: McpServer, *, method: str, headers: Mapping[str, str],
                    body: bytes, identity: str = "") -> McpHttpAnswer | McpCall:
    """:func:`answer_mcp_http` up to the tool: the whole answer, or the :class:`McpCall` to run
    — with :func:`answer_mcp_call`, or by a host that streams: when :func:`mcp_http_streams`
    says the answer is an event stream, each message ``McpServer.run_call`` emits is one
    ``event: message`` as it comes, then the response."""
    verb = method.upper()
    session_id = headers.get("mcp-session-id")
    if verb == "DELETE":
        return _reply(server.delete(session_id, identity=identity))
    if verb != "POST":
        return _refusal(405, "Method not allowed", (("allow", "POST, DELETE"),))
    refused = mcp_post_refusal(headers)
    if refused is not None:
        return _refusal(*refused)
    if len(body) > server.max_body:
        return _refusal(413, "the request body is too large")
    decided = server.post(body, session_id=session_id,
                          protocol_version=headers.get("mcp-protocol-version"),
                          identity=identity, method_header=headers.get("mcp-method"),
                          name_header=headers.get("mcp-name"),
                          param_headers=mcp_param_headers(headers.items()))
    if isinstance(decided, McpReply):
        return _reply(decided)
    return decided


def mcp_http_streams(call: McpCall, headers: Mapping[str, str]) -> bool:
    """Whether ``call`` is answered on an event stream as it runs: the client asked for progress
    (a ``progressToken``) and its ``Accept`` takes ``text/event-stream``."""
    return call.progress_token is not None and _takes(headers, "text/event-stream")


async def answer_mcp_call(server: McpServer, call: McpCall,
                          headers: Mapping[str, str]) -> McpHttpAnswer:
    """Run ``call`` to its end and answer it whole: JSON, or an event stream holding its
    progress notifications and then the response (:func:`mcp_http_streams`, or a client that
    takes no JSON)."""
    return await _run(server, call, headers)


async def _run(server: McpServer, call: McpCall, headers: Mapping[str, str]) -> McpHttpAnswer:
    progress: list[bytes] = []
    response = await server.run_call(call, progress.append)
    if not mcp_http_streams(call, headers) and _takes(headers, "application/json"):
        return McpHttpAnswer(status=200, headers=_JSON, body=response)
    events = b"".join(b"event: message\ndata: " + message + b"\n\n"
                      for message in (*progress, response))
    return McpHttpAnswer(status=200, headers=(("content-type", "text/event-stream"),
                                              ("cache-control", "no-cache")), body=events)
