"""Responses: any turn a provider could produce, rendered in its wire (whole body and SSE), decodes
back to the same turn."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import ModelTurnResult
from bindloop.hosts.provider_replies import render_body, render_sse
from bindloop.wire import WIRE_NAMES, collect_wire_turn, create_wire_adapter

from .wire_strategies import turns

_PROVIDER = {"openai_chat": "openai", "openai_responses": "openai", "anthropic": "anthropic",
             "gemini": "google"}


def _expected(wire: str, turn: ModelTurnResult) -> ModelTurnResult:
    import msgspec

    reasoning = tuple(msgspec.structs.replace(p, provider=_PROVIDER[wire], model="scripted-model")
                      for p in turn.reasoning)
    return msgspec.structs.replace(turn, reasoning=reasoning)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_rendered_turn_decodes_back(wire: str, data: st.DataObject) -> None:
    turn = data.draw(turns(wire))
    want = _expected(wire, turn)
    adapter = create_wire_adapter(wire)
    assert adapter.parse_response(render_body(wire, turn)) == want
    decoder = adapter.stream_decoder()
    chunks = render_sse(wire, turn)
    blob = b"".join(chunks)
    cut = data.draw(st.integers(0, len(blob)))
    events = decoder.feed(blob[:cut]) + decoder.feed(blob[cut:]) + decoder.end()
    assert collect_wire_turn(events) == want
