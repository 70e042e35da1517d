"""``mcp_tools(url)``: an MCP server's tools in one line, for an agent's ``tools=``.

::

    async with mcp_tools("http://127.0.0.1:8000/mcp") as calc:
        agent = create_agent(model=create_model("openai:gpt-5.1"), tools=calc.tools)

It opens the runtime's transport (httpx on CPython, JS ``fetch`` under Pyodide and Workers),
connects (:func:`~bindloop.mcp.open_mcp_client`), lists the tools
(:func:`~bindloop.mcp.load_mcp_tools`: namespaced ``<server>__<tool>``, schemas sanitized,
arguments checked before a call is sent) and yields the :class:`~bindloop.mcp.McpToolset`; the
session and the transport close when the block ends. Everything else the MCP client offers
(OAuth, elicitation, sampling, resources) is :mod:`bindloop.mcp`'s, and ``options`` reach
:class:`~bindloop.mcp.McpHttpClient` as they are.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from bindloop.errors import UsageError
from bindloop.mcp import McpToolset, ToolFilter, load_mcp_tools, open_mcp_client

__all__ = ("mcp_tools",)


@asynccontextmanager
async def mcp_tools(url: str, *, server: str = "mcp",
                    headers: Mapping[str, str] | Sequence[tuple[str, str]] = (),
                    allow: ToolFilter = None, prefix: str | None = None, fetch: Any = None,
                    **options: Any) -> AsyncIterator[McpToolset]:
    """The tools of the MCP server at ``url`` (streamable HTTP) for the block's duration.

    ``server`` names it in errors and is the tools' prefix unless ``prefix`` is given; ``headers``
    go with every request (an ``authorization`` header, say); ``allow`` keeps only the tools it
    names (or accepts); ``fetch`` injects a Worker binding's fetch under emscripten.

    Raises
    ------
    UsageError
        ``url`` is not an http(s) URL.
    McpError
        The server could not be reached or did not speak MCP (the message names ``server``).
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UsageError(f"mcp_tools(url) takes the server's http(s) URL, got {url!r}")
    pairs = tuple(headers.items()) if isinstance(headers, Mapping) else tuple(headers)
    transport: Any
    if sys.platform == "emscripten":
        from bindloop.hosts.transports.js_fetch import FetchTransport

        transport = FetchTransport(url, headers=pairs, fetch=fetch)
    else:
        if fetch is not None:
            raise UsageError("mcp_tools(fetch=...) is the JS fetch of Pyodide or a Worker; on "
                             "CPython requests go through httpx (leave fetch out)")
        from bindloop.hosts.transports.httpx import HttpxTransport

        transport = HttpxTransport(url, headers=pairs)
    try:
        async with open_mcp_client(transport, server=server, **options) as client:
            yield await load_mcp_tools(client, allow=allow, prefix=prefix)
    finally:
        close = getattr(transport, "aclose", None)
        if close is not None:
            await close()
