"""Agents, frames and hooks: context isolation, the draft barrier, reborn, memory, memo, resources,
scope, model resolution, and the model adapters."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    augment_model,
    create_agent,
    equip_budget,
    equip_history,
    equip_instruction,
    equip_memo,
    equip_memory,
    equip_resource,
    equip_scope,
    equip_system,
    equip_tool,
    equip_tool_call_loop_middleware,
    expect_resource,
    expect_scope,
    expect_validator,
    on_stream,
    prompt_chat,
    reborn,
    run_with,
)
from bindloop.agent.middleware import ToolCallLoopMiddleware
from bindloop.contracts import AssistantMessage, SystemMessage, ToolMessage, ToolResult, TurnUsage, \
    UserMessage
from bindloop.model import Model
from bindloop.errors import PortContractError, UsageError
from bindloop.agent.errors import (
    AfterPromptAgentError,
    NoAgentContextError,
    RebornLimitExceededError,
)
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model
from bindloop.testing import strategies as _strategies
from bindloop.wire import ModelAdapter, OpenAIChatAdapter, WireOptions

pytestmark = pytest.mark.anyio


class Q(msgspec.Struct):
    query: str


async def _search(args: Q, ctx: object) -> ToolResult:
    return ToolResult(content=f"found {args.query}")


SEARCH = define_tool(name="search", description="Search the web", args=Q, execute=_search)


@pytest.mark.parametrize("hook", [
    lambda: equip_system("x"), lambda: equip_instruction("x"), lambda: equip_tool(SEARCH),
    lambda: equip_budget(1), lambda: expect_validator(lambda v: True),
    lambda: on_stream(lambda s: None), lambda: equip_memory("k", 0), lambda: reborn(),
    lambda: equip_scope("k", 1), lambda: expect_scope("k"), lambda: equip_history([]),
    lambda: equip_memo("k", lambda: 1, []), lambda: equip_resource("k", lambda: 1, []),
])
def test_hooks_outside_an_agent_raise_no_agent_context(hook: Any) -> None:
    with pytest.raises(NoAgentContextError, match=r"outside an agent handler"):
        hook()


async def test_prompt_outside_an_agent_raises() -> None:
    with pytest.raises(NoAgentContextError, match="prompt_chat"):
        await prompt_chat()


DRAFT_HOOKS = {
    "equip_system": lambda: equip_system("late"),
    "equip_instruction": lambda: equip_instruction("late"),
    "equip_tool": lambda: equip_tool(SEARCH),
    "equip_tool_call_loop_middleware": lambda: equip_tool_call_loop_middleware(
        ToolCallLoopMiddleware(name="m", handler=lambda c, calls, nxt: nxt(calls))),
    "equip_budget": lambda: equip_budget(5),
    "expect_validator": lambda: expect_validator(lambda v: True),
    "on_stream": lambda: on_stream(lambda s: None),
    "equip_history": lambda: equip_history([]),
}


@pytest.mark.parametrize("name", sorted(DRAFT_HOOKS))
async def test_draft_hooks_after_the_prompt_raise_after_prompt(name: str) -> None:
    seen: list[str] = []

    async def handler(_: None) -> str:
        equip_instruction("hi")
        chat = await prompt_chat()
        # Not draft hooks: fine after the prompt.
        value, set_value = equip_memory("count", 1)
        set_value(value + 1)
        seen.append(chat.data)
        with pytest.raises(AfterPromptAgentError, match=name):
            DRAFT_HOOKS[name]()
        return chat.data

    agent = create_agent(id="a", handler=handler, model=scripted_stream_model([final_answer("ok")]))
    assert await agent(None) == "ok"
    assert seen == ["ok"]


async def test_second_prompt_in_one_generation_is_refused() -> None:
    async def handler(_: None) -> str:
        equip_instruction("hi")
        await prompt_chat()
        with pytest.raises(UsageError, match="reborn"):
            await prompt_chat()
        return "done"

    model = scripted_stream_model([final_answer("one")])
    assert await create_agent(id="a", handler=handler, model=model)(None) == "done"
    assert model.position == 1


async def test_system_instruction_and_history_make_the_prompt() -> None:
    model = scripted_stream_model([final_answer("fine")])

    async def handler(props: dict[str, str]) -> str:
        equip_system("You are terse.")
        equip_system("Never apologise.")
        equip_history([UserMessage(content="earlier")])
        equip_instruction(f"Topic: {props['topic']}")
        return (await prompt_chat()).data

    assert await create_agent(id="a", handler=handler, model=model)({"topic": "owls"}) == "fine"
    sent = model.requests[0].messages
    assert sent[0] == SystemMessage(content="You are terse.\n\nNever apologise.")
    assert sent[1] == UserMessage(content="earlier")
    assert sent[2] == UserMessage(content="Topic: owls")


async def test_prompt_without_instruction_is_a_usage_error() -> None:
    async def handler(_: None) -> str:
        return (await prompt_chat()).data

    with pytest.raises(UsageError, match="equip_instruction"):
        await create_agent(id="a", handler=handler, model=scripted_stream_model([]))(None)


async def test_reborn_resets_the_draft_and_keeps_memory() -> None:
    model = scripted_stream_model([final_answer("a"), final_answer("b"), final_answer("c")])
    system_counts: list[int] = []

    async def handler(_: None) -> list[str]:
        answers, set_answers = equip_memory("answers", [])
        equip_system("sys")
        equip_instruction(f"round {len(answers)}")
        chat = await prompt_chat()
        answers = [*answers, chat.data]
        set_answers(answers)
        system_counts.append(sum(isinstance(m, SystemMessage)
                                 for m in model.requests[-1].messages))
        if len(answers) < 3:
            return reborn()  # type: ignore[return-value]
        return answers

    result = await create_agent(id="a", handler=handler, model=model)(None)
    assert result == ["a", "b", "c"]
    assert system_counts == [1, 1, 1]  # the draft was reset: no system prompt piles up
    assert [r.messages[-1] for r in model.requests] == [
        UserMessage(content="round 0"), UserMessage(content="round 1"),
        UserMessage(content="round 2")]


@settings(max_examples=30)
@given(st.integers(min_value=0, max_value=12), st.integers(min_value=0, max_value=12))
def test_memory_survives_any_reborn_sequence(reborns: int, limit: int) -> None:
    generations: list[int] = []

    async def handler(_: None) -> int:
        count, set_count = equip_memory("count", 0)
        generations.append(count)
        if count < reborns:
            set_count(count + 1)
            return reborn()  # type: ignore[return-value]
        return count

    agent = create_agent(id="r", handler=handler, max_reborns=limit)
    if reborns > limit:
        with pytest.raises(RebornLimitExceededError, match="equip_memory"):
            anyio.run(agent, None)
        assert generations == list(range(limit + 1))
    else:
        assert anyio.run(agent, None) == reborns
        assert generations == list(range(reborns + 1))


async def test_memory_dies_when_the_agent_returns() -> None:
    async def handler(_: None) -> int:
        value, set_value = equip_memory("n", 0)
        set_value(value + 1)
        return value

    agent = create_agent(id="m", handler=handler)
    assert [await agent(None) for _ in range(3)] == [0, 0, 0]


async def test_memo_deep_compares_and_resource_shallow_compares() -> None:
    calls = {"memo": 0, "resource": 0}
    config = {"a": [1, 2]}

    def memo_factory() -> str:
        calls["memo"] += 1
        return "memo"

    def resource_factory() -> object:
        calls["resource"] += 1
        return object()

    async def handler(_: None) -> Any:
        gen, set_gen = equip_memory("gen", 0)
        equip_memo("m", memo_factory, [{"a": [1, 2]}])  # a fresh but equal dict each time
        equip_resource("r", resource_factory, [{"a": [1, 2]}])  # fresh object: not the same
        equip_resource("r2", resource_factory, [config])  # the same object every time
        if gen < 2:
            set_gen(gen + 1)
            return reborn()
        return calls

    result = await create_agent(id="m", handler=handler)(None)
    assert result["memo"] == 1
    assert result["resource"] == 3 + 1  # r recomputed every generation, r2 once


async def test_scope_and_resources_reach_sub_agents() -> None:
    async def child(_: None) -> tuple[Any, Any, Any]:
        return expect_scope("tenant"), expect_resource("db"), expect_resource("cache")

    child_agent = create_agent(id="child", handler=child)

    async def parent(_: None) -> Any:
        equip_scope("tenant", "acme")
        equip_resource("cache", lambda: {"hits": 0}, [])
        with pytest.raises(UsageError, match="equip_scope"):
            expect_scope("tenant")  # a frame reads its ancestors' scope, not its own
        return await child_agent(None)

    async def root() -> Any:
        return await create_agent(id="parent", handler=parent)(None)

    assert await run_with(root, providers={"db": "sqlite"}) == ("acme", "sqlite", {"hits": 0})


async def test_missing_resource_names_the_key_and_the_fix() -> None:
    async def handler(_: None) -> Any:
        return expect_resource("db")

    with pytest.raises(UsageError, match=r"providers=\{'db'"):
        await run_with(lambda: create_agent(id="a", handler=handler)(None))


async def test_sub_agent_inherits_the_parent_model_and_has_its_own_generation() -> None:
    model = scripted_stream_model([final_answer("child says hi"), final_answer("parent done")])

    async def child(_: None) -> str:
        equip_instruction("child task")
        return (await prompt_chat()).data

    child_agent = create_agent(id="child", handler=child)

    async def parent(_: None) -> tuple[str, str]:
        equip_instruction("parent task")
        sub = await child_agent(None)  # the parent's prompt is still ahead: its draft is intact
        return sub, (await prompt_chat()).data

    agent = create_agent(id="parent", handler=parent, model=model)
    assert await agent(None) == ("child says hi", "parent done")
    assert model.requests[0].messages[-1] == UserMessage(content="child task")


async def test_model_from_registry_root_and_missing() -> None:
    registry_model = scripted_stream_model([final_answer("from registry")], id="reg")
    root_model = scripted_stream_model([final_answer("from root")], id="root")

    async def handler(_: None) -> str:
        equip_instruction("q")
        return (await prompt_chat()).data

    by_id = create_agent(id="a", handler=handler, model="fast")
    inherit = create_agent(id="b", handler=handler)

    async def main() -> tuple[str, str]:
        return await by_id(None), await inherit(None)

    assert await run_with(main, model_registry={"fast": registry_model}, model=root_model) == (
        "from registry", "from root")
    with pytest.raises(UsageError, match="'slow'"):
        await run_with(lambda: create_agent(id="c", handler=handler, model="slow")(None),
                       model_registry={"fast": registry_model})
    with pytest.raises(UsageError, match="has no model"):
        await inherit(None)


async def test_concurrent_agents_do_not_share_frames() -> None:
    results: dict[int, int] = {}

    async def handler(props: int) -> int:
        value, set_value = equip_memory("v", props)
        await anyio.sleep(0)
        set_value(value * 10)
        await anyio.sleep(0)
        return equip_memory("v", -1)[0]

    agent = create_agent(id="c", handler=handler)

    async def one(i: int) -> None:
        results[i] = await agent(i)

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(one, i)
    assert results == {i: i * 10 for i in range(5)}


def test_create_agent_refuses_bad_arguments() -> None:
    async def handler(_: None) -> None:
        return None

    with pytest.raises(UsageError, match="id"):
        create_agent(id="", handler=handler)
    with pytest.raises(UsageError, match="handler"):
        create_agent(id="a", handler="nope")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="max_retries"):
        create_agent(id="a", handler=handler, max_retries=-1)
    with pytest.raises(UsageError, match="not a bindloop.model.Model"):
        create_agent(id="a", handler=handler, model=42)


async def test_a_non_awaitable_handler_is_a_typed_error() -> None:
    agent = create_agent(id="sync", handler=lambda props: props)  # type: ignore[arg-type,return-value]
    with pytest.raises(PortContractError, match="async def"):
        await agent(1)


def test_wire_models_declare_their_capabilities() -> None:
    class NoTransport:
        def open(self, request: object) -> Any:
            raise AssertionError("not called")

    adapter = ModelAdapter(OpenAIChatAdapter(), NoTransport(), WireOptions(model="gpt-x"),
                           price=lambda u: u.input_tokens)
    model: Model = adapter  # the wire's model is a Model as it is: no adapter in between
    assert (model.id, model.provider, model.structured_output) == ("gpt-x", "openai_chat",
                                                                   "json_schema")
    assert model.price(TurnUsage(input_tokens=7)) == 7
    own = ModelAdapter(OpenAIChatAdapter(), NoTransport(), WireOptions(model="gpt-x"), id="mine",
                       provider="acme", structured_output="tool")
    assert (own.id, own.provider, own.structured_output, own.price(TurnUsage())) == (
        "mine", "acme", "tool", 0)
    with pytest.raises(UsageError, match="structured_output"):
        ModelAdapter(OpenAIChatAdapter(), NoTransport(), WireOptions(model="gpt-x"),
                     structured_output="native")  # type: ignore[arg-type]
    stream_model = scripted_stream_model([])
    assert create_agent(id="a", handler=_noop, model=stream_model)._model is stream_model


async def _noop(_: None) -> None:
    return None


@pytest.mark.parametrize("where", ["create_agent", "run_with", "augment_model"])
async def test_something_that_is_not_a_model_is_refused_naming_what_it_lacks(where: str) -> None:
    class StreamOnly:
        id = "half"

        async def stream(self, messages: Any, request: Any) -> Any:
            yield None

    with pytest.raises(UsageError, match=rf"{where}\(model=\).*lacks provider, "
                                         r"structured_output, price, complete"):
        if where == "create_agent":
            create_agent(id="a", handler=_noop, model=StreamOnly())  # type: ignore[arg-type]
        elif where == "run_with":
            await run_with(lambda: None, model=StreamOnly())  # type: ignore[arg-type]
        else:
            augment_model(StreamOnly(), [])  # type: ignore[arg-type]


_MESSAGE_CLASSES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


class _NotedUser(UserMessage):
    """A message subclass: still a message to equip_history."""


_history_entries = st.lists(st.one_of(
    _strategies.messages(),
    st.builds(_NotedUser, content=st.text(min_size=1, max_size=5)),
    st.sampled_from([1, "text", {"role": "user", "content": "a dict"}, None])), max_size=12)


@settings(max_examples=60, deadline=None)
@given(first=_history_entries, second=_history_entries, as_iterator=st.booleans())
def test_history_is_added_whole_in_order_or_not_at_all(first: list[Any], second: list[Any],
                                                       as_iterator: bool) -> None:
    """Each equip_history call adds all its messages in order (from a list, a tuple or an
    iterator, read once), or raises naming its first entry that is no message and adds nothing."""
    model = scripted_stream_model([final_answer("ok")])
    refused: list[str] = []

    async def handler(_: None) -> str:
        for entries in (first, second):
            try:
                equip_history(iter(entries) if as_iterator else tuple(entries))
            except UsageError as exc:
                refused.append(str(exc))
        equip_instruction("now")
        return (await prompt_chat()).data

    assert anyio.run(create_agent(id="a", handler=handler, model=model), None) == "ok"
    expected: list[Any] = []
    expected_refusals: list[str] = []
    for entries in (first, second):
        bad = [e for e in entries if not isinstance(e, _MESSAGE_CLASSES)]
        if bad:
            expected_refusals.append(f"equip_history(): {bad[0]!r} is not a bindloop.contracts message")
        else:
            expected.extend(entries)
    assert refused == expected_refusals
    sent = list(model.requests[0].messages)
    assert sent[:-1] == expected and all(a is b for a, b in zip(sent, expected))
    assert sent[-1] == UserMessage(content="now")
