"""A bindloop agent on Cloudflare Workers: the model below, tools.py's tools, DO sessions."""

from bindloop.hosts import create_model
from bindloop.hosts.workers import app
from bindloop.hosts.workers.app import McpTokens, RateLimiter, Receipts  # noqa: F401
from bindloop.wire import ModelAdapter
from tools import TOOLS


def model(env: object) -> ModelAdapter:  # per run, from the env: the OPENAI_API_KEY secret
    return create_model("openai:gpt-4.1-mini", env=env)


class Session(app.Session):  # one Durable Object per conversation (wrangler.jsonc)
    tools, model = TOOLS, model


class Default(app.ChatWorker):  # /v1/chat, /api/chat (useChat), /ag-ui, /mcp, /a2a
    tools, model = TOOLS, model
