"""Middleware onions (model, tool static/dynamic, agent, tool-call loop) and call_tool."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.model import Model, ModelRequest
from bindloop.agent import (
    augment_agent,
    augment_model,
    augment_tool,
    call_tool,
    create_agent,
    equip_instruction,
    equip_memory,
    equip_tool,
    equip_tool_call_loop_middleware,
    prompt_chat,
    reborn,
)
from bindloop.agent.middleware import (
    AgentMiddleware,
    ModelMiddleware,
    ToolCallLoopMiddleware,
    ToolMiddleware,
    ToolOutput,
    WrappedModel,
)
from bindloop.completion import StreamEvent
from bindloop.contracts import Message, ToolError, ToolMessage, ToolResult
from bindloop.agent.errors import LoopMissingToolOutputError, ToolCallFailedError
from bindloop.errors import PortContractError, ToolFailure, UsageError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class Args(msgspec.Struct):
    q: str = ""


def _tool(name: str, log: list[str] | None = None) -> Any:
    async def run(args: Args, ctx: object) -> ToolResult:
        if log is not None:
            log.append(f"run {name}")
        if args.q == "fail":
            return ToolError(error="it failed")
        return ToolResult(content=f"{name}:{args.q}")

    return define_tool(name=name, description=name, args=Args, execute=run)


def _tool_layer(name: str, log: list[str]) -> ToolMiddleware:
    async def handler(ctx: Any, next: Any) -> Any:
        log.append(f"> {name}")
        out = await next()
        log.append(f"< {name}")
        return out

    return ToolMiddleware(name=name, handler=handler)


class _Logged(WrappedModel):
    """A model middleware's product: logs, then delegates."""

    def __init__(self, inner: Model, name: str, log: list[str]) -> None:
        super().__init__(inner)
        self.name, self.log = name, log

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        self.log.append(f"> {self.name}")
        async for event in self._inner.stream(messages, request):
            yield event
        self.log.append(f"< {self.name}")


def _model_layer(name: str, log: list[str]) -> ModelMiddleware:
    return ModelMiddleware(name=name, wrap=lambda inner: _Logged(inner, name, log))


NAMES = st.lists(st.text("abcdefgh", min_size=1, max_size=3), unique=True, max_size=5)


@settings(max_examples=40)
@given(NAMES)
def test_model_onion_order_for_any_list(names: list[str]) -> None:
    log: list[str] = []
    model = augment_model(scripted_stream_model([final_answer("x")]),
                          [_model_layer(n, log) for n in names])

    async def main() -> None:
        async for _ in model.stream([], ModelRequest()):
            pass

    anyio.run(main)
    assert log == [f"> {n}" for n in names] + [f"< {n}" for n in reversed(names)]


@settings(max_examples=40)
@given(NAMES, NAMES, NAMES)
def test_tool_onion_is_dynamic_then_static_for_any_lists(dynamic: list[str], static: list[str],
                                                         more_static: list[str]) -> None:
    log: list[str] = []
    tool = augment_tool(augment_tool(_tool("t", log), [_tool_layer(f"s{n}", log) for n in static]),
                        [_tool_layer(f"o{n}", log) for n in more_static])
    model = scripted_stream_model([tool_call_turn([tool_call("t", {"q": "1"})]),
                                   final_answer("done")])

    async def handler(_: None) -> str:
        equip_instruction("go")
        equip_tool(tool, middleware=[_tool_layer(f"d{n}", log) for n in dynamic])
        return (await prompt_chat()).data

    assert anyio.run(create_agent(id="a", handler=handler, model=model), None) == "done"
    order = [f"d{n}" for n in dynamic] + [f"o{n}" for n in more_static] + [f"s{n}" for n in static]
    assert log == [f"> {n}" for n in order] + ["run t"] + [f"< {n}" for n in reversed(order)]


