"""``equip_mcp``: an MCP server's tools offered to the current agent generation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..signal import AbortSignal
from ._context import draft_generation, optional_frame
from ._hooks import equip_tool
from ._middleware import ToolMiddleware

if TYPE_CHECKING:
    from ..mcp import McpHttpClient, McpToolset, ToolFilter

__all__ = ("equip_mcp",)


async def equip_mcp(server: McpHttpClient | McpToolset, *, allow: ToolFilter = None,
                    prefix: str | None = None,
                    middleware: Sequence[ToolMiddleware] = ()) -> McpToolset:
    """Equip every tool ``server`` offers (namespaced ``prefix__name``, schemas sanitized, arguments
    checked before a call is sent) in this generation, each with the dynamic ``middleware``; returns
    the :class:`McpToolset`, whose ``skipped`` entries say which tools were left out and why.

    ``server`` is a connected-or-new :class:`McpHttpClient` (its tools are listed now, every page) or
    an :class:`McpToolset` loaded earlier with :func:`load_mcp_tools` — pass the toolset to avoid
    listing the tools again in every generation of a reborn loop (``allow`` and ``prefix`` were
    applied when it was loaded, so they are refused here). Like :func:`equip_tool`
    it must come before the prompt (``AfterPromptAgentError``) and inside an agent handler
    (``NoAgentContextError``); the server is contacted only after that check passes.

    ``bindloop.mcp`` is imported on the first call, so importing ``bindloop.agent`` alone (an agent
    without MCP servers) does not pay for it, and ``bindloop.mcp`` needs nothing of the agent.

    Raises
    ------
    McpError
        The server could not be reached or did not speak MCP (the message names it).
    """
    from ..mcp import McpHttpClient, McpToolset, load_mcp_tools

    if isinstance(server, McpToolset):
        if allow is not None or prefix is not None:
            raise UsageError("equip_mcp(): allow= and prefix= apply when a toolset is loaded; pass "
                             "them to load_mcp_tools(), or pass the McpHttpClient here")
        toolset = server
    elif isinstance(server, McpHttpClient):
        # An equip after the prompt, or outside a handler, fails before the server is contacted.
        draft_generation("equip_mcp")
        toolset = await load_mcp_tools(server, prefix=prefix, allow=allow)
    else:
        raise UsageError(f"equip_mcp() takes an McpHttpClient or an McpToolset, got {server!r}")
    # The agent passes tools a ToolContext without the run's signal: each MCP tool reads the
    # current run's signal itself, so an aborted run cancels the call on the server.
    def run_signal() -> AbortSignal | None:
        frame = optional_frame()
        return None if frame is None else frame.signal

    for tool in toolset.tools:
        equip_tool(tool.with_signal_source(run_signal), middleware=middleware)
    return toolset
