"""A plain ASGI app serving bindloop runs to real frontends: the Vercel AI SDK UI message stream and
AG-UI, with streams that survive the client.

Routes (no web framework; run it under any ASGI server, e.g. ``uvicorn``):

``POST /api/chat``
    An AI SDK chat request (``DefaultChatTransport``); answers a UI message stream.
``GET /api/chat/{id}/stream``
    Reconnect to chat ``id``'s running response (``reconnectToStream``): the whole stream again, or
    what follows the ``Last-Event-ID`` header; ``204`` when nothing is running.
``POST /api/chat/{id}/stop``
    Stop chat ``id``'s running response (the stream ends with ``abort``).
``POST /ag-ui``
    An AG-UI ``RunAgentInput`` (``HttpAgent``); answers AG-UI events.
``GET /ag-ui/{threadId}/stream`` and ``POST /ag-ui/{threadId}/stop``
    The same reconnect and stop for an AG-UI thread.
``DELETE /api/chat/{id}`` and ``DELETE /ag-ui/{threadId}``
    The owner deletes the chat with all the app stored of it -- its run logs, and what the runner
    keeps of it (:class:`ForgetsChats`: the calls waiting for approval, the tool receipts)
    (``204``; ``404`` when there is nothing, ``409`` while a run of it goes on).

Each run is a task of the app (started in the ASGI lifespan), not of the request: every frame it
produces goes to its event log (:mod:`bindloop.hosts.asgi.run_logs`) with its offset as the SSE ``id:``,
and responses read the log. A client that disconnects stops reading; the run goes on. Refused
requests get ``{"error": code, "message": ...}`` with a 4xx status (5xx when the app is full).

Every request first goes through ``authorize`` (see :class:`ChatApp`): the identity it returns owns
the chats it starts, and another identity can neither read, resume, stop nor reuse them.

With logs that keep what a run needs to go on (:class:`~bindloop.hosts.asgi.run_logs.ContinuableRunLogs`,
:class:`~bindloop.hosts.asgi.run_logs.SqliteRunLogs`,
:class:`~bindloop.hosts.stores.postgres_chat.PostgresRunLogs`,
:class:`~bindloop.hosts.stores.redis_chat.RedisRunLogs`), a run whose process died is continued: its
request is stored as it begins and each settled boundary the runner reports (a
:class:`~bindloop.agent.events.CheckpointSavedEvent` through ``emit``) is saved with the encoder inputs
fed by then; once its lease is out, the app of any process on that store takes it over, writes the
dead run's log again up to that save under a new run id (the encoders are deterministic) and goes
on from the saved checkpoint. A client's resume follows the dead run into its continuation.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

import anyio
import msgspec
from anyio.abc import TaskGroup

from bindloop.contracts import JsonBoundsError
from bindloop.protocols import (
    AG_UI_HEADERS,
    UI_STREAM_HEADERS,
    AgUiEncoder,
    ProtocolRequestError,
    decode_run_agent_input,
    decode_ui_chat_request,
    RUN_ID_PATTERN,
    parse_run_event_id,
)
from bindloop.checkpoints import LoopCheckpoint, parse_loop_checkpoint, serialize_loop_checkpoint

from bindloop.stores import (
    MemoryRunLogs,
    RunBusyError,
    RunLogs,
    RunRecord,
    RunsFullError,
    RunStatus,
    StoreError,
)

from bindloop.hosts.chat.access import Authorize, ChatRefused, ChatRequest, scoped_chat_id
from bindloop.hosts.chat.bodies import BodyBound, BodyRefused, staggered_timeout
from bindloop.hosts.chat.errors import error_text
from bindloop.hosts.chat.follow import Liveness
from bindloop.hosts.chat.quota import DEFAULT_MAX_LOG_BYTES, LogQuota
from bindloop.hosts.chat.replay import RecordedFrames, decode_fed, encode_fed, replay
from bindloop.hosts.chat.run import (
    AgUiFrames,
    ChatInput,
    ForgetsChats,
    Frames,
    Runner,
    UiFrames,
    ag_ui_chat_input,
    drive_run,
    sse_event,
    ui_chat_input,
    ui_encoder,
)

from .run_logs import ContinuableRunLogs, Continuation

__all__ = ("ChatApp", "LARGE_BODY", "chat_request", "read_body")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
LARGE_BODY = 64 * 1024
"""A request body over this many bytes takes one of the app's large-body slots
(``ChatApp(max_large_bodies=)``)."""


_JSON = msgspec.json.Encoder()


def _declared_length(scope: Scope) -> int:
    """The request's ``Content-Length`` (``0`` when it declares none, or none that is a
    number)."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length" and value.isdigit():
            return int(value)
    return 0


