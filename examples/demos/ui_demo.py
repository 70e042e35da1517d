"""``make demo-ui``: the protocol host (:class:`~bindloop.hosts.asgi.chat.ChatApp`) on 127.0.0.1 over a
scripted model, for an AI SDK ``useChat`` page or an AG-UI client to talk to.

The model is deterministic: it reads the conversation and answers -- "count <words>" calls the
``word_count`` tool, "delete <note>" calls ``delete_note`` (which needs the user's approval),
"pick <a> <b>" calls ``pick_option`` (a tool the client declares and runs), "garble <words>"
calls ``word_count`` with arguments that are not JSON (the call fails before it runs), a tool
result is reported back, anything else is echoed with a short reasoning block first. Each event is
paced (``--delay``), so a reconnect or a stop can be tried mid-stream::

    python -m examples.demos.ui_demo --port 8787 [--page harness/clients/dist]   # make demo-ui
    curl -N localhost:8787/api/chat -H 'content-type: application/json' \\
      -d '{"id":"c1","trigger":"submit-message","messages":[{"id":"u1","role":"user",
           "parts":[{"type":"text","text":"count the words here"}]}]}'
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from bindloop.model import ModelRequest, StreamModel, turn_events
from bindloop.completion import StreamEvent, TextEvent
from bindloop.contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    ReasoningPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    TurnUsage,
    UserMessage,
    content_text,
)
from bindloop.tools import define_tool

from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.agent import PacedModel, agent_runner
from bindloop.stores import RunLogs

__all__ = ("DemoModel", "build_demo_app", "demo_tools", "main")


class Words(msgspec.Struct, frozen=True):
    text: str


class Note(msgspec.Struct, frozen=True):
    title: str


def _word_count(args: Words, _ctx: object) -> ToolResult:
    return ToolResult(content=str(len(args.text.split())))


def demo_tools(deleted: list[str] | None = None) -> list[Any]:
    """``word_count`` and ``delete_note`` (its deletions are appended to ``deleted``)."""
    gone = deleted if deleted is not None else []

    def _delete(args: Note, _ctx: object) -> ToolResult:
        gone.append(args.title)
        return ToolResult(content=f"deleted {args.title!r}")

    return [define_tool(name="word_count", description="Count the words in a text.", args=Words,
                        execute=_word_count),
            define_tool(name="delete_note", description="Delete a note by title.", args=Note,
                        execute=_delete)]


class DemoModel(StreamModel):
    """A scripted model that answers from the conversation (see the module docstring). Text comes
    in word-sized fragments; every turn reports usage (words in, words out)."""

    id = "demo"
    provider = "scripted"

    def turn_for(self, messages: Sequence[Message]) -> ModelTurnResult:
        last = messages[-1] if messages else None
        seen = sum(len(content_text(m.content).split()) for m in messages
                   if not isinstance(m, AssistantMessage) or m.content is not None)
        n = sum(1 for m in messages if isinstance(m, AssistantMessage))
        if isinstance(last, ToolMessage):
            text = f"The tool answered: {content_text(last.content)}."
            return ModelTurnResult(text=text, finish_reason="stop",
                                   usage=TurnUsage(input_tokens=seen, output_tokens=len(text.split())))
        said = content_text(last.content) if isinstance(last, UserMessage) else ""
        words = said.split()
        if words[:1] == ["count"]:
            call = ToolCall(id=f"call-{n}", name="word_count",
                            arguments=msgspec.json.encode({"text": " ".join(words[1:])}).decode())
            return ModelTurnResult(text="Counting.", tool_calls=(call,), finish_reason="tool_calls",
                                   usage=TurnUsage(input_tokens=seen, output_tokens=1))
        if words[:1] == ["pick"]:  # a tool the client declares and runs (AG-UI frontend tools)
            call = ToolCall(id=f"call-{n}", name="pick_option",
                            arguments=msgspec.json.encode({"options": words[1:]}).decode())
            return ModelTurnResult(tool_calls=(call,), finish_reason="tool_calls",
                                   usage=TurnUsage(input_tokens=seen, output_tokens=1))
        if words[:1] == ["garble"]:
            call = ToolCall(id=f"call-{n}", name="word_count",
                            arguments='{"text": "' + " ".join(words[1:]))
            return ModelTurnResult(tool_calls=(call,), finish_reason="tool_calls",
                                   usage=TurnUsage(input_tokens=seen, output_tokens=1))
        if words[:1] == ["delete"]:
            call = ToolCall(id=f"call-{n}", name="delete_note",
                            arguments=msgspec.json.encode({"title": " ".join(words[1:])}).decode())
            return ModelTurnResult(tool_calls=(call,), finish_reason="tool_calls",
                                   usage=TurnUsage(input_tokens=seen, output_tokens=1))
        text = f"You said: {said}. That is {len(words)} words, and I have nothing to add."
        return ModelTurnResult(
            text=text, reasoning=(ReasoningPart(text="The user wants an echo."),),
            finish_reason="stop", usage=TurnUsage(input_tokens=seen, output_tokens=len(text.split())))

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(self.turn_for(messages)):
            if isinstance(event, TextEvent):
                words = event.content.split(" ")
                for i, word in enumerate(words):
                    yield TextEvent(content=word if i == len(words) - 1 else word + " ")
            else:
                yield event


def build_demo_app(*, delay_s: float = 0.02, logs: RunLogs | None = None,
                   deleted: list[str] | None = None, model: DemoModel | None = None,
                   lease_ms: float = 10_000) -> ChatApp:
    """The demo host: ``model`` (a :class:`DemoModel` by default) paced by ``delay_s`` per event,
    the demo tools with ``delete_note`` behind an approval; runs hold ``lease_ms`` leases."""
    paced = PacedModel(model or DemoModel(), delay_s)
    runner = agent_runner(paced, tools=demo_tools(deleted), needs_approval=["delete_note"])
    return ChatApp(runner, logs=logs, lease_ms=lease_ms)


class _WithPage:
    """The app, plus ``GET /`` and ``GET /app.js`` from ``page_dir`` (the bundled useChat page)."""

    def __init__(self, app: ChatApp, page_dir: Path) -> None:
        self._app = app
        self._files = {"/": ("text/html", page_dir / "index.html"),
                       "/app.js": ("text/javascript", page_dir / "app.js")}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        served = self._files.get(scope.get("path", "")) if scope["type"] == "http" else None
        if served is None or scope["method"] != "GET":
            await self._app(scope, receive, send)
            return
        kind, path = served
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", kind.encode())]})
        await send({"type": "http.response.body", "body": path.read_bytes()})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8787,
                        help="the port on 127.0.0.1 (0: a free one, printed)")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds before each event")
    parser.add_argument("--db", default=None, help="keep run logs in this SQLite file (a run "
                        "lost with a killed demo goes on when it starts again)")
    parser.add_argument("--page", default=None, type=Path,
                        help="serve the bundled useChat page from this directory at /")
    args = parser.parse_args(argv)
    import uvicorn

    logs: RunLogs | None = None
    if args.db:
        from bindloop.hosts.asgi.run_logs import SqliteRunLogs

        logs = SqliteRunLogs(args.db)
    app: Any = build_demo_app(delay_s=args.delay, logs=logs)
    if args.page is not None:
        app = _WithPage(app, args.page)
    page = "  the useChat page at /;" if args.page is not None else ""
    # Bound here, so the URL printed is the one listening (with --port 0, the port the system chose).
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    print(f"bindloop protocol host on http://127.0.0.1:{sock.getsockname()[1]}  ({page} POST "
          "/api/chat for the AI SDK, POST /ag-ui for AG-UI; Ctrl-C stops)", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
