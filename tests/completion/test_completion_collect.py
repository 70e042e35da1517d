"""collect_turn: the normalized stream folds into the loop's ModelTurnResult."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.completion import (
    ErrorEvent,
    ExtraEvent,
    FinishEvent,
    ModelStreamError,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallDeltaError,
    ToolCallEvent,
    TurnCollector,
    UsageEvent,
    collect_turn,
    collect_turn_async,
)
from bindloop.contracts import ModelTurnResult, ReasoningPart, ToolCall, TurnUsage
from bindloop.errors import PortContractError, ProviderError


def tc(index: int, **kw: Any) -> ToolCallEvent:
    return ToolCallEvent(tool_call=ToolCallChunk(index=index, **kw))


def test_empty_stream_is_an_empty_turn() -> None:
    assert collect_turn([]) == ModelTurnResult()


def test_text_reasoning_tools_usage_and_finish() -> None:
    events: list[StreamEvent] = [
        ReasoningEvent(part=ReasoningPart(text="Let me ", provider="anthropic", model="m")),
        ReasoningEvent(part=ReasoningPart(text="think.")),
        ReasoningEvent(part=ReasoningPart(signature="sig-1")),
        UsageEvent(usage=TurnUsage(input_tokens=100, cached_input_tokens=40)),
        TextEvent(content="Reading "),
        tc(1, id="b", name="list", arguments="{}"),
        TextEvent(content="two files."),
        tc(0, id="a", name="read", arguments='{"p":'),
        tc(0, name="_file", arguments=' "x"}'),
        ExtraEvent(extra={"request_id": "r1"}),
        FinishEvent(finish_reason="tool_calls", usage=TurnUsage(output_tokens=12)),
        UsageEvent(usage=TurnUsage(input_tokens=100, output_tokens=15, cached_input_tokens=40)),
    ]
    result = collect_turn(events, price=lambda u: u.input_tokens + 10 * u.output_tokens)
    assert isinstance(result, ModelTurnResult)
    assert result == ModelTurnResult(
        text="Reading two files.",
        tool_calls=(ToolCall(id="a", name="read_file", arguments='{"p": "x"}'),
                    ToolCall(id="b", name="list", arguments="{}")),
        reasoning=(ReasoningPart(text="Let me think.", provider="anthropic", model="m",
                                 signature="sig-1"),),
        usage=TurnUsage(input_tokens=100, output_tokens=15, cached_input_tokens=40),
        cost=250,
        finish_reason="tool_calls",
    )


def test_usage_snapshots_merge_fieldwise_not_summed() -> None:
    result = collect_turn([
        UsageEvent(usage=TurnUsage(input_tokens=30, output_tokens=1)),
        UsageEvent(usage=TurnUsage(output_tokens=9)),
        UsageEvent(usage=TurnUsage(output_tokens=9)),  # a repeated snapshot counts once
    ])
    assert result.usage == TurnUsage(input_tokens=30, output_tokens=9)


def test_reasoning_blocks_by_index_and_redacted() -> None:
    result = collect_turn([
        ReasoningEvent(index=1, part=ReasoningPart(text="second")),
        ReasoningEvent(index=0, part=ReasoningPart(text="first")),
        ReasoningEvent(index=2, part=ReasoningPart(redacted=True, data="opaque")),
        ReasoningEvent(index=3, part=ReasoningPart(text="")),  # nothing at all: no part
    ])
    assert result.reasoning == (
        ReasoningPart(text="first"), ReasoningPart(text="second"),
        ReasoningPart(redacted=True, data="opaque"),
    )
    assert result.text is None


def test_text_only_turn_keeps_no_finish_reason_when_none_sent() -> None:
    result = collect_turn([TextEvent(content="hi"), TextEvent(content="")])
    assert result.text == "hi" and result.finish_reason is None and result.tool_calls == ()


def test_error_event_reraises_the_adapters_exception() -> None:
    boom = ProviderError("upstream 500")
    with pytest.raises(ProviderError) as info:
        collect_turn([TextEvent(content="partial"), ErrorEvent(error=boom)])
    assert info.value is boom


def test_error_event_with_a_non_exception_is_wrapped() -> None:
    with pytest.raises(ModelStreamError) as info:
        collect_turn([ErrorEvent(error={"code": 529})])
    assert info.value.error == {"code": 529}
    assert isinstance(info.value, ProviderError)


def test_a_non_event_is_a_port_contract_error() -> None:
    with pytest.raises(PortContractError):
        collect_turn(["text"])  # type: ignore[list-item]


def test_unmergeable_tool_delta_propagates() -> None:
    with pytest.raises(ToolCallDeltaError):
        collect_turn([tc(0, name="f")])  # no id ever arrived
    assert collect_turn([tc(0, name="f")], mint_id=lambda i: f"m{i}").tool_calls[0].id == "m0"


def test_collector_reads_partial_results() -> None:
    collector = TurnCollector()
    collector.observe(TextEvent(content="a"))
    assert collector.result().text == "a"
    collector.observe(TextEvent(content="b"))
    assert collector.result().text == "ab"


def test_async_stream() -> None:
    async def stream() -> AsyncIterator[StreamEvent]:
        yield TextEvent(content="hello")
        yield FinishEvent(finish_reason="stop")

    result = anyio.run(collect_turn_async, stream())
    assert result == ModelTurnResult(text="hello", finish_reason="stop")


def test_events_round_trip_through_json() -> None:
    events: list[StreamEvent] = [
        TextEvent(content="x"), ReasoningEvent(part=ReasoningPart(text="r", signature="s")),
        tc(0, id="c", name="f", arguments="{}"), UsageEvent(usage=TurnUsage(input_tokens=1)),
        FinishEvent(finish_reason="stop"), ExtraEvent(extra={"k": [1]}),
    ]
    data = msgspec.json.encode(events)
    assert msgspec.json.decode(data, type=list[StreamEvent]) == events
    assert b'"type":"tool_call"' in data


def test_events_are_frozen() -> None:
    event = TextEvent(content="x")
    with pytest.raises(AttributeError):
        event.content = "y"  # type: ignore[misc]


@given(st.lists(st.one_of(st.text(max_size=5).map(lambda s: ("t", s)),
                          st.text(max_size=5).map(lambda s: ("r", s))), max_size=30))
def test_text_and_reasoning_are_the_concatenation_of_their_deltas(
    deltas: list[tuple[str, str]],
) -> None:
    events: list[StreamEvent] = [TextEvent(content=s) if k == "t"
                                 else ReasoningEvent(part=ReasoningPart(text=s))
                                 for k, s in deltas]
    result = collect_turn(events)
    text = "".join(s for k, s in deltas if k == "t")
    reasoning = "".join(s for k, s in deltas if k == "r")
    assert result.text == (text or None)
    assert result.reasoning == ((ReasoningPart(text=reasoning),) if reasoning else ())


def test_reasoning_id_reaches_the_part_and_the_last_one_wins() -> None:
    result = collect_turn([
        ReasoningEvent(index=0, part=ReasoningPart(id="rs_first", provider="openai")),
        ReasoningEvent(index=0, part=ReasoningPart(text="plan")),
        ReasoningEvent(index=0, part=ReasoningPart(id=None, encrypted_content="enc")),
                                                    # None never clears
        ReasoningEvent(index=0, part=ReasoningPart(id="rs_final")),
        ReasoningEvent(index=1, part=ReasoningPart(text="other block", id="rs_other")),
    ])
    assert result.reasoning == (
        ReasoningPart(text="plan", provider="openai", encrypted_content="enc", id="rs_final"),
        ReasoningPart(text="other block", id="rs_other"),
    )


def test_a_block_with_only_an_id_is_kept_but_provenance_alone_is_not() -> None:
    # A stored Responses reasoning item without a summary is continued by sending its id back.
    result = collect_turn([
        ReasoningEvent(index=0, part=ReasoningPart(id="rs_stored", provider="openai", model="o4")),
        ReasoningEvent(index=1, part=ReasoningPart(provider="openai", model="o4")),
    ])
    assert result.reasoning == (ReasoningPart(provider="openai", model="o4", id="rs_stored"),)


def test_reasoning_id_through_the_async_fold_and_json() -> None:
    events: list[StreamEvent] = [ReasoningEvent(part=ReasoningPart(text="r", id="rs_1")),
                                 FinishEvent(finish_reason="stop")]
    data = msgspec.json.encode(events)
    assert b'"id":"rs_1"' in data
    # omitted when None
    assert b'"id"' not in msgspec.json.encode(ReasoningEvent(part=ReasoningPart(text="r")))
    decoded = msgspec.json.decode(data, type=list[StreamEvent])
    assert decoded == events

    async def stream() -> AsyncIterator[StreamEvent]:
        for event in decoded:
            yield event

    result = anyio.run(collect_turn_async, stream())
    assert result.reasoning == (ReasoningPart(text="r", id="rs_1"),)


_maybe = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))
_reasoning_events = st.builds(
    ReasoningEvent, index=st.integers(0, 2), part=st.builds(
        ReasoningPart, text=st.sampled_from(["", "x", "yz"]), signature=_maybe,
        redacted=st.booleans(), data=_maybe, encrypted_content=_maybe, provider=_maybe,
        model=_maybe, id=_maybe))


@given(st.lists(_reasoning_events, max_size=12))
def test_reasoning_blocks_fold_by_the_documented_rules(events: list[ReasoningEvent]) -> None:
    """Per block: text concatenated, each provenance field the last non-None value, redacted
    sticky, and the block dropped only when it has nothing worth sending back."""
    want = []
    for index in sorted({e.index for e in events}):
        block = [e for e in events if e.index == index]

        def last(field: str, block: list[ReasoningEvent] = block) -> Any:
            values = [getattr(e.part, field) for e in block
                      if getattr(e.part, field) is not None]
            return values[-1] if values else None

        part = ReasoningPart(
            text="".join(e.content for e in block),
            redacted=any(e.part.redacted for e in block),
            **{f: last(f) for f in ("signature", "data", "encrypted_content", "provider", "model",
                                    "id")})
        if part.text or part.signature or part.data or part.encrypted_content or part.redacted \
                or part.id:
            want.append(part)
    assert collect_turn(events).reasoning == tuple(want)


# The fold reads the exact event types by one type lookup and a ToolCallChunk of plain strings
# inline; everything else (a subclass, a bad fragment, a mapping delta) takes the general checks.
# Both must fold alike: the same turn, or the same error.

class _Chunk(ToolCallChunk):  # a subclass: never on the inline path
    pass


_fragment = st.one_of(st.none(), st.sampled_from(["", "a", "b_", '{"x":', "1}"]), st.just(7))
_usage = st.builds(TurnUsage, input_tokens=st.integers(-2, 9), output_tokens=st.integers(-2, 9),
                   cached_input_tokens=st.integers(-1, 3))
_event = st.one_of(
    st.builds(TextEvent, content=st.sampled_from(["", "hi", " there"])),
    st.builds(lambda i, cid, n, a: tc(i, id=cid, name=n, arguments=a),
              st.one_of(st.integers(-1, 2), st.just(True)), _fragment, _fragment, _fragment),
    st.builds(UsageEvent, usage=_usage, snapshot=st.booleans()),
    st.builds(FinishEvent, finish_reason=st.sampled_from(["stop", "tool_calls"]),
              usage=st.one_of(st.none(), _usage)),
)


def _fold(events: list[StreamEvent], general: bool) -> Any:
    collector = TurnCollector(mint_id=lambda i: f"minted_{i}")
    try:
        for event in events:
            if general and isinstance(event, ToolCallEvent):
                c = event.tool_call
                event = ToolCallEvent(tool_call=_Chunk(index=c.index, id=c.id, name=c.name,
                                                       arguments=c.arguments))
            (collector._observe_any if general else collector.observe)(event)
        return collector.result()
    except (ToolCallDeltaError, PortContractError) as exc:
        return type(exc).__name__


@given(st.lists(_event, max_size=8))
def test_the_inline_fold_and_the_general_checks_agree(events: list[StreamEvent]) -> None:
    assert _fold(events, general=False) == _fold(events, general=True)