@settings(max_examples=30)
@given(NAMES, st.integers(0, 2))
def test_agent_onion_runs_once_per_generation(names: list[str], reborns: int) -> None:
    log: list[str] = []

    def layer(name: str) -> AgentMiddleware:
        async def handler(ctx: Any, next: Any) -> Any:
            log.append(f"> {name}:{ctx.generation}")
            out = await next()
            log.append(f"< {name}:{ctx.generation}")
            return out

        return AgentMiddleware(name=name, handler=handler)

    async def base(props: int) -> Any:
        n, set_n = equip_memory("n", 0)
        if n < reborns:
            set_n(n + 1)
            return reborn()
        return props * 2

    agent = augment_agent(create_agent(id="a", handler=base), [layer(n) for n in names])
    assert anyio.run(agent, 21) == 42
    expected = []
    for g in range(reborns + 1):
        expected += [f"> {n}:{g}" for n in names] + [f"< {n}:{g}" for n in reversed(names)]
    assert log == expected


async def test_middleware_that_returns_the_wrong_type_is_named() -> None:
    bad_model = ModelMiddleware(name="broken", wrap=lambda inner: "nope")  # type: ignore[arg-type,return-value]
    with pytest.raises(PortContractError, match="'broken'"):
        augment_model(scripted_stream_model([]), [bad_model])

    async def wrong(ctx: Any, next: Any) -> Any:
        await next()
        return "plain string"

    tool = augment_tool(_tool("t"), [ToolMiddleware(name="wrong", handler=wrong)])
    with pytest.raises(PortContractError, match="'wrong'"):
        await call_tool(tool, {"q": "x"})
    with pytest.raises(UsageError, match="ToolMiddleware"):
        augment_tool(_tool("t"), ["not a middleware"])  # type: ignore[list-item]


async def test_call_tool_returns_raw_content_and_raises_on_failure() -> None:
    log: list[str] = []
    tool = augment_tool(_tool("t", log), [_tool_layer("static", log)])
    assert await call_tool(tool, {"q": "hi"}) == "t:hi"
    assert log == ["> static", "run t", "< static"]
    with pytest.raises(ToolCallFailedError, match="it failed"):
        await call_tool(tool, {"q": "fail"})
    with pytest.raises(ToolCallFailedError, match="validation"):
        await call_tool(tool, {"q": 5})


# -- the tool-call loop ----------------------------------------------------------------------------

def _blocking(blocked: set[str], *, merge: bool = True) -> ToolCallLoopMiddleware:
    async def handler(ctx: Any, calls: list[Any], next: Any) -> list[ToolOutput]:
        allowed = [c for c in calls if c.name not in blocked]
        refused = [ToolOutput(call_id=c.id, outcome=ToolError(error="blocked", kind="rejected"))
                   for c in calls if c.name in blocked]
        real = await next(allowed) if allowed else []
        return [*real, *refused] if merge else real

    return ToolCallLoopMiddleware(name="block", handler=handler)


@settings(max_examples=40)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=6),
       st.sets(st.sampled_from(["a", "b", "c"])))
