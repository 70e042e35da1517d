"""ToolCallAccumulator: merge by index, late ids, concatenated names, index order at the end."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.completion import (
    ToolCallAccumulator,
    ToolCallChunk,
    ToolCallDeltaError,
    create_tool_call_accumulator,
)
from bindloop.contracts import ToolCall
from bindloop.errors import ProviderError


def wire(index: Any, *, id: str | None = None, name: str | None = None,
         arguments: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    delta: dict[str, Any] = {"index": index, "type": "function", "function": function}
    if id is not None:
        delta["id"] = id
    return delta


def test_fresh_accumulator_is_empty() -> None:
    acc = create_tool_call_accumulator()
    assert acc.is_empty and len(acc) == 0
    assert acc.assembled() == ()
    acc.observe(None)
    acc.observe([])
    assert acc.is_empty


def test_openai_shaped_deltas_assemble() -> None:
    acc = create_tool_call_accumulator()
    acc.observe([wire(0, id="call_a", name="read_file", arguments="")])
    acc.observe([wire(0, arguments='{"pa')])
    acc.observe([wire(0, arguments='th": "x"}')])
    assert not acc.is_empty
    assert acc.assembled() == (ToolCall(id="call_a", name="read_file", arguments='{"path": "x"}'),)


def test_index_not_arrival_order() -> None:
    acc = create_tool_call_accumulator()
    acc.observe(wire(1, id="second", name="b", arguments="{}"))
    acc.observe(wire(0, id="first", name="a", arguments="{}"))
    assert [c.id for c in acc.assembled()] == ["first", "second"]


def test_name_fragments_are_concatenated_not_assigned() -> None:
    acc = create_tool_call_accumulator()
    acc.observe(ToolCallChunk(index=0, id="c", name="read"))
    acc.observe(ToolCallChunk(index=0, name="_file"))
    assert acc.assembled()[0].name == "read_file"


def test_late_id_is_taken_and_repeated_id_is_fine() -> None:
    acc = create_tool_call_accumulator()
    acc.observe(ToolCallChunk(index=0, name="f", arguments="{"))
    acc.observe(ToolCallChunk(index=0, id="late", arguments="}"))
    acc.observe(ToolCallChunk(index=0, id="late"))
    acc.observe(ToolCallChunk(index=0, id=""))  # empty ids on continuation deltas are ignored
    assert acc.assembled() == (ToolCall(id="late", name="f", arguments="{}"),)


def test_flat_mapping_delta_is_read() -> None:
    acc = create_tool_call_accumulator()
    acc.observe({"index": 0, "id": "c", "name": "f", "arguments": "{}"})
    assert acc.assembled() == (ToolCall(id="c", name="f", arguments="{}"),)


def test_sparse_indices_keep_order() -> None:
    acc = create_tool_call_accumulator()
    acc.observe([wire(5, id="e", name="e"), wire(2, id="b", name="b")])
    assert [c.id for c in acc.assembled()] == ["b", "e"]
    assert acc.assembled()[0].arguments == ""


@pytest.mark.parametrize("index", [None, "0", -1, 1.0, True])
def test_unusable_index_is_a_clear_error(index: Any) -> None:
    acc = create_tool_call_accumulator()
    with pytest.raises(ToolCallDeltaError, match="index"):
        acc.observe(wire(index, id="c", name="f"))
    assert acc.is_empty


def test_missing_index_is_an_error() -> None:
    with pytest.raises(ToolCallDeltaError):
        create_tool_call_accumulator().observe({"id": "c", "function": {"name": "f"}})


def test_conflicting_ids_for_one_index_are_refused() -> None:
    acc = create_tool_call_accumulator()
    acc.observe(wire(0, id="a", name="f"))
    with pytest.raises(ToolCallDeltaError, match="two ids"):
        acc.observe(wire(0, id="b", name="g"))
    assert acc.assembled() == (ToolCall(id="a", name="f", arguments=""),)


def test_non_string_fragment_is_refused() -> None:
    with pytest.raises(ToolCallDeltaError, match="arguments"):
        create_tool_call_accumulator().observe({"index": 0, "function": {"arguments": {"a": 1}}})
    with pytest.raises(ToolCallDeltaError):
        create_tool_call_accumulator().observe([42])  # type: ignore[list-item]


def test_call_without_id_raises_unless_minted() -> None:
    acc = create_tool_call_accumulator()
    acc.observe(wire(0, name="f"))
    with pytest.raises(ToolCallDeltaError, match="without an id"):
        acc.assembled()
    minted = create_tool_call_accumulator(mint_id=lambda i: f"minted_{i}")
    minted.observe([wire(3, name="f"), wire(1, id="real", name="g")])
    assert [c.id for c in minted.assembled()] == ["real", "minted_3"]


def test_call_without_name_raises() -> None:
    acc = create_tool_call_accumulator()
    acc.observe(wire(0, id="c", arguments="{}"))
    with pytest.raises(ToolCallDeltaError, match="without a name"):
        acc.assembled()


def test_delta_error_is_a_provider_error() -> None:
    assert issubclass(ToolCallDeltaError, ProviderError)
    assert issubclass(ToolCallDeltaError, ValueError)


def test_assembled_does_not_consume() -> None:
    acc = ToolCallAccumulator()
    acc.observe(wire(0, id="c", name="f", arguments="{}"))
    assert acc.assembled() == acc.assembled()


# -- property: any interleaving of N calls' deltas assembles exactly the N calls, in index order ----

def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points + [len(text)]:
        pieces.append(text[last:p])
        last = p
    return [p for p in pieces if p]


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[ToolCall], list[ToolCallChunk]]:
    n = draw(st.integers(min_value=1, max_value=5))
    indices = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n, unique=True))
    calls: dict[int, ToolCall] = {}
    per_call: list[list[ToolCallChunk]] = []
    for k, index in enumerate(indices):
        name = draw(st.text(alphabet="abcdefgh_", min_size=1, max_size=12))
        args = draw(st.text(max_size=30))
        call_id = f"call_{k}"
        calls[index] = ToolCall(id=call_id, name=name, arguments=args)
        name_parts = _split(name, draw(st.lists(st.integers(0, 50), max_size=4)))
        arg_parts = _split(args, draw(st.lists(st.integers(0, 50), max_size=5)))
        deltas = [ToolCallChunk(index=index, name=p) for p in name_parts]
        deltas += [ToolCallChunk(index=index, arguments=p) for p in arg_parts]
        # The id rides on one delta chosen anywhere (possibly the last), possibly repeated.
        carriers = draw(st.lists(st.integers(0, len(deltas) - 1), min_size=1, max_size=3))
        deltas = [ToolCallChunk(index=d.index, id=call_id if i in carriers else None, name=d.name,
                                arguments=d.arguments) for i, d in enumerate(deltas)]
        per_call.append(deltas)
    # Interleave: repeatedly take the next delta of a randomly chosen call (keeps per-call order).
    queues = [list(d) for d in per_call]
    stream: list[ToolCallChunk] = []
    while any(queues):
        live = [q for q in queues if q]
        q = live[draw(st.integers(0, len(live) - 1))]
        stream.append(q.pop(0))
    return [calls[i] for i in sorted(calls)], stream


@given(scenario(), st.integers(1, 4))
def test_any_interleaving_assembles_exactly_the_calls_in_index_order(
    case: tuple[list[ToolCall], list[ToolCallChunk]], batch: int,
) -> None:
    expected, stream = case
    acc = create_tool_call_accumulator()
    for start in range(0, len(stream), batch):  # some chunks carry several deltas
        acc.observe(stream[start:start + batch])
    assert list(acc.assembled()) == expected
