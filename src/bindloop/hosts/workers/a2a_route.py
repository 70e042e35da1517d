"""The agent as an A2A 1.0 agent (JSON-RPC binding): ``GET /.well-known/agent-card.json`` (the
card, its interface at this request's origin + ``/a2a``) and ``POST /a2a`` with ``SendMessage``,
``SendStreamingMessage`` (SSE), ``GetTask``, ``CancelTask`` and ``SubscribeToTask`` (SSE).
``ListTasks`` is not offered here (``-32004``; the Worker keeps no index across contexts), nor
push notifications (``-32003``) or an extended card.

The protocol logic is the wheel's (``bindloop.protocols``: the card, the version check, the
user's text, a task folded from its updates, the task encoder and run recorder; the run driver
and ``A2aFrames`` of ``bindloop.hosts.asgi.chat``); this module carries it over the Worker's storage
(``bindloop.hosts.workers``' Session object, run log, identity hook and body bounds).
Each context is one ``Session`` Durable Object (``a2a:<context>``, named within the caller's
identity: identity.py's hook applies, and another identity's ids reach other objects). A task is
a run of that object, checkpointed there as the protocol routes' runs are (its saves at every
settled tool round, its lease renewed while it runs); its id is ``<context>.<n>``, so a task id
names its object. The run's event log is the task's record: a ``task`` row (the task as the run
starts it), one ``update`` row per status or artifact update, and an ``end`` row (the context's
transcript after it, and what an ``input-required`` task waits on), after ``past`` rows: the
context's earlier tasks as they ended (the last :data:`PAST_TASKS`; an older one's id is
``-32001``). ``GetTask`` folds the log; a stream is the log, live.

``input-required`` is a run that ended on an approval (a tool in ``APPROVAL_TOOLS``) or a
tool's question; the next message with the task's id (or only its context's) answers it
(:func:`bindloop.protocols.a2a_reply`) and the task runs on, the approvals applied only to calls
the object recorded. ``CancelTask`` is the run's stop (the lease's stop request; its stream ends
``CANCELED``); a task waiting on input just ends. Bodies are bounded while they stream (with or
without ``Content-Length``); every refusal is a JSON-RPC error naming the problem, never a value,
a URL or an exception's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any
from urllib.parse import parse_qs, urlparse

import js  # type: ignore[import-not-found]
import msgspec
from workers import Response  # type: ignore[import-not-found]

from bindloop.hosts.workers.agent import (
    MAX_BODY_BYTES,
    MAX_BODY_DEPTH,
    SESSION_ID,
    AgentConfig,
    HttpError,
    _setting,
    build_model,
    config_from_env,
    model_of,
    error_event,
)
from bindloop.agent.approvals import ApprovalError
from bindloop.contracts import (
    Message,
    SystemMessage,
    UserMessage,
    decode_messages,
    encode_messages,
)
from bindloop.clock import iso_timestamp
from bindloop.hosts.chat.run import A2aFrames, ChatInput, drive_run
from bindloop.hosts.chat.agent import agent_runner
from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.protocols.a2a import (
    A2A_AGENT_CARD_PATH,
    TERMINAL_STATES,
    A2aCancelTaskRequest,
    A2aErrorCode,
    A2aGetTaskRequest,
    A2aMessage,
    A2aPart,
    A2aPending,
    A2aRpcError,
    A2aSendMessageRequest,
    A2aStatusUpdate,
    A2aStreamResponse,
    A2aSubscribeRequest,
    A2aTask,
    A2aTaskEncoder,
    A2aTaskStatus,
    a2a_agent_card,
    a2a_open_calls,
    a2a_reply,
    a2a_user_content,
    check_a2a_version,
    check_user_message,
    decode_a2a_call,
    decode_a2a_params,
    encode_a2a_error,
    encode_a2a_result,
    fold_a2a_task,
)
from bindloop.checkpoints import CheckpointFormatError, LoopCheckpoint, create_loop_checkpoint
from bindloop.hosts.workers.frontends import ChatApprovals
from bindloop.hosts.workers.identity import authorize, scoped_chat_id
from bindloop.hosts.workers.limits import limit_store, wall_clock_ms
from bindloop.hosts.workers.sessions import MAX_CONTINUATIONS, RunLog, SessionStore
from bindloop.hosts.workers.web import JSON_HEADERS, EventStream, Routes, read_text

__all__ = ("add_a2a_routes",)

RPC_PATH = "/a2a"
LOG_ROWS = 100_000
"""Rows read of a task's log at once (a task's updates: a few per model turn and tool call)."""
CANCEL_WAIT_S = 10.0
"""How long ``CancelTask`` waits for a stopped run to write its end (it sees the stop within a
second)."""
PAST_TASKS = 32
"""Ended tasks of a context kept readable (``GetTask``) besides its latest one."""
_SSE = {"content-type": "text/event-stream", "cache-control": "no-store"}
_INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
_TASK_ID = re.compile(r"^(?P<context>[A-Za-z0-9_-]{1,64})\.(?P<n>[0-9]{1,12})$")
_PENDING = msgspec.json.Decoder(tuple[A2aPending, ...])
_UPDATE = msgspec.json.Decoder(A2aStreamResponse)


def _now() -> str:
    return iso_timestamp(float(js.Date.now()))


def _rpc(body: bytes, status: int = 200) -> Response:
    return Response(body.decode(), status=status, headers=JSON_HEADERS)


class _Record(msgspec.Struct, frozen=True, kw_only=True):
    """A context's latest task as its log tells it."""

    task: A2aTask
    transcript: tuple[Message, ...] = ()
    pending: tuple[A2aPending, ...] = ()
    ended: bool = False
    live: bool = False
    past: tuple[A2aTask, ...] = ()
    """The context's earlier tasks, oldest first (at most :data:`PAST_TASKS`)."""

    def find(self, task_id: str) -> _Record | None:
        """This record when ``task_id`` is its task, an earlier task's (ended) record, or
        ``None``."""
        if self.task.id == task_id:
            return self
        old = next((t for t in self.past if t.id == task_id), None)
        return None if old is None else _Record(task=old, ended=True)

    def log_past(self, log: RunLog) -> None:
        """Write the context's earlier tasks, this one included, at the head of a new run's
        log: the log is the context's record."""
        for task in (*self.past, self.task)[-PAST_TASKS:]:
            log.send("past", A2aStreamResponse(task=task))


