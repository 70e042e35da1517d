"""What a chat host runs, whichever binding serves it -- the ASGI app
(:class:`~bindloop.hosts.asgi.chat.ChatApp`) or the Cloudflare Worker (:mod:`bindloop.hosts.workers`):
the request a run is asked to do (:class:`ChatInput`, built from an AI SDK or AG-UI request by
:func:`ui_chat_input` / :func:`ag_ui_chat_input`), the :data:`Runner` that does it, and
:func:`drive_run`, which takes a run from its first frame to its last through one protocol's
encoder (:class:`UiFrames`, :class:`AgUiFrames`, :class:`A2aFrames`). The binding owns the I/O:
it hands ``drive_run`` a ``write`` for the payloads and sends them (:func:`sse_event` frames a
logged payload as the SSE bytes a client gets)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import msgspec

from bindloop.agent.events import CheckpointSavedEvent
from bindloop.checkpoints import LoopCheckpoint
from bindloop.contracts import Message, ToolDefinition, ToolMessage, tool_error_message
from bindloop.protocols import (
    SSE_DONE,
    AgUiEncoder,
    AgUiRunInput,
    EncoderInput,
    ToolApproval,
    UIChatRequest,
    UIStreamEncoder,
    encode_ag_ui_event,
    encode_ui_chunk,
    sse_frame,
)
from bindloop.protocols.a2a import A2aTaskEncoder, RunRecorder
from bindloop.stores import RunStatus

from bindloop.hosts.chat.errors import error_text
from bindloop.hosts.chat.quota import LogQuota

__all__ = ("A2aFrames", "AgUiFrames", "ChatInput", "DONE_PAYLOAD", "Emit", "ForgetsChats",
           "Frames", "Runner", "UiFrames", "ag_ui_chat_input", "drive_run", "sse_event",
           "ui_chat_input", "ui_encoder")

Emit = Callable[[int | None, EncoderInput], None]
"""``emit(turn_index, event)``: hand one run event to the response's encoder."""

DONE_PAYLOAD = b"[DONE]"
"""The AI SDK's end-of-stream marker as a logged payload (:func:`sse_event` sends it bare)."""

_JSON = msgspec.json.Encoder()


class ChatInput(msgspec.Struct, frozen=True, kw_only=True):
    """What a run is asked to do, whichever protocol asked: continue ``transcript`` (canonical
    messages, the last one usually the user's), with ``tools`` the client declared (it runs them
    itself: a call to one is left for the client), ``approvals`` to apply first, and the shared
    ``state`` (AG-UI). ``checkpoint`` set: the run goes on from that saved boundary of an earlier
    run of this request (a host continuing a run that died; ``transcript`` is its messages) --
    its approvals were applied and its state sent then, so neither happens again.
    ``continuable``: the host keeps the run's boundaries to continue it if its process dies (the
    runner hands each to ``emit`` as a :class:`~bindloop.agent.events.CheckpointSavedEvent`)."""

    chat_id: str
    protocol: Literal["ui", "ag-ui", "a2a"]
    transcript: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    approvals: tuple[ToolApproval, ...] = ()
    state: Any = None
    checkpoint: LoopCheckpoint | None = None
    identity: str = ""
    continuable: bool = False

    @property
    def key(self) -> str:
        """The chat's key in what a runner keeps of it (its pending approvals, its receipts):
        the protocol with the id, so a UI chat and an AG-UI thread of one id share nothing."""
        return f"{self.protocol}:{self.chat_id}"


Runner = Callable[[ChatInput, Emit], Awaitable[Any]]
"""Runs one request: feeds ``emit`` as it goes and returns the run's result (AG-UI's
``RUN_FINISHED.result``; ignored by the AI SDK). A raise ends the stream with the protocol's error
(the exception's type and message, never a traceback)."""


@runtime_checkable
class ForgetsChats(Protocol):
    """A :data:`Runner` that keeps something of each chat beyond its runs (pending approvals,
    receipts: :class:`~bindloop.hosts.chat.agent.AgentRunner`): :class:`~bindloop.hosts.asgi.chat.ChatApp` calls
    ``forget_chat`` when the chat's owner deletes it, while no run of it goes on. ``chat`` names
    the chat (``chat_id``, ``protocol``, ``identity``; no transcript). Whether it kept any."""

    async def forget_chat(self, chat: ChatInput) -> bool: ...


def sse_event(run_id: str, offset: int, payload: bytes) -> bytes:
    """One logged payload as the SSE bytes a client gets: ``<run>:<offset>`` as the ``id:`` (so a
    resume names the run it saw, never another run of the chat), except the AI SDK's ``[DONE]``
    marker, which goes out bare, as the SDK's own servers send it."""
    if payload == DONE_PAYLOAD:
        return SSE_DONE
    return sse_frame(payload, event_id=f"{run_id}:{offset}")


