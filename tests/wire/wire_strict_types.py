"""The official SDKs' request types made strict for pydantic: every ``TypedDict`` rebuilt with
``extra="forbid"`` and ``strict=True``, and every ``Iterable`` / ``Sequence`` / ``SequenceNotStr``
turned into ``list`` (pydantic validates an ``Iterable`` lazily, so without this nothing inside a
message list is checked at all). What the strict adapter accepts is what the published types
allow: no unknown key at any depth, no missing required key, no value outside a ``Literal``, no
string where an int goes."""

from __future__ import annotations

import collections.abc as cabc
import functools
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter
from typing_extensions import NotRequired, Required, TypedDict, is_typeddict

_STRICT = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
# What a response model (never a JSON request's shape) is replaced by: a value nothing matches.
_NOTHING = typing.Literal["<a response model: never in a request>"]
_SEQUENCES = (list, cabc.Iterable, cabc.Sequence, cabc.Collection, typing.List)


class _Rebuild:
    def __init__(self) -> None:
        self.done: dict[Any, Any] = {}
        self.busy: set[Any] = set()

    def __call__(self, tp: Any) -> Any:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is Required:
            return Required[self(args[0])]
        if origin is NotRequired:
            return NotRequired[self(args[0])]
        if origin is typing.Annotated:
            return self(args[0])  # the SDK's PropertyInfo (a discriminator hint) is not pydantic's
        if is_typeddict(tp):
            return self._typeddict(tp)
        if _is_model(tp):
            return _NOTHING
        if getattr(origin, "__name__", None) == "SequenceNotStr" or \
                getattr(tp, "__name__", None) == "SequenceNotStr":
            return list[self(args[0]) if args else Any]  # type: ignore[misc]
        if origin in (typing.Union, types.UnionType):
            # A response model the SDK also accepts (anthropic's ContentBlock) is a pydantic
            # model that allows extra keys; a JSON body can only hold the request TypedDicts.
            kept = [a for a in args if not _is_model(a)]
            return typing.Union[tuple(self(a) for a in kept)] if kept else _NOTHING
        if origin in _SEQUENCES:
            return list[self(args[0]) if args else Any]  # type: ignore[misc]
        if origin in (dict, cabc.Mapping, typing.Dict):
            return dict[self(args[0]), self(args[1])] if args else dict[str, Any]  # type: ignore[misc]
        return tp

    def _typeddict(self, tp: Any) -> Any:
        if tp in self.done:
            return self.done[tp]
        if tp in self.busy:
            return dict[str, Any]  # a recursive type: checked one level down only
        self.busy.add(tp)
        hints = typing.get_type_hints(tp, include_extras=True)
        required = set(getattr(tp, "__required_keys__", ()))
        fields: dict[str, Any] = {}
        for key, hint in hints.items():
            rebuilt = self(hint)
            if typing.get_origin(rebuilt) not in (Required, NotRequired):
                rebuilt = Required[rebuilt] if key in required else NotRequired[rebuilt]
            fields[key] = rebuilt
        strict = TypedDict(tp.__name__, fields)  # type: ignore[operator]
        strict.__pydantic_config__ = _STRICT  # type: ignore[attr-defined]
        self.busy.discard(tp)
        self.done[tp] = strict
        return strict


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


@functools.lru_cache(maxsize=None)
def strict_adapter(tp: Any) -> TypeAdapter[Any]:
    """A pydantic ``TypeAdapter`` validating JSON values against ``tp`` made strict."""
    return TypeAdapter(_Rebuild()(tp))
