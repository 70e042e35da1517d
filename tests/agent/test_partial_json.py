"""parse_partial_json / PartialJsonParser: prefix-consistent values, json.loads on the whole."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent.partial_json import PartialJson, PartialJsonParser, parse_partial_json
from bindloop.errors import UsageError


@pytest.mark.parametrize(("text", "value", "state"), [
    ("", None, "partial"),
    ("   ", None, "partial"),
    ("{", {}, "partial"),
    ('{"a', {}, "partial"),  # a key is shown only once closed
    ('{"a"', {}, "partial"),
    ('{"a":', {}, "partial"),
    ('{"a": "he', {"a": "he"}, "partial"),
    ('{"a": 1', {}, "partial"),  # 1 may still become 12
    ('{"a": 1,', {"a": 1}, "partial"),
    ('{"a": [1, 2', {"a": [1]}, "partial"),
    ('{"a": [1, 2]', {"a": [1, 2]}, "partial"),
    ('{"a": [1, 2]}', {"a": [1, 2]}, "complete"),
    ("[tr", [True], "partial"),
    ("[f", [False], "partial"),
    ('{"x": n', {"x": None}, "partial"),
    ('"ab\\u00', "ab", "partial"),  # a truncated escape is held back
    ('"ab\\', "ab", "partial"),
    ('"\\ud83d', "", "partial"),  # a high surrogate waits for its pair
    ('"\\ud83d\\ude00"', "\U0001F600", "complete"),
    ("12", 12, "complete"),
    ("-", None, "partial"),
    ("1.", None, "partial"),
    ("1.5e", None, "partial"),
    ("true", True, "complete"),
    ("  null  ", None, "complete"),
    ('[{"a": {"b": [{}]}}]', [{"a": {"b": [{}]}}], "complete"),
])
def test_examples(text: str, value: Any, state: str) -> None:
    result = parse_partial_json(text)
    assert result == PartialJson(value=value, state=state)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    "[1,]", '{"a":1,}', "{a: 1}", "[01]", "[1 2]", "[NaN]", "Infinity", "[-]", "tx", "nul1",
    '{"a" 1}', '{"a": 1]', "[1}", "{} {}", "1 2", '"\x01"', '"\\x"', '"\\u12G4"', "'a'", "}",
    "\ufeff{}", "[1.e5]", "[.5]", "[1.5e+]",
])
def test_invalid_documents_are_invalid_and_say_where(text: str) -> None:
    result = parse_partial_json(text)
    assert result.state == "invalid"
    assert result.error is not None and "offset" in result.error
    with pytest.raises(ValueError):  # strict JSON: no NaN / Infinity either
        json.loads(text, parse_constant=_refuse)


def _refuse(name: str) -> Any:
    raise ValueError(name)


def test_invalid_keeps_what_was_read_before_the_error() -> None:
    assert parse_partial_json('{"a": 1, "b": [2, 3], "c" 4}').value == {"a": 1, "b": [2, 3]}


def test_lone_surrogates_match_json_loads() -> None:
    for text in ['"\\ud83d"', '"\\ud83dx"', '"\\ude00"', '"\\ud83d\\ud83d\\ude00"']:
        assert parse_partial_json(text).value == json.loads(text)


def test_duplicate_keys_last_wins_like_json_loads() -> None:
    text = '{"a": 1, "b": 2, "a": "x"}'
    result = parse_partial_json(text)
    assert result.value == json.loads(text)
    assert list(result.value) == list(json.loads(text))


def test_numbers_convert_like_json_loads() -> None:
    text = "[0, -0, 1e400, -1.5E-3, 12345678901234567890123, 3.0]"
    result = parse_partial_json(text)
    assert result.value == json.loads(text)
    assert [type(v) for v in result.value] == [type(v) for v in json.loads(text)]
    assert math.isinf(result.value[2])


def test_deep_nesting_does_not_recurse() -> None:
    text = "[" * 50_000 + "]" * 50_000
    assert parse_partial_json(text).state == "complete"


def test_parser_feeds_chunks_and_ignores_input_after_invalid() -> None:
    parser = PartialJsonParser()
    assert parser.feed('{"items": [') == PartialJson(value={"items": []}, state="partial")
    assert parser.feed('{"n": 1}, {"n"').value == {"items": [{"n": 1}, {}]}
    assert parser.feed(": 2}]}").state == "complete"
    assert parser.feed(" x").state == "invalid"
    assert parser.feed("]").state == "invalid"
    assert parser.result().value == {"items": [{"n": 1}, {"n": 2}]}


def test_parser_value_is_live() -> None:
    parser = PartialJsonParser()
    first = parser.feed("[1,").value
    parser.feed("2,")
    assert first == [1, 2]  # documented: the containers are the parser's own


def test_feed_rejects_bytes() -> None:
    with pytest.raises(UsageError):
        PartialJsonParser().feed(b"{}")  # type: ignore[arg-type]


# -- properties ------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
documents = st.tuples(
    st.one_of(st.lists(json_values, max_size=4), st.dictionaries(st.text(max_size=6), json_values,
                                                                 max_size=4)),
    st.sampled_from([None, 0, 2]),
    st.booleans(),
).map(lambda t: json.dumps(t[0], indent=t[1], ensure_ascii=t[2]))


def consistent(partial: Any, full: Any) -> bool:
    """``partial`` can only be extended into ``full``: nothing in it will be taken back."""
    if isinstance(full, dict):
        return isinstance(partial, dict) and all(k in full and consistent(v, full[k])
                                                 for k, v in partial.items())
    if isinstance(full, list):
        return (isinstance(partial, list) and len(partial) <= len(full)
                and all(p == f and type(p) is type(f) for p, f in zip(partial[:-1], full))
                and (not partial or consistent(partial[-1], full[len(partial) - 1])))
    if isinstance(full, str):
        return isinstance(partial, str) and full.startswith(partial)
    return type(partial) is type(full) and partial == full


@settings(max_examples=120)
@given(documents, st.data())
def test_every_prefix_is_prefix_consistent_and_the_whole_equals_json_loads(doc: str,
                                                                          data: st.DataObject) -> None:
    full = json.loads(doc)
    whole = parse_partial_json(doc)
    assert whole.state == "complete" and whole.value == full and consistent(whole.value, full)
    cuts = data.draw(st.lists(st.integers(0, len(doc)), min_size=1, max_size=12))
    for cut in cuts:
        result = parse_partial_json(doc[:cut])
        assert result.state in ("partial", "complete"), (doc[:cut], result)
        if result.value is not None or doc[:cut].strip():
            assert consistent(result.value, full), (doc[:cut], result.value)


@settings(max_examples=120)
@given(documents, st.lists(st.integers(1, 9), min_size=1, max_size=60))
def test_chunked_feeding_matches_one_shot_parsing_of_each_prefix(doc: str, sizes: list[int]) -> None:
    parser = PartialJsonParser()
    position, k = 0, 0
    while position < len(doc):
        start, position = position, min(len(doc), position + sizes[k % len(sizes)])
        k += 1
        fed = parser.feed(doc[start:position])
        fed_copy = PartialJson(value=copy.deepcopy(fed.value), state=fed.state)
        assert fed_copy == parse_partial_json(doc[:position])
    assert parser.result().value == json.loads(doc)


@given(documents, st.integers(0, 10_000), st.text(min_size=1, max_size=3))
def test_garbage_never_raises(doc: str, at: int, junk: str) -> None:
    at %= len(doc) + 1
    result = parse_partial_json(doc[:at] + junk + doc[at:])
    assert result.state in ("partial", "complete", "invalid")
    if result.state == "complete":
        assert result.value == json.loads(doc[:at] + junk + doc[at:])


@given(st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                 st.booleans(), st.none(), st.text(max_size=10)))
def test_top_level_scalars_equal_json_loads(value: Any) -> None:
    doc = json.dumps(value)
    assert parse_partial_json(doc) == PartialJson(value=json.loads(doc), state="complete")