def _fold(batch: dict[str, Any], *, lost: bool = False) -> _Record | None:
    """The latest task of a context from its log (``None``: it has none); ``lost``: its run's
    isolate died (the task has failed, unless it had ended)."""
    task: A2aTask | None = None
    transcript: tuple[Message, ...] = ()
    pending: tuple[A2aPending, ...] = ()
    past: list[A2aTask] = []
    for _offset, event, data in batch["events"]:
        if event == "past":
            old = _UPDATE.decode(data).task
            if old is not None:
                past.append(old)
            continue
        if event == "end":
            end = json.loads(data)
            transcript = tuple(decode_messages(json.dumps(end["transcript"])))
            pending = _PENDING.decode(json.dumps(end["pending"]))
            continue
        update = _UPDATE.decode(data)
        task = update.task if task is None else fold_a2a_task(task, update)
    if task is None:
        return None
    if lost and not batch["ended"] and task.status.state not in TERMINAL_STATES:
        # The object's alarm does not continue an A2A run (see _claim): the task has failed.
        task = fold_a2a_task(task, A2aStreamResponse(status_update=A2aStatusUpdate(
            task_id=task.id, context_id=task.context_id or "", status=A2aTaskStatus(
                state="TASK_STATE_FAILED", message=A2aMessage(
                    message_id=f"{task.id}.lost", role="ROLE_AGENT",
                    parts=(A2aPart(text="the run was lost; send the message again"),))))))
    return _Record(task=task, transcript=transcript, pending=pending,
                   ended=bool(batch["ended"]), live=bool(batch["live"]), past=tuple(past))


def _history(task: A2aTask, length: int | None) -> A2aTask:
    if length is None:
        return task
    if length < 0:
        raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "historyLength must be >= 0")
    kept = task.history[len(task.history) - length:] if length > 0 else ()
    return msgspec.structs.replace(task, history=kept)


