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
    on_stream,
    prompt_chat,
    reborn,
)
from bindloop.contracts import ToolResult
from bindloop.errors import UsageError
from bindloop.plugins import define_tool
from bindloop.testing import final_answer, scripted_stream_model

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
