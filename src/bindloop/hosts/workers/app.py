"""bindloop in a Cloudflare Python Worker: an agent over HTTP with Durable Object sessions.

A Worker's main module subclasses :class:`ChatWorker` (its ``fetch`` entrypoint) and
:class:`Session` (the Durable Object) with its tools and exports the other Durable Object classes
it binds::

    from bindloop.hosts.workers import app
    from bindloop.hosts.workers.app import McpTokens, RateLimiter, Receipts

    class Session(app.Session):
        tools = TOOLS

    class Default(app.ChatWorker):
        tools = TOOLS

Importable only inside workerd (it imports ``js`` and ``workers``); the agent itself
(:mod:`bindloop.hosts.workers.agent`) and the replay logic are plain Python.

Routes (the table is :data:`ROUTES`, a worker's ``routes``; a Worker with more routes gives its
subclass ``routes = ROUTES.copy()`` and adds them)
------
``POST /v1/chat`` ``{"message": str, "session_id"?: str}``
    Starts a session (or continues a ``finished`` one) and streams it as Server-Sent Events.
``POST /v1/sessions/{id}/reply`` ``{"content": str, "revision": int, "tool_call_id"?: str}``
    Answers the question a session stopped on (``waiting_for_reply``) and streams the rest.
``POST /v1/sessions/{id}/resume`` ``{"revision": int}``
    Runs a session whose run failed or was lost (status ``ready``, no live run) on from its last
    saved tool round.
``GET /v1/sessions/{id}``
    The stored checkpoint's status and revision, and its run: ``running``, ``lost`` or ``idle``.
``GET /v1/sessions/{id}/stream`` (``Last-Event-ID: <run>:<offset>`` optional)
    The latest run's events again from its event log, after the given one, then live until the
    run ends: what a client that lost its stream reconnects to. 204 when there is nothing to send.
``POST /v1/sessions/{id}/stop``
    Stops the live run (202); its last saved round is stored ``aborted``. 409 when none is live.
``POST /api/chat`` / ``POST /ag-ui``, ``GET .../{id}/stream``, ``POST .../{id}/stop``, ``DELETE .../{id}``
    The Vercel AI SDK UI message stream and AG-UI (frontends.py): the client holds the
    conversation; each response's events are logged, so a dropped client reconnects; its owner
    deletes a chat with its storage.
``POST /mcp`` (and ``DELETE``)
    The Worker's tools served to MCP clients (mcp_route.py), stateless.
``GET /conformance``
    bindloop's conformance report, run in this isolate (when ``harness/conformance/`` is vendored as ``conformance``).

SSE events, each with ``id: <run>:<offset>``: ``session`` (id, the stored revision and the run id), ``turn`` (the turn text stream's
``text`` / ``reset`` events, rendered by ``TurnStreamReducer`` in harness/wasm/demo/turn-stream.js),
``done`` (status, stop reason, revision, and the question when waiting) and ``error`` (the failure
and the revision storage holds); ``: keep-alive`` comments while the run is quiet. Refused requests
get a 4xx JSON body ``{"error": code, "message": ...}``.

The agent (bindloop's agent API, in agent.py) runs in the Worker with the subclass's ``tools``; the
``Session`` Durable Object (sessions.py) stores the checkpoint and the run's lease. Inside workerd an event loop is already
running: everything here is ``await``-ed, never ``anyio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import urlparse

import js  # type: ignore[import-not-found]
import msgspec
from workers import Response, WorkerEntrypoint  # type: ignore[import-not-found]

from bindloop.hosts.workers.agent import (
    SESSION_ID,
    AgentConfig,
    HttpError,
    ModelFor,
    config_from_env,
    model_of,
    run_view,
)
from bindloop.contracts import Message, SystemMessage, UserMessage
from bindloop.checkpoints import (
    CheckpointFormatError,
    CheckpointReply,
    LoopCheckpoint,
    apply_checkpoint_input,
    create_loop_checkpoint,
)
from bindloop.hosts.workers.frontends import (
    ag_ui,
    ag_ui_delete,
    ag_ui_stop,
    ag_ui_stream,
    api_chat,
    api_chat_delete,
    api_chat_stop,
    api_chat_stream,
)
from bindloop.hosts.workers.identity import authorize
from bindloop.hosts.workers.a2a_route import add_a2a_routes
from bindloop.hosts.workers.mcp_route import add_mcp_routes
from bindloop.hosts.workers.oauth_store import McpTokens
from bindloop.hosts.workers.receipts import Receipts
from bindloop.hosts.workers.limits import RateLimiter, live_runs
from bindloop.hosts.workers.sessions import (
    LOG_BATCH,
    RunLog,
    Session,
    SessionStore,
    drive,
    last_event_id,
)
from bindloop.hosts.workers.web import JSON_HEADERS, EventStream, Routes, json_response, read_json
from bindloop.tools import Tool
from bindloop.wire import WIRE_NAMES, create_wire_adapter

__all__ = ("ROUTES", "ChatWorker", "McpTokens", "RateLimiter", "Receipts", "Session")


def _into_the_snapshot() -> None:
    """Import now what a Worker's first chat would import: a deploy's memory snapshot is taken
    once the Worker's top level (which imports this module) has run, so what is imported here is
    restored with it on every cold start instead of compiled from source by the first request
    (in workerd, a first chat's CPU after a cold start 0.98 -> 0.13 s; the snapshot stays 36 MiB).
    The Workers SDK's ``Request.headers`` imports ``http.client`` (and with it the ``email``
    package) the first time a request's headers are read, which every chat route does; anyio
    imports its asyncio backend the first time it is used; bindloop imports each wire the first
    time an adapter for it is made (a process that uses one loads one), and a Worker's model may
    use any (``PROVIDER_WIRE``)."""
    import http.client  # noqa: F401

    # anyio's module, not its API: were it renamed, the first chat would import it as before.
    with contextlib.suppress(ImportError):
        importlib.import_module("anyio._backends._asyncio")
    for wire in WIRE_NAMES:
        create_wire_adapter(wire)


_into_the_snapshot()


def _config(env: Any, tools: Sequence[Tool[Any, Any]], model: ModelFor | None) -> AgentConfig:
    """The agent's config, refused (500, named) before anything is stored."""
    config = config_from_env(env, tools, model)
    limited = config.rate_limit_rpm is not None or config.rate_limit_concurrency is not None
    if limited and getattr(env, "LIMITS", None) is None:
        raise HttpError(500, "misconfigured", "RATE_LIMIT_* is set but the Worker has no LIMITS "
                        "Durable Object binding (class RateLimiter); add it in wrangler.jsonc")
    return config


