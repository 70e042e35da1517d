"""The tools the conformance suite's server scenarios call (``test_simple_text``, ...), defined
with bindloop's ``define_tool`` and served by :class:`bindloop.hosts.mcp.server.McpServerApp`.

The 2026-07-28 ones ask the client for input the way any served tool does: ``ctx.ask`` (Multi
Round-Trip Requests, the server's ``state_secret`` sealing the state), ``ctx.input`` on the
re-issued call, ``ctx.client_capabilities``; ``test_missing_capability`` is declared to need
``sampling`` (``required_client_capabilities``) and ``test_header_params`` mirrors arguments
into ``Mcp-Param-*`` headers (``x-mcp-header``)."""

from __future__ import annotations

import secrets

from typing import Annotated, Any

import anyio
import msgspec

from bindloop.contracts import FilePart, ImagePart, TextPart, ToolError, ToolResult, ToolSuspend
from bindloop.hosts.mcp.server import McpServerApp
from bindloop.mcp.server import McpServer
from bindloop.tools import Tool, define_tool

# A 1x1 red PNG and a minimal WAV header, base64.
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5Er"
       "kJggg==")
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="


class NoArgs(msgspec.Struct):
    pass


async def _text(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content="This is a simple text response for testing.")


async def _image(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=(ImagePart(data=PNG, media_type="image/png"),))


async def _audio(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=(FilePart(data=WAV, media_type="audio/wav"),))


async def _resource(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=(FilePart(data="VGhpcyBpcyBhbiBlbWJlZGRlZCByZXNvdXJjZS4=",
                                        media_type="text/plain", filename="resource.txt"),))


async def _mixed(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=(TextPart(text="Multiple content types test:"),
                               ImagePart(data=PNG, media_type="image/png"),
                               FilePart(data="eyJ0ZXN0IjoiZGF0YSJ9", media_type="application/json",
                                        filename="data.json")))


async def _error(args: NoArgs, ctx: Any) -> ToolError:
    return ToolError(error="This tool intentionally returns an error for testing")


async def _progress(args: NoArgs, ctx: Any) -> ToolResult:
    for step in (0, 50, 100):
        ctx.report_progress(step, 100, f"at {step}%")
        await anyio.sleep(0.05)
    return ToolResult(content="Progress complete")


def _form(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {
        "message": message, "requestedSchema": {
            "type": "object", "properties": {field: {"type": kind}}, "required": [field]}}}


def _sampling(text: str, max_tokens: int) -> dict[str, Any]:
    return {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens}}


ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


def _field(response: dict[str, Any], field: str) -> str:
    """A field of an accepted elicitation's content, or what the user did instead."""
    content = response.get("content")
    if response.get("action") == "accept" and isinstance(content, dict):
        return str(content.get(field))
    return f"({response.get('action')})"


def _sampled(response: dict[str, Any]) -> str:
    content = response.get("content")
    return str(content.get("text")) if isinstance(content, dict) else "(no text)"


def _lacks(ctx: Any, *keys: str) -> bool:
    """Whether this call brings no response for one of ``keys`` (a first call, or responses
    sent without a requestState that miss one): the tool asks (again)."""
    return ctx.input is None or any(key not in ctx.input.responses for key in keys)