async def _lost(store: SessionStore, batch: dict[str, Any]) -> bool:
    """Whether the log's run died with its isolate: its lease ran out unreleased, or the
    object's alarm found it so (``last_run`` ``lost``) and gave it up."""
    if batch["lost"]:
        return True
    if batch["live"] or batch["ended"]:
        return False
    last = (await store.state()).get("last_run") or {}
    return bool(last.get("run") == batch["run"] and last.get("outcome") == "lost")


def _context_of(task_id: str) -> str:
    match = _TASK_ID.match(task_id)
    if match is None:
        raise A2aRpcError(A2aErrorCode.TASK_NOT_FOUND, "task not found")
    return match.group("context")


class _Context:
    """One context's Session object, from a request of ``identity``."""

    def __init__(self, env: Any, config: AgentConfig, identity: str, context_id: str) -> None:
        self.id = context_id
        self.identity = identity
        self.store = SessionStore.for_session(env, f"a2a:{scoped_chat_id(identity, context_id)}",
                                              lease_ms=config.lease_ms)

    async def record(self) -> _Record | None:
        batch = json.loads(str(await self.store.target.read_log(-1, LOG_ROWS)))
        if not batch["run"]:
            return None
        return _fold(batch, lost=await _lost(self.store, batch))

    async def task(self, task_id: str) -> _Record:
        record = await self.record()
        found = None if record is None else record.find(task_id)
        if found is None:
            raise A2aRpcError(A2aErrorCode.TASK_NOT_FOUND, "task not found")
        return found


def _frame(rid: str | int | None) -> Any:
    """The log's rows as the stream's SSE events: each update the ``result`` of a JSON-RPC
    response to request ``rid``; the ``end`` row is the server's own."""
    head = '{"jsonrpc":"2.0","id":' + json.dumps(rid) + ',"result":'

    def frame(event: str, payload: str, _event_id: str | None) -> str:
        return "" if event in ("end", "past") else f"data: {head}{payload}}}\n\n"

    return frame


class _Updates:
    """A stream as a run log's client: the log's ``task`` row is not sent (the stream opened with
    the task as its request asked for it)."""

    def __init__(self, stream: EventStream) -> None:
        self._stream = stream

    def send_encoded(self, event: str, payload: str, event_id: str | None = None) -> None:
        if event != "task":
            self._stream.send_encoded(event, payload, event_id)

    async def close(self) -> None:
        await self._stream.close()


def _describe(exc: Exception) -> str:
    """A failed run as the client reads it: the provider and the kind of failure, never a URL or
    what the provider said (agent.error_event's rule); a refused approval says which call."""
    if isinstance(exc, ApprovalError):
        return f"approval refused: {exc}"
    return str(error_event(exc, session_id="", revision=-1)["message"])


def _transport(provider: Any, headers: Any) -> FetchTransport:
    return FetchTransport(provider.base_url, headers=headers)


def _checkpoint(session_id: str, transcript: tuple[Message, ...], config: AgentConfig,
                revision: int) -> LoopCheckpoint:
    """What the run's claim stores: its transcript -- up to the last user message when calls in
    it wait on this message's answers (a checkpoint holds no unanswered call)."""
    try:
        cp = create_loop_checkpoint(execution_id=session_id, messages=transcript,
                                    max_iterations=config.max_iterations)
    except CheckpointFormatError:
        users = [k for k, m in enumerate(transcript) if isinstance(m, UserMessage)]
        cp = create_loop_checkpoint(execution_id=session_id,
                                    messages=transcript[:users[-1] + 1] if users else (),
                                    max_iterations=config.max_iterations)
    return msgspec.structs.replace(cp, revision=revision)


async def _claim(store: SessionStore, cp: LoopCheckpoint, take: list[str] | None = None) -> None:
    """Take the context's object for a run of ``cp``. Its continuation budget is stored spent:
    the object's alarm continues the Worker's own sessions and the AI SDK / AG-UI runs, whose
    logs it knows how to write again, never an A2A run -- a run whose isolate died leaves its task
    ``FAILED`` (GetTask says so), and the context takes the next message."""
    await store.claim(cp, extra={"continuations": MAX_CONTINUATIONS}, take=take)


