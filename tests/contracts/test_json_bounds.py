"""decode_json_bounded: size, then depth, then a strict decode; deep nesting is refused without
recursion (the Worker's D1: a 10 KB body of brackets must be a 400, never an aborted isolate)."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import (
    DEFAULT_MAX_JSON_BYTES,
    JsonBoundsError,
    decode_json_bounded,
    json_nesting_depth,
)
from bindloop.errors import UsageError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def depth_of(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


@given(json_values)
def test_the_scan_measures_what_the_value_nests_to_and_the_decode_round_trips(value: object) -> None:
    text = json.dumps(value)
    assert json_nesting_depth(text) == depth_of(value)
    assert json_nesting_depth(text.encode()) == depth_of(value)
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert json_nesting_depth(raw) == depth_of(value)  # the bytes scan, multi-byte text inside
    assert decode_json_bounded(text, max_depth=depth_of(value)) == value
    if depth_of(value):
        with pytest.raises(JsonBoundsError) as info:
            decode_json_bounded(text, max_depth=depth_of(value) - 1)
        assert info.value.reason == "too_deep"


@given(st.text())
def test_brackets_inside_strings_do_not_count(s: str) -> None:
    text = json.dumps({"message": "[[[{{{" + s + "\\\"]]]"})
    assert json_nesting_depth(text) == 1
    assert decode_json_bounded(text) == json.loads(text)


@pytest.mark.parametrize("depth", [5_000, 20_000, 200_000])
def test_deep_nesting_is_refused_before_any_recursion(depth: int) -> None:
    body = '{"message":' + "[" * depth + "]" * depth + "}"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)  # a recursive parser (or scan) would raise RecursionError here
    try:
        with pytest.raises(JsonBoundsError) as info:
            decode_json_bounded(body, max_bytes=len(body))
    finally:
        sys.setrecursionlimit(limit)
    assert (info.value.reason, info.value.limit) == ("too_deep", 64)
    assert "64" in str(info.value) and isinstance(info.value, UsageError)
    assert json_nesting_depth(body) == depth + 1
    assert json_nesting_depth(body, stop_above=10) == 11


def test_size_is_checked_first_in_utf8_bytes() -> None:
    body = json.dumps({"message": "é" * 40_000}, ensure_ascii=False)  # 40k chars, 80k bytes
    with pytest.raises(JsonBoundsError) as info:
        decode_json_bounded(body)
    assert (info.value.reason, info.value.limit) == ("too_large", DEFAULT_MAX_JSON_BYTES)
    assert "é" not in str(info.value)  # the message names sizes, never content
    deep_and_large = "[" * 70_000
    with pytest.raises(JsonBoundsError) as info:
        decode_json_bounded(deep_and_large)
    assert info.value.reason == "too_large"


@pytest.mark.parametrize("text", ["{not json", '{"a": 1} trailing', '{"a": NaN}', "",
                                  '{"a": "unterminated', b'{"a": "\xff"}'])
def test_malformed_text_is_a_typed_refusal(text: str | bytes) -> None:
    with pytest.raises(JsonBoundsError) as info:
        decode_json_bounded(text)
    assert info.value.reason == "malformed" and info.value.limit is None


def test_require_object() -> None:
    assert decode_json_bounded(b'{"a": [1, {"b": null}]}', require_object=True) == {"a": [1, {"b": None}]}
    for text in ("[1]", '"s"', "3"):
        with pytest.raises(JsonBoundsError) as info:
            decode_json_bounded(text, require_object=True)
        assert info.value.reason == "not_an_object"
    with pytest.raises(ValueError):
        decode_json_bounded("{}", max_depth=-1)
