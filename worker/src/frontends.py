"""The routes real frontends speak, beside the Worker's own: ``POST /api/chat`` (the Vercel AI SDK
UI message stream, for ``useChat`` / ``DefaultChatTransport``) and ``POST /ag-ui`` (AG-UI, for
``HttpAgent``).

Both are stateless, as those clients expect: the request carries the conversation, decoded by
``bindloop.protocols`` into the transcript (bounded before parsing), and one ``prompt_chat`` runs
over the Worker's providers and tools (``bindloop.hosts.asgi_agent.agent_runner``), its events
encoded as they come and written to a streamed response from a background task
(``ctx.waitUntil``). ``ask_user`` suspends as the protocol's question: the AI SDK call stays
``input-available`` for the client's ``addToolResult``, AG-UI finishes with an interrupt.

Not here (see docs/protocols.md): the event log, ``GET /api/chat/{id}/stream`` and stop -- a Worker
response cannot be resumed after a dropped connection yet.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from collections.abc import Sequence

import js  # type: ignore[import-not-found]

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
from bindloop.hosts.asgi import (
    AgUiFrames,
    ChatInput,
    Frames,
    UiFrames,
    ag_ui_chat_input,
    drive_run,
    sse_event,
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
from sessions import limit_store, wall_clock_ms
from web import EventStream

__all__ = ("ag_ui", "api_chat")

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


def _as_is(_event: str, framed: str, _event_id: str | None) -> str:
    """The frames arrive SSE-framed already (``sse_event``: data-only, the offset as ``id:``)."""
    return framed


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


def _start(owner: Any, config: AgentConfig, chat: ChatInput, frames: Frames,
           headers: tuple[tuple[str, str], ...]) -> Any:
    stream = EventStream(heartbeat_ms=config.heartbeat_ms, frame=_as_is, headers=dict(headers))
    model = build_model(config, transport_for=_transport, on_turn_event=lambda _ev: None,
                        turn_prefix=f"{chat.protocol}:{chat.chat_id}", first_turn=0,
                        limit_store=limit_store(owner.env), clock=wall_clock_ms)
    runner = agent_runner(model, tools=TOOLS, max_turn_steps=config.max_iterations)
    offset = [0]

    def write(payloads: list[bytes]) -> None:
        for payload in payloads:
            stream.send_encoded("", sse_event(offset[0], payload).decode("utf-8"))
            offset[0] += 1

    async def run() -> None:
        try:
            await drive_run(runner, chat, frames, write, describe=_describe)
        finally:
            await stream.close()

    owner.ctx.waitUntil(asyncio.ensure_future(run()))
    return stream.response()


async def api_chat(owner: Any, request: Any, _match: re.Match[str]) -> Any:
    raw = await _body(request)
    config = config_from_env(owner.env)  # refuse (500, named) before anything runs
    try:
        req = decode_ui_chat_request(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
    except (JsonBoundsError, ProtocolRequestError) as exc:
        raise _refused(exc) from None
    encoder = ui_encoder(req, str(js.crypto.randomUUID()))
    return _start(owner, config, _chat(config, ui_chat_input(req)), UiFrames(encoder),
                  UI_STREAM_HEADERS)


async def ag_ui(owner: Any, request: Any, _match: re.Match[str]) -> Any:
    raw = await _body(request)
    config = config_from_env(owner.env)
    try:
        run = decode_run_agent_input(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
    except (JsonBoundsError, ProtocolRequestError) as exc:
        raise _refused(exc) from None
    encoder = AgUiEncoder(thread_id=run.thread_id, run_id=run.run_id, messages=run.messages)
    return _start(owner, config, _chat(config, ag_ui_chat_input(run)), AgUiFrames(encoder),
                  AG_UI_HEADERS)
