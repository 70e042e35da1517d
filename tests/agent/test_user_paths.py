"""The paths a user walks (issue 20): async mistakes refused by name, a consumer's own exception,
``await_on_end`` at the generation's close, prompt stats, tool-failure reports, per-turn tool
choice, ``tool_turns`` and the tool context's session / trace ids."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_tool,
    on_stream,
    prompt_agent,
    prompt_chat,
    reborn,
)
from bindloop.contracts import ToolResult
from bindloop.errors import UsageError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class Q(msgspec.Struct):
    q: str


async def _search(args: Q, ctx: object) -> ToolResult:
    return ToolResult(content=f"found {args.q}")


SEARCH = define_tool(name="search", description="s", args=Q, execute=_search)


# -- item 7: silent async mistakes ------------------------------------------------------------------

async def test_a_forgotten_await_is_refused_with_a_message_that_says_await() -> None:
    model = scripted_stream_model([final_answer("x")])

    async def handler(_: None) -> Any:
        equip_instruction("q")
        return prompt_chat()  # the mistake: no await

    with pytest.raises(UsageError, match=r"`await` is missing.*return await prompt_chat\(\)"):
        await create_agent(id="a", handler=handler, model=model)(None)
    assert model.requests == []  # the never-awaited prompt did not run


async def test_a_raising_consumer_reaches_the_caller_as_itself() -> None:
    model = scripted_stream_model([final_answer("x")], chunk_size=1)

    async def ui(stream: Any) -> None:
        async for _ in stream:
            raise ValueError("the UI broke")

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(ui)
        return (await prompt_chat()).data

    with pytest.raises(ValueError, match="the UI broke"):  # not an ExceptionGroup
        await create_agent(id="a", handler=handler, model=model)(None)


async def test_a_raising_consumer_outside_a_run_root_reaches_the_caller_as_itself() -> None:
    """The prompt's own task group (no run root to host consumers): still the error itself."""
    from bindloop.agent._context import RunState
    from bindloop.agent._stream import StreamConsumer, with_consumers
    from bindloop.agent._trace import Tracer

    run = RunState(providers={}, model=None, registry={}, enable_snapshot=False, signal=None,
                   tracer=Tracer(None, None), replay=None)

    async def ui(stream: Any) -> None:
        raise KeyError("consumer")

    async def body(hub: Any) -> str:
        await anyio.sleep(0)
        return "ok"

    with pytest.raises(KeyError, match="consumer"):
        await with_consumers(run, [StreamConsumer(ui, None, True)], body)


async def test_the_handler_error_wins_and_carries_the_consumers_as_a_note() -> None:
    model = scripted_stream_model([final_answer("x")])

    async def ui(stream: Any) -> None:
        async for _ in stream:
            pass
        raise ValueError("ui")

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(ui)
        await prompt_chat()
        raise LookupError("handler")

    with pytest.raises(LookupError, match="handler") as info:
        await create_agent(id="a", handler=handler, model=model)(None)
    assert any("ValueError: ui" in note for note in info.value.__notes__)


# -- item 13: await_on_end waits when the generation closes -----------------------------------------

async def test_await_on_end_waits_at_the_generation_close_not_inside_the_prompt() -> None:
    """A consumer whose cleanup waits for handler code after the prompt: no deadlock, and the
    agent returns only after that cleanup."""
    model = scripted_stream_model([final_answer("done")], chunk_size=2)
    log: list[str] = []

    async def handler(_: None) -> str:
        saved = anyio.Event()

        async def ui(stream: Any) -> None:
            async for _ in stream:
                pass
            await saved.wait()  # cleanup needs what the handler does after the prompt
            log.append("consumer cleaned up")

        equip_instruction("q")
        on_stream(ui)  # await_on_end=True (the default)
        out = (await prompt_chat()).data
        log.append("prompt returned")
        saved.set()
        return out

    with anyio.fail_after(5):
        assert await create_agent(id="a", handler=handler, model=model)(None) == "done"
    assert log == ["prompt returned", "consumer cleaned up"]


