"""I/O bindings for hosts (outside the fences): the real transports, stores, servers and exporters
the core's ports are answered with — the httpx and JS ``fetch`` transports, the SQLite, Postgres
and Redis stores, the ASGI apps, Temporal, OpenTelemetry and logging — and the demos and scripted
servers the tests and ``make demo`` run.

Nothing in the core imports this package. Its names load on first use — :func:`create_model` (a
model from a ``"provider:model"`` string, :mod:`bindloop.hosts.models`) and :func:`mcp_tools` (an
MCP server's tools from its URL, :mod:`bindloop.hosts.mcp_toolset`) — so importing a host binding
such as ``bindloop.hosts.sqlite_store`` loads neither the wire adapters nor the MCP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .mcp_toolset import mcp_tools as mcp_tools
    from .models import create_model as create_model

__all__ = ("create_model", "mcp_tools")


def __getattr__(name: str) -> Any:
    if name == "create_model":
        from .models import create_model

        return create_model
    if name == "mcp_tools":
        from .mcp_toolset import mcp_tools

        return mcp_tools
    raise AttributeError(f"module 'bindloop.hosts' has no attribute {name!r}")
