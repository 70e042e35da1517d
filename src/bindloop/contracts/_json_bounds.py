"""Untrusted JSON text (a request body) read with its size and nesting bounded *before* anything
recursive touches it.

A JSON parser recurses once per nesting level. Under Pyodide (the browser, Cloudflare Workers) that
recursion runs on the JavaScript stack, and a body of a few KiB — ``[`` repeated 10,000 times — can
overflow it and abort the whole isolate, with every other request in it; CPython only raises
``RecursionError``. :func:`decode_json_bounded` first measures the text's nesting with an iterative
scan (strings skipped, so brackets inside them do not count) and refuses a body that is too large or
too deep; only a body within both bounds reaches the decoder, msgspec's, which is strict (no NaN, no
trailing data, valid UTF-8 only).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from ..errors import UsageError
from ._errors import JsonBoundsError

__all__ = (
    "DEFAULT_MAX_JSON_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "decode_json_bounded",
    "json_nesting_depth",
)

DEFAULT_MAX_JSON_BYTES: Final = 64 * 1024
"""64 KiB: a chat request with a long pasted message, not a document store."""

DEFAULT_MAX_JSON_DEPTH: Final = 64
"""The nesting bound checkpoints already hold JSON values to (``bindloop.checkpoints``)."""


# A complete JSON string, escapes included (the unrolled form: linear, no nested repetition).
_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")
# The same over UTF-8 bytes: brackets, quotes and backslashes are ASCII, and UTF-8 never uses an
# ASCII byte inside a multi-byte sequence, so the bytes scan finds what the text scan would.
_STRING_BYTES: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET_BYTES: Final = re.compile(rb"[^\[\]{}]+")
_DECODER: Final = msgspec.json.Decoder()


def json_nesting_depth(text: str | bytes, stop_above: int | None = None) -> int:
    """The deepest nesting of ``[`` / ``{`` in JSON text, brackets inside strings not counted
    (``0`` for a scalar). Iterative: any depth is measured without recursion. ``stop_above``
    returns as soon as the depth exceeds it (the value returned is then ``stop_above + 1``).
    Malformed text gets a best-effort figure; the decoder reports what is wrong with it."""
    brackets: str | bytes
    if isinstance(text, (bytes, bytearray, memoryview)):
        brackets = _NOT_BRACKET_BYTES.sub(b"", _STRING_BYTES.sub(b"", bytes(text)))
    else:
        brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for ch in brackets.decode("ascii") if isinstance(brackets, bytes) else brackets:
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    return deepest
        elif depth:
            depth -= 1
    return deepest


def decode_json_bounded(data: str | bytes, *, max_bytes: int = DEFAULT_MAX_JSON_BYTES,
                        max_depth: int = DEFAULT_MAX_JSON_DEPTH,
                        require_object: bool = False) -> Any:
    """The JSON value of ``data`` (UTF-8 bytes, or text measured as UTF-8), or
    :class:`JsonBoundsError`: over ``max_bytes`` bytes, nested deeper than ``max_depth``
    (``{"a": [1]}`` is 2 deep), not JSON, or — with ``require_object`` — not a JSON object.
    The size is checked first, then the depth, and only then is the text decoded, so no recursion
    ever sees more than ``max_depth`` levels."""
    if max_bytes < 0 or max_depth < 0:
        raise UsageError("max_bytes and max_depth must be >= 0")
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise JsonBoundsError("too_large", f"the JSON body is {len(raw)} bytes; the limit is "
                              f"{max_bytes}", max_bytes)
    # No more opening brackets in all (strings included) than the bound: no nesting can pass
    # it, and the scan -- which walks every string, many times the decoder's cost on a body of
    # long strings -- is skipped.
    opening = raw.count(b"[") + raw.count(b"{")
    if opening > max_depth and json_nesting_depth(raw, stop_above=max_depth) > max_depth:
        raise JsonBoundsError("too_deep", f"the JSON body nests deeper than {max_depth} levels",
                              max_depth)
    try:
        value = _DECODER.decode(raw)
    except msgspec.DecodeError as exc:
        raise JsonBoundsError("malformed", f"the body is not JSON: {exc}") from None
    if require_object and not isinstance(value, dict):
        raise JsonBoundsError("not_an_object", "the JSON body must be an object")
    return value