def _check_revision(session_id: str, cp: LoopCheckpoint, revision: int, what: str,
                    fix: str) -> None:
    """A request that names the revision it acts on must name the stored one (409 otherwise)."""
    if revision != cp.revision:
        raise HttpError(409, "stale_revision", f"{what} is for revision {revision}, but session "
                        f"{session_id!r} is at revision {cp.revision}; {fix}",
                        revision=cp.revision)


def _field(body: dict[str, Any], name: str, kind: type, *, required: bool = True) -> Any:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or isinstance(value, bool) or (kind is str and not value):
        want = {str: "a non-empty string", int: "an integer"}[kind]
        raise HttpError(400, "invalid_field", f"field {name!r} must be {want}", field=name)
    return value


def _session_id(match: re.Match[str]) -> str:
    session_id = match.group("id")
    if not SESSION_ID.match(session_id):
        raise HttpError(400, "invalid_session_id", "a session id is 1-64 characters of A-Z a-z 0-9 _ -")
    return session_id


class ChatWorker(WorkerEntrypoint):  # type: ignore[misc]
    """The Worker's ``fetch`` entrypoint: :data:`ROUTES` (or the subclass's ``routes``) over the
    subclass's ``tools``, each caller named by :meth:`authorize`."""

    tools: tuple[Tool[Any, Any], ...] = ()
    """The agent's tools (``define_tool``); the ``Session`` subclass needs the same."""
    model: ClassVar[ModelFor | None] = None
    """The agent's model, a function of the Worker's env called for each run
    (:data:`~bindloop.hosts.workers.agent.ModelFor`: ``create_model(..., env=env)``); ``None``:
    from the ``PROVIDER_*`` vars. The ``Session`` subclass needs the same."""
    routes: Routes

    def __init_subclass__(cls, **_kwargs: Any) -> None:
        """The SDK's base class wraps each subclass's ``__init__`` (to wrap ``env``); this
        class's is wrapped already, so a Worker's subclass inherits it as it is instead of
        wrapping it again (an ``env`` wrapped twice returns Durable Object stubs whose calls
        answer coroutines)."""

    async def authorize(self, request: Any) -> str:
        """The caller's identity (``""``: the single user) or an :class:`HttpError` (401):
        :func:`bindloop.hosts.workers.identity.authorize` by default (the ``API_TOKEN`` secret's
        bearer tokens); override it for a session cookie, a JWT, Cloudflare Access."""
        return await authorize(request, self.env)

    async def fetch(self, request: Any) -> Response:
        try:
            return await self.routes.dispatch(request, self, urlparse(str(request.url)).path)
        except HttpError as exc:
            return json_response(exc.status, exc.body())

    def _store(self, session_id: str, config: AgentConfig, identity: str) -> SessionStore:
        return SessionStore.for_session(self.env, session_id, lease_ms=config.lease_ms,
                                        identity=identity)

    async def _start(self, store: SessionStore, cp: LoopCheckpoint, config: AgentConfig,
                     identity: str) -> Response:
        """Claim ``cp`` (within the caller's bound on live runs: a 429 before anything is
        stored), run it in the background and answer with its live stream (bindloop's SSE
        dialect)."""
        runs = live_runs(self.env, config.max_live_runs,
                         config.max_live_runs_total)
        slot = None if runs is None else await runs.enter(identity)
        try:
            claimed = await store.claim(cp)
        except BaseException:
            if runs is not None and slot is not None:
                await runs.leave(slot)
            raise
        stream = EventStream(heartbeat_ms=config.heartbeat_ms)
        log = RunLog(store.target, store.run, stream)
        work = drive(log, store, claimed, config, self.env)
        if runs is not None and slot is not None:
            work = runs.hold(slot, work)
        self.ctx.waitUntil(asyncio.ensure_future(work))
        return stream.response()

    async def _load(self, store: SessionStore) -> LoopCheckpoint:
        try:
            cp = await store.load()
        except CheckpointFormatError as exc:
            raise HttpError(500, "corrupt_session", f"stored checkpoint unreadable: {exc}") from exc
        if cp is None:
            raise HttpError(404, "unknown_session", f"no session {store.session_id!r}; start one "
                            "with POST /v1/chat")
        return cp

    async def chat(self, request: Any, _match: re.Match[str]) -> Response:
        identity = await self.authorize(request)  # before the body is read
        body = await read_json(request)
        message = _field(body, "message", str)
        session_id = _field(body, "session_id", str, required=False)
        config = _config(self.env, self.tools, model_of(self))  # refuse before anything is stored
        if session_id is None:
            store = self._store(str(js.crypto.randomUUID()), config, identity)
            history: list[Message] = []
            if config.system_prompt is not None:
                history.append(SystemMessage(content=config.system_prompt))
            history.append(UserMessage(content=message))
            cp = create_loop_checkpoint(execution_id=store.session_id, messages=history,
                                        max_iterations=config.max_iterations)
            return await self._start(store, cp, config, identity)
        if not SESSION_ID.match(session_id):
            raise HttpError(400, "invalid_session_id", "a session id is 1-64 characters of A-Z a-z 0-9 _ -")
        store = self._store(session_id, config, identity)
        cp = await self._load(store)
        if cp.status not in ("finished", "aborted"):
            raise HttpError(409, "session_busy", f"session {session_id!r} is {cp.status}; a new "
                            "message is accepted only when it is finished", session_status=cp.status)
        if cp.iterations >= cp.max_iterations:
            raise HttpError(409, "iteration_limit", f"session {session_id!r} used all its "
                            f"{cp.max_iterations} model turns (MAX_ITERATIONS); start a new session")
        cp = apply_checkpoint_input(cp, UserMessage(content=message))
        return await self._start(store, cp, config, identity)

    async def show(self, _request: Any, match: re.Match[str]) -> Response:
        session_id = _session_id(match)
        store = SessionStore.for_session(self.env, session_id, lease_ms=1,
                                         identity=await self.authorize(_request))
        cp = await self._load(store)
        return json_response(200, {"session_id": session_id, "status": cp.status,
                                   "revision": cp.revision, "iterations": cp.iterations,
                                   "messages": len(cp.messages),
                                   "run": run_view(await store.state())})

    async def reply(self, request: Any, match: re.Match[str]) -> Response:
        identity = await self.authorize(request)
        session_id = _session_id(match)
        body = await read_json(request)
        content = _field(body, "content", str)
        revision = _field(body, "revision", int)
        tool_call_id = _field(body, "tool_call_id", str, required=False)
        config = _config(self.env, self.tools, model_of(self))
        store = self._store(session_id, config, identity)
        cp = await self._load(store)
        if cp.status != "waiting_for_reply":
            raise HttpError(409, "not_waiting", f"session {session_id!r} is {cp.status}, not "
                            "waiting_for_reply: there is no question to answer", session_status=cp.status)
        _check_revision(session_id, cp, revision, "the reply", "reload and answer again")
        waiting = [s for s in cp.open_suspends if s.mode == "waiting_for_reply"]
        if tool_call_id is None:
            tool_call_id = waiting[0].tool_call_id
        elif all(s.tool_call_id != tool_call_id for s in waiting):
            raise HttpError(400, "invalid_field", f"session {session_id!r} is not waiting on tool call "
                            f"{tool_call_id!r}", field="tool_call_id")
        cp = apply_checkpoint_input(cp, CheckpointReply(tool_call_id=tool_call_id, content=content))
        return await self._start(store, cp, config, identity)

    async def resume(self, request: Any, match: re.Match[str]) -> Response:
        """Run a ``ready`` session (its last run failed, or was lost: GET says which) on from what
        storage holds -- the last saved tool round, or the request's input -- so finished rounds
        are not run again. The claim is the same checkpoint one revision later and takes the run
        lease: of two resumes racing for one revision one wins, the other gets a 409, and a
        resume while a run's lease is live gets ``run_in_progress``."""
        session_id = _session_id(match)
        identity = await self.authorize(request)
        revision = _field(await read_json(request), "revision", int)
        config = _config(self.env, self.tools, model_of(self))
        store = self._store(session_id, config, identity)
        cp = await self._load(store)
        if cp.status != "ready":
            raise HttpError(409, "not_resumable", f"session {session_id!r} is {cp.status}; only a "
                            "session whose run failed (ready) is resumed", session_status=cp.status)
        _check_revision(session_id, cp, revision, "the resume", "reload and retry")
        if cp.iterations >= cp.max_iterations:
            raise HttpError(409, "iteration_limit", f"session {session_id!r} used all its "
                            f"{cp.max_iterations} model turns (MAX_ITERATIONS); start a new session")
        return await self._start(store, msgspec.structs.replace(cp, revision=cp.revision + 1),
                                 config, identity)

    async def stream(self, request: Any, match: re.Match[str]) -> Response:
        """The latest run's events after ``Last-Event-ID`` (all of them without one), then the
        rest live, from the Session object's event log: a client that lost its stream -- a
        dropped connection, a reload -- reads the run on; the run never depended on it."""
        identity = await self.authorize(request)
        session_id = _session_id(match)
        config = _config(self.env, self.tools, model_of(self))
        store = self._store(session_id, config, identity)
        await self._load(store)
        want_run, after = last_event_id(request.headers.get("last-event-id"))
        batch = json.loads(str(await store.target.read_log(after, LOG_BATCH)))
        if want_run and batch["run"] != want_run:  # a newer run: all of it
            after = -1
            batch = json.loads(str(await store.target.read_log(after, LOG_BATCH)))
        if not batch["run"] or (not batch["events"] and not batch["live"]):
            return Response("", status=204)
        stream = EventStream(heartbeat_ms=config.heartbeat_ms)
        self.ctx.waitUntil(asyncio.ensure_future(
            _follow(stream, store.target, batch, after, config.lease_ms)))
        return stream.response()

    async def stop(self, _request: Any, match: re.Match[str]) -> Response:
        session_id = _session_id(match)
        store = SessionStore.for_session(self.env, session_id, lease_ms=1,
                                         identity=await self.authorize(_request))
        await self._load(store)
        run = str(await store.target.request_stop())
        if not run:
            raise HttpError(409, "not_running", f"session {session_id!r} has no live run to stop")
        return json_response(202, {"session_id": session_id, "run": run, "stopping": True})

    async def conformance(self, _request: Any, _match: re.Match[str]) -> Response:
        try:
            import conformance
            from conformance.runner import report_for
        except ImportError:
            raise HttpError(404, "not_vendored", "conformance/ is not vendored into this Worker") from None
        import os

        report = await report_for(os.path.join(os.path.dirname(conformance.__file__), "scenarios"))
        return Response(report, status=200, headers=JSON_HEADERS)




