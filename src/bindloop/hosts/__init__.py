"""I/O bindings for hosts (outside the fences): the real transports, stores, servers and exporters
the core's ports are answered with, in one sub-package per kind —

- :mod:`bindloop.hosts.transports`: the httpx and JS ``fetch`` transports;
- :mod:`bindloop.hosts.stores`: the SQLite, Postgres and Redis stores;
- :mod:`bindloop.hosts.asgi`: the chat app for the AI SDK and AG-UI, its agent runner and run logs;
- :mod:`bindloop.hosts.mcp` and :mod:`bindloop.hosts.a2a`: the MCP and A2A servers and clients;
- :mod:`bindloop.hosts.temporal`: durable runs on Temporal;
- :mod:`bindloop.hosts.telemetry`: OpenTelemetry and stdlib ``logging``.

Nothing in the core imports this package. Its names load on first use — :func:`create_model` (a
model from a ``"provider:model"`` string, :mod:`bindloop.hosts.models`) and :func:`mcp_tools` (an
MCP server's tools from its URL, :mod:`bindloop.hosts.mcp.toolset`) — so importing a host binding
such as ``bindloop.hosts.stores.sqlite`` loads neither the wire adapters nor the MCP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .mcp.toolset import mcp_tools as mcp_tools
    from .models import create_model as create_model

__all__ = ("create_model", "mcp_tools")


def __getattr__(name: str) -> Any:
    if name == "create_model":
        from .models import create_model

        return create_model
    if name == "mcp_tools":
        from .mcp.toolset import mcp_tools

        return mcp_tools
    raise AttributeError(f"module 'bindloop.hosts' has no attribute {name!r}")