async def _keep_lease(store: SessionStore, work: asyncio.Future[Any]) -> None:
    """Renew the run's lease while it goes; cancel it when ``CancelTask`` asks (the stop)."""
    while not work.done():
        await asyncio.sleep(min(1000, store.lease_ms / 3) / 1000)
        with contextlib.suppress(Exception):  # the object unreachable: try again next tick
            answer = await store.heartbeat()
            if not answer["held"] or answer["stop"]:
                work.cancel()
                return


async def _run(env: Any, config: AgentConfig, ctx: _Context, log: RunLog, chat: ChatInput,
               frames: A2aFrames, approvals: ChatApprovals, task: A2aTask,
               open_calls: tuple[Any, ...]) -> A2aTask:
    """The task's run to its end: each update to the log (folded into ``task``), each settled
    tool round saved to the object, then the ``end`` row and the lease released."""
    store = ctx.store
    model = build_model(config, transport_for=_transport, on_turn_event=lambda _ev: None,
                        turn_prefix=f"a2a:{chat.chat_id}", first_turn=0,
                        limit_store=limit_store(env), clock=wall_clock_ms)

    async def save(_chat: ChatInput, cp: Any) -> None:
        await store.commit(msgspec.structs.replace(cp, revision=store.revision + 1))

    runner = agent_runner(model, tools=config.tools, needs_approval=config.approval_tools,
                          max_turn_steps=config.max_iterations, on_checkpoint=save,
                          approvals=approvals, trust_system_messages=True)
    state = [task]

    def write(payloads: list[bytes]) -> None:
        for payload in payloads:
            state[0] = fold_a2a_task(state[0], _UPDATE.decode(payload))
            log.send("update", msgspec.Raw(payload))

    work = asyncio.ensure_future(drive_run(runner, chat, frames, write, describe=_describe))
    keeper = asyncio.ensure_future(_keep_lease(store, work))
    outcome = "stopped"
    try:
        outcome = await work
    except asyncio.CancelledError:
        pass  # stopped: drive_run wrote the task's CANCELED
    finally:
        keeper.cancel()
        done = state[0].status.state
        if done not in TERMINAL_STATES and done not in _INTERRUPTED:
            write(frames.abort())
        done = state[0].status.state
        transcript = chat.transcript
        if done in ("TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"):
            transcript = chat.transcript + frames.recorder.messages(open_calls)
        pending = frames.encoder.pending() if done == "TASK_STATE_INPUT_REQUIRED" else ()
        log.send("end", {"transcript": msgspec.Raw(encode_messages(transcript)),
                         "pending": pending})
        with contextlib.suppress(Exception):  # unreachable: the lease runs out instead
            await store.release(outcome, approvals.recorded)
        await log.close()
    return state[0]


