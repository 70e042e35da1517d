"""RFC 8785 JSON Canonicalization Scheme (JCS).

Equal JSON values give identical text: object members sorted by the UTF-16 code units of their names,
no whitespace, strings with minimal escaping, numbers as ECMAScript ``Number.prototype.toString``
prints an IEEE-754 double. Hashing that text is how a receipt recognises "the same call".

It refuses, with :class:`CanonicalJsonError`, every value it cannot represent faithfully: NaN and the
infinities, integers that a double cannot hold exactly, strings with lone surrogates, non-``str``
keys, sets, bytes, arbitrary objects, and cycles. A silent coercion here would make two different
calls hash alike and skip a write that never happened.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ._errors import CanonicalJsonError

__all__ = ("canonical_json", "canonical_json_bytes", "format_number")


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int key past the digit limit
        return "(unprintable)"
    return text if len(text) <= 80 else text[:77] + "..."


def _int_text(value: int) -> str:
    # str() of an int past CPython's digit limit raises ValueError: describe it by size instead.
    try:
        return str(value)
    except ValueError:
        return f"of about {int(value.bit_length() * 0.30103)} digits"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_EXACT = 2**53


def format_number(value: float | int) -> str:
    """An IEEE-754 double as ECMAScript ``Number.prototype.toString`` prints it (RFC 8785 §3.2.2.3).

    ``int`` values are accepted when a double holds them exactly. Raises :class:`CanonicalJsonError`
    for NaN, infinities, and inexact integers.
    """
    try:
        return _number(value)
    except _Unrepresentable as exc:
        raise CanonicalJsonError(str(exc), "") from None


class _Unrepresentable(Exception):
    pass


def _number(value: object) -> str:
    if isinstance(value, bool):
        raise _Unrepresentable("a bool is not a number")
    if isinstance(value, int):
        if -_MAX_EXACT <= value <= _MAX_EXACT:
            return str(int(value))  # exact, and below 1e21 ECMAScript prints integers plainly
        try:
            as_float = float(value)
        except OverflowError:
            raise _Unrepresentable(f"integer {_int_text(value)} exceeds the double range") from None
        if int(as_float) != value:
            raise _Unrepresentable(
                f"integer {_int_text(value)} is not exactly representable as an IEEE-754 double"
            )
        return _format_double(as_float)
    if not isinstance(value, float):
        raise _Unrepresentable(f"{type(value).__name__} is not a number")
    if not math.isfinite(value):
        raise _Unrepresentable(f"{value!r} has no JSON representation")
    return _format_double(value)


def _format_double(x: float) -> str:
    if x == 0.0:
        return "0"  # also -0.0: ECMAScript prints it without the sign
    if x < 0.0:
        return "-" + _format_double(-x)
    # repr() gives the shortest digit string that round-trips, nearest to x on ties: the same
    # digits ECMAScript's algorithm selects. Only the layout differs.
    text = repr(x)
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + exponent  # the decimal point sits after `point` digits of `digits`
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k, n = len(s), point
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + s
    e = n - 1
    sign = "+" if e >= 0 else "-"
    head = s if k == 1 else s[0] + "." + s[1:]
    return f"{head}e{sign}{abs(e)}"


def _utf16_key(name: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like sequences of UTF-16 code units.
    return name.encode("utf-16-be", "surrogatepass")


def _string(value: str, path: str) -> str:
    if not value.isascii() and _LONE_SURROGATE.search(value) is not None:
        raise CanonicalJsonError("string holds a lone surrogate (not valid Unicode)", path)
    # encode_basestring escapes exactly what JCS escapes: '"', '\\', and U+0000-U+001F, using the
    # two-character forms for \b \t \n \f \r and lower-case \u00xx otherwise. All else is literal.
    from json.encoder import encode_basestring  # on first use: see canonical_json

    return encode_basestring(value)


def canonical_json(value: object) -> str:
    """The RFC 8785 canonical JSON text of ``value``.

    Accepted: ``None``, ``bool``, ``int`` (exact as a double), finite ``float``, ``str``, ``list`` /
    ``tuple`` (arrays), and mappings with ``str`` keys (objects). Everything else raises
    :class:`CanonicalJsonError`. Nesting depth is bounded only by memory: the walk is iterative.
    """
    # Imported here, not at module level: every loop imports bindloop.run, few runs canonicalise,
    # and the json package is ~1 ms of import.
    from json.encoder import encode_basestring

    out: list[str] = []
    append = out.append
    # Pending work, popped from the end: a literal to write (str), a container exit marker, or a
    # (value, where) pair. `where` is a cheap (parent_where, key) chain, turned into a path only
    # when an error needs one.
    stack: list[Any] = [(value, None)]
    pop = stack.pop
    push = stack.append
    active: set[int] = set()  # ids of containers on the current path, for cycle detection
    while stack:
        item = pop()
        if type(item) is str:
            append(item)
            continue
        if type(item) is _ExitMarker:
            active.discard(item.ident)
            continue
        node, where = item
        kind = type(node)
        if kind is str:
            if not node.isascii() and _LONE_SURROGATE.search(node) is not None:
                raise CanonicalJsonError("string holds a lone surrogate (not valid Unicode)",
                                         _path(where))
            append(encode_basestring(node))
        elif kind is int and -_MAX_EXACT <= node <= _MAX_EXACT:
            append(str(node))
        elif node is None:
            append("null")
        elif node is True:
            append("true")
        elif node is False:
            append("false")
        elif isinstance(node, (int, float)):
            try:
                append(_number(node))
            except _Unrepresentable as exc:
                raise CanonicalJsonError(str(exc), _path(where)) from None
        elif isinstance(node, str):
            append(_string(node, _path(where)))
        elif isinstance(node, (list, tuple)):
            ident = id(node)
            if ident in active:
                raise CanonicalJsonError("cycle", _path(where))
            active.add(ident)
            push(_ExitMarker(ident))
            push("]")
            for i in range(len(node) - 1, -1, -1):
                push((node[i], (where, i)))
                if i:
                    push(",")
            append("[")
        elif isinstance(node, Mapping):
            ident = id(node)
            if ident in active:
                raise CanonicalJsonError("cycle", _path(where))
            for key in node:
                if type(key) is not str and not isinstance(key, str):
                    raise CanonicalJsonError(
                        f"object key {_short_repr(key)} is a {type(key).__name__}, not a str", _path(where)
                    )
            keys = sorted(node) if all(k.isascii() for k in node) else sorted(node, key=_utf16_key)
            active.add(ident)
            push(_ExitMarker(ident))
            push("}")
            for i in range(len(keys) - 1, -1, -1):
                key = keys[i]
                child = (where, key)
                push((node[key], child))
                if not key.isascii() and _LONE_SURROGATE.search(key) is not None:
                    raise CanonicalJsonError("key holds a lone surrogate (not valid Unicode)",
                                             _path(child))
                push(encode_basestring(key) + ":")
                if i:
                    push(",")
            append("{")
        else:
            raise CanonicalJsonError(
                f"{type(node).__name__} has no faithful JSON representation", _path(where)
            )
    return "".join(out)


def _path(where: Any) -> str:
    parts: list[str] = []
    while where is not None:
        where, key = where
        parts.append(str(key).replace("~", "~0").replace("/", "~1"))
    return "".join("/" + p for p in reversed(parts))


def canonical_json_bytes(value: object) -> bytes:
    """:func:`canonical_json` encoded as UTF-8 (what RFC 8785 hashes)."""
    return canonical_json(value).encode("utf-8")


class _ExitMarker:
    """Pushed after a container's children: popping it takes the container off the active path."""

    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        self.ident = ident
