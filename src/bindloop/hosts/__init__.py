"""I/O bindings for hosts (outside the fences): the real transports, stores, servers and exporters
the core's ports are answered with — the httpx and JS ``fetch`` transports, the SQLite, Postgres
and Redis stores, the ASGI apps, Temporal, OpenTelemetry and logging — and the demos and scripted
servers the tests and ``make demo`` run.

Nothing in the core imports this package.
"""

__all__ = ()
