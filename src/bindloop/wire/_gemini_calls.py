"""Gemini function calls: the wire's ``FunctionCall`` and the assembly of a call whose arguments
stream in pieces (Vertex ``streamFunctionCallArguments``: ``partialArgs`` at RFC 9535 paths, with
``willContinue``), shared by the whole-body and streamed paths of :mod:`._gemini`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from ._errors import WireDecodeError

__all__ = ("FunctionCall", "PartialArg", "StreamedCall")


class PartialArg(msgspec.Struct):
    jsonPath: str = ""  # noqa: N815 - wire name
    stringValue: str | None = None  # noqa: N815
    numberValue: int | float | None = None  # noqa: N815
    boolValue: bool | None = None  # noqa: N815
    nullValue: str | None = None  # noqa: N815
    willContinue: bool = False  # noqa: N815


class FunctionCall(msgspec.Struct):
    name: str = ""
    args: Any = None
    id: str | None = None
    partialArgs: list[PartialArg] | None = None  # noqa: N815
    willContinue: bool = False  # noqa: N815



_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]"
                        r'|\["((?:[^"\\]|\\.)*)"\]')
# A streamed argument path deeper than this, or an array index past this, is a defect, not data:
# it would otherwise let one event allocate without bound.
_MAX_PATH_STEPS = 64
_MAX_INDEX = 10_000


def _path_steps(path: str) -> list[str | int]:
    """An RFC 9535 normalized path (``$.a.b[0]``, ``$['a b']``) as its steps."""
    if not path.startswith("$"):
        raise WireDecodeError(f"a streamed function-call argument path must start with $: "
                              f"{path[:80]!r}")
    steps: list[str | int] = []
    at = 1
    while at < len(path):
        m = _PATH_STEP.match(path, at)
        if m is None or len(steps) >= _MAX_PATH_STEPS:
            raise WireDecodeError(f"unsupported function-call argument path {path[:80]!r}")
        name, index, single, double = m.groups()
        if index is not None:
            if int(index) > _MAX_INDEX:
                raise WireDecodeError(f"function-call argument path index too large: {path[:80]!r}")
            steps.append(int(index))
        else:
            raw = name if name is not None else single if single is not None else double
            steps.append(re.sub(r"\\(.)", r"\1", raw or ""))
        at = m.end()
    if not steps:
        raise WireDecodeError("a streamed function-call argument must name a field, not $")
    return steps


class StreamedCall:
    """A function call whose arguments stream in pieces (Vertex ``streamFunctionCallArguments``):
    the call opens with ``willContinue``, each ``partialArgs`` entry sets the value at a JSON path
    (a string value continued by the next entry for the same path is appended to), and the call
    ends with the first part that no longer says ``willContinue``."""

    __slots__ = ("args", "continuing", "id", "index", "name")

    def __init__(self, index: int, call: FunctionCall) -> None:
        self.index = index
        self.name = call.name
        self.id = call.id
        self.args: dict[str, Any] = dict(call.args) if isinstance(call.args, dict) else {}
        self.continuing: str | None = None  # the path whose string value is still arriving

    def apply(self, partial: Sequence[PartialArg]) -> None:
        for arg in partial:
            if arg.stringValue is not None:
                value: Any = arg.stringValue
            elif arg.numberValue is not None:
                value = arg.numberValue
            elif arg.boolValue is not None:
                value = arg.boolValue
            elif arg.nullValue is not None:
                value = None
            else:
                continue  # a path announced before its value: nothing to set yet
            steps = _path_steps(arg.jsonPath)
            if isinstance(value, str) and self.continuing == arg.jsonPath:
                current = _get(self.args, steps)
                value = (current if isinstance(current, str) else "") + value
            _put(self.args, steps, value)
            self.continuing = arg.jsonPath if arg.willContinue and isinstance(value, str) else None


def _get(root: Any, steps: Sequence[str | int]) -> Any:
    node = root
    for step in steps:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
    return node


def _put(root: dict[str, Any], steps: Sequence[str | int], value: Any) -> None:
    node: Any = root
    for step, following in zip(steps, [*steps[1:], None]):
        fresh: Any = value if following is None else [] if isinstance(following, int) else {}
        if isinstance(step, int):
            if not isinstance(node, list):
                raise WireDecodeError("a streamed function-call argument indexes a non-array")
            while len(node) <= step:
                node.append(None)
            if following is None or not isinstance(node[step], (list, dict)):
                node[step] = fresh
            node = node[step]
        else:
            if not isinstance(node, dict):
                raise WireDecodeError("a streamed function-call argument names a field of a "
                                      "non-object")
            if following is None or not isinstance(node.get(step), (list, dict)):
                node[step] = fresh
            node = node[step]