async def _send(owner: Any, config: AgentConfig, identity: str, rid: str | int | None,
                request: A2aSendMessageRequest, streaming: bool) -> Response:
    message = request.message
    check_user_message(message)
    content = a2a_user_content(message)
    length = request.configuration.history_length if request.configuration else None
    _history(A2aTask(id="", status=A2aTaskStatus(state="TASK_STATE_UNSPECIFIED")), length)
    if message.task_id:
        context_id = _context_of(message.task_id)
        if message.context_id and message.context_id != context_id:
            raise A2aRpcError(A2aErrorCode.INVALID_PARAMS,
                              "message.contextId is not the task's context")
    elif message.context_id:
        if not SESSION_ID.match(message.context_id):
            raise A2aRpcError(A2aErrorCode.INVALID_PARAMS,
                              "message.contextId is 1-64 characters of A-Z a-z 0-9 _ -")
        context_id = message.context_id
    else:
        context_id = str(js.crypto.randomUUID()).replace("-", "")
    ctx = _Context(owner.env, config, identity, context_id)
    cp = await ctx.store.load()
    last = await ctx.record() if cp is not None else None
    named = None if last is None or not message.task_id else last.find(message.task_id)
    if message.task_id and named is None:
        raise A2aRpcError(A2aErrorCode.TASK_NOT_FOUND, "task not found")
    revision = (cp.revision if cp is not None else -1) + 1
    continues = last is not None and last.task.status.state == "TASK_STATE_INPUT_REQUIRED" \
        and not last.live and (named is None or named is last)
    if named is not None and not continues:
        if named.task.status.state in TERMINAL_STATES or named is not last:
            raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                              f"the task has ended ({named.task.status.state}); send a new "
                              "message in its context instead")
        raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                          "the task is running; wait for it or cancel it")
    if last is not None and not continues and not last.ended and last.live:
        raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                          "a task of this context is running; wait for it or cancel it")
    chat_id = scoped_chat_id(identity, context_id)
    stamped = msgspec.structs.replace(message, context_id=context_id)
    if continues and last is not None:
        task = last.task
        approvals, answers = a2a_reply(message, last.pending)
        transcript = last.transcript + answers
        open_calls = a2a_open_calls(transcript)
        id_prefix = f"{task.id}.{revision}"
    else:
        task = A2aTask(id=f"{context_id}.{revision}", context_id=context_id,
                       status=A2aTaskStatus(state="TASK_STATE_SUBMITTED"))
        approvals, open_calls, id_prefix = (), (), task.id
        prior: tuple[Message, ...] = last.transcript if last is not None else ()
        if not prior and config.system_prompt is not None:
            prior = (SystemMessage(content=config.system_prompt),)
        transcript = (*prior, UserMessage(content=content))
    task = msgspec.structs.replace(
        task, status=A2aTaskStatus(state="TASK_STATE_SUBMITTED", timestamp=_now()),
        history=(*task.history, msgspec.structs.replace(stamped, task_id=task.id)))
    chat = ChatInput(chat_id=chat_id, protocol="a2a", transcript=transcript,
                     approvals=approvals, identity=identity)
    await _claim(ctx.store, _checkpoint(ctx.store.session_id, transcript, config, revision),
                 take=[a.tool_call_id for a in approvals])
    encoder = A2aTaskEncoder(task.id, context_id, now=_now, known_calls=open_calls,
                             id_prefix=id_prefix)
    frames = A2aFrames(encoder)
    grants = ChatApprovals(chat.key, ctx.store.taken)
    if streaming:
        stream = EventStream(heartbeat_ms=config.heartbeat_ms, frame=_frame(rid), headers=_SSE)
        # the stream opens with the task as the request asked for it (historyLength); the log
        # keeps it whole
        stream.send_encoded("task", msgspec.json.encode(
            A2aStreamResponse(task=_history(task, length))).decode())
        log = RunLog(ctx.store.target, ctx.store.run, _Updates(stream))
        _log_head(log, last, continues)
        log.send("task", A2aStreamResponse(task=task))
        owner.ctx.waitUntil(asyncio.ensure_future(
            _run(owner.env, config, ctx, log, chat, frames, grants, task, open_calls)))
        return stream.response()
    log = RunLog(ctx.store.target, ctx.store.run, None)
    _log_head(log, last, continues)
    log.send("task", A2aStreamResponse(task=task))
    run = _run(owner.env, config, ctx, log, chat, frames, grants, task, open_calls)
    if request.configuration is not None and request.configuration.return_immediately:
        owner.ctx.waitUntil(asyncio.ensure_future(run))
    else:
        task = await run
    return _rpc(encode_a2a_result(rid, {"task": _history(task, length)}))


def _log_head(log: RunLog, last: _Record | None, continues: bool) -> None:
    """A new run's log starts with the context's earlier tasks (the task it continues is not
    one of them)."""
    if last is None:
        return
    if continues:
        for task in last.past[-PAST_TASKS:]:
            log.send("past", A2aStreamResponse(task=task))
    else:
        last.log_past(log)


