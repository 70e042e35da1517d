"""The routes real frontends speak, beside the Worker's own: ``POST /api/chat`` (the Vercel AI SDK
UI message stream, for ``useChat`` / ``DefaultChatTransport``) and ``POST /ag-ui`` (AG-UI, for
``HttpAgent``), each with ``GET .../{id}/stream`` (reconnect) and ``POST .../{id}/stop``.

The client holds the conversation, as those clients expect: the request carries it, decoded by
``bindloop.protocols`` into the transcript (bounded before parsing), and one ``prompt_chat`` runs
over the Worker's providers and tools (``bindloop.hosts.asgi_agent.agent_runner``), its events
encoded as they come. Each response is a run of the chat's own ``Session`` object (named
``ui:<id>`` / ``ag-ui:<id>``): it holds the run lease (a second request while one runs gets 409
``run_in_progress``; stop is asked through it) and the event log, so a client that dropped reads
the response again (the AI SDK replays from the start; ``Last-Event-ID: <run>:<offset>`` resumes
after an event) while the run goes on in ``ctx.waitUntil``. ``ask_user`` suspends as the protocol's
question: the AI SDK call stays ``input-available`` for the client's ``addToolResult``, AG-UI
finishes with an interrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any

from collections.abc import Sequence

import js  # type: ignore[import-not-found]
import msgspec
from workers import Response  # type: ignore[import-not-found]

from agent import (
    MAX_BODY_BYTES,
    MAX_BODY_DEPTH,
    TOOLS,
    AgentConfig,
    HttpError,
    Provider,
    build_model,
    config_from_env,
    error_event,
)
from bindloop.contracts import JsonBoundsError, SystemMessage
from bindloop.session import create_loop_checkpoint
from bindloop.hosts.asgi import (
    AgUiFrames,
    ChatInput,
    Frames,
    UiFrames,
    ag_ui_chat_input,
    drive_run,
    ui_chat_input,
    ui_encoder,
)
from bindloop.hosts.asgi_agent import agent_runner
from bindloop.hosts.js_fetch import FetchTransport
from bindloop.protocols import (
    AG_UI_HEADERS,
    UI_STREAM_HEADERS,
    AgUiEncoder,
    ProtocolRequestError,
    decode_run_agent_input,
    decode_ui_chat_request,
)
from sessions import RunLog, SessionStore, limit_store, wall_clock_ms
from web import EventStream

__all__ = ("ag_ui", "ag_ui_stop", "ag_ui_stream", "api_chat", "api_chat_stop", "api_chat_stream")

_BOUNDS = {"too_large": (413, "body_too_large"), "too_deep": (400, "body_too_deep"),
           "malformed": (400, "malformed_json"), "not_an_object": (400, "malformed_json")}


async def _body(request: Any) -> str:
    length = request.headers.get("content-length")
    if length is not None and str(length).isdigit() and int(str(length)) > MAX_BODY_BYTES:
        raise HttpError(413, "body_too_large",
                        f"the request body is {length} bytes; the limit is {MAX_BODY_BYTES}")
    return str(await request.text())


def _refused(exc: Exception) -> HttpError:
    if isinstance(exc, JsonBoundsError):
        status, code = _BOUNDS[exc.reason]
        return HttpError(status, code, str(exc))
    return HttpError(400, "invalid_request", str(exc),
                     field=getattr(exc, "field", None))


def _describe(exc: Exception) -> str:
    """A failed run as the client reads it: the provider and the kind of failure, never a URL or
    what the provider said (the Worker's own routes' rule, agent.error_event)."""
    return str(error_event(exc, session_id="", revision=-1)["message"])


def _transport(provider: Provider, headers: Sequence[tuple[str, str]]) -> FetchTransport:
    return FetchTransport(provider.base_url, headers=headers)


def _chat(config: AgentConfig, chat: ChatInput) -> ChatInput:
    """The Worker's system prompt opens a conversation that has none."""
    if config.system_prompt is None or any(isinstance(m, SystemMessage) for m in chat.transcript):
        return chat
    return ChatInput(chat_id=chat.chat_id, protocol=chat.protocol,
                     transcript=(SystemMessage(content=config.system_prompt), *chat.transcript),
                     tools=chat.tools, approvals=chat.approvals, state=chat.state)


