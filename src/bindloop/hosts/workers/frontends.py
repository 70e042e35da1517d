"""The routes real frontends speak, beside the Worker's own: ``POST /api/chat`` (the Vercel AI SDK
UI message stream, for ``useChat`` / ``DefaultChatTransport``) and ``POST /ag-ui`` (AG-UI, for
``HttpAgent``), each with ``GET .../{id}/stream`` (reconnect) and ``POST .../{id}/stop``.

The client holds the conversation, as those clients expect: the request carries it, decoded by
``bindloop.protocols`` into the transcript (bounded before parsing), and one ``prompt_chat`` runs
over the Worker's providers and tools (``bindloop.hosts.chat.agent.agent_runner``), its events
encoded as they come. Each response is a run of the chat's own ``Session`` object (named
``ui:<id>`` / ``ag-ui:<id>``): it holds the run lease (a second request while one runs gets 409
``run_in_progress``; stop is asked through it) and the event log, so a client that dropped reads
the response again (the AI SDK replays from the start; ``Last-Event-ID: <run>:<offset>`` resumes
after an event) while the run goes on in ``ctx.waitUntil``. ``ask_user`` suspends as the protocol's
question: the AI SDK call stays ``input-available`` for the client's ``addToolResult``, AG-UI
finishes with an interrupt. A tool named in ``APPROVAL_TOOLS`` waits for the user's approval (the
AI SDK's ``tool-approval-request``, an AG-UI interrupt); the answer comes with the next request,
and applies only to a call the chat's Session object recorded (:class:`ChatApprovals`). Each
chat belongs to its caller's identity (identity.py): its object is named within that identity.

A run whose isolate dies goes on: it commits every boundary (the approved calls ran, a tool round
settled) with the encoder inputs fed so far (replay.py), and the object's alarm continues it from
the last one (:func:`continue_lost_run`) into the same log, which a reconnecting client reads.
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

from bindloop.hosts.workers.agent import (
    MAX_BODY_BYTES,
    MAX_BODY_DEPTH,
    AgentConfig,
    HttpError,
    Provider,
    build_model,
    config_from_env,
    model_of,
    LOGGER,
)
from bindloop.contracts import JsonBoundsError, Message, SystemMessage, ToolCall, UserMessage
from bindloop.checkpoints import CheckpointFormatError, LoopCheckpoint, create_loop_checkpoint
from bindloop.hosts.chat.run import (
    AgUiFrames,
    ChatInput,
    Frames,
    UiFrames,
    ag_ui_chat_input,
    drive_run,
    ui_chat_input,
    ui_encoder,
)
from bindloop.hosts.chat.errors import error_text
from bindloop.hosts.chat.quota import LogQuota
from bindloop.hosts.chat.agent import agent_runner
from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.protocols import (
    AG_UI_HEADERS,
    UI_STREAM_HEADERS,
    AgUiEncoder,
    ProtocolRequestError,
    decode_run_agent_input,
    decode_ui_chat_request,
)
from bindloop.hosts.chat.replay import RecordedFrames, decode_fed, encode_fed, replay
from bindloop.hosts.chat.follow import LogFollower
from bindloop.hosts.workers.identity import scoped_chat_id
from bindloop.hosts.workers.limits import limit_store, live_runs, wall_clock_ms
from bindloop.hosts.workers.sessions import (
    LOG_BATCH,
    RunLog,
    SessionStore,
    last_event_id,
    recorded_calls,
)
from bindloop.hosts.workers.web import EventStream, read_text

__all__ = ("ag_ui", "ag_ui_delete", "ag_ui_stop", "ag_ui_stream", "api_chat", "api_chat_delete",
           "api_chat_stop", "api_chat_stream", "continue_lost_run")

_BOUNDS = {"too_large": (413, "body_too_large"), "too_deep": (400, "body_too_deep"),
           "malformed": (400, "malformed_json"), "not_an_object": (400, "malformed_json")}


async def _body(request: Any) -> str:
    return await read_text(request)


def _refused(exc: Exception) -> HttpError:
    if isinstance(exc, JsonBoundsError):
        status, code = _BOUNDS[exc.reason]
        return HttpError(status, code, str(exc))
    return HttpError(400, "invalid_request", str(exc),
                     field=getattr(exc, "field", None))


def _describe(store: SessionStore, chat: ChatInput, exc: Exception) -> str:
    """A failed run as the client reads it -- the same short category and ``[ref <run>]`` the
    ASGI host sends (``error_text``: never a URL nor what the provider said; a refused approval
    says which call and why) -- with the detail logged for the operator."""
    LOGGER.error("run %s of chat %r (%s) failed", store.run, chat.chat_id, chat.protocol,
                 exc_info=exc)
    return error_text(exc, store.run)


class ChatApprovals:
    """bindloop's ``PendingApprovals`` for one request's run, over the chat's ``Session`` object:
    the server's record of the calls the chat waits to have approved. The calls this request's
    decisions name were taken out of the object's record by the run's claim (``taken``: one RPC,
    under the object's input gate, so of two requests with one decision only one gets the call);
    the calls the run suspends on (``recorded``) are added to it by the run's release, in the
    same write that frees the chat for its next request. A decision on a call not taken -- one
    the model never made, another chat's, or one decided already -- is refused and runs
    nothing."""

    def __init__(self, chat_id: str, taken: dict[str, ToolCall]) -> None:
        self._chat_id = chat_id
        self._taken = dict(taken)
        self.recorded: list[ToolCall] = []

    def record(self, chat_id: str, calls: Sequence[ToolCall]) -> None:
        if chat_id == self._chat_id:
            self.recorded.extend(calls)

    def take(self, chat_id: str, call_id: str) -> ToolCall | None:
        return self._taken.pop(call_id, None) if chat_id == self._chat_id else None

    def forget(self, chat_id: str) -> int:
        if chat_id != self._chat_id:
            return 0
        count = len(self._taken) + len(self.recorded)
        self._taken.clear()
        self.recorded.clear()
        return count


def _transport(provider: Provider, headers: Sequence[tuple[str, str]]) -> FetchTransport:
    return FetchTransport(provider.base_url, headers=headers)


def _chat(config: AgentConfig, chat: ChatInput) -> ChatInput:
    """The operator's instructions stay the operator's: a system message the client sent is
    carried as user content (it can ask, never instruct), and the Worker's ``SYSTEM_PROMPT``
    opens every conversation."""
    transcript: tuple[Message, ...] = tuple(
        UserMessage(content=m.content) if isinstance(m, SystemMessage) else m
        for m in chat.transcript)
    if config.system_prompt is not None:
        transcript = (SystemMessage(content=config.system_prompt), *transcript)
    return msgspec.structs.replace(chat, transcript=transcript)




def _frame(_event: str, payload: str, event_id: str | None) -> str:
    """A protocol frame: data-only SSE with the log's ``<run>:<offset>`` as its ``id:`` -- except
    the AI SDK's end marker, which goes out bare, as the SDK's own servers send it."""
    if payload == "[DONE]" or event_id is None:
        return f"data: {payload}\n\n"
    return f"id: {event_id}\ndata: {payload}\n\n"


def _session(env: Any, protocol: str, chat_id: str, config: AgentConfig,
             identity: str = "") -> SessionStore:
    """Each protocol chat's Session object (its run lease and event log), named apart from the
    Worker's own sessions and within its caller's identity (identity.py): another identity's
    request with the same id reaches another object."""
    return SessionStore.for_session(env, f"{protocol}:{scoped_chat_id(identity, chat_id)}",
                                    lease_ms=config.lease_ms)


def _request(protocol: str, raw: str, new_id: str,
             config: AgentConfig) -> tuple[ChatInput, Frames]:
    """A request (bounded before parsing) as what its run needs: the chat and fresh frames --
    the same for the same body and ``new_id`` (the AI SDK message id minted when the request
    names none), which is what lets a continuation rebuild them."""
    try:
        if protocol == "ui":
            req = decode_ui_chat_request(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
            return _chat(config, ui_chat_input(req)), UiFrames(ui_encoder(req, new_id))
        run = decode_run_agent_input(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
    except (JsonBoundsError, ProtocolRequestError) as exc:
        raise _refused(exc) from None
    encoder = AgUiEncoder(thread_id=run.thread_id, run_id=run.run_id, messages=run.messages)
    return _chat(config, ag_ui_chat_input(run)), AgUiFrames(encoder)


async def _keep_lease(store: SessionStore, work: asyncio.Future[Any]) -> None:
    """Renew the lease while the run goes; cancel it when ``POST .../stop`` asks."""
    while not work.done():
        await asyncio.sleep(min(1000, store.lease_ms / 3) / 1000)
        with contextlib.suppress(Exception):  # the object unreachable: try again next tick
            answer = await store.heartbeat()
            if not answer["held"] or answer["stop"]:
                work.cancel()
                return


FED_CHUNK = 100_000
"""Characters of saved encoder inputs per storage value (a value holds at most 128 KiB)."""


async def _start(owner: Any, config: AgentConfig, protocol: str, raw: str,
                 identity: str = "") -> Any:
    """Claim the chat's Session object for this request's run and answer with its live stream.
    The claim stores what a continuation needs: the request body, the minted message id, and a
    checkpoint of the request's transcript (a ``ready`` one: the alarm continues the run if its
    isolate dies)."""
    new_id = str(js.crypto.randomUUID())
    chat, frames = _request(protocol, raw, new_id, config)
    headers = UI_STREAM_HEADERS if protocol == "ui" else AG_UI_HEADERS
    store = _session(owner.env, protocol, chat.chat_id, config, identity)
    await store.load()
    cp = msgspec.structs.replace(_claimed(store.session_id, chat, config),
                                 revision=store.revision + 1)
    record = {"run": store.run_for(cp), "protocol": protocol, "new_id": new_id, "chunks": 0,
              "offset": 0}
    runs = live_runs(owner.env, config.max_live_runs,
                     config.max_live_runs_total)
    slot = None if runs is None else await runs.enter(identity)  # a 429 before the claim
    try:
        await store.claim(cp, extra={"protocol": json.dumps(record), "protocol_body": raw},
                          take=[a.tool_call_id for a in chat.approvals])
    except BaseException:
        if runs is not None and slot is not None:
            await runs.leave(slot)
        raise
    stream = EventStream(heartbeat_ms=config.heartbeat_ms, frame=_frame, headers=dict(headers))
    log = RunLog(store.target, store.run, stream)
    work = _run(owner.env, config, store, log, chat, RecordedFrames(frames), record,
                ChatApprovals(chat.key, store.taken))
    if runs is not None and slot is not None:
        work = runs.hold(slot, work)
    owner.ctx.waitUntil(asyncio.ensure_future(work))
    return stream.response()


def _claimed(session_id: str, chat: ChatInput, config: AgentConfig) -> LoopCheckpoint:
    """The checkpoint a request's claim stores: its transcript -- up to the last user message
    when calls in it wait on the request's approvals (a checkpoint holds no unanswered call).
    A continuation without a save runs the request body again, approvals included."""
    try:
        return create_loop_checkpoint(execution_id=session_id, messages=chat.transcript,
                                      max_iterations=config.max_iterations)
    except CheckpointFormatError:
        users = [k for k, m in enumerate(chat.transcript) if isinstance(m, UserMessage)]
        return create_loop_checkpoint(execution_id=session_id,
                                      messages=chat.transcript[:users[-1] + 1] if users else (),
                                      max_iterations=config.max_iterations)


async def _run(env: Any, config: AgentConfig, store: SessionStore, log: RunLog, chat: ChatInput,
               frames: RecordedFrames, record: dict[str, Any], approvals: ChatApprovals, *,
               resumed: bool = False, logged_bytes: int = 0) -> None:
    """One protocol run to its end, its frames to ``log``. Each boundary the runner reports
    (the approvals ran, a tool round settled) is committed with the encoder inputs fed since the
    last one and the log's length, in one write: what :func:`continue_lost_run` starts from.
    The calls it suspends on for approval are recorded with its release (``approvals``). Its
    log is bounded by ``MAX_LOG_BYTES`` (``logged_bytes``: what a continuation's replay logged
    first): a run reaching it is stopped and its stream ends with ``log_full``."""
    model = build_model(config, transport_for=_transport, on_turn_event=lambda _ev: None,
                        turn_prefix=f"{chat.protocol}:{chat.chat_id}", first_turn=0,
                        limit_store=limit_store(env), clock=wall_clock_ms)

    async def save(_chat: ChatInput, cp: Any) -> None:
        # Taken before the write is awaited: the inputs and the offset of this very boundary.
        fed, count, offset = frames.unsaved(), len(frames.fed), log.offset
        text = encode_fed(fed)
        pieces = [text[i:i + FED_CHUNK] for i in range(0, len(text), FED_CHUNK)]
        values: dict[str, Any] = {f"fed:{record['chunks'] + i:06d}": piece
                                  for i, piece in enumerate(pieces)}
        saved = {**record, "chunks": record["chunks"] + len(pieces), "offset": offset}
        values["protocol"] = json.dumps(saved)
        await store.commit(msgspec.structs.replace(cp, revision=store.revision + 1), extra=values)
        record.update(saved)
        frames.saved = count

    # _chat already carried the client's system messages as user content, after SYSTEM_PROMPT.
    runner = agent_runner(model, tools=config.tools, needs_approval=config.approval_tools,
                          max_turn_steps=config.max_iterations, on_checkpoint=save,
                          approvals=approvals, trust_system_messages=True)

    def write(payloads: list[bytes]) -> None:
        for payload in payloads:
            log.send("", msgspec.Raw(payload))  # already JSON: logged and streamed as it is

    work = asyncio.ensure_future(drive_run(runner, chat, frames, write,
                                           describe=lambda exc: _describe(store, chat, exc),
                                           resumed=resumed,
                                           quota=LogQuota(config.max_log_bytes,
                                                          used=logged_bytes)))
    keeper = asyncio.ensure_future(_keep_lease(store, work))
    outcome = "stopped"
    try:
        outcome = await work
    except asyncio.CancelledError:
        pass  # stopped: drive_run has written the protocol's abort
    finally:
        keeper.cancel()
        with contextlib.suppress(Exception):  # unreachable: the lease runs out instead
            await store.release(outcome, approvals.recorded)
        await log.close()


async def continue_lost_run(target: Any, config: AgentConfig, *, lost_run: str,
                            continuation: int) -> None:
    """The Session object's alarm found protocol run ``lost_run`` dead (its lease ran out): run
    its request on in the object, no client attached. From its last save, a fresh encoder is fed
    the inputs saved with it -- writing the dead run's log again, offset for offset, under the new
    run's id (``continues`` names the dead run) -- and ``resume_chat`` goes on from the saved
    checkpoint, so a client that reconnects reads one stream that ends as an uninterrupted run's.
    Without a save the request runs again from its start. An approved call runs at most once,
    unless the isolate died between running it and that save. ``continuation`` counts the lost
    runs continued in a row (stored with the claim)."""
    state = json.loads(str(await target.protocol_run()))
    record, body = state["record"], state["body"]
    chat, frames = _request(record["protocol"], body, record["new_id"], config)
    store = SessionStore(target, f"{record['protocol']}:{chat.chat_id}", lease_ms=config.lease_ms)
    cp = await store.load()
    assert cp is not None  # the lost run's claim stored one
    saved = record["offset"] > 0
    recorder, payloads = RecordedFrames(frames), list[bytes]()
    if saved:
        recorder, payloads = replay(frames, decode_fed(state["fed"]))
        chat = msgspec.structs.replace(chat, transcript=cp.messages, approvals=(), checkpoint=cp)
    claim = msgspec.structs.replace(cp, revision=cp.revision + 1)
    extra: dict[str, Any] = {"protocol": json.dumps({**record, "run": store.run_for(claim)}),
                             "continuations": continuation}
    if saved and len(payloads) == record["offset"]:
        # The replay wrote as many frames as the dead run had by its save (an encoder changed by
        # a deploy in between might not): a client holding that much of it may go on here.
        extra["log_continues"] = f"{lost_run}:{record['offset'] - 1}"
    await store.claim(claim, extra=extra)
    log = RunLog(target, store.run, None)
    for payload in payloads:
        log.send("", msgspec.Raw(payload))
    # Without a save the request's decisions apply again, to the calls its claim took.
    await _run(target.env, config, store, log, chat, recorder, {**record, "run": store.run},
               ChatApprovals(chat.key, recorded_calls(state.get("taken") or {})),
               resumed=saved, logged_bytes=sum(len(p) for p in payloads))


async def _follow(stream: EventStream, target: Any, batch: dict[str, Any], after: int) -> None:
    """Send the chat's log from ``batch`` on, as
    :class:`~bindloop.hosts.chat.follow.LogFollower` decides: live while the run is proven
    alive, held back past its last save while it may be dead, then its continuation."""
    follower = LogFollower(batch["run"], after)
    try:
        while True:
            run = follower.run
            events, then = follower.take(batch)
            for offset, event, payload in events:
                stream.send_encoded(event, payload, f"{run}:{offset}")
            if then == "end":
                return
            if then == "wait":
                await asyncio.sleep(0.1)
            batch = json.loads(str(await target.read_log(follower.after, LOG_BATCH)))
    finally:
        await stream.close()


async def _reconnect(owner: Any, request: Any, protocol: str, chat_id: str,
                     headers: tuple[tuple[str, str], ...]) -> Any:
    """The chat's running response again, from its start (the AI SDK's ``reconnectToStream``
    replays) or after ``Last-Event-ID`` -- also a run that was lost and is being (or will be)
    continued by the Session object's alarm; 204 when nothing is running."""
    identity = await owner.authorize(request)
    config = config_from_env(owner.env, owner.tools, model_of(owner))
    store = _session(owner.env, protocol, chat_id, config, identity)
    want_run, after = last_event_id(request.headers.get("last-event-id"))
    batch = json.loads(str(await store.target.read_log(after, LOG_BATCH)))
    if want_run and batch["run"] != want_run:
        cont = batch["continues"]
        if cont is None or cont["run"] != want_run or after > cont["offset"]:
            after = -1  # a newer run: all of it
        batch = json.loads(str(await store.target.read_log(after, LOG_BATCH)))
    running = (batch["live"] or batch["lost"]) and not batch["ended"]
    if not batch["run"] or not (running or (want_run and batch["events"])):
        return Response("", status=204)
    stream = EventStream(heartbeat_ms=config.heartbeat_ms, frame=_frame, headers=dict(headers))
    owner.ctx.waitUntil(asyncio.ensure_future(_follow(stream, store.target, batch, after)))
    return stream.response()