async def _cancel(owner: Any, config: AgentConfig, identity: str, rid: str | int | None,
                  task_id: str) -> Response:
    ctx = _Context(owner.env, config, identity, _context_of(task_id))
    latest = await ctx.record()
    record = await ctx.task(task_id)
    state = record.task.status.state
    if state in TERMINAL_STATES or latest is None or latest.task.id != task_id:
        raise A2aRpcError(A2aErrorCode.TASK_NOT_CANCELABLE, f"the task has ended ({state})")
    if record.live:  # the run's stop: its lease's holder sees it and ends the task CANCELED
        await ctx.store.target.request_stop()
        waited = 0.0
        while waited < CANCEL_WAIT_S and not record.ended:
            await asyncio.sleep(0.1)
            waited += 0.1
            record = await ctx.task(task_id)
        return _rpc(encode_a2a_result(rid, record.task))
    # Waiting on input (or its run lost): nothing runs; the task ends in a run of its own.
    cp = await ctx.store.load()
    if cp is None:
        raise A2aRpcError(A2aErrorCode.TASK_NOT_FOUND, "task not found")
    await _claim(ctx.store, msgspec.structs.replace(cp, revision=cp.revision + 1))
    canceled = A2aStreamResponse(status_update=A2aStatusUpdate(
        task_id=task_id, context_id=ctx.id,
        status=A2aTaskStatus(state="TASK_STATE_CANCELED", timestamp=_now())))
    task = fold_a2a_task(record.task, canceled)
    log = RunLog(ctx.store.target, ctx.store.run, None)
    _log_head(log, latest, True)
    log.send("task", A2aStreamResponse(task=record.task))
    log.send("update", canceled)
    log.send("end", {"transcript": msgspec.Raw(encode_messages(record.transcript)),
                     "pending": ()})
    await ctx.store.release("canceled")
    await log.close()
    return _rpc(encode_a2a_result(rid, task))


async def _follow(stream: EventStream, target: Any, after: int) -> None:
    """The context's log from ``after`` on until its run ends (a ``SubscribeToTask``)."""
    try:
        while True:
            batch = json.loads(str(await target.read_log(after, 256)))
            for offset, event, data in batch["events"]:
                stream.send_encoded(event, data)
                after = offset
            if not batch["events"]:
                if batch["ended"] or not batch["live"]:
                    return
                await asyncio.sleep(0.1)
    finally:
        await stream.close()


async def _subscribe(owner: Any, config: AgentConfig, identity: str, rid: str | int | None,
                     task_id: str) -> Response:
    ctx = _Context(owner.env, config, identity, _context_of(task_id))
    batch = json.loads(str(await ctx.store.target.read_log(-1, LOG_ROWS)))
    latest = _fold(batch, lost=await _lost(ctx.store, batch)) if batch["run"] else None
    record = None if latest is None else latest.find(task_id)
    if record is None:
        raise A2aRpcError(A2aErrorCode.TASK_NOT_FOUND, "task not found")
    if record.task.status.state in TERMINAL_STATES or not record.live:
        raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                          "the task is not running; GetTask reads it")
    after = batch["events"][-1][0] if batch["events"] else -1
    stream = EventStream(heartbeat_ms=config.heartbeat_ms, frame=_frame(rid), headers=_SSE)
    stream.send_encoded("task", msgspec.json.encode(
        A2aStreamResponse(task=record.task)).decode())
    owner.ctx.waitUntil(asyncio.ensure_future(_follow(stream, ctx.store.target, after)))
    return stream.response()


