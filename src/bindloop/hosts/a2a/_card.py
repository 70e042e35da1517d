"""The A2A server's agent card: what :class:`~bindloop.hosts.a2a.server.A2aServer` publishes at
``/.well-known/agent-card.json``, its JSON-RPC interface URL fixed, or taken from the request's
own scheme and ``Host``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from bindloop.hosts.asgi.chat import Scope
from bindloop.protocols.a2a import (
    A2aAgentCard,
    A2aAgentProvider,
    A2aAgentSkill,
    a2a_agent_card,
    a2a_interface,
)

__all__ = ("agent_card", "card_for_request")

_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def agent_card(*, name: str, description: str, skills: Sequence[A2aAgentSkill], version: str,
               url: str, streaming: bool, provider: A2aAgentProvider | None,
               security_schemes: dict[str, Any] | None,
               security_requirements: Sequence[dict[str, Any]]) -> A2aAgentCard:
    """The card of an agent answering JSON-RPC at ``url``: without ``skills``, one ``chat``
    skill of the name and description (the card requires one); no push notifications and no
    extended card (:func:`bindloop.protocols.a2a.a2a_agent_card`, which the Worker's route
    serves too)."""
    return a2a_agent_card(name=name, description=description, url=url, skills=skills,
                          version=version, provider=provider, security_schemes=security_schemes,
                          security_requirements=security_requirements, streaming=streaming)


def card_for_request(card: A2aAgentCard, scope: Scope) -> A2aAgentCard:
    """``card`` with its interface URL (a path) joined to the request's scheme and ``Host`` --
    or, when the ``Host`` header is missing or not a ``host[:port]``, the address served on."""
    headers = dict(scope.get("headers", ()))
    host = bytes(headers.get(b"host", b"")).decode("latin-1")
    if not _HOST.fullmatch(host):
        server = scope.get("server")
        host = f"{server[0]}:{server[1]}" if server else "localhost"
    rpc = f"{scope.get('scheme', 'http')}://{host}{card.supported_interfaces[0].url}"
    return msgspec.structs.replace(card, supported_interfaces=(a2a_interface(rpc),))
