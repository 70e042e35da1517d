"""A bindloop agent on Cloudflare Workers: streamed chats with Durable Object sessions.

The provider comes from wrangler.jsonc's vars (PROVIDER_*) and its key from a secret; the tools
are tools.py's; the routes, sessions, stores and protocols are bindloop.hosts.workers'.
"""

from bindloop.hosts.workers import app
from bindloop.hosts.workers.app import McpTokens, RateLimiter, Receipts  # noqa: F401
from tools import TOOLS


class Session(app.Session):  # one Durable Object per conversation (wrangler.jsonc)
    tools = TOOLS


class Default(app.ChatWorker):  # /v1/chat, /api/chat (useChat), /ag-ui, /mcp, /a2a
    tools = TOOLS
