"""A Worker built on the library: its tools are plain functions, its callers named by a header."""

from typing import Any

from bindloop.hosts.workers import app
from bindloop.hosts.workers.agent import HttpError
from bindloop.hosts.workers.app import RateLimiter  # noqa: F401
from bindloop.tools import define_tool


@define_tool
def lookup(city: str) -> str:
    """Look a city's weather up."""
    raise ConnectionError(f"weather service down for {city}")


@define_tool
def shout(text: str) -> str:
    """Say a text loudly."""
    return text.upper()


TOOLS = (lookup, shout)


class Session(app.Session):
    tools = TOOLS


class Default(app.ChatWorker):
    tools = TOOLS

    async def authorize(self, request: Any) -> str:
        user = str(request.headers.get("x-user") or "")
        if not user:
            raise HttpError(401, "unauthorized", "send X-User")
        return user