async def _follow(stream: EventStream, target: Any, batch: dict[str, Any], after: int,
                  lease_ms: int) -> None:
    """Send the log from ``batch`` on, polling for more while the run is live; a run the alarm
    continued (a newer run in the log) is followed from its first event."""
    run = batch["run"]
    quiet_ms = 0.0
    try:
        while True:
            for offset, event, payload in batch["events"]:
                stream.send_encoded(event, payload, f"{run}:{offset}")
                after = offset
            if not batch["events"]:
                if batch["ended"] or (not batch["live"] and quiet_ms > 2 * lease_ms):
                    return
                await asyncio.sleep(0.25)
                quiet_ms += 250
            else:
                quiet_ms = 0.0
            batch = json.loads(str(await target.read_log(after, LOG_BATCH)))
            if batch["run"] != run:
                run, after = batch["run"], -1
                batch = json.loads(str(await target.read_log(after, LOG_BATCH)))
    finally:
        await stream.close()


ROUTES = Routes()
_SESSION = r"/v1/sessions/(?P<id>[^/]+)"
ROUTES.add("GET", "/conformance", ChatWorker.conformance)
ROUTES.add("POST", "/v1/chat", ChatWorker.chat)
ROUTES.add("GET", _SESSION, ChatWorker.show)
ROUTES.add("POST", _SESSION + "/reply", ChatWorker.reply)
ROUTES.add("POST", _SESSION + "/resume", ChatWorker.resume)
ROUTES.add("GET", _SESSION + "/stream", ChatWorker.stream)
ROUTES.add("POST", _SESSION + "/stop", ChatWorker.stop)
# The protocols real frontends speak (frontends.py): the AI SDK UI message stream and AG-UI.
ROUTES.add("POST", "/api/chat", api_chat)
ROUTES.add("GET", r"/api/chat/(?P<id>[^/]+)/stream", api_chat_stream)
ROUTES.add("POST", r"/api/chat/(?P<id>[^/]+)/stop", api_chat_stop)
ROUTES.add("DELETE", r"/api/chat/(?P<id>[^/]+)", api_chat_delete)
ROUTES.add("POST", "/ag-ui", ag_ui)
ROUTES.add("GET", r"/ag-ui/(?P<id>[^/]+)/stream", ag_ui_stream)
ROUTES.add("POST", r"/ag-ui/(?P<id>[^/]+)/stop", ag_ui_stop)
ROUTES.add("DELETE", r"/ag-ui/(?P<id>[^/]+)", ag_ui_delete)
add_mcp_routes(ROUTES)  # POST/DELETE /mcp: the tools as an MCP server (mcp_route.py)
add_a2a_routes(ROUTES)  # the agent card and POST /a2a: the agent as an A2A 1.0 agent (a2a_route.py)
ChatWorker.routes = ROUTES
