"""parse_tool_call_arguments: every outcome is a value the caller can answer the call with."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.tools import (
    ParsedArguments,
    UnparseableArguments,
    UnsupportedToolCallType,
    parse_tool_call_arguments,
)
from bindloop.contracts import ToolCall


def call(arguments: str) -> ToolCall:
    return ToolCall(id="call_1", name="read_file", arguments=arguments)


@pytest.mark.parametrize("text", ["", " ", "\n\t  ", "{}", " {} "])
def test_empty_and_whitespace_mean_no_arguments(text: str) -> None:
    assert parse_tool_call_arguments(call(text)) == ParsedArguments(arguments={})


def test_object_is_parsed() -> None:
    read = parse_tool_call_arguments(call('{"path": "a.txt", "lines": [1, 2], "deep": {"x": null}}'))
    assert read == ParsedArguments(arguments={"path": "a.txt", "lines": [1, 2], "deep": {"x": None}})


@pytest.mark.parametrize(("text", "described"), [
    ("null", "null"), ("[]", "an array"), ("[1, 2]", "an array"), ("42", "a number"),
    ("4.5", "a number"), ('"x"', "a string"), ("true", "a boolean"),
])
def test_valid_json_that_is_not_an_object_is_refused(text: str, described: str) -> None:
    read = parse_tool_call_arguments(call(text))
    assert isinstance(read, UnparseableArguments)
    assert described in read.detail
    assert "object" in read.detail


@pytest.mark.parametrize("text", ['{"a": 1', "{'a': 1}", '{"a": 1,}', "{a: 1}", '{"a": NaN}',
                                  '{"a": Infinity}', '{"a": 1} trailing', "nope"])
def test_malformed_json_is_unparseable_with_a_detail_for_the_model(text: str) -> None:
    read = parse_tool_call_arguments(call(text))
    assert isinstance(read, UnparseableArguments)
    assert "not valid JSON" in read.detail
    assert "JSON object" in read.detail  # tells the model what to send instead


def test_json_error_detail_locates_the_problem() -> None:
    read = parse_tool_call_arguments(call('{\n  "a": 1\n  "b": 2\n}'))
    assert isinstance(read, UnparseableArguments)
    assert "line 3" in read.detail


def test_deeply_nested_arguments_do_not_raise() -> None:
    read = parse_tool_call_arguments(call('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"))
    assert isinstance(read, (UnparseableArguments, ParsedArguments))


def test_openai_wire_dict_function_call() -> None:
    wire = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}
    assert parse_tool_call_arguments(wire) == ParsedArguments(arguments={"q": 1})


def test_openai_wire_dict_without_type_is_a_function_call() -> None:
    wire = {"id": "c", "function": {"name": "f", "arguments": ""}}
    assert parse_tool_call_arguments(wire) == ParsedArguments(arguments={})


def test_non_function_call_type_is_unsupported() -> None:
    wire = {"id": "c", "type": "custom", "custom": {"name": "f", "input": "raw"}}
    assert parse_tool_call_arguments(wire) == UnsupportedToolCallType(type="custom")


@pytest.mark.parametrize(("wire", "expected"), [
    ({"id": "c", "type": "function"}, UnparseableArguments),
    ({"id": "c", "type": "function", "function": "f"}, UnparseableArguments),
    ({"id": "c", "function": {"name": "f", "arguments": 12}}, UnparseableArguments),
    ({"id": "c", "function": {"name": "f", "arguments": None}}, ParsedArguments),
    ({"id": "c", "function": {"name": "f", "arguments": {"already": "decoded"}}}, ParsedArguments),
])
def test_wire_dict_shapes(wire: dict[str, Any], expected: type) -> None:
    assert isinstance(parse_tool_call_arguments(wire), expected)


def test_a_value_that_is_not_a_call_is_answered_not_raised() -> None:
    read = parse_tool_call_arguments(["not", "a", "call"])  # type: ignore[arg-type]
    assert isinstance(read, UnparseableArguments)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=15,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_any_json_object_round_trips(obj: dict[str, Any]) -> None:
    assert parse_tool_call_arguments(call(json.dumps(obj))) == ParsedArguments(arguments=obj)


@given(st.text(max_size=40))
def test_never_raises_and_parsed_means_a_dict(text: str) -> None:
    read = parse_tool_call_arguments(call(text))
    if isinstance(read, ParsedArguments):
        assert isinstance(read.arguments, dict)
    else:
        assert isinstance(read, UnparseableArguments) and read.detail


# ---- the msgspec fast path agrees with the stdlib reader ------------------------------------------

from hypothesis import given, strategies as st  # noqa: E402

from bindloop.tools._arguments import _parse_text, _parse_text_stdlib  # noqa: E402

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


def _text_forms() -> st.SearchStrategy[str]:
    import json as _json
    dumped = _json_values.map(lambda v: _json.dumps(v, allow_nan=True))
    return dumped | dumped.map(lambda t: t[: len(t) // 2]) | st.text(max_size=30) | st.sampled_from(
        ['{"a": 1e999}', '{"a": -1e400}', '{"a": NaN}', '{"a": "\\ud800"}', '{"a": 1, "a": 2}',
         '{"a": ' + "9" * 5000 + "}", '{"a": 1}  ', ' \n', '{"a":"\x01"}', '{"a": 0.1e-400}'])


@given(_text_forms())
def test_fast_path_gives_the_stdlib_verdict(text: str) -> None:
    assert _parse_text(text) == _parse_text_stdlib(text)


# ---- lone surrogates: a verdict, never a raise (issue 23, class 6) --------------------------------

@pytest.mark.parametrize("text", ["\ud800", "\udfff", '{"a": "x\ud800"}', "{\ud83d}", '{"\udc00": 1}'])
def test_a_lone_surrogate_in_the_text_is_unparseable_not_a_raise(text: str) -> None:
    for form in (call(text), text, {"type": "function", "function": {"arguments": text}}):
        read = parse_tool_call_arguments(form)
        assert isinstance(read, UnparseableArguments)
        assert "lone surrogate" in read.detail
        read.detail.encode("utf-8")  # the detail itself is sendable to the model


_with_surrogates = st.text(alphabet=st.characters(categories=["Cs", "L", "P"]), max_size=30)


@given(_with_surrogates | st.dictionaries(_with_surrogates, _with_surrogates, max_size=3).map(
    lambda d: json.dumps(d, ensure_ascii=False)))
def test_any_text_with_surrogates_gets_a_verdict(text: str) -> None:
    read = parse_tool_call_arguments(call(text))
    assert isinstance(read, (ParsedArguments, UnparseableArguments))
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        assert isinstance(read, UnparseableArguments)