async def test_each_generation_closes_its_consumers_before_a_reborn() -> None:
    model = scripted_stream_model([final_answer("one"), final_answer("two")])
    log: list[str] = []

    async def handler(_: None) -> str:
        from bindloop.agent import equip_memory

        n, set_n = equip_memory("n", 0)

        async def ui(stream: Any) -> None:
            async for _ in stream:
                pass
            await anyio.sleep(0.01)
            log.append(f"consumer {n} done")

        equip_instruction("q")
        on_stream(ui)
        chat = await prompt_chat()
        log.append(f"generation {n} returns")
        if n == 0:
            set_n(1)
            return reborn()  # type: ignore[return-value]
        return chat.data

    assert await create_agent(id="a", handler=handler, model=model)(None) == "two"
    assert log == ["generation 0 returns", "consumer 0 done", "generation 1 returns",
                   "consumer 1 done"]


# -- item 5: every prompt gives its stats and cost --------------------------------------------------

class Answer(msgspec.Struct):
    answer: str


async def test_prompt_agent_gives_its_stats_and_cost_without_a_trace_bus() -> None:
    from bindloop.agent import prompt_stats

    model = scripted_stream_model(
        [tool_call_turn([tool_call("search", {"q": "x"})]),
         final_answer("not json"),  # re-asked: its turn counts too
         final_answer('{"answer": "y"}')],
        price=lambda usage: 7)
    seen: list[Any] = []

    async def handler(_: None) -> Answer:
        equip_instruction("q")
        equip_tool(SEARCH)
        with pytest.raises(UsageError, match="has not returned yet"):
            prompt_stats()
        value = await prompt_agent(Answer)
        seen.append(prompt_stats())
        return value

    assert await create_agent(id="a", handler=handler, model=model)(None) == Answer("y")
    (stats,) = seen
    assert (stats.turns, stats.tool_calls, stats.cost) == (3, 1, 21)


async def test_prompt_chat_stats_are_the_chat_results() -> None:
    from bindloop.agent import prompt_stats

    model = scripted_stream_model([final_answer("hi")], price=lambda usage: 5)

    async def handler(_: None) -> bool:
        equip_instruction("q")
        chat = await prompt_chat()
        return prompt_stats() == chat.stats and chat.stats.cost == 5

    assert await create_agent(id="a", handler=handler, model=model)(None) is True


# -- item 11: ToolCallLoopContext.tool_turns ---------------------------------------------------------

async def test_a_loop_middleware_sees_the_completed_rounds_as_tool_turns() -> None:
    from bindloop.agent import equip_tool_call_loop_middleware
    from bindloop.agent.middleware import ToolCallLoopMiddleware, ToolTurn

    model = scripted_stream_model([
        tool_call_turn([tool_call("search", {"q": "a"}, id="c1")]),
        tool_call_turn([tool_call("search", {"q": "b"}, id="c2"),
                        tool_call("search", {"q": "c"}, id="c3")]),
        final_answer("done")])
    history: list[tuple[ToolTurn, ...]] = []

    async def watch(ctx: Any, calls: list[Any], next: Any) -> Any:
        history.append(ctx.tool_turns)
        return await next(calls)

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(SEARCH)
        equip_tool_call_loop_middleware(ToolCallLoopMiddleware(name="watch", handler=watch))
        return (await prompt_chat()).data

    assert await create_agent(id="a", handler=handler, model=model)(None) == "done"
    assert [len(h) for h in history] == [0, 1]
    (first,) = history[1]
    assert first.step == 1 and [c.id for c in first.calls] == ["c1"]
    assert [(o.call_id, o.outcome) for o in first.outputs] == [("c1", ToolResult(content="found a"))]


# -- item 14: a per-turn tool choice (the chat's policy) --------------------------------------------

async def test_a_tool_choice_policy_sets_each_turns_choice() -> None:
    from bindloop.agent import ToolChoiceContext

    model = scripted_stream_model([tool_call_turn([tool_call("search", {"q": "a"})]),
                                   final_answer("done")])
    seen: list[int] = []

    def policy(turn: ToolChoiceContext) -> Any:
        seen.append(turn.turn_index)
        return "required" if turn.turn_index == 0 else None  # force a tool first, then free

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(SEARCH)
        return (await prompt_chat(tool_choice=policy)).data

    assert await create_agent(id="a", handler=handler, model=model)(None) == "done"
    assert seen == [0, 1]
    assert [r.request.tool_choice for r in model.requests] == ["required", None]