LOG_BATCH = 256
"""Events read from the log per call while a reconnected client catches up."""


def _frame(_event: str, payload: str, event_id: str | None) -> str:
    """A protocol frame: data-only SSE with the log's ``<run>:<offset>`` as its ``id:`` -- except
    the AI SDK's end marker, which goes out bare, as the SDK's own servers send it."""
    if payload == "[DONE]" or event_id is None:
        return f"data: {payload}\n\n"
    return f"id: {event_id}\ndata: {payload}\n\n"


def _session(owner: Any, protocol: str, chat_id: str, config: AgentConfig) -> SessionStore:
    """Each protocol chat's Session object (its run lease and event log), named apart from the
    Worker's own sessions."""
    return SessionStore.for_session(owner.env, f"{protocol}:{chat_id}", lease_ms=config.lease_ms)


async def _claim(store: SessionStore, chat: ChatInput, config: AgentConfig) -> None:
    """Take the chat's run lease (409 ``run_in_progress`` while another run of it is live) and
    start its event log. The checkpoint stored is the request's transcript marked ``finished``:
    the client holds the conversation, so the object's alarm never continues a protocol run."""
    await store.load()
    cp = create_loop_checkpoint(execution_id=store.session_id, messages=chat.transcript,
                                max_iterations=config.max_iterations)
    await store.claim(msgspec.structs.replace(cp, revision=store.revision + 1, status="finished"))


async def _keep_lease(store: SessionStore, work: asyncio.Future[Any]) -> None:
    """Renew the lease while the run goes; cancel it when ``POST .../stop`` asks."""
    while not work.done():
        await asyncio.sleep(min(1000, store.lease_ms / 3) / 1000)
        with contextlib.suppress(Exception):  # the object unreachable: try again next tick
            answer = await store.heartbeat()
            if not answer["held"] or answer["stop"]:
                work.cancel()
                return


async def _start(owner: Any, config: AgentConfig, chat: ChatInput, frames: Frames,
                 headers: tuple[tuple[str, str], ...]) -> Any:
    store = _session(owner, chat.protocol, chat.chat_id, config)
    await _claim(store, chat, config)
    stream = EventStream(heartbeat_ms=config.heartbeat_ms, frame=_frame, headers=dict(headers))
    log = RunLog(store.target, store.run, stream)
    model = build_model(config, transport_for=_transport, on_turn_event=lambda _ev: None,
                        turn_prefix=f"{chat.protocol}:{chat.chat_id}", first_turn=0,
                        limit_store=limit_store(owner.env), clock=wall_clock_ms)
    runner = agent_runner(model, tools=TOOLS, max_turn_steps=config.max_iterations)

    def write(payloads: list[bytes]) -> None:
        for payload in payloads:
            log.send("", msgspec.Raw(payload))  # already JSON: logged and streamed as it is

    async def run() -> None:
        work = asyncio.ensure_future(drive_run(runner, chat, frames, write, describe=_describe))
        keeper = asyncio.ensure_future(_keep_lease(store, work))
        outcome = "stopped"
        try:
            outcome = await work
        except asyncio.CancelledError:
            pass  # stopped: drive_run has written the protocol's abort
        finally:
            keeper.cancel()
            with contextlib.suppress(Exception):  # unreachable: the lease runs out instead
                await store.release(outcome)
            await log.close()

    owner.ctx.waitUntil(asyncio.ensure_future(run()))
    return stream.response()


