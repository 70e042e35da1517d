"""The model-turn activity's transcript chunk when an attempt dies between claiming the chunk's
row and completing it (a killed worker, a cut connection, a store restarting): the retried
attempt completes the chunk instead of trusting the dead attempt's claim and then finding its
own chunk "missing from the payload store" (the Temporal crash test's failed workflows). No
Temporal server: the activity is called as the worker would call it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from bindloop.contracts import ModelTurnResult, ToolCall, ToolOutcome, UserMessage
from bindloop.contracts import encode_messages
from bindloop.hosts.temporal._payloads import chunk_key, write_payload
from bindloop.hosts.temporal.workflow import AgentActivities, ModelTurnInput
from bindloop.run import ReceiptCompleted, ReceiptRunning, ToolCallReceiptKey
from bindloop.stores import StoreError
from bindloop.testing import function_model, stepping_clock
from bindloop.stores import MemoryToolCallReceiptStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class DiesAfterClaim:
    """The store as an attempt that dies right after its claim landed sees it."""

    def __init__(self, store: MemoryToolCallReceiptStore) -> None:
        self.store = store
        self.read, self.claim = store.read, store.claim

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
        raise StoreError("memory", "complete", "the connection was cut")

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool:
        raise AssertionError("not used")


def _activities(store: Any, seen: list[list[Any]]) -> AgentActivities:
    async def call_model(messages: Sequence[Any], request: Any) -> ModelTurnResult:
        seen.append(messages)
        return ModelTurnResult(text="hello")

    async def run_tool_call(call: ToolCall) -> ToolOutcome:
        raise AssertionError("no tools here")

    return AgentActivities(model=function_model(call_model), run_tool_call=run_tool_call, payloads=store)


async def test_a_retried_model_turn_completes_the_chunk_its_dead_attempt_claimed() -> None:
    store = MemoryToolCallReceiptStore(now=stepping_clock(start=0.0, step=1_000.0))
    messages = [UserMessage(content="hi")]
    turn = ModelTurnInput(execution_id="e", chunks=["run:0-1"], new_chunk="run:0-1",
                          new_messages=encode_messages(messages).decode(), tools=[])
    seen: list[list[Any]] = []
    with pytest.raises(StoreError):
        await _activities(DiesAfterClaim(store), seen).model_turn(turn)
    assert isinstance(await store.read(chunk_key("e", "run:0-1")), ReceiptRunning)
    out = await _activities(store, seen).model_turn(turn)  # Temporal's retry
    assert msgspec.json.decode(out, type=ModelTurnResult).text == "hello"
    assert seen == [messages]
    row = await store.read(chunk_key("e", "run:0-1"))
    assert isinstance(row, ReceiptCompleted) and row.attempt == 2


async def test_a_chunk_written_twice_is_written_once() -> None:
    store = MemoryToolCallReceiptStore(now=stepping_clock(start=0.0, step=1_000.0))
    key = chunk_key("e", "run:0-1")
    await write_payload(store, key, "same bytes")
    await write_payload(store, key, "same bytes")  # a retried attempt finds it done
    assert await store.read(key) == ReceiptCompleted(attempt=1, result="same bytes")


async def test_a_chunk_that_never_completes_is_a_store_error() -> None:
    class NeverCompletes(DiesAfterClaim):
        async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
            return False  # fenced out every time: another writer took it over

    store = MemoryToolCallReceiptStore(now=stepping_clock(start=0.0, step=1_000.0))
    with pytest.raises(StoreError, match="eight times"):
        await write_payload(NeverCompletes(store), chunk_key("e", "c"), "text")  # type: ignore[arg-type]
