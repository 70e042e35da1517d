"""The one local server behind the browser demo: page, Pyodide, wheels and two scripted providers.

    .venv/bin/python harness/wasm/demo/serve.py [--wheels harness/wasm/wheels] [--pyc-wheels DIR]
        [--bytecode-wheels DIR] [--stdlib-bytecode DIR] [--delay-ms 12]

Everything is served by one :class:`harness.fixtures.scripted_server.ScriptedProviderServer` on
127.0.0.1 (an ephemeral port; the first line printed is ``serving http://127.0.0.1:PORT/demo/``), so
the page, Pyodide and the model calls share one origin (no CORS, nothing from elsewhere):

``/demo/...``      this directory (index.html, loader.js, app.js, page_agent.py, turn-stream.js)
``/examples/...``  the repository's ``examples/`` Python files: the page installs
                   ``examples/demos/demo.py`` (the ``make demo`` tools) into Pyodide
``/pyodide/...``   harness/wasm/node_modules/pyodide (the npm package: pyodide.mjs, pyodide.asm.mjs,
                   pyodide.asm.wasm, the stdlib zip, the lock file)
``/wheels/...``    the wheel directory; ``/wheels/index.json`` lists its ``.whl`` files
``/wheels-pyc/...`` the same for the ``.pyc`` wheel set (harness/wasm/wheels-pyc)
``/wheels-bytecode/...`` the same for the bytecode wheel set (harness/wasm/wheels-bytecode), the
                   page's default
``/stdlib-bytecode/...`` the standard-library bytecode table (harness/wasm/stdlib-bytecode,
                   ``make wasm-stdlib-bytecode``), which the page installs right after the boot
``/primary/...``   an OpenAI-chat provider that fails: ``503`` on the first turn, serves the second,
                   and drops the connection in the middle of the third (final) answer
``/backup/...``    an OpenAI-chat provider that always answers, streamed word by word
``/structured/...`` an OpenAI-chat provider for JSON-schema requests (``response_format``): it
                   reports the notes the transcript's last ``notes_list`` result holds, as JSON
                   streamed a few characters a chunk (the page's structured-output panel)
``/down/<name>/...`` the same three behind an outage: the first two model calls under ``/down/``
                   answer 503 (a run whose every provider is down), later ones reach ``<name>``
                   (the page's ``?providers=down``: its error line and retry button)

Both providers decide their turns with the ``make demo`` policy model reading the transcript they
are sent, so every request is answered from its own body (a page reload starts a fresh run). The
final answer's mid-stream drop is what makes the page show a turn-stream ``reset``: text was already
on screen when routing fell back, and the backup's answer replaces it.
"""

from __future__ import annotations

import argparse
import mimetypes
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec

# Run as a script: the demo's tools (examples.demos) and the scripted server (harness.fixtures) are
# imported from the repository root.
_ROOT = Path(__file__).resolve().parents[3]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bindloop.contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    ToolMessage,
    TurnUsage,
    content_text,
    messages_from_openai,
)
from bindloop.model import ModelRequest
from examples.demos.demo import PolicyModel
from harness.fixtures.provider_replies import render_sse, sse_event
from harness.fixtures.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
)

DEMO_DIR = Path(__file__).resolve().parent
WASM_DIR = DEMO_DIR.parent
PYODIDE_DIR = WASM_DIR / "node_modules" / "pyodide"
EXAMPLES_DIR = _ROOT / "examples"

