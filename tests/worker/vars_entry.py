"""The template's Worker with no ``model``: its model comes from the ``PROVIDER_*`` /
``FALLBACK_*`` vars (the route of two providers, their wires and keys set without code). The
tests of that configuration stage it in place of ``worker/src/entry.py``
(``stage(..., entry=VARS_ENTRY)``); the rest of the template's modules are the template's."""

from bindloop.hosts.workers import app
from bindloop.hosts.workers.app import McpTokens, RateLimiter, Receipts  # noqa: F401
from tools import TOOLS


class Session(app.Session):
    tools = TOOLS


class Default(app.ChatWorker):
    tools = TOOLS
