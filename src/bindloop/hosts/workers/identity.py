"""Who is calling: the Worker's equivalent of ``ChatApp(authorize=...)``. Edit :func:`authorize`
to fit your deployment (a session cookie, a JWT from your identity provider, Cloudflare Access's
signed ``Cf-Access-Jwt-Assertion`` checked against its keys); the routes only need it to return
the caller's identity or raise an :class:`agent.HttpError`.

As shipped it has two modes, chosen by the ``API_TOKEN`` secret (``uv run pywrangler secret put
API_TOKEN``): unset, a single user (identity ``""``: chats are keyed by the client's id alone, for
a Worker you run for yourself); set, bearer tokens -- one or more, comma-separated -- and a request
must send ``Authorization: Bearer <one of them>``; its identity is derived from which one (a hash,
never the token), so each token is its own user, whose chats no other token reads, resumes, stops
or reuses (:func:`scoped_chat_id`).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from bindloop.hosts.chat.access import scoped_chat_id
from bindloop.hosts.workers.agent import HttpError

__all__ = ("authorize", "scoped_chat_id")


def _tokens(env: Any) -> list[str]:
    raw = getattr(env, "API_TOKEN", None)
    text = "" if raw is None or str(raw) == "undefined" else str(raw)
    return [t.strip() for t in text.split(",") if t.strip()]


async def authorize(request: Any, env: Any) -> str:
    """The caller's identity (``""``: the single user), or a 401 ``unauthorized``."""
    tokens = _tokens(env)
    if not tokens:
        return ""
    header = str(request.headers.get("authorization") or "")
    scheme, _, sent = header.partition(" ")
    if scheme.lower() == "bearer" and sent:
        for token in tokens:  # each compared in constant time
            if hmac.compare_digest(sent.strip().encode(), token.encode()):
                return "t-" + hashlib.sha256(token.encode()).hexdigest()[:24]
    raise HttpError(401, "unauthorized", "send Authorization: Bearer <token>")


