"""prompt_chat / resume_chat ``on_checkpoint``: a save at every settled boundary, and a run killed
after any round resumes from its last save in a new process without running a round again."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_instruction,
    equip_tool,
    expect_validator,
    prompt_agent,
    prompt_chat,
    resume_chat,
)
from bindloop.contracts import ToolMessage, ToolResult, ToolSuspend, UserMessage
from bindloop.errors import UsageError
from bindloop.agent.errors import StructuredOutputError, TurnBudgetExceededError
from bindloop.tools import define_tool
from bindloop.checkpoints import CheckpointFormatError, LoopCheckpoint, parse_loop_checkpoint, \
    serialize_loop_checkpoint
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn


class Expr(msgspec.Struct):
    expression: str


class Killed(Exception):
    """The provider (or the process) going away mid-run."""


def _counting(ran: list[str]) -> Any:
    async def calc(args: Expr, ctx: object) -> ToolResult:
        ran.append(args.expression)
        a, b = args.expression.split("+")
        return ToolResult(content=str(int(a) + int(b)))

    return define_tool(name="calc", description="Add two numbers", args=Expr, execute=calc)


def _round(i: int) -> Any:
    return tool_call_turn([tool_call("calc", {"expression": f"{i}+1"}, id=f"c{i}")])


def _script(n: int) -> list[Any]:
    return [*(_round(i) for i in range(n)), final_answer(f"counted to {n}")]


def _prompting(tool: Any, **prompt: Any) -> Any:
    async def handler(props: str) -> ChatResult:
        equip_instruction(props)
        equip_tool(tool)
        return await prompt_chat(**prompt)

    return handler


def _resuming(tool: Any, stored: bytes, **kw: Any) -> Any:
    async def handler(_: None) -> ChatResult:
        equip_tool(tool)
        return await resume_chat(stored, **kw)

    return handler


@settings(max_examples=30, deadline=None)
@given(data=st.data(), n=st.integers(1, 5), sync=st.booleans())
def test_a_run_killed_after_any_round_resumes_from_its_last_save(data: Any, n: int,
                                                                 sync: bool) -> None:
    k = data.draw(st.integers(1, n), label="rounds before the kill")

    async def main() -> None:
        # The uninterrupted chat, for the outcome to compare with.
        ref_ran: list[str] = []
        reference = await create_agent(id="chat", handler=_prompting(_counting(ref_ran)),
                                       model=scripted_stream_model(_script(n)))("count")

        ran: list[str] = []
        saved: list[bytes] = []
        revisions: list[int] = []

        def keep(cp: LoopCheckpoint) -> None:
            # every boundary save is ready after a round; the chat's end is saved as finished
            assert (cp.status == "ready" and isinstance(cp.messages[-1], ToolMessage)) or \
                cp.status == "finished"
            revisions.append(cp.revision)
            saved.append(serialize_loop_checkpoint(cp))

        async def keep_async(cp: LoopCheckpoint) -> None:
            await anyio.sleep(0)
            keep(cp)

        save = keep if sync else keep_async
        dying = scripted_stream_model([*_script(n)[:k], Killed("provider down")])
        with pytest.raises(Killed):
            await create_agent(id="chat", handler=_prompting(_counting(ran), on_checkpoint=save),
                               model=dying)("count")
        assert len(saved) == k  # one save per finished round
        last = parse_loop_checkpoint(saved[-1])
        assert (last.iterations, last.stats.tool_calls) == (k, k)

        # "A new process": only the bytes carried over; a fresh agent, tool and model.
        rest = scripted_stream_model(_script(n)[k:])
        done = await create_agent(id="chat", model=rest,
                                  handler=_resuming(_counting(ran), saved[-1],
                                                    on_checkpoint=save))(None)
        assert ran == ref_ran == [f"{i}+1" for i in range(n)]  # each tool ran exactly once
        assert (done.stop_reason, done.data) == (reference.stop_reason, reference.data)
        assert [*last.messages, *done.delta] == [UserMessage(content="count"), *reference.delta]
        assert len(saved) == n + 1 and rest.position == n - k + 1
        assert parse_loop_checkpoint(saved[-1]).status == "finished"
        assert done.checkpoint is not None and serialize_loop_checkpoint(
            done.checkpoint) == saved[-1]
        assert revisions == sorted(set(revisions))  # strictly increasing across both processes

    anyio.run(main)


@pytest.mark.anyio
async def test_a_raising_save_fails_the_prompt_and_nothing_after_it_runs() -> None:
    ran: list[str] = []
    model = scripted_stream_model(_script(3))

    def refuse(cp: LoopCheckpoint) -> None:
        raise OSError("storage refused the write")

    with pytest.raises(OSError, match="storage refused"):
        await create_agent(id="chat", handler=_prompting(_counting(ran), on_checkpoint=refuse),
                           model=model)("count")
    assert ran == ["0+1"] and model.position == 1  # no model call after the failed save


@pytest.mark.anyio
async def test_the_suspend_checkpoint_comes_after_every_save() -> None:
    class Question(msgspec.Struct):
        question: str

    async def ask(args: Question, ctx: object) -> ToolSuspend:
        return ToolSuspend(mode="waiting_for_reply", detail=args.question)

    asker = define_tool(name="ask", description="Ask", args=Question, execute=ask)
    saves: list[LoopCheckpoint] = []
    ran: list[str] = []
    model = scripted_stream_model([_round(0), _round(1),
                                   tool_call_turn([tool_call("ask", {"question": "go on?"})])])

    async def handler(_: None) -> ChatResult:
        equip_instruction("count")
        equip_tool(_counting(ran))
        equip_tool(asker)
        return await prompt_chat(on_checkpoint=saves.append)

    paused = await create_agent(id="chat", handler=handler, model=model)(None)
    assert paused.stop_reason == "waiting_for_reply" and paused.checkpoint is not None
    # the suspend's checkpoint is the last of the saves (on_checkpoint sees it)
    assert [c.revision for c in saves] == [0, 1, 2]
    assert saves[-1] == paused.checkpoint and paused.checkpoint.revision == 2
    assert {c.execution_id for c in saves} == {paused.checkpoint.execution_id}


@pytest.mark.anyio
async def test_a_save_inside_a_re_ask_resumes_with_the_re_asks_that_were_left() -> None:
    """max_retries=1: the first answer is refused, the re-ask does a tool round and dies. Resumed,
    the second refusal is the last (as uninterrupted), and both attempts are reported."""
    def no(text: str) -> str:
        return f"{text!r} is not good"

    def handler_with(ran: list[str], **prompt: Any) -> Any:
        async def handler(_: None) -> ChatResult:
            equip_instruction("count")
            equip_tool(_counting(ran))
            expect_validator(no)
            return await prompt_chat(**prompt)

        return handler

    turns = [final_answer("first"), _round(0), final_answer("second")]
    ref_ran: list[str] = []
    with pytest.raises(StructuredOutputError) as reference:
        await create_agent(id="chat", max_retries=1, handler=handler_with(ref_ran),
                           model=scripted_stream_model(turns))(None)

    ran: list[str] = []
    saved: list[bytes] = []
    with pytest.raises(Killed):
        await create_agent(id="chat", max_retries=1,
                           handler=handler_with(ran, on_checkpoint=lambda c: saved.append(
                               serialize_loop_checkpoint(c))),
                           model=scripted_stream_model([*turns[:2], Killed()]))(None)
    # Saved before the re-ask's model call and after its tool round: both settled boundaries.
    assert len(saved) == 2
    assert msgspec.json.decode(saved[0])["reask"]["attempts"] == [["first", "'first' is not good"]]

    async def resume(_: None) -> ChatResult:
        equip_tool(_counting(ran))
        expect_validator(no)
        return await resume_chat(saved[-1])

    with pytest.raises(StructuredOutputError) as resumed:
        await create_agent(id="chat", max_retries=1, handler=resume,
                           model=scripted_stream_model(turns[2:]))(None)
    assert resumed.value.attempts == reference.value.attempts
    assert [a[0] for a in resumed.value.attempts] == ["first", "second"]
    assert ran == ref_ran == ["0+1"]


@pytest.mark.anyio
async def test_a_save_in_a_loop_cut_by_max_total_turns_resumes_to_the_same_error() -> None:
    ran: list[str] = []
    saved: list[bytes] = []
    with pytest.raises(Killed):
        await create_agent(id="chat", handler=_prompting(
            _counting(ran), max_turn_steps=5, max_total_turns=2,
            on_checkpoint=lambda c: saved.append(serialize_loop_checkpoint(c))),
            model=scripted_stream_model([_round(0), Killed()]))("count")
    with pytest.raises(TurnBudgetExceededError) as info:
        await create_agent(id="chat", handler=_resuming(_counting(ran), saved[-1]),
                           model=scripted_stream_model([_round(1), _round(2)]))(None)
    assert info.value.max_total_turns == 2 and ran == ["0+1", "1+1"]


@pytest.mark.anyio
async def test_prompt_agent_refuses_on_checkpoint_and_a_save_must_be_callable() -> None:
    class Out(msgspec.Struct):
        n: int

    async def structured(_: None) -> Any:
        return await prompt_agent(Out, on_checkpoint=print)  # type: ignore[call-overload]

    with pytest.raises(UsageError, match=r"prompt_agent\(on_checkpoint=...\) is not supported"):
        await create_agent(id="a", handler=structured,
                           model=scripted_stream_model([final_answer('{"n": 1}')]))(None)

    with pytest.raises(UsageError, match=r"prompt_chat\(on_checkpoint=...\) must be a function"):
        await create_agent(id="a", handler=_prompting(_counting([]), on_checkpoint="store"),
                           model=scripted_stream_model([final_answer("x")]))("hi")


@pytest.mark.anyio
async def test_a_checkpoint_whose_reask_record_is_not_one_is_refused_by_name() -> None:
    saved: list[LoopCheckpoint] = []
    with pytest.raises(Killed):
        await create_agent(id="chat", handler=_prompting(_counting([]), on_checkpoint=saved.append),
                           model=scripted_stream_model([_round(0), Killed()]))("count")
    assert saved[0].bindings.config == {}  # the record is a typed field, not a config entry
    raw = msgspec.json.decode(serialize_loop_checkpoint(saved[0]))
    raw["reask"]["attempts"] = "none"
    with pytest.raises(CheckpointFormatError, match="reask.attempts"):
        await create_agent(id="chat", handler=_resuming(_counting([]), msgspec.json.encode(raw)),
                           model=scripted_stream_model([final_answer("x")]))(None)
    raw = msgspec.json.decode(serialize_loop_checkpoint(saved[0]))
    raw["reask"]["attempt_turns"] = 5
    with pytest.raises(CheckpointFormatError, match="reask.attempt_turns"):
        await create_agent(id="chat", handler=_resuming(_counting([]), msgspec.json.encode(raw)),
                           model=scripted_stream_model([final_answer("x")]))(None)
    with pytest.raises(UsageError, match=r"resume_chat\(on_checkpoint=...\) must be a function"):
        await create_agent(id="chat", handler=_resuming(_counting([]), serialize_loop_checkpoint(
            saved[0]), on_checkpoint=3), model=scripted_stream_model([final_answer("x")]))(None)


@pytest.mark.anyio
@pytest.mark.parametrize("status", ["finished", "aborted"])
async def test_a_checkpoint_with_nothing_to_continue_is_refused(status: str) -> None:
    saved: list[LoopCheckpoint] = []
    with pytest.raises(Killed):
        await create_agent(id="chat", handler=_prompting(_counting([]), on_checkpoint=saved.append),
                           model=scripted_stream_model([_round(0), Killed()]))("count")
    done = msgspec.structs.replace(saved[0], status=status)
    model = scripted_stream_model([final_answer("x")])
    with pytest.raises(UsageError, match=f"the checkpoint is '{status}'"):
        await create_agent(id="chat", handler=_resuming(_counting([]),
                                                        serialize_loop_checkpoint(done)),
                           model=model)(None)
    assert model.requests == []