async def test_a_fixed_tool_choice_and_bad_ones() -> None:
    from bindloop.errors import PortContractError
    from bindloop.wire import ForcedTool

    model = scripted_stream_model([final_answer("x")])

    async def fixed(_: None) -> str:
        equip_instruction("q")
        equip_tool(SEARCH)
        return (await prompt_chat(tool_choice=ForcedTool(name="search"))).data

    await create_agent(id="a", handler=fixed, model=model)(None)
    assert model.requests[0].request.tool_choice == ForcedTool(name="search")

    async def bad(_: None) -> str:
        equip_instruction("q")
        return (await prompt_chat(tool_choice="always")).data  # type: ignore[arg-type]

    with pytest.raises(UsageError, match="tool_choice"):
        await create_agent(id="b", handler=bad, model=model)(None)

    async def bad_policy(_: None) -> str:
        equip_instruction("q")
        return (await prompt_chat(tool_choice=lambda turn: 3)).data  # type: ignore[arg-type,return-value]

    with pytest.raises(PortContractError, match="returned 3"):
        await create_agent(id="c", handler=bad_policy, model=scripted_stream_model([]))(None)


async def test_a_replay_checks_the_per_turn_choice() -> None:
    """The choice is part of each request's hash: a snapshot replays under the same policy, and a
    different policy diverges."""
    from bindloop.agent import run_with
    from bindloop.agent.snapshots import dump_snapshot
    from bindloop.agent.snapshots import SnapshotDivergenceError

    first: list[Any] = ["required"]

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(SEARCH)
        return (await prompt_chat(tool_choice=lambda t: first[0] if t.turn_index == 0
                                  else None)).data

    agent = create_agent(id="a", handler=handler)

    async def main() -> tuple[str, Any]:
        return await agent(None), dump_snapshot()

    model = scripted_stream_model([tool_call_turn([tool_call("search", {"q": "a"})]),
                                   final_answer("done")])
    value, snap = await run_with(main, model=model, enable_snapshot=True)
    empty = scripted_stream_model([])
    again, _ = await run_with(main, model=empty, snapshot=snap, enable_snapshot=True)
    assert again == value == "done" and empty.requests == []
    first[0] = "auto"
    with pytest.raises(SnapshotDivergenceError):
        await run_with(main, model=empty, snapshot=snap, enable_snapshot=True)


# -- item 16: the tool context's session and trace ids ----------------------------------------------

@pytest.mark.parametrize("layered", [False, True])
async def test_a_tool_sees_the_runs_session_and_trace_ids(layered: bool) -> None:
    from bindloop.agent import run_with
    from bindloop.agent.events import TraceOptions
    from bindloop.agent.middleware import ToolMiddleware
    from bindloop.tools import ToolContext

    seen: list[tuple[str | None, str | None, str | None]] = []

    async def look(args: Q, ctx: ToolContext) -> ToolResult:
        seen.append((ctx.agent_id, ctx.session_id, ctx.trace_id))
        return ToolResult(content="ok")

    tool = define_tool(name="look", description="l", args=Q, execute=look)

    async def passthrough(ctx: ToolContext, next: Any) -> Any:
        return await next()

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(tool, middleware=[ToolMiddleware(name="p", handler=passthrough)]
                   if layered else [])
        return (await prompt_chat()).data

    def model() -> Any:
        return scripted_stream_model([tool_call_turn([tool_call("look", {"q": "a"})]),
                                      final_answer("done")])

    agent = create_agent(id="a", handler=handler)
    await run_with(agent, initial_props=None, model=model(), session_id="user-7",
                   trace=TraceOptions(trace_id="4bf92f3577b34da6a3ce929d0e0e4736"))
    await run_with(agent, initial_props=None, model=model())
    await create_agent(id="b", handler=handler, model=model())(None)  # an implicit run
    assert seen == [("a", "user-7", "4bf92f3577b34da6a3ce929d0e0e4736"), ("a", None, None),
                    ("b", None, None)]


# -- item 6: tool failures reach the host (hook; stdlib logging from bindloop.hosts) ---------------

class Secret(RuntimeError):
    pass


async def _failing(args: Q, ctx: object) -> ToolResult:
    raise Secret("db refused: Authorization: Bearer sk-live-0123456789abcdef")


FAILING = define_tool(name="flaky", description="f", args=Q, execute=_failing)


