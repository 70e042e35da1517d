"""A routed tool-loop run leaves no bindloop object to the cyclic garbage collector: everything a
served call, its route attempt and the loop's driver make is freed by reference counting when they
end (a cycle left per call would hold it until a collection, whose passes then cost more while many
runs are in flight)."""

from __future__ import annotations

import gc
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import pytest

from bindloop.contracts import ToolCall, ToolDefinition, ToolResult, UserMessage
from bindloop.loop import ToolLoopParams, ToolLoopState, ToolRunner, run_tool_loop
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.wire import (
    HttpRequest,
    ModelAdapter,
    OpenAIChatAdapter,
    RoutedModel,
    StreamBudgets,
    WireOptions,
)

def _sse(delta: dict[str, object] | None, finish: str | None = None,
         usage: dict[str, int] | None = None) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps({"choices": choices, "usage": usage}).encode() + b"\n\n"


def _reply(answered: bool) -> list[bytes]:
    if not answered:
        chunks = [_sse({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                        "function": {"name": "lookup", "arguments": ""}}]}),
                  _sse({"tool_calls": [{"index": 0, "function": {"arguments": '{"key": "k"}'}}]}),
                  _sse({}, finish="tool_calls")]
    else:
        chunks = [_sse({"content": f"word{i} "}) for i in range(5)] + [_sse({}, finish="stop")]
    return [*chunks, _sse(None, usage={"prompt_tokens": 3, "completion_tokens": 5}),
            b"data: [DONE]\n\n"]


class _Body:
    status = 200
    headers: tuple[tuple[str, str], ...] = ()

    def __init__(self, chunks: Sequence[bytes], status: int = 200) -> None:
        self.status = status
        self._chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            await anyio.lowlevel.checkpoint()  # a socket read gives the loop a turn
            yield chunk


class _Transport:
    """The provider: the scripted reply for the transcript it is sent; ``fail`` answers 503."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        if self.fail:
            yield _Body([b'{"error": {"message": "overloaded", "type": "server_error"}}'], 503)
            return
        answered = any(m["role"] == "tool" for m in json.loads(request.body)["messages"])
        yield _Body(_reply(answered))


def _routed(first_fails: bool) -> RoutedModel:
    chat = OpenAIChatAdapter()
    budgets = StreamBudgets(first_token_ms=60_000, inter_chunk_ms=60_000, total_ms=600_000)
    names = ("p1", "p2")
    models = {p: ModelAdapter(chat, _Transport(fail=first_fails and p == "p1"),
                              WireOptions(model="m", stream=True), budgets=budgets)
              for p in names}
    model = canonical_model_id("test/m")
    return RoutedModel(plan=RoutePlan(stages=(RouteStage(
        role="primary", model=model,
        policy=OrderedPolicy(providers=tuple(provider_id(p) for p in names)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model,
                                        provider_invocation_model="m",
                                        credential_source="platform") for p in names)),)),
        models=models)


def _garbage_of(backend: str, routed: RoutedModel) -> list[str]:
    """The bindloop types the collector finds unreachable after three runs on ``backend`` (run
    here, not by a fixture, so nothing else releases objects in between)."""
    tools = [ToolDefinition(name="lookup", description="Look a key up.", parameters={
        "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})]

    async def lookup(call: ToolCall) -> ToolResult:
        return ToolResult(content="value of " + json.loads(call.arguments)["key"])

    runner = ToolRunner(run_tool_call=lookup, build_tools=lambda: tools)

    async def runs() -> None:
        for _ in range(3):  # later runs find the request cache warm, as a session's turns do
            state = ToolLoopState(messages=[UserMessage(content="look k up")])
            result = await run_tool_loop(ToolLoopParams(model=routed, runner=runner, state=state,
                                                        max_iterations=4))
            assert result.stop_reason == "done"
            assert state.messages[-1].content == "word0 word1 word2 word3 word4 "

    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        anyio.run(runs, backend=backend)
        gc.collect()
        return sorted({f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage
                       if type(o).__module__.startswith("bindloop")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_routed_tool_loop_run_leaves_no_cyclic_garbage(backend: str) -> None:
    assert _garbage_of(backend, _routed(first_fails=False)) == []
