"""Responses: any turn a provider could produce, rendered in its wire (whole body and SSE), decodes
back to the same turn — through the adapter alone and through ModelAdapter — and an OpenAI Responses
reasoning item's id survives the whole cycle: decoded, sent back in the next request, echoed by the
provider, decoded again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.completion import ExtraEvent, ReasoningEvent, StreamEvent, collect_turn
from bindloop.contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    ReasoningPart,
    TextPart,
    ToolMessage,
    UserMessage,
)
from harness.fixtures.provider_replies import render_body, render_sse, sse_event
from bindloop.wire import StreamBudgets
from bindloop.wire import (
    WIRE_NAMES,
    HttpRequest,
    ModelAdapter,
    OpenAIResponsesAdapter,
    WireOptions,
    create_wire_adapter,
)
from bindloop.wire._stream import decode_stream  # the test helper of this area

from .wire_strategies import texts, turns

_PROVIDER = {"openai_chat": "openai", "openai_responses": "openai", "anthropic": "anthropic",
             "gemini": "google"}
_NO_BUDGETS = StreamBudgets(first_token_ms=None, inter_chunk_ms=None, total_ms=None)


def _expected(wire: str, turn: ModelTurnResult) -> ModelTurnResult:
    reasoning = tuple(msgspec.structs.replace(p, provider=_PROVIDER[wire], model="scripted-model")
                      for p in turn.reasoning)
    return msgspec.structs.replace(turn, reasoning=reasoning)


def _decode_stream(wire: str, blob: bytes, cut: int) -> list[StreamEvent]:
    return decode_stream(create_wire_adapter(wire), [blob[:cut], blob[cut:]])


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_rendered_turn_decodes_back(wire: str, data: st.DataObject) -> None:
    turn = data.draw(turns(wire))
    want = _expected(wire, turn)
    adapter = create_wire_adapter(wire)
    assert adapter.parse_response(render_body(wire, turn)) == want
    blob = b"".join(render_sse(wire, turn))
    cut = data.draw(st.integers(0, len(blob)))
    assert collect_turn(_decode_stream(wire, blob, cut)) == want


# -- through ModelAdapter: the non-streamed body is replayed as events and folded again ----------

class _Reply:
    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks
        self.status = 200
        self.headers: tuple[tuple[str, str], ...] = ()

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _CannedTransport:
    """Answers every request with the given provider reply (SSE or whole body, as asked)."""

    def __init__(self, body: bytes, sse: Sequence[bytes]) -> None:
        self._body = body
        self._sse = sse
        self.requests: list[HttpRequest] = []

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Reply]:
        self.requests.append(request)
        yield _Reply(self._sse if request.stream else (self._body,))


def _complete(wire: str, body: bytes, sse: Sequence[bytes], stream: bool,
              adapter: Any = None) -> ModelTurnResult:
    seen: list[StreamEvent] = []
    model = ModelAdapter(adapter or create_wire_adapter(wire), _CannedTransport(body, sse),
                         WireOptions(model="m", stream=stream), budgets=_NO_BUDGETS,
                         on_event=seen.append)
    result = anyio.run(model.complete, [UserMessage(content="hi")])
    # Ids ride on the reasoning events themselves; no side channel carries them.
    assert not any(isinstance(e, ExtraEvent) and "refusal" not in e.extra for e in seen)
    assert {e.part.id for e in seen if isinstance(e, ReasoningEvent) and e.part.id} == \
        {p.id for p in result.reasoning if p.id}
    return result


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_model_adapter_gives_back_the_rendered_turn(wire: str, stream: bool,
                                                    data: st.DataObject) -> None:
    turn = data.draw(turns(wire))
    got = _complete(wire, render_body(wire, turn), render_sse(wire, turn), stream)
    assert got == _expected(wire, turn)


# -- the Responses reasoning id across a whole cycle -------------------------------------------

def _echo_reply(items: list[dict[str, Any]]) -> tuple[bytes, list[bytes]]:
    """The provider handing the reasoning items it was sent back as its output (whole and as SSE,
    the summary streamed before the finished item)."""
    body = {"id": "resp_echo", "object": "response", "status": "completed", "model": "echo-model",
            "output": items}
    sse = [sse_event({"type": "response.created",
                      "response": {**body, "status": "in_progress", "output": []}})]
    for index, item in enumerate(items):
        sse.append(sse_event({"type": "response.output_item.added", "output_index": index,
                              "item": {"id": item["id"], "type": "reasoning", "summary": []}}))
        for s, summary in enumerate(item["summary"]):
            if s:
                sse.append(sse_event({"type": "response.reasoning_summary_part.added",
                                      "output_index": index, "summary_index": s}))
            sse.append(sse_event({"type": "response.reasoning_summary_text.delta",
                                  "output_index": index, "summary_index": s,
                                  "delta": summary["text"]}))
        sse.append(sse_event({"type": "response.output_item.done", "output_index": index,
                              "item": item}))
    sse.append(sse_event({"type": "response.completed", "response": body}))
    return msgspec.json.encode(body), sse


def _next_request(adapter: OpenAIResponsesAdapter, turn: ModelTurnResult) -> dict[str, Any]:
    history: list[Message] = [
        UserMessage(content="go"),
        AssistantMessage(content=(*turn.reasoning,
                                  *((TextPart(text=turn.text),) if turn.text else ())) or None,
                         tool_calls=turn.tool_calls),
        *(ToolMessage(tool_call_id=c.id, content="ok") for c in turn.tool_calls),
        UserMessage(content="and then?"),
    ]
    body: dict[str, Any] = msgspec.json.decode(
        adapter.build_request(history, [], WireOptions(model="m")).body)
    return body


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_responses_reasoning_id_survives_decode_send_back_echo_and_decode(
        stream: bool, data: st.DataObject) -> None:
    turn = data.draw(turns("openai_responses"))
    sent_ids = [p.id for p in turn.reasoning]
    decoded = _complete("openai_responses", render_body("openai_responses", turn),
                        render_sse("openai_responses", turn), stream)
    assert [p.id for p in decoded.reasoning] == sent_ids

    adapter = OpenAIResponsesAdapter()
    items = [i for i in _next_request(adapter, decoded)["input"] if i.get("type") == "reasoning"]
    assert [i["id"] for i in items] == sent_ids
    assert [i.get("encrypted_content") for i in items] == \
        [p.encrypted_content for p in turn.reasoning]

    body, sse = _echo_reply(items)
    echoed = _complete("openai_responses", body, sse, stream, adapter)
    assert echoed.reasoning == tuple(
        msgspec.structs.replace(p, provider="openai", model="echo-model") for p in turn.reasoning)


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@given(summary=st.one_of(st.just(""), texts), item_id=st.text("abcdef0123456789", min_size=1, max_size=12))
@settings(max_examples=40, deadline=None)
def test_stored_reasoning_item_is_continued_by_its_id_alone(stream: bool, summary: str,
                                                            item_id: str) -> None:
    # store=true: no encrypted content comes back, and without a summary the id is all there is.
    adapter = OpenAIResponsesAdapter(store=True)
    item = {"id": f"rs_{item_id}", "type": "reasoning",
            "summary": [{"type": "summary_text", "text": summary}] if summary else []}
    body, sse = _echo_reply([item])
    turn = _complete("openai_responses", body, sse, stream, adapter)
    assert turn.reasoning == (ReasoningPart(text=summary, provider="openai", model="echo-model",
                                            id=f"rs_{item_id}"),)
    sent = [i for i in _next_request(adapter, turn)["input"] if i.get("type") == "reasoning"]
    assert sent == [item]


@pytest.mark.parametrize("on", ["added", "done", "both"])
@pytest.mark.parametrize("streamed_summary", [True, False])
def test_streamed_reasoning_id_is_read_from_either_item_event(on: str,
                                                              streamed_summary: bool) -> None:
    def item(with_id: bool, **fields: Any) -> dict[str, Any]:
        return {"type": "reasoning", **({"id": "rs_9"} if with_id else {}), **fields}

    done = item(on != "added", summary=[{"type": "summary_text", "text": "why"}],
                encrypted_content="enc")
    chunks = [
        sse_event({"type": "response.output_item.added", "output_index": 0,
                   "item": item(on != "done", summary=[])}),
        *([sse_event({"type": "response.reasoning_summary_text.delta", "output_index": 0,
                      "delta": "why"})] if streamed_summary else []),
        sse_event({"type": "response.output_item.done", "output_index": 0, "item": done}),
        sse_event({"type": "response.completed", "response": {"status": "completed"}}),
    ]
    events = _decode_stream("openai_responses", b"".join(chunks), 0)
    assert collect_turn(events).reasoning == (
        ReasoningPart(text="why", provider="openai", encrypted_content="enc", id="rs_9"),)
