"""bindloop in a Cloudflare Python Worker: an agent over HTTP with Durable Object sessions.

Routes
------
``POST /v1/chat`` ``{"message": str, "session_id"?: str}``
    Starts a session (or continues a ``finished`` one) and streams it as Server-Sent Events.
``POST /v1/sessions/{id}/reply`` ``{"content": str, "revision": int, "tool_call_id"?: str}``
    Answers the question a session stopped on (``waiting_for_reply``) and streams the rest.
``POST /v1/sessions/{id}/resume`` ``{"revision": int}``
    Runs a session whose run failed (status ``ready``) on from its last saved tool round.
``GET /v1/sessions/{id}``
    The stored checkpoint's status and revision.
``GET /conformance``
    bindloop's conformance report, run in this isolate (when ``conformance/`` is vendored).

SSE events: ``session`` (id and the stored revision), ``turn`` (the turn text stream's ``text`` /
``reset`` events, rendered by ``TurnStreamReducer`` in wasm/demo/turn-stream.js), ``done`` (status,
stop reason, revision, and the question when waiting) and ``error`` (the failure and the revision
storage still holds). Refused requests get a 4xx JSON body ``{"error": code, "message": ...}``.

The agent (bindloop's agent API, in agent.py) runs in the Worker and saves the session after
every finished tool round; the ``Session`` Durable Object only stores the checkpoint and accepts a
write of revision *n + 1* only over revision *n* -- one writer per session, whatever the number of
isolates. The ``RateLimiter`` Durable Object is the
``LimitStore`` of ``with_limit`` when ``RATE_LIMIT_*`` is set: every isolate counts against one
limit. Inside workerd an event loop is already running: everything here is ``await``-ed, never
``anyio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

import js  # type: ignore[import-not-found]
import msgspec
from pyodide.ffi import JsException, to_js  # type: ignore[import-not-found]
from workers import DurableObject, Response, WorkerEntrypoint  # type: ignore[import-not-found]

from agent import (
    MAX_BODY_BYTES,
    SESSION_ID,
    AgentConfig,
    HttpError,
    Provider,
    build_model,
    config_from_env,
    run_session,
    stopped_checkpoint,
)
from bindloop.agent import InMemoryLimitStore, LimitStore
from bindloop.contracts import Message, SystemMessage, UserMessage
from bindloop.agent import ToolLoopExceededError, TurnBudgetExceededError
from bindloop.hosts.js_fetch import FetchTransport
from bindloop.session import (
    CheckpointFormatError,
    CheckpointReply,
    LoopCheckpoint,
    apply_checkpoint_input,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)

JSON_HEADERS = {"content-type": "application/json"}


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, headers=JSON_HEADERS)


def _js_obj(value: dict[str, Any]) -> Any:
    return to_js(value, dict_converter=js.Object.fromEntries)


class Session(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """One conversation's checkpoint: ``checkpoint`` (its JSON) and ``revision`` under one key set,
    written together. Compare-and-set on the revision makes the object the session's single writer."""

    async def load(self) -> str | None:
        data = await self.ctx.storage.get("checkpoint")
        return None if data is None else str(data)

    async def commit(self, expected_revision: int, revision: int, data: str) -> str:
        """Store ``data`` (revision ``revision``) if the stored revision is ``expected_revision``
        (``-1``: nothing stored yet). Answers ``{"ok": bool, "revision": stored revision}``."""
        stored = await self.ctx.storage.get("revision")
        current = -1 if stored is None else int(stored)
        if current != expected_revision:
            return json.dumps({"ok": False, "revision": current})
        # One put of both keys: atomic, so no reader sees a revision without its checkpoint.
        await self.ctx.storage.put(_js_obj({"checkpoint": data, "revision": revision}))
        return json.dumps({"ok": True, "revision": revision})


