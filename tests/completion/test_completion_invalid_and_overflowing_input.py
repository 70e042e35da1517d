"""Partial JSON that can never become valid is refused at once, a long open string stays linear to
read, and tool arguments that overflow to infinity are refused."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.tools import ParsedArguments, UnparseableArguments, parse_tool_call_arguments
from bindloop.agent.partial_json import PartialJson, PartialJsonParser, parse_partial_json
from bindloop.contracts import ToolCall

# -- numbers no continuation can repair -------------------------------------------------------


@pytest.mark.parametrize("text", [
    "01", "-01", "00", "[01", '{"a":01', '{"a": 01', "1.2.3", "[1.2.3", "1.2.", "1e5e",
    "1e+-", "--1", "1-", "[0x", "1.5e3.", "-.5", "[1e5.2",
])
def test_a_number_no_continuation_can_repair_is_invalid_at_once(text: str) -> None:
    result = parse_partial_json(text)
    assert result.state == "invalid", result
    assert result.error is not None and "offset" in result.error


@pytest.mark.parametrize("text", ["0", "-0", "0.", "-", "1.", "1.5e", "1.5e+", "1e-", "[0.",
                                  '{"a":0', '{"a":-0.0e', "123", "[10"])
def test_number_prefixes_that_may_still_grow_are_not_invalid(text: str) -> None:
    assert parse_partial_json(text).state in ("partial", "complete")


def test_invalid_number_is_detected_however_the_number_is_chunked() -> None:
    parser = PartialJsonParser()
    for chunk in ('{"a": ', "1", ".", "2", "."):
        result = parser.feed(chunk)
    assert result.state == "invalid"
    assert parser.feed("3}").state == "invalid"
    assert result.value == {}


# -- the open string: value materialised on read, snapshot for a root string -------------------


def test_feed_result_of_an_open_string_reads_the_text_so_far() -> None:
    parser = PartialJsonParser()
    first = parser.feed('{"answer": "ab')
    assert first.value == {"answer": "ab"}
    second = parser.feed("cd")
    assert second.value == {"answer": "abcd"}
    assert parser.feed('"}') == PartialJson(value={"answer": "abcd"}, state="complete")


def test_a_root_string_result_is_a_snapshot() -> None:
    parser = PartialJsonParser()
    early = parser.feed('"ab')
    late = parser.feed("cd")
    assert late.value == "abcd"
    assert early.value == "ab"  # read after the later feed: still the prefix it stood for
    done = parser.feed('e"')
    assert (early.value, done.value, done.state) == ("ab", "abcde", "complete")


def test_invalid_inside_a_string_keeps_the_text_read_before_the_error() -> None:
    assert parse_partial_json('{"a": "xyz\x01').value == {"a": "xyz"}
    assert parse_partial_json('"xyz\\q').value == "xyz"


def test_partial_json_equality_and_repr() -> None:
    parser = PartialJsonParser()
    result = parser.feed('["a')
    assert result == PartialJson(value=["a"], state="partial")
    assert result != PartialJson(value=["a"], state="complete")
    assert result != object()
    assert "partial" in repr(result) and "'a'" in repr(result)


def test_many_small_fragments_join_to_the_exact_string() -> None:
    text = "".join(chr(0x41 + i % 26) + ("\\n" if i % 97 == 0 else "") for i in range(20_000))
    parser = PartialJsonParser()
    doc = json.dumps({"s": None})[:-5] + '"' + text + '"}'
    for k, i in enumerate(range(0, len(doc), 3)):
        fed = parser.feed(doc[i:i + 3])
        if k % 997 == 0:  # reads between compactions see exactly the one-shot prefix
            assert fed == parse_partial_json(doc[:i + 3])
    assert parser.result() == PartialJson(value=json.loads(doc), state="complete")


@settings(max_examples=120, deadline=None)
@given(st.text(max_size=60), st.lists(st.integers(1, 7), min_size=1, max_size=30),
       st.sets(st.integers(0, 80), max_size=10))
def test_reading_value_at_any_feed_matches_one_shot_parsing(text: str, sizes: list[int],
                                                            reads: set[int]) -> None:
    doc = json.dumps({"k": [text, {"inner": text}], "t": text})
    parser = PartialJsonParser()
    position, k = 0, 0
    while position < len(doc):
        start, position = position, min(len(doc), position + sizes[k % len(sizes)])
        fed = parser.feed(doc[start:position])
        if k in reads or position == len(doc):
            assert PartialJson(value=copy.deepcopy(fed.value), state=fed.state) == \
                parse_partial_json(doc[:position])
        k += 1
    assert parser.result().value == json.loads(doc)


# -- tool-call arguments that overflow ------------------------------------------------------------


def _call(arguments: str) -> ToolCall:
    return ToolCall(id="c", name="f", arguments=arguments)


@pytest.mark.parametrize("text", ['{"x": 1e999}', '{"x": -1e999}', '{"x": [1.5E+400]}',
                                  '{"x": {"y": 123456789e999}}'])
def test_numbers_that_overflow_to_infinity_are_refused(text: str) -> None:
    read = parse_tool_call_arguments(_call(text))
    assert isinstance(read, UnparseableArguments)
    assert "JSON object" in read.detail and "finite" in read.detail


@pytest.mark.parametrize(("text", "value"), [
    ('{"x": 1e308}', 1e308), ('{"x": 1e-999}', 0.0), ('{"x": 12345678901234567890}',
                                                      12345678901234567890),
])
def test_large_but_finite_numbers_still_parse(text: str, value: Any) -> None:
    assert parse_tool_call_arguments(_call(text)) == ParsedArguments(arguments={"x": value})
