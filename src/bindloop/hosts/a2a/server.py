"""A bindloop agent served as an A2A 1.0 agent: the JSON-RPC binding as a plain ASGI app.

Routes (run it under any ASGI server with lifespan on, e.g. ``uvicorn``):

``GET /.well-known/agent-card.json``
    The agent card: name, description, skills, ``capabilities.streaming``, and the JSON-RPC
    interface (``protocolBinding: JSONRPC``, ``protocolVersion: 1.0``) at ``rpc_path``.
``POST <rpc_path>`` (``/`` by default)
    JSON-RPC 2.0: ``SendMessage``, ``SendStreamingMessage`` (SSE), ``GetTask``, ``ListTasks``,
    ``CancelTask``, ``SubscribeToTask`` (SSE). Push notifications are not offered
    (``-32003``); there is no extended card (``-32004``).

A task is a run of the :data:`~bindloop.hosts.chat.run.Runner` (``agent_runner(...)`` makes one):
``TASK_STATE_SUBMITTED`` when it is taken, ``WORKING`` while the run goes, then ``COMPLETED``,
``FAILED`` (the client reads :func:`~bindloop.hosts.chat.errors.error_text`'s category, never the
exception), ``CANCELED`` (``CancelTask`` stops the run) or ``INPUT_REQUIRED`` when the run ends
waiting on an approval or a tool's question. The next message with that task's id -- or only its
context's id -- answers it (:func:`bindloop.protocols.a2a.a2a_reply`) and the task runs again from
where it stopped. A new task in a known context continues that context's conversation: the server
keeps each context's transcript (in memory, the oldest ended tasks dropped past ``max_tasks``).

Every JSON-RPC request goes through ``authorize`` (the web host's identity hook): a task and a
context belong to the identity that made them; another identity finds neither (``-32001``). The
card is public. Bodies are bounded (``max_body``, ``body_timeout_s``); errors are typed JSON-RPC
errors whose messages name the problem, never a value, a path or an exception's text.

The runner's events are read through :class:`~bindloop.protocols.a2a.A2aTaskEncoder` and
:class:`~bindloop.protocols.a2a.RunRecorder`: the agent's run events -- completion stream events,
``TurnStartEvent``, ``ToolCallDoneEvent``, ``TurnDoneEvent``, ``TurnFailedEvent``,
``ToolFinishedEvent``, ``ApprovalRequestedEvent``, ``ApprovalDecidedEvent`` -- and a turn text
stream's ``TurnResetEvent`` (``ToolStartedEvent`` and ``CheckpointSavedEvent`` are read past).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskGroup

from bindloop.contracts import (
    ToolCall,
    UserMessage,
)
from bindloop.protocols.a2a import (
    A2A_AGENT_CARD_PATH,
    TERMINAL_STATES,
    A2aAgentCard,
    A2aAgentProvider,
    A2aAgentSkill,
    A2aCancelTaskRequest,
    A2aErrorCode,
    A2aGetTaskRequest,
    A2aRpcError,
    A2aSendMessageRequest,
    A2aStreamResponse,
    A2aSubscribeRequest,
    A2aTaskEncoder,
    A2aTaskStatus,
    RunRecorder,
    a2a_open_calls,
    a2a_reply,
    a2a_user_content,
    check_a2a_version,
    check_user_message,
    decode_a2a_call,
    decode_a2a_params,
    encode_a2a_error,
    encode_a2a_result,
)

from bindloop.clock import iso_timestamp
from bindloop.hosts.a2a._card import agent_card, card_for_request
from bindloop.hosts.a2a._streaming import Frames, stream_task
from bindloop.hosts.a2a._tasks import (
    Task,
    TaskStore,
    check_history_length,
    status_event,
    until_settled,
)
from bindloop.hosts.asgi.chat import Receive, Scope, Send, chat_request, read_body
from bindloop.hosts.chat.run import ChatInput, Runner, drive_run
from bindloop.hosts.chat.access import Authorize, ChatRefused, scoped_chat_id
from bindloop.hosts.chat.bodies import BodyRefused, staggered_timeout
from bindloop.hosts.chat.errors import error_text

__all__ = ("A2aServer",)

LOGGER = logging.getLogger("bindloop.hosts.a2a.server")
_JSON = msgspec.json.Encoder()
_INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
_PUSH_METHODS = frozenset({"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
                           "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"})


class _Refused(Exception):
    def __init__(self, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()
                 ) -> None:
        super().__init__("refused")
        self.status = status
        self.body = body
        self.headers = list(headers)


class A2aServer:
    """The A2A ASGI application over ``runner``.

    The card says ``name``, ``description``, ``skills`` (:class:`~bindloop.protocols.a2a.A2aAgentSkill`;
    without any, one ``chat`` skill of the name and description: the card requires one),
    ``version``, ``provider`` and ``security_schemes``/``security_requirements`` (ProtoJSON
    objects, for an ``authorize`` that checks them); its JSON-RPC URL is ``url`` (the public URL of
    ``rpc_path``), or, without it, the request's own scheme and ``Host`` joined with
    ``rpc_path``. ``streaming=False`` refuses the streaming methods (and says so on the card).

    ``authorize``, ``max_body``, ``body_timeout_s``, ``max_runs`` and ``max_runs_per_identity``
    work as on :class:`~bindloop.hosts.asgi.chat.ChatApp` (a message past a run bound gets ``-32603``
    saying so). ``max_tasks`` bounds the tasks kept: past it the tasks that
    ended longest ago are forgotten (with their contexts' transcripts). ``new_id`` makes task
    and context ids; ``clock_ms`` is the wall clock of the status timestamps."""

    def __init__(self, runner: Runner, *, name: str, description: str,
                 skills: Sequence[A2aAgentSkill] = (), version: str = "1.0.0",
                 url: str | None = None, rpc_path: str = "/",
                 provider: A2aAgentProvider | None = None,
                 security_schemes: dict[str, Any] | None = None,
                 security_requirements: Sequence[dict[str, Any]] = (),
                 streaming: bool = True, authorize: Authorize | None = None,
                 max_body: int = 1024 * 1024, body_timeout_s: float = 15.0,
                 max_tasks: int = 1000, max_runs: int = 256, max_runs_per_identity: int = 8,
                 new_id: Callable[[], str] | None = None,
                 clock_ms: Callable[[], float] | None = None) -> None:
        if not rpc_path.startswith("/"):
            raise ValueError(f"rpc_path must start with '/', got {rpc_path!r}")
        if max_tasks < 1 or max_runs < 1 or max_runs_per_identity < 1:
            raise ValueError("max_tasks, max_runs and max_runs_per_identity must be at least 1")
        if not body_timeout_s > 0:
            raise ValueError(f"body_timeout_s must be positive, got {body_timeout_s!r}")
        self._runner = runner
        self._card = agent_card(
            name=name, description=description, skills=skills, version=version,
            url=url or rpc_path, streaming=streaming, provider=provider,
            security_schemes=security_schemes, security_requirements=security_requirements)
        self._fixed_url = url is not None
        self._rpc_path = rpc_path.rstrip("/") or "/"
        self._streaming = streaming
        self._authorize = authorize
        self._max_body = max_body
        self._body_timeout_s = body_timeout_s
        self._bodies = 0  # body reads started: their deadlines are staggered
        self._max_runs = max_runs
        self._max_runs_per_identity = max_runs_per_identity
        self._new_id = new_id or (lambda: uuid.uuid4().hex)
        self._now = clock_ms or (lambda: time.time() * 1000)
        self._tg: TaskGroup | None = None
        self._tasks = TaskStore(max_tasks)
        self._runs = 0
        self._per_identity: dict[str, int] = {}

    # -- ASGI ------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            await self._route(scope, receive, send)
        except _Refused as exc:
            await _respond(send, exc.status, exc.body, exc.headers)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            tg.cancel_scope.cancel()  # runs still going end canceled
        self._tg = None
        await send({"type": "lifespan.shutdown.complete"})

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        if path == A2A_AGENT_CARD_PATH and method == "GET":
            body = _JSON.encode(self.card(scope))
            # a card naming the request's own Host is that request's: no shared cache keeps it
            caching = [(b"cache-control", b"public, max-age=300")] if self._fixed_url else \
                [(b"cache-control", b"private, max-age=300"), (b"vary", b"host")]
            await _respond(send, 200, body, caching)
            return
        if path != self._rpc_path:
            await _respond(send, 404, _JSON.encode({"error": "not_found"}))
            return
        if method != "POST":
            await _respond(send, 405, _JSON.encode({"error": "method_not_allowed"}),
                           [(b"allow", b"POST")])
            return
        identity = await self._identify(scope)
        body = await self._body(scope, receive)
        try:
            call = decode_a2a_call(body, max_bytes=self._max_body)
        except A2aRpcError as exc:
            await _respond(send, 200, encode_a2a_error(exc.request_id, exc))
            return
        started = [False]

        async def tracked(message: MutableMapping[str, Any]) -> None:
            started[0] = True
            await send(message)

        try:
            _check_version(scope)
            await self._dispatch(call.id, call.method, call.params, identity, receive, tracked)
        except A2aRpcError as exc:
            await _respond(send, 200, encode_a2a_error(call.id, exc))
        except Exception:
            # A fault of this server, not of the request: the detail goes to the log, the client
            # reads -32603 (or, mid-stream, the stream ends).
            LOGGER.exception("A2A %s failed", call.method)
            if started[0]:
                raise
            await _respond(send, 200, encode_a2a_error(call.id, A2aRpcError(
                A2aErrorCode.INTERNAL_ERROR, "internal error")))

    def card(self, scope: Scope | None = None) -> A2aAgentCard:
        """The agent card (its interface URL from the request's ``Host`` unless ``url`` was
        given)."""
        if self._fixed_url or scope is None:
            return self._card
        return card_for_request(self._card, scope)

    async def _identify(self, scope: Scope) -> str:
        if self._authorize is None:
            return ""
        try:
            identity = await self._authorize(chat_request(scope))
        except ChatRefused as exc:
            raise _Refused(exc.status, encode_a2a_error(None, A2aRpcError(
                A2aErrorCode.INVALID_REQUEST, str(exc)))) from None
        if not isinstance(identity, str) or not identity:
            raise _Refused(401, encode_a2a_error(None, A2aRpcError(
                A2aErrorCode.INVALID_REQUEST, "not authorized")))
        return identity

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        n, self._bodies = self._bodies, self._bodies + 1
        try:
            return await read_body(scope, receive, max_bytes=self._max_body,
                                   timeout_s=staggered_timeout(self._body_timeout_s, n))
        except BodyRefused as exc:
            if exc.status == 400:  # the client went away: nobody reads an answer
                raise _Refused(400, b"") from None
            raise _Refused(exc.status, encode_a2a_error(None, A2aRpcError(
                A2aErrorCode.INVALID_REQUEST, str(exc)))) from None

    # -- methods -------------------------------------------------------------------------------

    async def _dispatch(self, rid: str | int | None, method: str, params: dict[str, Any],
                        identity: str, receive: Receive, send: Send) -> None:
        if method in ("SendMessage", "SendStreamingMessage"):
            request = decode_a2a_params(params, A2aSendMessageRequest)
            if request.configuration is not None:
                check_history_length(request.configuration.history_length)
            streaming = method == "SendStreamingMessage"
            if streaming and not self._streaming:
                raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                                  "this agent does not stream")
            task, begin = self._take(request, identity)
            config = request.configuration
            length = config.history_length if config is not None else None
            if streaming:
                await stream_task(rid, task, task.log_end, receive, send,
                                  first=task.snapshot(length), begin=begin)
                return
            begin()
            if config is None or not config.return_immediately:
                await until_settled(task)
            await _respond(send, 200, encode_a2a_result(rid, {"task": task.snapshot(length)}))
        elif method == "GetTask":
            get = decode_a2a_params(params, A2aGetTaskRequest)
            check_history_length(get.history_length)
            task = self._tasks.find(identity, get.id)
            await _respond(send, 200, encode_a2a_result(rid, task.snapshot(get.history_length)))
        elif method == "CancelTask":
            cancel = decode_a2a_params(params, A2aCancelTaskRequest)
            task = await self._cancel(self._tasks.find(identity, cancel.id))
            await _respond(send, 200, encode_a2a_result(rid, task.snapshot()))
        elif method == "SubscribeToTask":
            subscribe = decode_a2a_params(params, A2aSubscribeRequest)
            if not self._streaming:
                raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                                  "this agent does not stream")
            task = self._tasks.find(identity, subscribe.id)
            if task.state in TERMINAL_STATES:
                raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                                  "the task has ended; GetTask reads it")
            await stream_task(rid, task, task.log_end, receive, send, first=task.snapshot())
        elif method == "ListTasks":
            await _respond(send, 200, encode_a2a_result(rid, self._tasks.list(identity, params)))
        elif method in _PUSH_METHODS:
            raise A2aRpcError(A2aErrorCode.PUSH_NOTIFICATION_NOT_SUPPORTED,
                              "this agent sends no push notifications")
        elif method == "GetExtendedAgentCard":
            raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                              "this agent has no extended card")
        else:
            raise A2aRpcError(A2aErrorCode.METHOD_NOT_FOUND, "method not found")

    def _take(self, request: A2aSendMessageRequest, identity: str
              ) -> tuple[Task, Callable[[], None]]:
        """The task this message starts or continues, and the call that starts its run (a
        stream sends its first event before: the run's first steps do not delay it)."""
        message = request.message
        check_user_message(message)
        content = a2a_user_content(message)
        if self._tg is None:
            raise A2aRpcError(A2aErrorCode.INTERNAL_ERROR, "the server runs no lifespan")
        task: Task | None = None
        if message.task_id:
            task = self._tasks.find(identity, message.task_id)
            if message.context_id and message.context_id != task.context_id:
                raise A2aRpcError(A2aErrorCode.INVALID_PARAMS,
                                  "message.contextId is not the task's context")
        elif message.context_id:
            last = self._tasks.last_in_context(identity, message.context_id)
            if last is not None and last.state == "TASK_STATE_INPUT_REQUIRED":
                task = last  # the reply to what the context's task asked
            elif last is not None and last.running:
                raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                                  "a task of this context is running; wait for it or cancel it")
        if task is not None:
            if task.state in TERMINAL_STATES:
                raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                                  f"the task has ended ({task.state}); send a new message "
                                  "in its context instead")
            if task.state != "TASK_STATE_INPUT_REQUIRED":
                raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                                  "the task is running; wait for it or cancel it")
            self._admit(identity)
            approvals, answers = a2a_reply(message, task.pending)
            transcript = task.transcript + answers
            open_calls = a2a_open_calls(transcript)
            chat = ChatInput(chat_id=scoped_chat_id(identity, task.context_id), protocol="a2a",
                             transcript=transcript, approvals=approvals, identity=identity)
        else:
            context_id = message.context_id or self._new_id()
            last = self._tasks.last_in_context(identity, context_id)
            self._admit(identity)
            task = Task(self._new_id(), context_id, identity, self._now())
            self._tasks.add(task)
            prior = last.transcript if last is not None else ()
            transcript = prior + (UserMessage(content=content),)
            open_calls = ()
            chat = ChatInput(chat_id=scoped_chat_id(identity, context_id), protocol="a2a",
                             transcript=transcript, identity=identity)
        task.history.append(msgspec.structs.replace(message, task_id=task.id,
                                                    context_id=task.context_id))
        task.transcript = chat.transcript
        task.status = A2aTaskStatus(state="TASK_STATE_SUBMITTED",
                                    timestamp=iso_timestamp(self._now()))
        task.pending = ()
        task.running = True
        self._tasks.forget_old()
        task.ended = anyio.Event()
        task.scope = anyio.CancelScope()
        task.runs += 1
        encoder = A2aTaskEncoder(task.id, task.context_id,
                                 now=lambda: iso_timestamp(self._now()), known_calls=open_calls,
                                 id_prefix=task.id if task.runs == 1 else f"{task.id}.{task.runs}")
        frames = Frames(task, encoder, RunRecorder(), self._now)
        tg = self._tg

        def begin() -> None:
            tg.start_soon(self._drive, task, chat, frames, open_calls)

        return task, begin

    def _admit(self, identity: str) -> None:
        if self._runs >= self._max_runs or \
                self._per_identity.get(identity, 0) >= self._max_runs_per_identity:
            raise A2aRpcError(A2aErrorCode.INTERNAL_ERROR,
                              "too many runs at once; try again shortly")
        self._runs += 1
        self._per_identity[identity] = self._per_identity.get(identity, 0) + 1

    async def _drive(self, task: Task, chat: ChatInput, frames: Frames,
                     open_calls: tuple[ToolCall, ...]) -> None:
        def describe(exc: Exception) -> str:
            LOGGER.error("A2A task %s (context %r) failed", task.id, chat.chat_id, exc_info=exc)
            return error_text(exc, task.id)

        try:
            with task.scope:
                await drive_run(self._runner, chat, frames, lambda _: None, describe=describe)
        finally:
            with anyio.CancelScope(shield=True):
                if task.state not in TERMINAL_STATES and task.state not in _INTERRUPTED:
                    frames.apply(frames.encoder.abort())  # cancelled before the run began
                if task.state in ("TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"):
                    task.transcript = chat.transcript + frames.recorder.messages(open_calls)
                task.pending = frames.encoder.pending() \
                    if task.state == "TASK_STATE_INPUT_REQUIRED" else ()
                task.running = False
                task.trim()
                self._runs -= 1
                left = self._per_identity.get(task.identity, 1) - 1
                if left > 0:
                    self._per_identity[task.identity] = left
                else:
                    self._per_identity.pop(task.identity, None)
                task.ended.set()
                task.changed.set()

    async def _cancel(self, task: Task) -> Task:
        if task.state in TERMINAL_STATES:
            raise A2aRpcError(A2aErrorCode.TASK_NOT_CANCELABLE,
                              f"the task has ended ({task.state})")
        if task.running:
            task.scope.cancel()  # the run's stop: its stream ends CANCELED
            await task.ended.wait()
        else:  # waiting on input: nothing runs, the task just ends
            task.apply(A2aStreamResponse(status_update=status_event(
                task, "TASK_STATE_CANCELED", iso_timestamp(self._now()))), self._now())
            task.pending = ()
            task.trim()
        return task



def _check_version(scope: Scope) -> None:
    version = None
    for name, value in scope.get("headers", ()):
        if name == b"a2a-version":
            version = bytes(value).decode("latin-1").strip()
    if version is None:
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        for pair in query.split("&"):
            key, _, value = pair.partition("=")
            if key.lower() == "a2a-version":
                version = value.strip()
    check_a2a_version(version)


async def _respond(send: Send, status: int, body: bytes,
                   headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": body})