class RateLimiter(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """The rate-limit state every isolate shares: one object per limit group (``idFromName``), so
    ``with_limit``'s windows and in-flight counts are counted once however many isolates call the
    providers. The object serialises its calls, and each method finishes without awaiting, so no
    two requests interleave inside one. State lives in the object's memory (it is evicted only
    after a quiet spell longer than a one-minute window, which has emptied by then; concurrency
    slots of calls that outlive an eviction are forgotten, never double-counted)."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._limits = InMemoryLimitStore()

    async def admit(self, key: str, window_ms: float, limit: int, amount: int, now: float) -> float:
        return await self._limits.admit(str(key), float(window_ms), int(limit), int(amount), float(now))

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        await self._limits.charge(str(key), float(window_ms), int(amount), float(now))

    async def enter(self, key: str, limit: int) -> bool:
        return await self._limits.enter(str(key), int(limit))

    async def leave(self, key: str) -> None:
        await self._limits.leave(str(key))


class DurableLimitStore:
    """bindloop's ``LimitStore`` over a :class:`RateLimiter` Durable Object (RPC), for
    ``with_limit(store=...)``: requests in any isolate share one limit. Pair it with a clock every
    isolate agrees on (:func:`wall_clock_ms`), not a per-process monotonic one."""

    def __init__(self, namespace: Any, name: str = "providers") -> None:
        self._stub = namespace.get(namespace.idFromName(name))

    async def admit(self, key: str, window_ms: float, limit: int, amount: int, now: float) -> float:
        return float(await self._stub.admit(key, window_ms, limit, amount, now))

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        await self._stub.charge(key, window_ms, amount, now)

    async def enter(self, key: str, limit: int) -> bool:
        return bool(await self._stub.enter(key, limit))

    async def leave(self, key: str) -> None:
        await self._stub.leave(key)


def wall_clock_ms() -> float:
    # Date.now() in workerd advances with I/O, not while Python computes: fine for windows of
    # seconds, and the same clock in every isolate (a monotonic clock is per process).
    return float(js.Date.now())


def _limit_store(env: Any) -> LimitStore | None:
    namespace = getattr(env, "LIMITS", None)
    return None if namespace is None else DurableLimitStore(namespace)


def _config(env: Any) -> AgentConfig:
    """The agent's config, refused (500, named) before anything is stored."""
    config = config_from_env(env)
    limited = config.rate_limit_rpm is not None or config.rate_limit_concurrency is not None
    if limited and getattr(env, "LIMITS", None) is None:
        raise HttpError(500, "misconfigured", "RATE_LIMIT_* is set but the Worker has no LIMITS "
                        "Durable Object binding (class RateLimiter); add it in wrangler.jsonc")
    return config


class _Store:
    """The Worker's handle on one session's Durable Object."""

    def __init__(self, env: Any, session_id: str) -> None:
        ns = env.SESSION
        self._stub = ns.get(ns.idFromName(session_id))
        self.session_id = session_id
        self.revision = -1
        self.latest: LoopCheckpoint | None = None  # what storage holds, once known

    async def load(self) -> LoopCheckpoint | None:
        data = await self._stub.load()
        if data is None:
            return None
        cp = parse_loop_checkpoint(str(data))
        self.revision = cp.revision
        self.latest = cp
        return cp

    async def commit(self, cp: LoopCheckpoint) -> None:
        data = serialize_loop_checkpoint(cp).decode("utf-8")
        answer = json.loads(str(await self._stub.commit(self.revision, cp.revision, data)))
        if not answer["ok"]:
            raise HttpError(409, "stale_revision",
                            f"session {self.session_id!r} is at revision {answer['revision']}, not "
                            f"{self.revision}: another request wrote it first; reload and retry",
                            revision=answer["revision"])
        self.revision = cp.revision
        self.latest = cp


async def _read_json(request: Any) -> dict[str, Any]:
    length = request.headers.get("content-length")
    if length is not None and str(length).isdigit() and int(str(length)) > MAX_BODY_BYTES:
        raise HttpError(413, "body_too_large",
                        f"the request body is {length} bytes; the limit is {MAX_BODY_BYTES}")
    raw = await request.text()
    if len(raw.encode("utf-8")) > MAX_BODY_BYTES:
        raise HttpError(413, "body_too_large", f"the request body exceeds {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise HttpError(400, "malformed_json", f"the request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise HttpError(400, "malformed_json", "the request body must be a JSON object")
    return body


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


class _EventStream:
    """An SSE response fed from a background task (kept alive with ``ctx.waitUntil``)."""

    def __init__(self) -> None:
        self._ts = js.TransformStream.new()
        self._writer = self._ts.writable.getWriter()
        self._encoder = js.TextEncoder.new()

    def send(self, event: str, data: Any) -> None:
        """One SSE event; ``data`` is anything msgspec encodes (a dict, a turn stream event)."""
        line = f"event: {event}\ndata: {msgspec.json.encode(data).decode()}\n\n"
        # Writes queue in order; the readable side delivers each as it is written.
        self._writer.write(self._encoder.encode(line))

    async def close(self) -> None:
        # A client that went away first has already errored the stream: nothing is left to tell it.
        with contextlib.suppress(JsException):
            await self._writer.close()

    def response(self) -> Response:
        return Response(self._ts.readable, status=200,
                        headers={"content-type": "text/event-stream", "cache-control": "no-store"})


def _transport_for(provider: Provider, headers: Sequence[tuple[str, str]]) -> FetchTransport:
    return FetchTransport(provider.base_url, headers=headers)


async def _drive(stream: _EventStream, store: _Store, cp: LoopCheckpoint,
                 config: AgentConfig, env: Any) -> None:
    stream.send("session", {"session_id": store.session_id, "revision": store.revision})
    try:
        model = build_model(config, transport_for=_transport_for,
                            on_turn_event=lambda ev: stream.send("turn", ev),
                            turn_prefix=cp.execution_id, first_turn=cp.iterations,
                            limit_store=_limit_store(env), clock=wall_clock_ms)
        # Every finished tool round is committed as it settles: a run that fails later resumes
        # from there (POST /v1/sessions/{id}/resume) instead of running the round again.
        result = await run_session(cp, model=model, save=store.commit)
        final = result.checkpoint
        await store.commit(final)
        done: dict[str, Any] = {"session_id": store.session_id, "status": final.status,
                                "stop_reason": result.stop_reason, "revision": store.revision,
                                "iterations": final.iterations}
        waiting = [s for s in final.open_suspends if s.mode == "waiting_for_reply"]
        if waiting:
            done["question"] = waiting[0].detail
            done["tool_call_id"] = waiting[0].tool_call_id
        if final.status == "finished":
            done["text"] = result.text
        stream.send("done", done)
    except HttpError as exc:
        stream.send("error", {**exc.body(), "session_id": store.session_id, "revision": store.revision})
    except (ToolLoopExceededError, TurnBudgetExceededError) as exc:
        try:
            await store.commit(stopped_checkpoint(store.latest or cp))
        except HttpError as refused:  # a second writer got there first: storage keeps its revision
            stream.send("error", {**refused.body(), "session_id": store.session_id,
                                  "revision": store.revision})
        else:
            stream.send("error", {"error": "iteration_limit", "message": str(exc),
                                  "session_id": store.session_id, "revision": store.revision,
                                  "status": "aborted"})
    except Exception as exc:  # a provider or transport failure: report it, storage keeps its revision
        stream.send("error", {"error": type(exc).__name__, "message": str(exc),
                              "session_id": store.session_id, "revision": store.revision})
    finally:
        await stream.close()


class Default(WorkerEntrypoint):  # type: ignore[misc]
    async def fetch(self, request: Any) -> Response:
        try:
            return await self._route(request)
        except HttpError as exc:
            return _json(exc.status, exc.body())

    async def _route(self, request: Any) -> Response:
        path = urlparse(str(request.url)).path
        method = str(request.method)
        if path == "/conformance" and method == "GET":
            return await self._conformance()
        if path == "/v1/chat":
            if method != "POST":
                raise HttpError(405, "method_not_allowed", "use POST /v1/chat")
            return await self._chat(await _read_json(request))
        parts = path.strip("/").split("/")
        if len(parts) >= 3 and parts[:2] == ["v1", "sessions"]:
            session_id = parts[2]
            if not SESSION_ID.match(session_id):
                raise HttpError(400, "invalid_session_id",
                                "a session id is 1-64 characters of A-Z a-z 0-9 _ -")
            if len(parts) == 3 and method == "GET":
                return await self._show(session_id)
            if len(parts) == 4 and parts[3] == "reply" and method == "POST":
                return await self._reply(session_id, await _read_json(request))
            if len(parts) == 4 and parts[3] == "resume" and method == "POST":
                return await self._resume(session_id, await _read_json(request))
        raise HttpError(404, "not_found", f"no route for {method} {path}")

    def _start(self, store: _Store, cp: LoopCheckpoint, config: AgentConfig) -> Response:
        stream = _EventStream()
        self.ctx.waitUntil(asyncio.ensure_future(_drive(stream, store, cp, config, self.env)))
        return stream.response()

    async def _chat(self, body: dict[str, Any]) -> Response:
        message = _field(body, "message", str)
        session_id = _field(body, "session_id", str, required=False)
        config = _config(self.env)  # refuse before anything is stored
        if session_id is None:
            session_id = str(js.crypto.randomUUID())
            store = _Store(self.env, session_id)
            history: list[Message] = []
            if config.system_prompt is not None:
                history.append(SystemMessage(content=config.system_prompt))
            history.append(UserMessage(content=message))
            cp = create_loop_checkpoint(execution_id=session_id, messages=history,
                                        max_iterations=config.max_iterations)
            await store.commit(cp)
            return self._start(store, cp, config)
        if not SESSION_ID.match(session_id):
            raise HttpError(400, "invalid_session_id", "a session id is 1-64 characters of A-Z a-z 0-9 _ -")
        store = _Store(self.env, session_id)
        cp = await self._load(store)
        if cp.status not in ("finished", "aborted"):
            raise HttpError(409, "session_busy", f"session {session_id!r} is {cp.status}; a new "
                            "message is accepted only when it is finished", session_status=cp.status)
        if cp.iterations >= cp.max_iterations:
            raise HttpError(409, "iteration_limit", f"session {session_id!r} used all its "
                            f"{cp.max_iterations} model turns (MAX_ITERATIONS); start a new session")
        cp = apply_checkpoint_input(cp, UserMessage(content=message))
        await store.commit(cp)
        return self._start(store, cp, config)

    async def _load(self, store: _Store) -> LoopCheckpoint:
        try:
            cp = await store.load()
        except CheckpointFormatError as exc:
            raise HttpError(500, "corrupt_session", f"stored checkpoint unreadable: {exc}") from exc
        if cp is None:
            raise HttpError(404, "unknown_session", f"no session {store.session_id!r}; start one "
                            "with POST /v1/chat")
        return cp

    async def _show(self, session_id: str) -> Response:
        cp = await self._load(_Store(self.env, session_id))
        return _json(200, {"session_id": session_id, "status": cp.status, "revision": cp.revision,
                           "iterations": cp.iterations, "messages": len(cp.messages)})

    async def _reply(self, session_id: str, body: dict[str, Any]) -> Response:
        content = _field(body, "content", str)
        revision = _field(body, "revision", int)
        tool_call_id = _field(body, "tool_call_id", str, required=False)
        config = _config(self.env)
        store = _Store(self.env, session_id)
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
        await store.commit(cp)
        return self._start(store, cp, config)

    async def _resume(self, session_id: str, body: dict[str, Any]) -> Response:
        """Run a ``ready`` session (its last run failed: the SSE ``error`` named its revision)
        on from what storage holds -- the last saved tool round, or the request's input -- so
        finished rounds are not run again. The claim is the same checkpoint one revision later:
        of two resumes racing for one revision one wins, the other gets a 409."""
        revision = _field(body, "revision", int)
        config = _config(self.env)
        store = _Store(self.env, session_id)
        cp = await self._load(store)
        if cp.status != "ready":
            raise HttpError(409, "not_resumable", f"session {session_id!r} is {cp.status}; only a "
                            "session whose run failed (ready) is resumed", session_status=cp.status)
        _check_revision(session_id, cp, revision, "the resume", "reload and retry")
        if cp.iterations >= cp.max_iterations:
            raise HttpError(409, "iteration_limit", f"session {session_id!r} used all its "
                            f"{cp.max_iterations} model turns (MAX_ITERATIONS); start a new session")
        cp = msgspec.structs.replace(cp, revision=cp.revision + 1)
        await store.commit(cp)
        return self._start(store, cp, config)

    async def _conformance(self) -> Response:
        try:
            import conformance
            from conformance.runner import report_for
        except ImportError:
            raise HttpError(404, "not_vendored", "conformance/ is not vendored into this Worker") from None
        import os

        report = await report_for(os.path.join(os.path.dirname(conformance.__file__), "scenarios"))
        return Response(report, status=200, headers=JSON_HEADERS)
