"""The elicitation values (``elicitation/create``): what a server asks the user, in ``form`` mode
(a flat object schema of primitive fields) or ``url`` mode (2025-11-25: the user is sent to a URL
and the interaction happens out of band, so nothing the user enters passes through the client),
and the user's answer. Values only: who asks the user is the host's port
(:class:`~bindloop.mcp.server_requests.ServerRequestHandlers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

__all__ = ("ElicitationRequest", "ElicitationResult", "fill_defaults", "url_elicitations")


class ElicitationRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``elicitation/create``: the server asks the user for input. In ``form`` mode
    ``requested_schema`` is a flat object schema of primitive fields; in ``url`` mode the user is
    sent to ``url``, and ``elicitation_id`` names the interaction (the server may later announce
    it finished with ``notifications/elicitation/complete``)."""

    message: str
    requested_schema: dict[str, Any] | None = None
    mode: str = "form"
    url: str | None = None
    elicitation_id: str | None = None


class ElicitationResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The user's answer: ``accept`` (with ``content`` for a form; none for a URL, whose
    interaction happens out of band), ``decline`` or ``cancel``. Fields of the form the user left
    out are filled with the schema's ``default`` values."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


def url_elicitations(data: object) -> tuple[ElicitationRequest, ...]:
    """The URL-mode elicitations of a URLElicitationRequired error's ``data``
    (``{"elicitations": [...]}``); entries that are not URL elicitations with an id, a URL and
    a message are left out."""
    raw = data.get("elicitations") if isinstance(data, dict) else None
    out: list[ElicitationRequest] = []
    for item in raw if isinstance(raw, list) else ():
        try:
            asked = msgspec.convert(item, ElicitationRequest)
        except msgspec.ValidationError:
            continue
        if asked.mode == "url" and asked.url and asked.elicitation_id:
            out.append(asked)
    return tuple(out)


def fill_defaults(content: dict[str, Any], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``content`` with the form schema's ``default`` for every field the user left out
    (SEP-1034); ``content`` is filled in place and returned."""
    properties = schema.get("properties") if schema is not None else None
    if isinstance(properties, Mapping):
        for name, field in properties.items():
            if name not in content and isinstance(field, Mapping) and "default" in field:
                content[name] = field["default"]
    return content
