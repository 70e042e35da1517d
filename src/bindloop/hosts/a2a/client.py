"""An A2A 1.0 client over httpx (JSON-RPC binding), and an A2A agent as a bindloop tool.

:class:`A2aClient` reads the agent's card (``/.well-known/agent-card.json`` under the agent's
URL), picks its JSON-RPC interface for protocol 1.x, and calls ``SendMessage``,
``SendStreamingMessage`` and ``SubscribeToTask`` (SSE), ``GetTask`` and ``CancelTask`` with the
``A2A-Version: 1.0`` header. The agent's JSON-RPC errors are raised as :class:`~bindloop.protocols.a2a.A2aRpcError`
(``code``, ``reason``, the agent's message); anything else that goes wrong on the way (the agent
unreachable, an HTTP error status, a body that is not an A2A answer, one over ``max_bytes``) is an
:class:`A2aClientError` whose message names the failure, never the URL.

:func:`a2a_tool` makes a :class:`~bindloop.tools.Tool` of an agent: the model's ``message`` is
sent as a user message (``task_id`` continues a task that asked for input), and the tool returns
the task's artifacts as text. A task that ends asking for input returns what it asks and its id;
one that fails, is rejected or canceled, and every error above, is a :class:`ToolError` the model
reads.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, TypeVar

import anyio.lowlevel
import msgspec

from bindloop.contracts import ToolError, ToolResult
from bindloop.errors import BindloopError
from bindloop.tools import Tool, define_tool
from bindloop.protocols.a2a import (
    A2A_AGENT_CARD_PATH,
    A2A_PROTOCOL_VERSION,
    A2aAgentCard,
    A2aMessage,
    A2aPart,
    A2aRpcError,
    A2aSendConfiguration,
    A2aSendMessageRequest,
    A2aStreamResponse,
    A2aTask,
)

__all__ = ("A2aClient", "A2aClientError", "AskAgent", "a2a_tool", "task_text")

_JSON = msgspec.json.Encoder()
_T = TypeVar("_T")


class A2aClientError(BindloopError):
    """The agent could not be asked or did not answer in A2A: ``kind`` is ``transport``,
    ``http_status`` (``status`` set), ``bad_response`` or ``too_large``."""

    def __init__(self, message: str, *, kind: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class _Envelope(msgspec.Struct, frozen=True):
    jsonrpc: str = ""
    id: Any = None
    result: Any = msgspec.UNSET
    error: Any = msgspec.UNSET


class _SendResult(msgspec.Struct, frozen=True, rename="camel"):
    task: A2aTask | None = None
    message: A2aMessage | None = None


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("A2aClient needs httpx: pip install httpx (bindloop's httpx extra)") from exc
    return httpx


class A2aClient:
    """A client of the agent at ``url`` (its base URL: the card is read from
    ``url + /.well-known/agent-card.json``; pass ``card`` to skip that). ``http`` is an
    ``httpx.AsyncClient`` the host owns (else this client makes one per event loop, and
    :meth:`aclose` closes the running loop's);
    ``headers`` go with every request (credentials). ``timeout_s`` bounds each request (a stream
    between two events); ``max_bytes`` each answer or event."""

    def __init__(self, url: str, *, http: Any = None, headers: dict[str, str] | None = None,
                 card: A2aAgentCard | None = None, timeout_s: float = 120.0,
                 max_bytes: int = 4 * 1024 * 1024,
                 new_id: Callable[[], str] | None = None) -> None:
        self._url = url.rstrip("/")
        self._owned = http is None
        self._given = http
        self._clients: tuple[object, Any] | None = None  # (event loop token, client it owns)
        self._headers = {**(headers or {}), "A2A-Version": A2A_PROTOCOL_VERSION}
        self._card = card
        self._timeout = timeout_s
        self._max = max_bytes
        self._new_id = new_id or (lambda: uuid.uuid4().hex)

    @property
    def _http(self) -> Any:
        """The httpx client for the running event loop: the host's, or one this client owns per
        loop (an httpx client's pooled connections cannot move between loops, and a tool made
        once may serve run after run, each on its own ``anyio.run``)."""
        if self._given is not None:
            return self._given
        loop = anyio.lowlevel.current_token()
        if self._clients is None or self._clients[0] != loop:
            # a client of an earlier loop cannot be closed from this one: it is dropped
            self._clients = (loop, _httpx().AsyncClient())
        return self._clients[1]

    async def aclose(self) -> None:
        """Close the client this one owns on the running loop (the host's is the host's)."""
        clients, self._clients = self._clients, None
        if clients is not None and clients[0] == anyio.lowlevel.current_token():
            await clients[1].aclose()

    async def __aenter__(self) -> A2aClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def card(self) -> A2aAgentCard:
        """The agent's card (read once)."""
        if self._card is None:
            body = await self._request("GET", self._url + A2A_AGENT_CARD_PATH, None)
            try:
                self._card = msgspec.json.decode(body, type=A2aAgentCard)
            except msgspec.DecodeError:
                raise A2aClientError("the agent card is not an A2A 1.0 card",
                                     kind="bad_response") from None
        return self._card

    async def _rpc_url(self) -> str:
        url = (await self.card()).jsonrpc_url()
        if url is None:
            raise A2aClientError("the agent card offers no JSON-RPC interface for A2A 1.x",
                                 kind="bad_response")
        return url

    def message(self, text: str, *, task_id: str | None = None,
                context_id: str | None = None) -> A2aMessage:
        """A user message of ``text`` (with a fresh message id)."""
        return A2aMessage(message_id=self._new_id(), role="ROLE_USER", parts=(A2aPart(text=text),),
                          task_id=task_id, context_id=context_id)

    async def send(self, message: A2aMessage, *, return_immediately: bool = False
                   ) -> A2aTask | A2aMessage:
        """``SendMessage``: the task (once it ended or waits on input, unless
        ``return_immediately``) or the agent's direct message."""
        request = A2aSendMessageRequest(message=message, configuration=A2aSendConfiguration(
            return_immediately=return_immediately))
        result = await self._call("SendMessage", request)
        try:
            answer = msgspec.convert(result, _SendResult)
        except msgspec.ValidationError:
            raise A2aClientError("SendMessage answered neither a task nor a message",
                                 kind="bad_response") from None
        if answer.task is not None:
            return answer.task
        if answer.message is not None:
            return answer.message
        raise A2aClientError("SendMessage answered neither a task nor a message",
                             kind="bad_response")

    async def ask(self, message: A2aMessage) -> A2aTask | A2aMessage:
        """``message`` answered: the task once it ended or waits on input, or the agent's direct
        message. An agent that streams is read as a stream (``timeout_s`` then bounds the silence
        between two events, not the whole task, which may run for minutes) and its task read back
        whole with ``GetTask``; one that does not is asked with a blocking ``SendMessage``."""
        if not (await self.card()).capabilities.streaming:
            return await self.send(message)
        task_id: str | None = None
        async for event in self.stream(message):
            if event.message is not None and task_id is None:
                return event.message
            if event.task is not None:
                task_id = event.task.id
            elif event.status_update is not None:
                task_id = event.status_update.task_id
        if task_id is None:
            raise A2aClientError("the agent's stream named no task", kind="bad_response")
        return await self.get_task(task_id)

    async def get_task(self, task_id: str, *, history_length: int | None = None) -> A2aTask:
        params: dict[str, Any] = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        return self._as(await self._call("GetTask", params), A2aTask, "GetTask")

    async def cancel_task(self, task_id: str) -> A2aTask:
        return self._as(await self._call("CancelTask", {"id": task_id}), A2aTask, "CancelTask")

    def stream(self, message: A2aMessage) -> AsyncIterator[A2aStreamResponse]:
        """``SendStreamingMessage``: each streamed result as it arrives (the task first, then its
        status and artifact updates) until the agent closes the stream."""
        return self._sse("SendStreamingMessage", A2aSendMessageRequest(message=message))

    def subscribe(self, task_id: str) -> AsyncIterator[A2aStreamResponse]:
        """``SubscribeToTask``: a task that has not ended, from now on (the task first, then its
        updates until it ends or asks for input) -- how a client that lost its stream follows
        the task again."""
        return self._sse("SubscribeToTask", {"id": task_id})

    async def _sse(self, method: str, params: Any) -> AsyncIterator[A2aStreamResponse]:
        url = await self._rpc_url()
        body = _JSON.encode({"jsonrpc": "2.0", "id": self._new_id(), "method": method,
                             "params": params})
        httpx = _httpx()
        headers = {**self._headers, "content-type": "application/json",
                   "accept": "text/event-stream"}
        try:
            async with self._http.stream("POST", url, content=body, headers=headers,
                                         timeout=self._timeout) as response:
                if response.status_code != 200:
                    raise A2aClientError(f"the agent answered HTTP {response.status_code}",
                                         kind="http_status", status=response.status_code)
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    raw = await _read(response, self._max)
                    self._result(raw)  # an error answer raises; a result here is not a stream
                    raise A2aClientError("the agent did not stream", kind="bad_response")
                async for data in _sse_data(response, self._max):
                    yield self._as(self._result(data), A2aStreamResponse, "a streamed event")
        except httpx.HTTPError as exc:
            raise A2aClientError(f"the agent could not be reached ({type(exc).__name__})",
                                 kind="transport") from None

    # -- plumbing --------------------------------------------------------------------------------

    async def _call(self, method: str, params: Any) -> Any:
        url = await self._rpc_url()
        body = _JSON.encode({"jsonrpc": "2.0", "id": self._new_id(), "method": method,
                             "params": params})
        return self._result(await self._request("POST", url, body))

    def _result(self, raw: bytes) -> Any:
        try:
            envelope = msgspec.json.decode(raw, type=_Envelope)
        except msgspec.DecodeError:
            raise A2aClientError("the agent's answer is not JSON-RPC",
                                 kind="bad_response") from None
        if isinstance(envelope.error, dict):
            code = envelope.error.get("code")
            text = envelope.error.get("message")
            raise A2aRpcError(code if isinstance(code, int) else -32603,
                              text if isinstance(text, str) else "the agent refused the call")
        if envelope.result is msgspec.UNSET:
            raise A2aClientError("the agent's answer has neither result nor error",
                                 kind="bad_response")
        return envelope.result

    @staticmethod
    def _as(value: Any, type_: type[_T], what: str) -> _T:
        try:
            return msgspec.convert(value, type_)
        except msgspec.ValidationError:
            raise A2aClientError(f"{what} is not the A2A 1.0 shape",
                                 kind="bad_response") from None

    async def _request(self, method: str, url: str, body: bytes | None) -> bytes:
        httpx = _httpx()
        headers = dict(self._headers)
        if body is not None:
            headers["content-type"] = "application/json"
        try:
            async with self._http.stream(method, url, content=body, headers=headers,
                                         timeout=self._timeout) as response:
                raw = await _read(response, self._max)
        except httpx.HTTPError as exc:
            raise A2aClientError(f"the agent could not be reached ({type(exc).__name__})",
                                 kind="transport") from None
        if response.status_code != 200:
            try:  # a JSON-RPC error with an HTTP status (a refused identity, a too large body)
                self._result(raw)
            except A2aRpcError as exc:
                raise A2aClientError(f"the agent answered HTTP {response.status_code}: "
                                     f"{exc.message}", kind="http_status",
                                     status=response.status_code) from None
            except A2aClientError:
                pass
            raise A2aClientError(f"the agent answered HTTP {response.status_code}",
                                 kind="http_status", status=response.status_code)
        return raw


async def _read(response: Any, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise A2aClientError(f"the agent's answer is over {limit} bytes", kind="too_large")
        chunks.append(chunk)
    return b"".join(chunks)


async def _sse_data(response: Any, limit: int) -> AsyncIterator[bytes]:
    """The ``data`` of each SSE event (multi-line data joined with newlines)."""
    buffer = b""
    data: list[bytes] = []
    async for chunk in response.aiter_bytes():
        buffer += chunk
        if len(buffer) > limit:
            raise A2aClientError(f"an event is over {limit} bytes", kind="too_large")
        while True:
            cut = buffer.find(b"\n")
            if cut < 0:
                break
            line, buffer = buffer[:cut].rstrip(b"\r"), buffer[cut + 1:]
            if not line:
                if data:
                    yield b"\n".join(data)
                data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield b"\n".join(data)


def task_text(task: A2aTask) -> str:
    """A task's output as text: its artifacts' text parts (data parts as JSON), artifacts
    separated by a blank line; without artifacts, its status message's text."""
    pieces = ["".join(_part_text(p) for p in a.parts) for a in task.artifacts]
    pieces = [p for p in pieces if p]
    if not pieces and task.status.message is not None:
        pieces = ["\n".join(_part_text(p) for p in task.status.message.parts)]
    return "\n\n".join(pieces)


def _part_text(part: A2aPart) -> str:
    if part.text is not None:
        return part.text
    if part.data is not msgspec.UNSET:
        return _JSON.encode(part.data).decode()
    if part.url is not None:
        return part.url
    return ""


class AskAgent(msgspec.Struct, frozen=True, kw_only=True):
    """The arguments of an :func:`a2a_tool`."""

    message: Annotated[str, msgspec.Meta(description="What to ask or tell the agent.")]
    task_id: Annotated[str | None, msgspec.Meta(
        description="Only to answer the agent's question: the task_id it gave.")] = None


def a2a_tool(url: str | A2aClient, *, name: str = "ask_agent",
             description: str | None = None, headers: dict[str, str] | None = None,
             http: Any = None) -> Tool[AskAgent, Any]:
    """The A2A agent at ``url`` (or behind an :class:`A2aClient`) as a tool named ``name``: the
    model's ``message`` goes to the agent as a user message (:meth:`A2aClient.ask`: until the
    task ends or asks for input), and the tool returns the task's text (:func:`task_text`).

    A task that asks for input returns ``input required (task_id=...)`` and the agent's question;
    the model answers by calling the tool again with that ``task_id``. A failed, rejected or
    canceled task, an error the agent answered and an agent that cannot be reached are a
    :class:`~bindloop.contracts.ToolError` the model reads (never the URL or a credential)."""
    client = url if isinstance(url, A2aClient) else A2aClient(url, headers=headers, http=http)
    text = description or ("Ask another agent (over A2A) and get its answer. Send the whole "
                           "request as `message`; set `task_id` only to answer a question the "
                           "agent asked.")

    async def execute(args: AskAgent, _ctx: object) -> ToolResult | ToolError:
        try:
            answer = await client.ask(client.message(args.message, task_id=args.task_id))
        except A2aRpcError as exc:
            return ToolError(error=f"the agent refused the message ({exc.reason or exc.code}): "
                                   f"{exc.message}")
        except A2aClientError as exc:
            return ToolError(error=str(exc))
        if isinstance(answer, A2aMessage):
            return ToolResult(content="\n".join(_part_text(p) for p in answer.parts))
        state = answer.status.state
        if state == "TASK_STATE_COMPLETED":
            return ToolResult(content=task_text(answer))
        if state in ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"):
            asked = "" if answer.status.message is None else "\n".join(
                _part_text(p) for p in answer.status.message.parts if p.text is not None)
            return ToolResult(content=f"input required (task_id={answer.id}): {asked}")
        detail = "" if answer.status.message is None else ": " + "\n".join(
            _part_text(p) for p in answer.status.message.parts)
        return ToolError(error=f"the agent's task ended {state.removeprefix('TASK_STATE_')}"
                               f"{detail}")

    return define_tool(name=name, description=text, args=AskAgent, execute=execute)