async def _elicit(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if _lacks(ctx, "user_name"):
        return ctx.ask({"user_name": _form("What is your name?", "name")})
    return ToolResult(content=f"Hello, {_field(ctx.input.responses['user_name'], 'name')}!")


async def _sample(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if _lacks(ctx, "capital_question"):
        return ctx.ask({"capital_question": _sampling("What is the capital of France?", 100)})
    return ToolResult(content=f"The model said: {_sampled(ctx.input.responses['capital_question'])}")


async def _roots(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if _lacks(ctx, "client_roots"):
        return ctx.ask({"client_roots": ROOTS})
    roots = ctx.input.responses["client_roots"].get("roots")
    uris = [r.get("uri") for r in roots if isinstance(r, dict)] if isinstance(roots, list) else []
    return ToolResult(content=f"Client roots: {', '.join(map(str, uris)) or '(none)'}")


async def _request_state(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if ctx.input is None or ctx.input.state != "awaiting-confirmation":
        return ctx.ask({"confirm": _form("Please confirm", "ok", "boolean")},
                       state="awaiting-confirmation")
    # The sealed state came back intact: the server checked its seal before this call ran.
    return ToolResult(content=f"state-ok: confirmed="
                              f"{_field(ctx.input.responses['confirm'], 'ok')}")


async def _multiple(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if _lacks(ctx, "user_name", "greeting", "client_roots"):
        return ctx.ask({"user_name": _form("What is your name?", "name"),
                        "greeting": _sampling("Generate a greeting", 50),
                        "client_roots": ROOTS}, state="three-inputs")
    got = ctx.input.responses
    return ToolResult(content=f"{_sampled(got['greeting'])} {_field(got['user_name'], 'name')} "
                              f"({len(got['client_roots'].get('roots') or [])} roots)")


async def _multi_round(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if ctx.input is None or ctx.input.state is None:
        return ctx.ask({"step1": _form("Step 1: What is your name?", "name")}, state="round-1")
    if ctx.input.state == "round-1":
        name = _field(ctx.input.responses["step1"], "name")
        return ctx.ask({"step2": _form("Step 2: What is your favorite color?", "color")},
                       state=f"round-2:{name}")
    name = str(ctx.input.state).removeprefix("round-2:")
    return ToolResult(content=f"{name} likes {_field(ctx.input.responses['step2'], 'color')}")


async def _tampered(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if ctx.input is None or ctx.input.state != "sealed":
        return ctx.ask({"confirm": _form("Please confirm", "ok", "boolean")}, state="sealed")
    return ToolResult(content="confirmed")


async def _capabilities(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if ctx.input is None or ctx.input.state != "asked":
        declared = ctx.client_capabilities
        asks: dict[str, Any] = {}
        if "elicitation" in declared:
            asks["user_name"] = _form("What is your name?", "name")
        if "sampling" in declared:
            asks["greeting"] = _sampling("Generate a greeting", 50)
        if "roots" in declared:
            asks["client_roots"] = ROOTS
        if not asks:
            return ToolResult(content="The client declared no capability to ask through")
        return ctx.ask(asks, state="asked")
    return ToolResult(content=f"Answered: {', '.join(sorted(ctx.input.responses))}")


async def _missing_capability(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
    if _lacks(ctx, "summary"):
        return ctx.ask({"summary": _sampling("Summarize the conformance run", 50)})
    return ToolResult(content=_sampled(ctx.input.responses["summary"]))


class HeaderArgs(msgspec.Struct):
    region: Annotated[str, msgspec.Meta(extra_json_schema={"x-mcp-header": "Region"})]
    priority: Annotated[int, msgspec.Meta(extra_json_schema={"x-mcp-header": "Priority"})]
    query: str


async def _headers(args: HeaderArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=f"{args.query} in {args.region} at priority {args.priority}")


def conformance_tools() -> list[Tool[Any, Any]]:
    def tool(name: str, execute: Any) -> Tool[Any, Any]:
        return define_tool(name=name, description=f"Conformance tool {name}.", args=NoArgs,
                           execute=execute)

    return [tool("test_simple_text", _text), tool("test_image_content", _image),
            tool("test_audio_content", _audio), tool("test_embedded_resource", _resource),
            tool("test_multiple_content_types", _mixed), tool("test_error_handling", _error),
            tool("test_tool_with_progress", _progress),
            tool("test_input_required_result_elicitation", _elicit),
            tool("test_input_required_result_sampling", _sample),
            tool("test_input_required_result_list_roots", _roots),
            tool("test_input_required_result_request_state", _request_state),
            tool("test_input_required_result_multiple_inputs", _multiple),
            tool("test_input_required_result_multi_round", _multi_round),
            tool("test_input_required_result_tampered_state", _tampered),
            tool("test_input_required_result_capabilities", _capabilities),
            tool("test_missing_capability", _missing_capability),
            tool("test_streaming_elicitation", _elicit),
            define_tool(name="test_header_params", args=HeaderArgs, execute=_headers,
                        description="Mirrors region and priority into Mcp-Param headers.")]


def app() -> McpServerApp:
    server = McpServer(conformance_tools(), name="bindloop-conformance", version="1",
                       session_ids=lambda: secrets.token_urlsafe(24),
                       state_secret=secrets.token_bytes(32),
                       required_client_capabilities={"test_missing_capability": ("sampling",)})
    return McpServerApp(server)