class Frames(Protocol):
    """One protocol's encoder behind a run driver: each call returns wire payloads (JSON, or
    ``b"[DONE]"`` for the AI SDK's end marker)."""

    def start(self) -> list[bytes]: ...
    def feed(self, event: EncoderInput, turn_index: int | None) -> list[bytes]: ...
    def finish(self, result: Any) -> list[bytes]: ...
    def abort(self) -> list[bytes]: ...
    def fail(self, text: str) -> list[bytes]: ...
    def close(self) -> list[bytes]: ...


async def drive_run(runner: Runner, chat: ChatInput, frames: Frames,
                    write: Callable[[list[bytes]], None], *,
                    describe: Callable[[Exception], str] = error_text,
                    resumed: bool = False,
                    on_save: Callable[[LoopCheckpoint], None] | None = None,
                    quota: LogQuota | None = None) -> RunStatus:
    """One run from its first frame to its last, every payload handed to ``write`` in order (the
    ASGI app's event log, the Worker's SSE stream): the start, the runner's events, then the finish
    -- or the protocol's error when the runner raises (``describe(exc)``, never a traceback; a
    host whose errors can carry a provider URL passes a scrubbing one), or its abort when the run
    is cancelled (the cancellation is re-raised). Returns how it ended. ``resumed``: ``frames``
    were started (and fed) by the caller -- a continuation of a run that died -- so no start is
    written. A :class:`~bindloop.agent.events.CheckpointSavedEvent` the runner emits (a boundary it
    could go on from) is no frame: it goes to ``on_save``, which stores it before the run goes
    on.

    ``quota`` (:class:`~bindloop.hosts.chat.quota.LogQuota`) bounds the bytes written: once a
    batch of frames reaches it, the runner is cancelled (nothing it emits after is written, no
    save is stored) and the run ends ``failed`` with the protocol's error,
    ``describe(quota.error())`` -- ``log_full`` to the client."""
    open_ = [True]
    full = anyio.CancelScope()  # cancelled when the frames written reach the quota

    def log(payloads: list[bytes]) -> None:
        write(payloads)
        if quota is not None and quota.add(payloads) and open_[0]:
            open_[0] = False
            full.cancel()

    def emit(turn_index: int | None, event: EncoderInput) -> None:
        if isinstance(event, CheckpointSavedEvent):
            if on_save is not None and open_[0]:
                on_save(event.checkpoint)
            return
        if open_[0]:  # a tool still reporting after the run's end is not part of the stream
            log(frames.feed(event, turn_index))

    def failed(exc: Exception) -> RunStatus:
        write(frames.fail(describe(exc)))
        write(frames.close())
        return "failed"

    if not resumed:
        log(frames.start())
    if quota is not None and quota.reached:  # a continuation's replay, or the start, filled it
        return failed(quota.error())
    try:
        with full:
            result = await runner(chat, emit)
    except anyio.get_cancelled_exc_class():
        open_[0] = False
        write(frames.abort())
        write(frames.close())
        raise
    except Exception as exc:
        open_[0] = False
        # A runner that turned the quota's cancellation into an error failed of the quota.
        return failed(quota.error() if full.cancel_called and quota is not None else exc)
    open_[0] = False
    if full.cancel_called and quota is not None:
        return failed(quota.error())
    write(frames.finish(result))
    write(frames.close())
    return "finished"


class UiFrames:
    """The AI SDK UI message stream as :class:`Frames`."""

    def __init__(self, encoder: UIStreamEncoder) -> None:
        self.encoder = encoder

    def start(self) -> list[bytes]:
        return [encode_ui_chunk(c) for c in self.encoder.start()]

    def feed(self, event: EncoderInput, turn_index: int | None) -> list[bytes]:
        return [encode_ui_chunk(c) for c in self.encoder.feed(event, turn_index=turn_index)]

    def finish(self, result: Any) -> list[bytes]:
        return [encode_ui_chunk(c) for c in self.encoder.finish()]

    def abort(self) -> list[bytes]:
        return [encode_ui_chunk(c) for c in self.encoder.abort("stopped")]

    def fail(self, text: str) -> list[bytes]:
        return [encode_ui_chunk(c) for c in self.encoder.fail(text)]

    def close(self) -> list[bytes]:
        return [DONE_PAYLOAD]


