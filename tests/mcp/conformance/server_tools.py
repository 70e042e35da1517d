"""The tools the conformance suite's server scenarios call (``test_simple_text``, ...), defined
with bindloop's ``define_tool`` and served by :class:`bindloop.hosts.mcp.server.McpServerApp`."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from bindloop.contracts import FilePart, ImagePart, TextPart, ToolError, ToolResult
from bindloop.hosts.mcp.server import McpServerApp
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


def conformance_tools() -> list[Tool[Any, Any]]:
    def tool(name: str, execute: Any) -> Tool[Any, Any]:
        return define_tool(name=name, description=f"Conformance tool {name}.", args=NoArgs,
                           execute=execute)

    return [tool("test_simple_text", _text), tool("test_image_content", _image),
            tool("test_audio_content", _audio), tool("test_embedded_resource", _resource),
            tool("test_multiple_content_types", _mixed), tool("test_error_handling", _error),
            tool("test_tool_with_progress", _progress)]


def app() -> McpServerApp:
    return McpServerApp(conformance_tools(), name="bindloop-conformance", version="1")