async def _stop(owner: Any, request: Any, protocol: str, chat_id: str) -> Any:
    identity = await owner.authorize(request)
    config = config_from_env(owner.env, owner.tools, model_of(owner))
    run = str(await _session(owner.env, protocol, chat_id, config,
                             identity).target.request_stop())
    if not run:
        raise HttpError(409, "not_running", f"nothing is running for {chat_id!r}")
    return Response(json.dumps({"stopping": run}), status=202,
                    headers={"content-type": "application/json"})


async def _delete(owner: Any, request: Any, protocol: str, chat_id: str) -> Any:
    """The owner deletes a chat with its storage (204); 404 when it has none, 409 while a run
    of it is live. Another identity's request names another object: a 404."""
    identity = await owner.authorize(request)
    config = config_from_env(owner.env, owner.tools, model_of(owner))
    answer = str(await _session(owner.env, protocol, chat_id, config,
                                identity).target.delete_chat())
    if answer == "busy":
        raise HttpError(409, "run_in_progress", f"{chat_id!r} has a live run: stop it first")
    if answer == "none":
        raise HttpError(404, "unknown_chat", f"no chat {chat_id!r}")
    return Response("", status=204)


async def api_chat_delete(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _delete(owner, request, "ui", match.group("id"))


async def ag_ui_delete(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _delete(owner, request, "ag-ui", match.group("id"))


async def api_chat_stream(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _reconnect(owner, request, "ui", match.group("id"), UI_STREAM_HEADERS)


async def api_chat_stop(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _stop(owner, request, "ui", match.group("id"))


async def ag_ui_stream(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _reconnect(owner, request, "ag-ui", match.group("id"), AG_UI_HEADERS)


async def ag_ui_stop(owner: Any, request: Any, match: re.Match[str]) -> Any:
    return await _stop(owner, request, "ag-ui", match.group("id"))


async def api_chat(owner: Any, request: Any, _match: re.Match[str]) -> Any:
    identity = await owner.authorize(request)  # before the body is read
    raw = await _body(request)
    config = config_from_env(owner.env, owner.tools, model_of(owner))  # refuse (500, named) before anything runs
    return await _start(owner, config, "ui", raw, identity)


async def ag_ui(owner: Any, request: Any, _match: re.Match[str]) -> Any:
    identity = await owner.authorize(request)
    raw = await _body(request)
    config = config_from_env(owner.env, owner.tools, model_of(owner))
    return await _start(owner, config, "ag-ui", raw, identity)