def _last_event_id(header: Any) -> tuple[str, int]:
    """``"r5:17"`` -> ``("r5", 17)``; absent or not ours -> ``("", -1)``: the whole log."""
    run, _, offset = str(header or "").partition(":")
    if not re.fullmatch(r"r\d{1,12}", run) or not offset.isdigit():
        return "", -1
    return run, int(offset)


async def _follow(stream: EventStream, target: Any, batch: dict[str, Any], after: int) -> None:
    run = batch["run"]
    try:
        while True:
            for offset, event, payload in batch["events"]:
                stream.send_encoded(event, payload, f"{run}:{offset}")
                after = offset
            if not batch["events"]:
                if batch["ended"] or not batch["live"]:
                    return
                await asyncio.sleep(0.1)
            batch = json.loads(str(await target.read_log(after, LOG_BATCH)))
            if batch["run"] != run:
                return  # a newer run of the chat: this one is over
    finally:
        await stream.close()


async def _reconnect(owner: Any, request: Any, protocol: str, chat_id: str,
                     headers: tuple[tuple[str, str], ...]) -> Any:
    """The chat's running response again, from its start (the AI SDK's ``reconnectToStream``
    replays) or after ``Last-Event-ID``; 204 when nothing is running."""
    config = config_from_env(owner.env)
    store = _session(owner, protocol, chat_id, config)
    want_run, after = _last_event_id(request.headers.get("last-event-id"))
    batch = json.loads(str(await store.target.read_log(after, LOG_BATCH)))
    if want_run and batch["run"] != want_run:
        after = -1
        batch = json.loads(str(await store.target.read_log(after, LOG_BATCH)))
    running = batch["live"] and not batch["ended"]
    if not batch["run"] or not (running or (want_run and batch["events"])):
        return Response("", status=204)
    stream = EventStream(heartbeat_ms=config.heartbeat_ms, frame=_frame, headers=dict(headers))
    owner.ctx.waitUntil(asyncio.ensure_future(_follow(stream, store.target, batch, after)))
    return stream.response()


async def _stop(owner: Any, protocol: str, chat_id: str) -> Any:
    config = config_from_env(owner.env)
    run = str(await _session(owner, protocol, chat_id, config).target.request_stop())
    if not run:
        raise HttpError(409, "not_running", f"nothing is running for {chat_id!r}")
    return Response(json.dumps({"stopping": run}), status=202,
                    headers={"content-type": "application/json"})


async def api_chat_stream(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _reconnect(owner, request, "ui", match.group("id"), UI_STREAM_HEADERS)


async def api_chat_stop(owner: Any, _request: Any, match: re.Match[str]) -> Any:
    return await _stop(owner, "ui", match.group("id"))


async def ag_ui_stream(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _reconnect(owner, request, "ag-ui", match.group("id"), AG_UI_HEADERS)


async def ag_ui_stop(owner: Any, _request: Any, match: re.Match[str]) -> Any:
    return await _stop(owner, "ag-ui", match.group("id"))


async def api_chat(owner: Any, request: Any, _match: re.Match[str]) -> Any:
    raw = await _body(request)
    config = config_from_env(owner.env)  # refuse (500, named) before anything runs
    try:
        req = decode_ui_chat_request(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
    except (JsonBoundsError, ProtocolRequestError) as exc:
        raise _refused(exc) from None
    encoder = ui_encoder(req, str(js.crypto.randomUUID()))
    return await _start(owner, config, _chat(config, ui_chat_input(req)), UiFrames(encoder),
                  UI_STREAM_HEADERS)


async def ag_ui(owner: Any, request: Any, _match: re.Match[str]) -> Any:
    raw = await _body(request)
    config = config_from_env(owner.env)
    try:
        run = decode_run_agent_input(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
    except (JsonBoundsError, ProtocolRequestError) as exc:
        raise _refused(exc) from None
    encoder = AgUiEncoder(thread_id=run.thread_id, run_id=run.run_id, messages=run.messages)
    return await _start(owner, config, _chat(config, ag_ui_chat_input(run)), AgUiFrames(encoder),
                  AG_UI_HEADERS)