def chat_request(scope: Scope) -> ChatRequest:
    """What an ``authorize`` hook sees of an ASGI request (the one reading for every host)."""
    return ChatRequest(
        method=scope["method"], path=scope["path"],
        headers=tuple((bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1"))
                      for k, v in scope.get("headers", ())),
        client=tuple(scope["client"]) if scope.get("client") else None)


async def read_body(scope: Scope, receive: Receive, *, max_bytes: int, timeout_s: float) -> bytes:
    """The request body, bounded while it arrives (:class:`~bindloop.hosts.chat.bodies.BodyBound`:
    a declared ``Content-Length`` over ``max_bytes`` is refused before anything is read, a body
    the moment it passes it, one not whole within ``timeout_s`` too): raises
    :class:`~bindloop.hosts.chat.bodies.BodyRefused`."""
    bound = BodyBound(max_bytes=max_bytes, timeout_s=timeout_s)
    bound.declared(str(_declared_length(scope)))
    with anyio.move_on_after(timeout_s):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise bound.gone()
            bound.add(message.get("body", b""))
            if not message.get("more_body", False):
                return bound.body()
    raise bound.timed_out()


class _HttpError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _store_unavailable() -> _HttpError:
    """A store call failed (its server down, unreachable, or still loading its data): 503, which
    the app answers with ``Retry-After``; the detail goes to the log, never to the client."""
    return _HttpError(503, "store_unavailable", "the server cannot reach its store; try again "
                      "shortly")


class _Run:
    __slots__ = ("bytes", "changed", "closed", "frames", "identity", "large", "logged",
                 "protocol", "recorder", "run_id", "scope")

    def __init__(self, run_id: str, protocol: str, identity: str = "") -> None:
        self.run_id = run_id
        self.protocol = protocol
        self.identity = identity
        self.changed = anyio.Event()
        self.scope = anyio.CancelScope()
        self.logged = 0  # frames appended to its log
        self.bytes = 0  # and their bytes (its log's quota counts them)
        # What it logged, by offset, once the store took it: its followers in this process read
        # it here instead of from the store (None: offsets not as expected, read the store).
        self.frames: list[bytes] | None = []
        self.closed = False  # it ended and the store recorded how
        self.recorder: RecordedFrames | None = None  # with continuable logs: what it fed
        self.large = False  # holds one of the app's large-body slots


class _Claim(msgspec.Struct, frozen=True, kw_only=True):
    """What a continuation needs of a request: its body, the message id the app minted for it
    (AI SDK) and the caller's identity."""

    body: bytes
    minted: str = ""
    identity: str = ""


_CLAIM = msgspec.json.Decoder(_Claim)


class ChatApp:
    """The ASGI application. ``runner`` does the work (see :func:`bindloop.hosts.chat.agent.agent_runner`
    for one over bindloop's agent API); ``logs`` keep each run's frames (memory by default; pass a
    :class:`~bindloop.hosts.asgi.run_logs.SqliteRunLogs`, or a Postgres or Redis one of
    ``bindloop.hosts.stores``, to keep them beyond the process, to let several processes serve
    one chat, and to continue a run whose process died: see the module docstring). ``max_body`` bounds a request body (413 above it) and
    ``body_timeout_s`` the time to read it (408 after; each request's deadline is staggered
    between three quarters of it and all of it by
    :func:`~bindloop.hosts.chat.bodies.staggered_timeout`, so stalled bodies that arrived
    together are not all refused in one instant). A run renews its lease (``lease_ms``, on
    ``clock_ms``, wall-clock milliseconds by default) every third of it; another process's run is
    followed by polling the store every ``poll_s``.

    ``authorize`` (``await authorize(ChatRequest) -> identity``, or raise :class:`ChatRefused`)
    runs before every route. A chat belongs to the identity that started it: its key is
    :func:`scoped_chat_id` (what the runner gets as ``ChatInput.chat_id``, with
    ``ChatInput.identity``), so another identity's read, resume or stop of the same id finds
    nothing, and its post starts a chat of its own. Without ``authorize`` the app is
    **single-user**: every caller is the same identity, which suits a server bound to 127.0.0.1
    and nothing else.

    ``max_runs`` bounds the runs going on in this app at once and ``max_runs_per_identity`` those
    of one identity; a request past either gets 429 with ``Retry-After``. ``max_large_bodies``
    bounds the requests with a body over :data:`LARGE_BODY` bytes (64 KiB: an AG-UI ``state``
    of that size, a long pasted document) from the moment they are admitted -- by their
    declared length, before it is read -- until their runs end: past it, 429
    ``too_many_large_requests`` with ``Retry-After``. Each such body costs milliseconds of the
    event loop to read, decode and echo, on which every other chat's frames wait, so a crowd of
    them would stretch every response.

    ``max_log_bytes`` bounds the bytes of frames one run logs
    (:data:`~bindloop.hosts.chat.quota.DEFAULT_MAX_LOG_BYTES`, 8 MiB): a run that reaches it is
    stopped -- never evicted -- and its stream ends with the protocol's error, ``log_full`` and
    the run's id (:class:`~bindloop.hosts.chat.quota.LogQuota`); its log keeps what it logged,
    so a resume reads it to that error, and the ``bindloop.hosts.asgi.chat`` logger says why.
    While a run is live, the app also keeps its frames in memory (up to that quota), so the
    responses following it in this process never read them back from the store.

    ``ai_sdk`` is the AI SDK major of the app's frontend (a chat request does not say it): with
    ``7`` a retracted attempt is sent as 7's ``reset-step``, which AI SDK 6 refuses (see
    :class:`~bindloop.protocols.UIStreamEncoder`)."""

    def __init__(self, runner: Runner, *, logs: RunLogs | None = None,
                 max_body: int = 1024 * 1024, new_id: Callable[[], str] | None = None,
                 lease_ms: float = 10_000, clock_ms: Callable[[], float] | None = None,
                 poll_s: float = 0.05, authorize: Authorize | None = None,
                 max_runs: int = 256, max_runs_per_identity: int = 8,
                 body_timeout_s: float = 15.0, ai_sdk: int = 6,
                 max_large_bodies: int = 8,
                 max_log_bytes: int = DEFAULT_MAX_LOG_BYTES) -> None:
        if ai_sdk not in (6, 7):
            raise ValueError(f"ai_sdk must be 6 or 7, not {ai_sdk!r}")
        self._ai_sdk = ai_sdk
        if (max_runs < 1 or max_runs_per_identity < 1 or max_large_bodies < 1
                or max_log_bytes < 1):
            raise ValueError("max_runs, max_runs_per_identity, max_large_bodies and "
                             "max_log_bytes must be at least 1")
        self._max_log_bytes = max_log_bytes
        self._max_large_bodies = max_large_bodies
        self._large = 0  # requests holding a large-body slot
        if not body_timeout_s > 0:
            raise ValueError(f"body_timeout_s must be positive, got {body_timeout_s!r}")
        self._authorize = authorize
        self._max_runs = max_runs
        self._max_runs_per_identity = max_runs_per_identity
        self._body_timeout_s = body_timeout_s
        self._bodies = 0  # body reads started: each one's deadline is staggered by its number
        self._per_identity: dict[str, int] = {}
        self._runner = runner
        self.logs: RunLogs = logs if logs is not None else MemoryRunLogs()
        self._max_body = max_body
        self._new_id = new_id or (lambda: uuid.uuid4().hex)
        self._lease_ms = lease_ms
        self._now = clock_ms or (lambda: time.time() * 1000)
        self._poll_s = poll_s
        self._tg: TaskGroup | None = None
        self._live: dict[str, _Run] = {}
        self._active: dict[tuple[str, str], str] = {}
        self._deleting: set[tuple[str, str]] = set()

    # -- ASGI ---------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            try:
                identity = await self._identify(scope)
                await self._route(scope, receive, send, identity)
            except StoreError as exc:  # before a response started (a stream handles its own)
                LOGGER.error("%s %s: the store failed", scope["method"], scope["path"],
                             exc_info=exc)
                raise _store_unavailable() from None
        except _HttpError as exc:
            headers = [(b"retry-after", b"1")] if exc.status in (429, 503) else []
            await _send_json(send, exc.status, {"error": exc.code, "message": str(exc)},
                             headers)

    async def _identify(self, scope: Scope) -> str:
        if self._authorize is None:
            return ""
        try:
            identity = await self._authorize(chat_request(scope))
        except ChatRefused as exc:
            raise _HttpError(exc.status, "unauthorized" if exc.status == 401 else "forbidden",
                             str(exc)) from None
        if not isinstance(identity, str) or not identity:
            raise _HttpError(401, "unauthorized", "not authorized")
        return identity

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if isinstance(self.logs, ContinuableRunLogs):
                tg.start_soon(self._continue_lost, self.logs)
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            tg.cancel_scope.cancel()  # runs still going are stopped (their logs end as stopped)
        self._tg = None
        await send({"type": "lifespan.shutdown.complete"})

    async def _route(self, scope: Scope, receive: Receive, send: Send, identity: str) -> None:
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        parts = path.strip("/").split("/")
        if path == "/api/chat" and method == "POST":
            await self._post("ui", scope, receive, send, identity)
        elif path == "/ag-ui" and method == "POST":
            await self._post("ag-ui", scope, receive, send, identity)
        elif method == "DELETE" and (len(parts) == 3 and parts[:2] == ["api", "chat"] or (
                len(parts) == 2 and parts[0] == "ag-ui")):
            await self._delete("ui" if parts[0] == "api" else "ag-ui",
                               scoped_chat_id(identity, parts[-1]), identity, send)
        elif len(parts) == 4 and parts[:2] == ["api", "chat"] or (
                len(parts) == 3 and parts[0] == "ag-ui"):
            protocol = "ui" if parts[0] == "api" else "ag-ui"
            chat_id, action = scoped_chat_id(identity, parts[-2]), parts[-1]
            if action == "stream" and method == "GET":
                await self._reconnect(protocol, chat_id, scope, receive, send)
            elif action == "stop" and method == "POST":
                await self._stop(protocol, chat_id, send)
            else:
                raise _HttpError(405 if action in ("stream", "stop") else 404, "not_found",
                                 f"no route for {method} {path}")
        else:
            raise _HttpError(404, "not_found", f"no route for {method} {path}")

    # -- requests -------------------------------------------------------------------------------

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        n, self._bodies = self._bodies, self._bodies + 1
        try:
            return await read_body(scope, receive, max_bytes=self._max_body,
                                   timeout_s=staggered_timeout(self._body_timeout_s, n))
        except BodyRefused as exc:
            raise _HttpError(exc.status, exc.code, str(exc)) from None

    def _refuse(self, exc: Exception) -> _HttpError:
        if isinstance(exc, JsonBoundsError):
            status = 413 if exc.reason == "too_large" else 400
            return _HttpError(status, f"body_{exc.reason}", str(exc))
        return _HttpError(400, "invalid_request", str(exc))

    def _decoded(self, protocol: str, body: bytes,
                 minted: str) -> tuple[ChatInput, Frames, str | None]:
        """A request body as the run it asks for: its input, its protocol's frames (an AI SDK
        message id ``msg-<minted>`` unless the request names one) and the run id it names
        (AG-UI's ``runId``; ``None``: the app mints one)."""
        if protocol == "ui":
            request = decode_ui_chat_request(body, max_bytes=self._max_body)
            encoder = ui_encoder(request, minted, ai_sdk=self._ai_sdk)
            return ui_chat_input(request), UiFrames(encoder), None
        run = decode_run_agent_input(body, max_bytes=self._max_body)
        if not RUN_ID_PATTERN.fullmatch(run.run_id):
            raise _HttpError(400, "invalid_request", "runId must be 1 to 128 characters of "
                             "A-Z a-z 0-9 . _ ~ - (it names the run's events)")
        ag_ui = AgUiEncoder(thread_id=run.thread_id, run_id=run.run_id, messages=run.messages)
        return ag_ui_chat_input(run), AgUiFrames(ag_ui), run.run_id

    async def _post(self, protocol: str, scope: Scope, receive: Receive, send: Send,
                    identity: str) -> None:
        # Refused before the body is read: a refused caller costs no more. A large body (its
        # declared length, else what arrived) takes one of the app's large-body slots until
        # its run ends.
        large = _declared_length(scope) > LARGE_BODY
        self._admit(identity, large=large)
        self._large += large
        try:
            body = await self._body(scope, receive)
            if not large and len(body) > LARGE_BODY:
                self._admit(identity, large=True)
                self._large, large = self._large + 1, True
            minted = self._new_id() if protocol == "ui" else ""
            try:
                chat, frames, run_id = self._decoded(protocol, body, minted)
            except (JsonBoundsError, ProtocolRequestError) as exc:
                raise self._refuse(exc) from None
            chat = _owned(chat, identity)
            run = self._begin(protocol, chat.chat_id, identity, run_id=run_id)
            run.large, large = large, False  # the run gives the slot back when it ends
        finally:
            self._large -= large
        if isinstance(self.logs, ContinuableRunLogs):
            try:
                self.logs.claim(run.run_id, _JSON.encode(_Claim(body=body, minted=minted,
                                                                 identity=identity)))
            except StoreError as exc:  # it runs, but no other process could continue it
                LOGGER.error("run %s: its request could not be stored", run.run_id,
                             exc_info=exc)
            else:
                chat = msgspec.structs.replace(chat, continuable=True)
                run.recorder = RecordedFrames(frames)
                frames = run.recorder
        self._spawn(run, chat, frames)
        await self._serve(run.run_id, None, UI_STREAM_HEADERS if protocol == "ui"
                          else AG_UI_HEADERS, receive, send)

    async def _reconnect(self, protocol: str, chat_id: str, scope: Scope, receive: Receive,
                         send: Send) -> None:
        named = None
        for name, value in scope.get("headers", ()):
            if name == b"last-event-id":
                named = parse_run_event_id(value)
        after: int | None = None
        run_id: str | None
        if named is not None:
            # The run the client saw, whichever run of the chat is the latest now: the rest of
            # it, or nothing when this chat has no such run (a bare offset names no run).
            record = self.logs.record(named[0])
            run_id = None
            if record is not None and (record.chat_id, record.protocol) == (chat_id, protocol):
                run_id, after = named
                # A run taken over after its process died: its continuation repeats its log up
                # to the save it went on from; a client that saw more of it gets nothing.
                while record is not None and record.continued_by is not None:
                    run_id = record.continued_by if after < record.continued_at else None
                    record = None if run_id is None else self.logs.record(run_id)
                if record is None or (record.events <= after + 1 and not self._going_on(record)
                                      and record.run_id not in self._live):
                    run_id = None  # it ended and the client saw all of it
        else:
            run_id = self._active.get((protocol, chat_id))
            if run_id is None:
                latest = self.logs.latest(chat_id, protocol)
                if latest is not None and self._going_on(latest):
                    run_id = latest.run_id  # running in another process that shares the store
        if run_id is None:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = UI_STREAM_HEADERS if protocol == "ui" else AG_UI_HEADERS
        await self._serve(run_id, after, headers, receive, send)

    async def _stop(self, protocol: str, chat_id: str, send: Send) -> None:
        run_id = self._active.get((protocol, chat_id))
        run = None if run_id is None else self._live.get(run_id)
        if run is not None:
            run.scope.cancel()
            await _send_json(send, 200, {"stopped": run.run_id})
            return
        latest = self.logs.latest(chat_id, protocol)
        if latest is None or not latest.live(self._now()):
            raise _HttpError(409, "not_running", "nothing is running in this chat")
        # Another process runs it: it sees the request at its next lease renewal.
        self.logs.request_stop(latest.run_id)
        await _send_json(send, 202, {"stopping": latest.run_id})

    async def _delete(self, protocol: Literal["ui", "ag-ui"], chat_id: str, identity: str,
                      send: Send) -> None:
        key = (protocol, chat_id)
        if key in self._active or key in self._deleting:
            raise _HttpError(409, "chat_busy", "this chat has a running response: stop it first")
        try:
            deleted = self.logs.delete_chat(chat_id, protocol, now_ms=self._now())
        except RunBusyError:
            raise _HttpError(409, "chat_busy", "this chat has a running response: stop it "
                             "first") from None
        if isinstance(self._runner, ForgetsChats):
            self._deleting.add(key)  # no run of it starts here while the runner forgets it
            try:
                forgot = await self._runner.forget_chat(ChatInput(
                    chat_id=chat_id, protocol=protocol, transcript=(), identity=identity))
            finally:
                self._deleting.discard(key)
            deleted = deleted or forgot
        if not deleted:
            raise _HttpError(404, "unknown_chat", "no such chat")
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    # -- runs -----------------------------------------------------------------------------------

    def _begin(self, protocol: str, chat_id: str, identity: str,
               run_id: str | None = None) -> _Run:
        if self._tg is None:
            raise _HttpError(500, "no_lifespan", "the app's runs live in the ASGI lifespan: run it "
                             "under a server with lifespan on (uvicorn's default)")
        if (protocol, chat_id) in self._active:
            raise _HttpError(409, "chat_busy", "this chat already has a running response; "
                             "reconnect to it, or stop it first")
        if (protocol, chat_id) in self._deleting:
            raise _HttpError(409, "chat_busy", "this chat is being deleted")
        self._admit(identity)
        run_id = run_id or self._new_id()
        try:
            if run_id in self._live or self.logs.record(run_id) is not None:
                raise _HttpError(409, "run_exists", f"run {run_id!r} already exists")
            now = self._now()
            self.logs.begin(run_id, chat_id, protocol, now_ms=now,
                            lease_until_ms=now + self._lease_ms)
        except StoreError as exc:
            LOGGER.error("a run of chat %r (%s) could not begin", chat_id, protocol,
                         exc_info=exc)
            raise _store_unavailable() from None
        except RunBusyError:
            raise _HttpError(409, "chat_busy", "this chat already has a running response; "
                             "reconnect to it, or stop it first") from None
        except RunsFullError:
            raise _HttpError(503, "too_many_runs", "the server is running as many chats as it "
                             "holds; try again shortly") from None
        return self._register(run_id, protocol, chat_id, identity)

    def _admit(self, identity: str, *, large: bool = False) -> None:
        """429 when the app, or ``identity``, runs as many chats as it may -- or, for a
        ``large`` request, when the app serves as many large bodies as it may."""
        if large and self._large >= self._max_large_bodies:
            raise _HttpError(429, "too_many_large_requests", "the server is busy with as many "
                             "large requests as it takes; try again shortly")
        if len(self._live) >= self._max_runs:
            raise _HttpError(429, "too_many_runs", "the server is running as many chats as it "
                             "may; try again shortly")
        if self._per_identity.get(identity, 0) >= self._max_runs_per_identity:
            raise _HttpError(429, "too_many_runs", f"you have {self._max_runs_per_identity} "
                             "chats running already; try again when one has finished")

    def _register(self, run_id: str, protocol: str, chat_id: str, identity: str) -> _Run:
        run = _Run(run_id, protocol, identity)
        self._live[run_id] = run
        self._active[(protocol, chat_id)] = run_id
        self._per_identity[identity] = self._per_identity.get(identity, 0) + 1
        return run

    def _spawn(self, run: _Run, chat: ChatInput, frames: Frames, *,
               resumed: bool = False) -> None:
        assert self._tg is not None
        self._tg.start_soon(self._drive, run, chat, frames, resumed)
        self._tg.start_soon(self._keep_lease, run)

    def _release(self, identity: str) -> None:
        """One run of ``identity`` fewer."""
        left = self._per_identity.get(identity, 1) - 1
        if left > 0:
            self._per_identity[identity] = left
        else:
            self._per_identity.pop(identity, None)

    def _going_on(self, record: RunRecord) -> bool:
        """``record``'s run renews its lease, or its process died and these logs continue it."""
        return record.live(self._now()) or (record.status == "running" and record.claimed)

    def _save(self, run: _Run, checkpoint: LoopCheckpoint) -> None:
        """Store a boundary the runner reported, with what was fed and logged by then (a
        synchronous write: it is on disk before the run goes on)."""
        recorder = run.recorder
        if recorder is None or not isinstance(self.logs, ContinuableRunLogs):
            return
        self.logs.save(run.run_id, serialize_loop_checkpoint(checkpoint),
                       encode_fed(recorder.unsaved()), run.logged)
        recorder.saved = len(recorder.fed)

    async def _continue_lost(self, logs: ContinuableRunLogs) -> None:
        """Every third of a lease: take over the runs whose process died (lease out). A failure
        (the store busy, a stored request this app cannot read) is logged and ends that
        continuation, never the app."""
        while True:
            await anyio.sleep(self._lease_ms / 3000)
            try:
                lost = logs.lost(self._now())
            except Exception as exc:
                LOGGER.error("looking for lost runs failed", exc_info=exc)
                continue
            for record in lost:
                if record.run_id not in self._live and len(self._live) < self._max_runs:
                    self._take_over(logs, record)

    def _take_over(self, logs: ContinuableRunLogs, record: RunRecord) -> None:
        """Continue ``record``'s run under a new id, from its last save (or its start)."""
        now = self._now()
        run_id = self._new_id()
        try:
            taken = logs.take_over(record.run_id, run_id, now_ms=now,
                                   lease_until_ms=now + self._lease_ms)
        except Exception as exc:
            LOGGER.error("taking over run %s failed", record.run_id, exc_info=exc)
            return
        if taken is None:
            return  # another process took it, or a newer request superseded it
        try:
            self._continue(logs, record, run_id, taken)
        except Exception as exc:
            LOGGER.error("run %s of chat %r (%s) could not be continued", record.run_id,
                         record.chat_id, record.protocol, exc_info=exc)
            run = self._live.get(run_id)
            if run is not None:  # registered before it failed: undo that
                self._live.pop(run_id, None)
                self._active.pop((record.protocol, record.chat_id), None)
                self._release(run.identity)
            logs.end(run_id, "failed")

    def _continue(self, logs: ContinuableRunLogs, record: RunRecord, run_id: str,
                  taken: Continuation) -> None:
        """Start run ``run_id`` from ``taken``: the stored request decoded again, the dead run's
        frames written again up to its save, the runner resumed from the saved checkpoint."""
        claim = _CLAIM.decode(taken.claim)
        chat, frames, _ = self._decoded(record.protocol, claim.body, claim.minted)
        chat = msgspec.structs.replace(_owned(chat, claim.identity), continuable=True)
        run = self._register(run_id, record.protocol, record.chat_id, claim.identity)
        run.recorder = RecordedFrames(frames)
        resumed = taken.checkpoint is not None
        if taken.checkpoint is not None:
            checkpoint = parse_loop_checkpoint(taken.checkpoint)
            run.recorder, payloads = replay(frames, decode_fed(taken.fed))
            if len(payloads) != taken.offset:  # not the dead run's frames (its encoder changed)
                logs.unlink(record.run_id)
                LOGGER.error("run %s: its replay wrote %d frames where it had %d by its save; a "
                             "resume of it gets nothing", record.run_id, len(payloads),
                             taken.offset)
            self._append(run, payloads)  # the dead run's log again, up to its save
            chat = msgspec.structs.replace(chat, checkpoint=checkpoint,
                                           transcript=checkpoint.messages)
        LOGGER.warning("run %s of chat %r (%s) lost its process: continued as run %s from %s",
                       record.run_id, record.chat_id, record.protocol, run_id,
                       f"its save at frame {taken.offset}" if resumed else "its start")
        self._spawn(run, chat, run.recorder, resumed=resumed)

    async def _keep_lease(self, run: _Run) -> None:
        """Renew the run's lease while it runs; a stop asked through the store cancels it. A
        renewal the store fails is logged and tried again; a run whose lease ran out unrenewed
        is stopped (another process may take it over from then)."""
        leased_until = self._now() + self._lease_ms
        while True:
            await anyio.sleep(self._lease_ms / 3000)
            if run.run_id not in self._live:
                return
            until = self._now() + self._lease_ms
            try:
                stop = self.logs.renew(run.run_id, until)
            except Exception as exc:
                LOGGER.error("run %s: its lease could not be renewed", run.run_id, exc_info=exc)
                if self._now() >= leased_until:
                    run.scope.cancel()
                continue
            leased_until = until
            if stop:
                run.scope.cancel()

    def _append(self, run: _Run, payloads: list[bytes]) -> None:
        if not payloads:
            return
        for payload in payloads:
            offset = self.logs.append(run.run_id, payload)
            run.bytes += len(payload)
            if run.frames is not None:
                if offset == len(run.frames):
                    run.frames.append(payload)
                else:
                    run.frames = None
        run.logged += len(payloads)
        run.changed.set()
        run.changed = anyio.Event()

    @staticmethod
    def _describe(run: _Run, chat: ChatInput, exc: Exception) -> str:
        LOGGER.error("run %s of chat %r (%s) failed", run.run_id, chat.chat_id, run.protocol,
                     exc_info=exc)
        return error_text(exc, run.run_id)

    async def _drive(self, run: _Run, chat: ChatInput, frames: Frames, resumed: bool) -> None:
        status: RunStatus = "stopped"  # unless drive_run returns: the scope caught a stop
        try:
            with run.scope:
                status = await drive_run(self._runner, chat, frames,
                                         lambda payloads: self._append(run, payloads),
                                         describe=lambda exc: self._describe(run, chat, exc),
                                         resumed=resumed,
                                         on_save=lambda cp: self._save(run, cp),
                                         quota=LogQuota(self._max_log_bytes, used=run.bytes))
        except Exception as exc:
            # The log store failed under the run (a server gone: drive_run could not even write
            # the failure): this run ends, the app and its other runs go on.
            LOGGER.error("run %s of chat %r (%s) lost its log store", run.run_id, chat.chat_id,
                         run.protocol, exc_info=exc)
            status = "failed"
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    self.logs.end(run.run_id, status)
                    run.closed = True
                except Exception as exc:  # left running: its lease runs out, it is lost
                    LOGGER.error("run %s could not be closed as %s", run.run_id, status,
                                 exc_info=exc)
                self._live.pop(run.run_id, None)
                self._release(run.identity)
                self._large -= run.large
                key = (chat.protocol, chat.chat_id)
                if self._active.get(key) == run.run_id:
                    del self._active[key]
                run.changed.set()

    async def _serve(self, run_id: str, after: int | None, headers: tuple[tuple[str, str], ...],
                     receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(k.encode(), v.encode()) for k, v in headers]})
        async with anyio.create_task_group() as tg:
            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()  # only this response: the run goes on

            tg.start_soon(watch_disconnect)
            try:
                await self._tail(run_id, after, send)
            except OSError:
                pass  # the client's socket is gone
            except StoreError as exc:
                # The log cannot be read (its server gone or still loading): the stream ends
                # and the client resumes from the last event it got.
                LOGGER.error("run %s: its log could not be read", run_id, exc_info=exc)
                with anyio.CancelScope(shield=True):
                    try:
                        await send({"type": "http.response.body", "body": b"",
                                    "more_body": False})
                    except OSError:
                        pass
            tg.cancel_scope.cancel()

    async def _tail(self, run_id: str, after: int | None, send: Send) -> None:
        """Send run ``run_id``'s log after ``after`` until the run ends, following it into its
        continuation. Another process's continuable run may be dead while its lease still looks
        live (a client reconnects right after a kill): what it logged after its last save is
        held back until it is proven alive (:class:`~bindloop.hosts.chat.follow.Liveness`, the
        Worker's rule too), since its continuation would not repeat that. Until then the tail
        waits (at most the lease, then the run is lost) and goes on with whichever comes: the
        run's frames, or its continuation from the save. A run live in this app is read from
        its frames in memory (each one kept once the store took it), to its end once the store
        closed it; any other from the store."""
        liveness = Liveness()
        seen: _Run | None = None  # the run followed, while it was live here
        while True:
            run = self._live.get(run_id)
            if run is not None:
                seen = run
            elif seen is not None and seen.closed and seen.frames is not None:
                # It ran here and ended, closed in the store: the rest of it is in memory.
                start = 0 if after is None else after + 1
                await send({"type": "http.response.body", "more_body": False, "body": b"".join(
                    sse_event(run_id, o, p) for o, p in enumerate(seen.frames[start:], start))})
                return
            changed = None if run is None else run.changed
            # Another process's run (not live here): is it still renewing its lease?
            elsewhere, hold = False, None
            if run is None:
                record = self.logs.record(run_id)
                if record is not None and record.continued_by is not None:
                    # Its process died and another took it over: the continuation repeats the
                    # log up to the save it went on from, so a client that saw no more goes on.
                    if after is not None and after >= record.continued_at:
                        await send({"type": "http.response.body", "body": b"",
                                    "more_body": False})
                        return
                    run_id = record.continued_by
                    continue
                elsewhere = record is not None and self._going_on(record)
                if record is not None and elsewhere and record.claimed and not liveness.alive(
                        run_id, logged=record.events, lease_until_ms=record.lease_until_ms,
                        live=record.live(self._now())):
                    hold = record.saved  # what it logged after its save may not repeat
            if run is not None and run.frames is not None:
                # Live here: what it logged is in memory (and already in the store), so a
                # follower costs the store nothing.
                start = 0 if after is None else after + 1
                frames = list(enumerate(run.frames[start:], start))
            else:
                frames = self.logs.read(run_id, after)
            if hold is not None:
                frames = [f for f in frames if f[0] < hold]
            if frames:
                body = (sse_event(run_id, *frames[0]) if len(frames) == 1 else
                        b"".join(sse_event(run_id, o, p) for o, p in frames))
                after = frames[-1][0]
                await send({"type": "http.response.body", "body": body, "more_body": True})
                continue
            if changed is not None:
                await changed.wait()
            elif elsewhere:
                await anyio.sleep(self._poll_s)
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return


LOGGER = logging.getLogger("bindloop.hosts.asgi.chat")
"""Where :class:`ChatApp` records a failed run's detail (ERROR, with the exception); the client
is told only :func:`error_text`'s short category and the run's id to quote."""


def _owned(chat: ChatInput, identity: str) -> ChatInput:
    """``chat`` as the identity's own: its id scoped (:func:`scoped_chat_id`), its owner named."""
    if not identity:
        return chat
    return msgspec.structs.replace(chat, chat_id=scoped_chat_id(identity, chat.chat_id),
                                   identity=identity)


async def _send_json(send: Send, status: int, body: dict[str, Any],
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = _JSON.encode(body)
    # A declared length: the server writes the head and the body, with no chunk framing (one
    # write fewer for every refusal a flood of requests gets).
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *(headers or ())]})
    await send({"type": "http.response.body", "body": data})