def test_a_filtering_middleware_that_merges_keeps_n_in_equal_n_out(calls: list[str],
                                                                   blocked: set[str]) -> None:
    log: list[str] = []
    tools = {n: _tool(n, log) for n in "abc"}
    model = scripted_stream_model([
        tool_call_turn([tool_call(n, {"q": str(i)}) for i, n in enumerate(calls)]),
        final_answer("ok")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        for t in tools.values():
            equip_tool(t)
        equip_tool_call_loop_middleware(_blocking(blocked))
        return await prompt_chat()

    chat = anyio.run(create_agent(id="a", handler=handler, model=model), None)
    answers = [m for m in chat.delta if isinstance(m, ToolMessage)]
    assert len(answers) == len(calls)  # N in, N out, in the model's order
    for i, (name, message) in enumerate(zip(calls, answers, strict=True)):
        assert message.tool_call_id == f"call_1_{i}"
        assert ("blocked" in str(message.content)) == (name in blocked)
    assert sorted(log) == sorted(f"run {n}" for n in calls if n not in blocked)


async def test_a_middleware_that_drops_calls_raises_naming_the_unanswered_ids() -> None:
    model = scripted_stream_model([
        tool_call_turn([tool_call("a", {"q": "1"}, id="keep"), tool_call("b", {}, id="lost")]),
        final_answer("unreachable")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_tool("a"))
        equip_tool(_tool("b"))
        equip_tool_call_loop_middleware(_blocking({"b"}, merge=False))
        return await prompt_chat()

    with pytest.raises(LoopMissingToolOutputError, match=r"\['lost'\]") as info:
        await create_agent(id="a", handler=handler, model=model)(None)
    assert info.value.missing == ("lost",)


async def test_loop_middleware_layers_nest_and_see_the_original_calls() -> None:
    seen: list[tuple[str, int, int]] = []

    def layer(name: str, drop: str | None) -> ToolCallLoopMiddleware:
        async def handler(ctx: Any, calls: list[Any], next: Any) -> list[ToolOutput]:
            seen.append((name, len(ctx.original_calls), len(calls)))
            passed = [c for c in calls if c.name != drop]
            out = await next(passed)
            return out + [ToolOutput(call_id=c.id, outcome=ToolResult(content=f"{name} answered"))
                          for c in calls if c.name == drop]

        return ToolCallLoopMiddleware(name=name, handler=handler)

    model = scripted_stream_model([
        tool_call_turn([tool_call("a"), tool_call("b"), tool_call("c")]), final_answer("ok")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        for n in "abc":
            equip_tool(_tool(n))
        equip_tool_call_loop_middleware(layer("outer", "a"))
        equip_tool_call_loop_middleware(layer("inner", "b"))
        return await prompt_chat()

    chat = await create_agent(id="a", handler=handler, model=model)(None)
    assert seen == [("outer", 3, 3), ("inner", 3, 2)]
    contents = [m.content for m in chat.delta if isinstance(m, ToolMessage)]
    assert contents == ["outer answered", "inner answered", "c:"]


@pytest.mark.parametrize(("outputs", "error", "match"), [
    (lambda calls: "not a list", PortContractError, "not a list"),
    (lambda calls: [ToolOutput(call_id=calls[0].id, outcome=ToolResult(content="a"))] * 2,
     LoopMissingToolOutputError, "several outputs"),
    (lambda calls: [ToolOutput(call_id="ghost", outcome=ToolResult(content="a"))],
     LoopMissingToolOutputError, "not in the batch"),
    (lambda calls: [calls[0]], PortContractError, "ToolOutput"),
])
async def test_loop_middleware_answers_are_checked(outputs: Any, error: type[Exception],
                                                   match: str) -> None:
    async def handler(ctx: Any, calls: list[Any], next: Any) -> Any:
        return outputs(calls)

    model = scripted_stream_model([tool_call_turn([tool_call("a")]), final_answer("x")])

    async def agent_handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_tool("a"))
        equip_tool_call_loop_middleware(ToolCallLoopMiddleware(name="odd", handler=handler))
        return await prompt_chat()

    with pytest.raises(error, match=match):
        await create_agent(id="a", handler=agent_handler, model=model)(None)


def _raising_tool(exc: Exception) -> Any:
    async def run(args: Args, ctx: object) -> ToolResult:
        raise exc

    return define_tool(name="leaky", description="raises", args=Args, execute=run)


def _passthrough() -> ToolCallLoopMiddleware:
    async def handler(ctx: Any, calls: list[Any], next: Any) -> list[ToolOutput]:
        return list(await next(calls))

    return ToolCallLoopMiddleware(name="pass", handler=handler)


@pytest.mark.parametrize("with_loop_middleware", [False, True])
@pytest.mark.parametrize("exc, seen", [
    (RuntimeError("db password=hunter2"), '{"error":"RuntimeError: the tool failed","kind":"error"}'),
    (ToolFailure("quota reached, try tomorrow", kind="rate_limited"),
     '{"error":"quota reached, try tomorrow","kind":"rate_limited"}'),
])
async def test_a_raising_tool_reads_the_same_to_the_model_with_or_without_a_batch_middleware(
        with_loop_middleware: bool, exc: Exception, seen: str) -> None:
    # The loop hides an exception's message (it may hold a secret); a batch middleware runs the
    # calls itself and must apply the same rule, not format the message into the transcript.
    model = scripted_stream_model([tool_call_turn([tool_call("leaky", {}, id="c1")]),
                                   final_answer("ok")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_raising_tool(exc))
        if with_loop_middleware:
            equip_tool_call_loop_middleware(_passthrough())
        return await prompt_chat()

    chat = await create_agent(id="a", handler=handler, model=model)(None)
    [answer] = [m for m in chat.delta if isinstance(m, ToolMessage)]
    assert answer.content == seen and answer.is_error
    assert "hunter2" not in str(chat.delta)