class AgUiFrames:
    """AG-UI as :class:`Frames`."""

    def __init__(self, encoder: AgUiEncoder) -> None:
        self.encoder = encoder

    def start(self) -> list[bytes]:
        return [encode_ag_ui_event(e) for e in self.encoder.start()]

    def feed(self, event: EncoderInput, turn_index: int | None) -> list[bytes]:
        return [encode_ag_ui_event(e) for e in self.encoder.feed(event, turn_index=turn_index)]

    def finish(self, result: Any) -> list[bytes]:
        return [encode_ag_ui_event(e) for e in self.encoder.finish(result)]

    def abort(self) -> list[bytes]:
        return [encode_ag_ui_event(e) for e in self.encoder.abort()]

    def fail(self, text: str) -> list[bytes]:
        return [encode_ag_ui_event(e) for e in self.encoder.fail(text)]

    def close(self) -> list[bytes]:
        return []


class A2aFrames:
    """An A2A task's updates as :class:`Frames`: each ``A2aStreamResponse`` of ``encoder`` as its
    JSON (the ``result`` of a streamed JSON-RPC response), the run recorded beside them as
    canonical messages (``recorder``: what the task's next message, or its context's next task,
    continues from)."""

    def __init__(self, encoder: A2aTaskEncoder) -> None:
        self.encoder = encoder
        self.recorder = RunRecorder()

    def start(self) -> list[bytes]:
        return [_JSON.encode(u) for u in self.encoder.start()]

    def feed(self, event: EncoderInput, turn_index: int | None) -> list[bytes]:
        self.recorder.feed(event)
        return [_JSON.encode(u) for u in self.encoder.feed(event, turn_index=turn_index)]

    def finish(self, result: Any) -> list[bytes]:
        return [_JSON.encode(u) for u in self.encoder.finish()]

    def abort(self) -> list[bytes]:
        return [_JSON.encode(u) for u in self.encoder.abort()]

    def fail(self, text: str) -> list[bytes]:
        return [_JSON.encode(u) for u in self.encoder.fail(text)]

    def close(self) -> list[bytes]:
        return []


def ui_chat_input(request: UIChatRequest) -> ChatInput:
    """What an AI SDK chat request asks a runner to do."""
    return ChatInput(chat_id=request.id, protocol="ui", transcript=request.transcript,
                     approvals=request.approvals)


def ui_encoder(request: UIChatRequest, new_id: str, *, ai_sdk: int = 6) -> UIStreamEncoder:
    """The encoder for the response to ``request``: it continues the trailing assistant message
    when the request added to it (its calls are known to the client), else builds a new one
    (``request.message_id``, or ``msg-<new_id>``); ``ai_sdk`` is the client's AI SDK major."""
    message_id = request.continues or request.message_id or f"msg-{new_id}"
    known = {c.id for m in request.transcript for c in getattr(m, "tool_calls", ())}
    return UIStreamEncoder(message_id, known_calls=known, ai_sdk=ai_sdk)


def ag_ui_chat_input(run: AgUiRunInput) -> ChatInput:
    """What an AG-UI run asks a runner to do, its resume entries applied: an answer to an approval
    interrupt (id ``approval-<call id>``, resolved with ``{"approved": bool, "reason"?: str}``, or
    cancelled: a denial) becomes an approval for the runner; an answer to a question interrupt
    (id: the call's id) becomes that call's tool message -- the payload's text (a non-string as
    JSON), or a refusal when cancelled."""
    calls = {c.id: c for m in run.transcript for c in getattr(m, "tool_calls", ())}
    answered = {m.tool_call_id for m in run.transcript if isinstance(m, ToolMessage)}
    approvals: list[ToolApproval] = []
    transcript = list(run.transcript)
    for entry in run.resume:
        payload = entry.payload
        if entry.interrupt_id.startswith("approval-"):
            call = calls.get(entry.interrupt_id.removeprefix("approval-"))
            if call is None:
                continue
            fields = payload if isinstance(payload, dict) else {}
            reason = fields.get("reason")
            approvals.append(ToolApproval(
                approval_id=entry.interrupt_id, tool_call_id=call.id, tool_name=call.name,
                arguments=call.arguments,
                approved=entry.status == "resolved" and fields.get("approved") is True,
                reason=reason if isinstance(reason, str) else None))
            continue
        call = calls.get(entry.interrupt_id)
        if call is None or call.id in answered:
            continue
        if entry.status == "cancelled":
            transcript.append(tool_error_message(call.id, "the user did not answer", "rejected",
                                                 name=call.name))
        else:
            text = payload if isinstance(payload, str) else _JSON.encode(payload).decode()
            transcript.append(ToolMessage(tool_call_id=call.id, content=text, name=call.name))
    return ChatInput(chat_id=run.thread_id, protocol="ag-ui", transcript=tuple(transcript),
                     tools=run.tools, approvals=tuple(approvals), state=run.state)
