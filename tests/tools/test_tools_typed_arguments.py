"""``Tool.parse_arguments`` decodes JSON text straight into the argument type; the documented
reader path (bytes, mappings, and anything the typed decode refuses) must reach the same verdict
with the same value or message."""

from __future__ import annotations

import datetime
import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import ToolError, ToolResult
from bindloop.tools import define_tool


class Inner(msgspec.Struct):
    x: int
    tags: list[str] = []


class Args(msgspec.Struct):
    n: int
    ratio: float = 0.5
    name: str | None = None
    flags: dict[str, bool] = {}
    ids: dict[int, str] = {}
    inner: Inner | None = None
    at: datetime.datetime | None = None


async def _run(args: Args, ctx: object) -> ToolResult:
    return ToolResult(content=repr(args))


TOOL = define_tool(name="t", description="typed", args=Args, execute=_run)

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5),
                     st.sampled_from(["2020-01-02T03:04:05Z", "not a date", "7"]))
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["x", "tags", "1", "-2", "a", "n"]), inner, max_size=3)),
    max_leaves=8)
_OBJECTS = st.fixed_dictionaries({}, optional={
    "n": st.one_of(st.integers(-5, 5), _JSON), "ratio": _JSON, "name": _JSON, "flags": _JSON,
    "ids": st.one_of(st.dictionaries(st.sampled_from(["1", "22", "x", "-3"]), st.text(max_size=3),
                                     max_size=3), _JSON),
    "inner": st.one_of(st.fixed_dictionaries({"x": st.integers(0, 9)}), _JSON), "at": _JSON,
    "extra": _JSON})
_TEXTS = st.one_of(
    _OBJECTS.map(json.dumps), _JSON.map(json.dumps),
    st.sampled_from(["", "  ", "{}", '{"n": 1}', '{"n": NaN}', '{"n": 1, "ratio": 1e999}',
                     '{"n": 1e400}', "[1]", "null", "{", '{"n": 1, "name": "\\ud800"}',
                     '{"n": 1, "n": 2}', "[" * 2000 + "]" * 2000]),
    st.text(max_size=12))


@settings(max_examples=400)
@given(_TEXTS)
def test_text_decoded_straight_into_the_type_agrees_with_the_reader_path(text: str) -> None:
    fast = TOOL.parse_arguments(text)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        assert isinstance(fast, ToolError) and fast.kind == "validation"
        return
    slow = TOOL.parse_arguments(data)  # bytes always take the documented reader
    assert fast == slow
    mapped: Any = json.loads(text) if not isinstance(slow, ToolError) else None
    if mapped is not None and "\\ud" not in text.lower():  # a lone surrogate cannot be re-encoded
        assert TOOL.parse_arguments(mapped) == slow  # and a decoded mapping reads the same


def test_integer_keys_read_as_json_spells_them_on_every_path() -> None:
    for raw in ('{"n": 1, "ids": {"1": "a"}}', b'{"n": 1, "ids": {"1": "a"}}',
                {"n": 1, "ids": {"1": "a"}}):
        assert TOOL.parse_arguments(raw) == Args(n=1, ids={1: "a"})
    refused = TOOL.parse_arguments('{"n": 1, "ids": {"one": "a"}}')
    assert isinstance(refused, ToolError) and "$.ids" in refused.error


def test_invoke_hands_back_the_body_unawaited_or_the_validation_error() -> None:
    started = TOOL.invoke('{"n": 2}', None)
    assert not isinstance(started, ToolError)
    assert hasattr(started, "__await__")
    started.close()  # type: ignore[union-attr]  # a coroutine, never run
    refused = TOOL.invoke('{"n": "two"}', None)
    assert isinstance(refused, ToolError) and refused.kind == "validation"