async def _dispatch(owner: Any, request: Any, rid: str | int | None, method: str,
                    params: dict[str, Any], identity: str) -> Response:
    url = urlparse(str(request.url))
    version = request.headers.get("a2a-version")
    if version is None:
        version = next(iter(v for k, vs in parse_qs(url.query).items()
                            if k.lower() == "a2a-version" for v in vs), None)
    check_a2a_version(None if version is None else str(version))
    try:
        config = config_from_env(owner.env, owner.tools, model_of(owner))
    except HttpError:  # a misconfigured Worker: the operator reads the cause in GET /v1/...
        raise A2aRpcError(A2aErrorCode.INTERNAL_ERROR, "the agent is not configured") from None
    if method in ("SendMessage", "SendStreamingMessage"):
        send = decode_a2a_params(params, A2aSendMessageRequest)
        return await _send(owner, config, identity, rid, send, method == "SendStreamingMessage")
    if method == "GetTask":
        get = decode_a2a_params(params, A2aGetTaskRequest)
        ctx = _Context(owner.env, config, identity, _context_of(get.id))
        record = await ctx.task(get.id)
        return _rpc(encode_a2a_result(rid, _history(record.task, get.history_length)))
    if method == "CancelTask":
        cancel = decode_a2a_params(params, A2aCancelTaskRequest)
        return await _cancel(owner, config, identity, rid, cancel.id)
    if method == "SubscribeToTask":
        subscribe = decode_a2a_params(params, A2aSubscribeRequest)
        return await _subscribe(owner, config, identity, rid, subscribe.id)
    if method == "ListTasks":
        raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION,
                          "ListTasks is not offered by this agent; GetTask reads a task by id")
    if method.endswith("PushNotificationConfig") or method == "ListTaskPushNotificationConfigs":
        raise A2aRpcError(A2aErrorCode.PUSH_NOTIFICATION_NOT_SUPPORTED,
                          "this agent sends no push notifications")
    if method == "GetExtendedAgentCard":
        raise A2aRpcError(A2aErrorCode.UNSUPPORTED_OPERATION, "this agent has no extended card")
    raise A2aRpcError(A2aErrorCode.METHOD_NOT_FOUND, "method not found")


_REFUSED = {409: (A2aErrorCode.UNSUPPORTED_OPERATION,
                  "a task of this context is running; wait for it or cancel it"),
            413: (A2aErrorCode.INVALID_PARAMS,
                  "the context's conversation is too large to store; start a new context")}


async def rpc(owner: Any, request: Any, _match: re.Match[str]) -> Response:
    """``POST /a2a``: the identity hook first, then the body (bounded while it streams), then
    one JSON-RPC call."""
    try:
        identity = await authorize(request, owner.env)
        raw = await read_text(request)
    except HttpError as exc:  # 401, 408, 413: the request itself is refused
        return _rpc(encode_a2a_error(None, A2aRpcError(A2aErrorCode.INVALID_REQUEST,
                                                       exc.message)), exc.status)
    try:
        call = decode_a2a_call(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
    except A2aRpcError as exc:
        return _rpc(encode_a2a_error(exc.request_id, exc))
    try:
        return await _dispatch(owner, request, call.id, call.method, call.params, identity)
    except A2aRpcError as exc:
        return _rpc(encode_a2a_error(call.id, exc))
    except HttpError as exc:  # the Session object refused (busy, stale, too large)
        code, text = _REFUSED.get(exc.status, (A2aErrorCode.INTERNAL_ERROR,
                                               "the task could not be stored; try again"))
        return _rpc(encode_a2a_error(call.id, A2aRpcError(code, text)))
    except Exception:
        # A fault of this Worker, not of the request: the detail stays in its log.
        import traceback

        traceback.print_exc()
        return _rpc(encode_a2a_error(call.id, A2aRpcError(A2aErrorCode.INTERNAL_ERROR,
                                                          "internal error")))


async def card(owner: Any, request: Any, _match: re.Match[str]) -> Response:
    """The agent card: ``A2A_NAME`` and ``A2A_DESCRIPTION`` (vars), its JSON-RPC interface at
    this request's origin."""
    url = urlparse(str(request.url))
    body = msgspec.json.encode(a2a_agent_card(
        name=_setting(owner.env, "A2A_NAME") or "bindloop agent",
        description=_setting(owner.env, "A2A_DESCRIPTION") or "An agent built with bindloop.",
        url=f"{url.scheme}://{url.netloc}{RPC_PATH}"))
    return Response(body.decode(), status=200,
                    headers={**JSON_HEADERS, "cache-control": "private, max-age=300"})


def add_a2a_routes(routes: Routes) -> None:
    """The A2A agent's two routes."""
    routes.add("GET", re.escape(A2A_AGENT_CARD_PATH), card)
    routes.add("POST", RPC_PATH, rpc)