@pytest.mark.parametrize("with_loop_middleware", [False, True])
async def test_a_tool_failure_reaches_the_host_hook_and_the_model_text_is_unchanged(
        with_loop_middleware: bool) -> None:
    from bindloop.agent import (
        ToolErrorReport,
        equip_tool_call_loop_middleware,
        run_with,
    )
    from bindloop.agent.middleware import ToolCallLoopMiddleware

    reports: list[ToolErrorReport] = []

    async def passthrough(ctx: Any, calls: list[Any], next: Any) -> Any:
        return await next(calls)

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(FAILING)
        if with_loop_middleware:
            equip_tool_call_loop_middleware(ToolCallLoopMiddleware(name="p", handler=passthrough))
        return (await prompt_chat()).data

    def model() -> Any:
        return scripted_stream_model([tool_call_turn([tool_call("flaky", {"q": "a"}, id="c1")]),
                                      final_answer("sorry")])

    plain = model()
    await run_with(create_agent(id="a", handler=handler), model=plain)
    hooked = model()
    assert await run_with(create_agent(id="a", handler=handler), model=hooked,
                          on_tool_error=reports.append, session_id="s1") == "sorry"
    (report,) = reports
    assert isinstance(report.error, Secret) and "sk-live" in str(report.error)  # the exception
    assert (report.call_id, report.tool_name, report.agent_id, report.session_id) == (
        "c1", "flaky", "a", "s1")
    # What the model read is the same with and without the hook (and holds no secret).
    assert hooked.requests[1].messages[-1] == plain.requests[1].messages[-1]
    assert "sk-live" not in str(hooked.requests[1].messages[-1].content)


async def test_log_tool_errors_makes_redacted_log_records(caplog: Any) -> None:
    import logging

    from bindloop.agent import run_with
    from bindloop.hosts.telemetry.logs import LOGGER_NAME, log_tool_errors

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(FAILING)
        return (await prompt_chat()).data

    model = scripted_stream_model([tool_call_turn([tool_call("flaky", {"q": "a"}, id="c9")]),
                                   final_answer("sorry")])
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        await run_with(create_agent(id="a", handler=handler), model=model,
                       on_tool_error=log_tool_errors(include_traceback=True))
    (record,) = [r for r in caplog.records if r.name == LOGGER_NAME]
    text = record.getMessage()
    assert "tool flaky (call c9) of agent a failed: Secret: db refused" in text
    assert "Traceback" in text and "_failing" in text
    assert "sk-live" not in text and record.exc_info is None
    assert record.bindloop["tool_name"] == "flaky" and record.bindloop["error_type"] == "Secret"


def test_run_with_refuses_a_hook_that_is_not_callable() -> None:
    from bindloop.agent import run_with

    async def main() -> None:
        return None

    with pytest.raises(UsageError, match="on_tool_error"):
        anyio.run(lambda: run_with(main, on_tool_error="log"))  # type: ignore[arg-type]


# -- properties: the per-turn choice and the rounds history over any script -------------------------

def test_property_choices_and_tool_turns_follow_the_script() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from bindloop.agent import equip_tool_call_loop_middleware
    from bindloop.agent.middleware import ToolCallLoopMiddleware

    choices = st.sampled_from([None, "auto", "none", "required"])

    @settings(max_examples=40, deadline=None)
    @given(rounds=st.lists(st.integers(min_value=1, max_value=3), max_size=4),
           picks=st.lists(choices, min_size=5, max_size=5))
    def check(rounds: list[int], picks: list[Any]) -> None:
        script = [tool_call_turn([tool_call("search", {"q": f"{r}.{i}"}, id=f"c{r}.{i}")
                                  for i in range(n)]) for r, n in enumerate(rounds)]
        model = scripted_stream_model([*script, final_answer("end")])
        histories: list[list[list[str]]] = []

        async def watch(ctx: Any, calls: list[Any], next: Any) -> Any:
            histories.append([[c.id for c in t.calls] for t in ctx.tool_turns])
            return await next(calls)

        async def handler(_: None) -> str:
            equip_instruction("q")
            equip_tool(SEARCH)
            equip_tool_call_loop_middleware(ToolCallLoopMiddleware(name="w", handler=watch))
            return (await prompt_chat(tool_choice=lambda t: picks[t.turn_index])).data

        agent = create_agent(id="p", handler=handler, model=model)
        assert anyio.run(agent, None) == "end"
        assert [r.request.tool_choice for r in model.requests] == picks[:len(rounds) + 1]
        ids = [[f"c{r}.{i}" for i in range(n)] for r, n in enumerate(rounds)]
        assert histories == [ids[:k] for k in range(len(rounds))]

    check()