_TYPES = {".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
          ".whl": "application/zip", ".py": "text/x-python; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".json": "application/json", ".zip": "application/zip"}
_UNAVAILABLE = b'{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}'
_NOT_FOUND = b'{"error":{"message":"no such file"}}'


def _file_reply(root: Path, rel: str) -> ScriptedReply:
    target = (root / rel).resolve()
    # Only files under root: "..", absolute paths and symlinks out of it are refused.
    if not target.is_relative_to(root.resolve()) or not target.is_file():
        return error_reply(404, _NOT_FOUND)
    kind = _TYPES.get(target.suffix) or mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    return ScriptedReply(headers=(("content-type", kind), ("cache-control", "no-store")),
                         chunks=(target.read_bytes(),), streamed=False)


def static(prefix: str, root: Path) -> Callable[[RecordedRequest], ScriptedReply]:
    """GET ``/<prefix>/<file>`` from ``root``; ``/<prefix>/index.json`` lists its wheels."""
    def respond(request: RecordedRequest) -> ScriptedReply:
        if request.method != "GET":
            return error_reply(405, b'{"error":{"message":"GET only"}}')
        rel = request.path.split("?", 1)[0][len(prefix) + 2:] or "index.html"
        if rel == "index.json" and not (root / rel).exists():
            names = sorted(p.name for p in root.glob("*.whl"))
            return ScriptedReply(headers=(("content-type", "application/json"),
                                          ("cache-control", "no-store")),
                                 chunks=(msgspec.json.encode(names),), streamed=False)
        return _file_reply(root, rel)
    return respond


def python_files(prefix: str, root: Path) -> Callable[[RecordedRequest], ScriptedReply]:
    """GET ``/<prefix>/<file>.py`` from ``root`` (the demo modules the page installs); nothing else."""
    serve_file = static(prefix, root)

    def respond(request: RecordedRequest) -> ScriptedReply:
        if not request.path.split("?", 1)[0].endswith(".py"):
            return error_reply(404, _NOT_FOUND)
        return serve_file(request)
    return respond


def _word_sse(turn: ModelTurnResult, model: str) -> tuple[bytes, ...]:
    """The OpenAI-chat SSE for ``turn`` with its text in one chunk per word (a provider streams
    tokens; the shared renderer sends the text in two halves)."""
    # Each word with the whitespace after it: the pieces join back to exactly the text.
    return _pieces_sse(turn, model, [p for p in re.findall(r"\S*\s*", turn.text or "") if p])


def _pieces_sse(turn: ModelTurnResult, model: str, pieces: list[str]) -> tuple[bytes, ...]:
    """The OpenAI-chat SSE for ``turn`` with its text sent as ``pieces`` (which join to it)."""
    rest = render_sse("openai_chat", msgspec.structs.replace(turn, text=None), model=model)
    text = [sse_event({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                       "model": model, "usage": None,
                       "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
            for p in pieces]
    return (rest[0], *text, *rest[1:])


def _policy_turn(messages: list[Message]) -> ModelTurnResult:
    """The policy model's next turn for this transcript, from the transcript alone."""
    model = PolicyModel()
    model.turn = sum(1 for m in messages if isinstance(m, AssistantMessage))
    coro = model.complete(messages, ModelRequest())
    try:
        coro.send(None)
    except StopIteration as done:
        turn: ModelTurnResult = done.value
        return turn
    raise RuntimeError("the policy model awaited")  # it never does; a change there must show


def provider(*, flaky: bool, delay_s: float) -> Callable[[RecordedRequest], ScriptedReply]:
    def respond(request: RecordedRequest) -> ScriptedReply:
        body = msgspec.json.decode(request.body)
        messages = messages_from_openai(body["messages"])
        turn_no = 1 + sum(1 for m in messages if isinstance(m, AssistantMessage))
        if flaky and turn_no == 1:
            return error_reply(503, _UNAVAILABLE, retry_after="1")
        chunks = _word_sse(_policy_turn(messages), body["model"])
        # The third turn is the final answer: cut it off after the role chunk and 13 more chunks.
        drop = 14 if flaky and turn_no == 3 else None
        return ScriptedReply(headers=(("content-type", "text/event-stream"),), chunks=chunks,
                             delay_s=delay_s, drop_after=drop)
    return respond


_NO_SCHEMA = b'{"error":{"message":"this provider answers JSON-schema requests only: send response_format {\\"type\\": \\"json_schema\\", ...}"}}'


def notes_report(messages: list[Message]) -> dict[str, object]:
    """What ``/structured`` answers for a transcript: the notes of its last ``notes_list`` result
    (none when there is none), how many there are, and a one-line summary."""
    notes: list[dict[str, str]] = []
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            try:
                listed = msgspec.json.decode(content_text(message.content))
            except msgspec.DecodeError:
                continue
            if isinstance(listed, list) and all(isinstance(n, dict) and set(n) == {"title", "body"}
                                                for n in listed):
                notes = listed
                break
    calls = sum(len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage))
    return {"count": len(notes), "notes": notes,
            "summary": f"{len(notes)} note(s) saved in a run of {calls} tool calls"}


def structured(*, delay_s: float, chunk: int = 6) -> Callable[[RecordedRequest], ScriptedReply]:
    def respond(request: RecordedRequest) -> ScriptedReply:
        body = msgspec.json.decode(request.body)
        fmt = body.get("response_format") or {}
        if fmt.get("type") != "json_schema":
            return error_reply(400, _NO_SCHEMA)
        answer = msgspec.json.encode(notes_report(messages_from_openai(body["messages"]))).decode()
        turn = ModelTurnResult(text=answer, finish_reason="stop",
                               usage=TurnUsage(input_tokens=len(request.body) // 4,
                                               output_tokens=len(answer) // 4))
        pieces = [answer[i:i + chunk] for i in range(0, len(answer), chunk)]
        return ScriptedReply(headers=(("content-type", "text/event-stream"),),
                             chunks=_pieces_sse(turn, body["model"], pieces), delay_s=delay_s)
    return respond


def outage(routes: dict[str, Callable[[RecordedRequest], ScriptedReply]], *,
           failures: int = 2) -> Callable[[RecordedRequest], ScriptedReply]:
    """``/down/<name>/...``: 503 for the first ``failures`` calls, then ``routes[name]``."""
    lock = threading.Lock()
    left = [failures]

    def respond(request: RecordedRequest) -> ScriptedReply:
        with lock:
            failing = left[0] > 0
            left[0] -= failing
        if failing:
            return error_reply(503, _UNAVAILABLE)
        _, _, rest = request.path.partition("/down/")
        name = rest.split("/", 1)[0]
        if name not in routes:
            return error_reply(404, _NOT_FOUND)
        return routes[name](RecordedRequest(method=request.method, path="/" + rest,
                                            headers=request.headers, body=request.body))
    return respond


def build_server(wheels: Path, *, pyc_wheels: Path | None = None, bytecode_wheels: Path | None = None,
                 stdlib_bytecode: Path | None = None, delay_s: float = 0.012) -> ScriptedProviderServer:
    server = ScriptedProviderServer()
    server.set_responder("demo", static("demo", DEMO_DIR))
    server.set_responder("examples", python_files("examples", EXAMPLES_DIR))
    server.set_responder("pyodide", static("pyodide", PYODIDE_DIR))
    server.set_responder("wheels", static("wheels", wheels))
    if pyc_wheels is not None:
        server.set_responder("wheels-pyc", static("wheels-pyc", pyc_wheels))
    if bytecode_wheels is not None:
        server.set_responder("wheels-bytecode", static("wheels-bytecode", bytecode_wheels))
    if stdlib_bytecode is not None:
        server.set_responder("stdlib-bytecode", static("stdlib-bytecode", stdlib_bytecode))
    routes = {"primary": provider(flaky=True, delay_s=delay_s),
              "backup": provider(flaky=False, delay_s=delay_s),
              "structured": structured(delay_s=delay_s)}
    for name, respond in routes.items():
        server.set_responder(name, respond)
    server.set_responder("down", outage(routes))
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheels", type=Path, default=WASM_DIR / "wheels",
                        help="directory of the wheels the page installs (default: harness/wasm/wheels)")
    parser.add_argument("--pyc-wheels", type=Path, default=WASM_DIR / "wheels-pyc",
                        help="the .pyc wheel set, served under /wheels-pyc/ (the page's ?wheels=pyc)")
    parser.add_argument("--bytecode-wheels", type=Path, default=WASM_DIR / "wheels-bytecode",
                        help="the bytecode wheel set, served under /wheels-bytecode/ (the page's default)")
    parser.add_argument("--stdlib-bytecode", type=Path, default=WASM_DIR / "stdlib-bytecode",
                        help="the standard-library bytecode table's directory, served under "
                             "/stdlib-bytecode/ (the page's ?stdlib=source does without it)")
    parser.add_argument("--delay-ms", type=float, default=12.0,
                        help="pause before each streamed chunk, so streaming is visible")
    args = parser.parse_args(argv)
    for need, hint in ((PYODIDE_DIR / "pyodide.mjs", "make wasm-node"),
                       (args.wheels, "make wasm-wheels"), (args.pyc_wheels, "make wasm-wheels-pyc"),
                       (args.bytecode_wheels, "make wasm-wheels-bytecode"),
                       (args.stdlib_bytecode / "stdlib-bytecode.bin", "make wasm-stdlib-bytecode")):
        if not need.exists():
            parser.error(f"{need} is missing: run `{hint}`")
    if not any(args.wheels.glob("bindloop-*.whl")):
        parser.error(f"no bindloop wheel in {args.wheels}: run `make wasm-wheels`")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with build_server(args.wheels, pyc_wheels=args.pyc_wheels, bytecode_wheels=args.bytecode_wheels,
                      stdlib_bytecode=args.stdlib_bytecode, delay_s=args.delay_ms / 1000) as server:
        print(f"serving {server.base_url('demo')}/", flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
