"""Reading the arguments of a tool call the model asked for.

Every outcome is a value, never an exception: whatever happens, the caller must still answer the call
with a tool message carrying its id (a transcript with an unanswered tool call is rejected by the
provider on the next request), so "give up on this call" is not an option the API should offer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

import msgspec

from ..contracts import ToolCall, openai_tool_call_fields

__all__ = (
    "ParsedArguments",
    "ToolCallArguments",
    "UnparseableArguments",
    "UnsupportedToolCallType",
    "parse_tool_call_arguments",
    "read_tool_arguments",
)


class ParsedArguments(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="parsed"):
    """The arguments are a JSON object (``""`` and whitespace read as ``{}``)."""

    arguments: dict[str, Any]


class UnsupportedToolCallType(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind",
                              tag="unsupported_type"):
    """The call is not a function call (e.g. OpenAI's ``"custom"`` tools); ``type`` is what it was."""

    type: str


class UnparseableArguments(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind",
                           tag="unparseable"):
    """The arguments cannot be used. ``detail`` is written for the *model*: put it in the tool
    message, because the model's next turn is the only thing that can correct the arguments."""

    detail: str


ToolCallArguments: TypeAlias = ParsedArguments | UnsupportedToolCallType | UnparseableArguments

_JSON_TYPE_NAMES: Mapping[type, str] = MappingProxyType({
    list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
})


def _refuse_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; strict JSON does not, and a provider re-validating the
    # transcript would reject the call later, far from here.
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # json.loads turns 1e999 into inf: the same non-JSON value as Infinity, arrived by overflow.
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"the number {shown} is too large to be a finite number")
    return value


def _describe(value: object) -> str:
    if value is None:
        return "null"
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


# msgspec accepts a strict subset of what the stdlib reader below accepts (it refuses NaN, numbers
# out of range, lone-surrogate escapes, huge integers and deep nesting), with equal values: the common case costs
# ~0.1 us instead of ~1.4 us, and anything it refuses goes through the stdlib path, whose verdict and
# message stay the documented ones.
_FAST_DECODE = msgspec.json.Decoder().decode


def _parse_text(text: str) -> ParsedArguments | UnparseableArguments:
    try:
        fast = _FAST_DECODE(text)
    except (msgspec.DecodeError, RecursionError):
        pass
    except UnicodeEncodeError as exc:
        # A lone surrogate in the text itself (not a JSON escape): no wire can carry it as UTF-8
        # and no store can keep it, so it is a verdict for the model, not a raise.
        return UnparseableArguments(
            detail=(f"the arguments are not valid Unicode text (a lone surrogate at character "
                    f"{exc.start}); send the arguments as one JSON object"))
    else:
        if type(fast) is dict:
            return ParsedArguments(arguments=fast)
    return _parse_text_stdlib(text)


def _parse_text_stdlib(text: str) -> ParsedArguments | UnparseableArguments:
    if not text.strip():
        # Providers send "" for a zero-argument call as readily as "{}".
        return ParsedArguments(arguments={})
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        return UnparseableArguments(
            detail=(f"the arguments are not valid JSON ({exc.msg} at line {exc.lineno} column "
                    f"{exc.colno}); send the arguments as one JSON object")
        )
    except (ValueError, RecursionError) as exc:
        return UnparseableArguments(
            detail=f"the arguments are not valid JSON ({exc}); send the arguments as one JSON object"
        )
    if not isinstance(value, dict):
        # A tool takes a named parameter bag; an array or scalar would fail inside the tool, after
        # whatever it did before validating, instead of failing clearly here.
        return UnparseableArguments(
            detail=(f"the arguments must be a JSON object of named parameters, got {_describe(value)}")
        )
    return ParsedArguments(arguments=value)


def parse_tool_call_arguments(call: ToolCall | Mapping[str, Any] | str) -> ToolCallArguments:
    """Read a tool call's arguments into a parameter dict, or say why that is impossible. The one
    reader of argument text: ``define_tool``'s dispatch validates what this returns.

    ``call`` is a canonical :class:`~bindloop.contracts.ToolCall`, an OpenAI-shaped wire dict
    (``{"id", "type", "function": {"name", "arguments"}}``, or the same fields flat — read by
    :func:`~bindloop.contracts.openai_tool_call_fields`, the one reader of that dict), or the raw
    arguments text itself. Returns :class:`ParsedArguments` for a
    JSON object (empty or whitespace-only text, and a missing ``arguments``, mean ``{}``; a dict that a
    provider already decoded is taken as is), :class:`UnsupportedToolCallType` for a non-function
    call, and :class:`UnparseableArguments` otherwise — including valid JSON that is not an object
    (``null``, ``[]``, ``42``), a number that is not finite (``NaN``, ``Infinity``, or ``1e999``,
    which overflows to infinity) and text holding a lone surrogate character (``"\\ud800"`` as a
    Python str, which is not Unicode text any wire can carry). Never raises.
    """
    if isinstance(call, ToolCall):
        return _parse_text(call.arguments)
    if isinstance(call, str):
        return _parse_text(call)
    if not isinstance(call, Mapping):
        return UnparseableArguments(detail=f"the tool call is not an object (got {_describe(call)})")
    kind = call.get("type", "function")
    if kind != "function":
        return UnsupportedToolCallType(type=kind if isinstance(kind, str) else repr(kind))
    _, _, name, raw = openai_tool_call_fields(call)
    if name is None and raw is None and not isinstance(call.get("function"), Mapping):
        return UnparseableArguments(detail="the tool call has no function name and arguments")
    return _read(raw)


def read_tool_arguments(
    raw: str | bytes | Mapping[str, Any] | None,
) -> ParsedArguments | UnparseableArguments:
    """Read the arguments a dispatcher hands a tool — the raw JSON text (``bytes`` as UTF-8),
    ``None`` or blank text for none, or an object a provider already decoded — with the rules of
    :func:`parse_tool_call_arguments`. An already-decoded object must hold only JSON values (it is
    copied through JSON, so the result shares nothing with it). Never raises."""
    return _read(raw)


def _read(raw: object) -> ParsedArguments | UnparseableArguments:
    if raw is None:
        return ParsedArguments(arguments={})
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return UnparseableArguments(detail=f"the arguments are not UTF-8 text ({exc.reason})")
    if isinstance(raw, str):
        return _parse_text(raw)
    if isinstance(raw, Mapping):
        try:
            copied = _FAST_DECODE(msgspec.json.encode(raw))
        except (TypeError, ValueError, OverflowError, msgspec.DecodeError) as exc:
            return UnparseableArguments(detail=f"the arguments are not JSON ({exc})")
        return ParsedArguments(arguments=copied)
    return UnparseableArguments(
        detail=f"the arguments must be a JSON object of named parameters, got {_describe(raw)}"
    )
