"""Percent-encoding as URL query and form encoders write it, without ``urllib`` (outside the
core's fence): the wire's credential redaction and MCP's OAuth forms share it."""

from __future__ import annotations

import re

__all__ = ("percent_decode", "percent_encode")

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PERCENT = re.compile(rb"%([0-9A-Fa-f]{2})")


def percent_encode(text: str, safe: str = "", plus: bool = False) -> str:
    """``text`` with every character outside RFC 3986's unreserved set (and ``safe``) written as
    ``%XX`` UTF-8 bytes; ``plus`` writes a space as ``+`` (form encoding)."""
    out = []
    for char in text:
        if char in _UNRESERVED or char in safe:
            out.append(char)
        elif plus and char == " ":
            out.append("+")
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def percent_decode(text: str) -> str:
    """``%XX`` sequences decoded as UTF-8 (invalid bytes replaced); ``+`` is left as it is."""
    raw = _PERCENT.sub(lambda m: bytes([int(m.group(1), 16)]), text.encode("utf-8"))
    return raw.decode("utf-8", "replace")
