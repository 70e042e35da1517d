"""Every conversation of an agent gets a fresh execution id from the agent's id port, so two chats
of one agent saved to one SqliteStore do not collide; a collision that does happen (a bad port)
is named as another conversation, not as another writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from bindloop.agent import ChatResult, create_agent, equip_instruction, prompt_chat, resume_chat
from bindloop.errors import PortContractError, UsageError
from bindloop.hosts.stores.sqlite import CheckpointConflictError, SqliteStore
from bindloop.testing import final_answer, scripted_stream_model


def _chat_agent(store: SqliteStore, **agent: Any) -> Any:
    async def handler(props: str) -> ChatResult:
        equip_instruction(props)
        return await prompt_chat(on_checkpoint=store.save_checkpoint)

    model = scripted_stream_model([final_answer("one"), final_answer("two")])
    return create_agent(id="files", handler=handler, model=model, **agent)


def test_two_conversations_of_one_agent_save_to_one_store(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        agent = _chat_agent(store)
        first = anyio.run(agent, "first user")
        second = anyio.run(agent, "second user")
        assert first.checkpoint is not None and second.checkpoint is not None
        assert first.checkpoint.execution_id != second.checkpoint.execution_id
        assert sorted(store.checkpoint_ids()) == sorted(
            [first.checkpoint.execution_id, second.checkpoint.execution_id])


def test_the_injected_port_names_each_conversation(tmp_path: Path) -> None:
    ids = iter(["u-17", "u-18"])
    with SqliteStore(tmp_path / "s.db") as store:
        agent = _chat_agent(store, execution_ids=lambda: next(ids))
        assert anyio.run(agent, "a").checkpoint.execution_id == "u-17"
        assert anyio.run(agent, "b").checkpoint.execution_id == "u-18"
        assert store.checkpoint_ids() == ["u-17", "u-18"]


def test_a_reused_id_is_named_another_conversation(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        agent = _chat_agent(store, execution_ids=lambda: "same")
        anyio.run(agent, "a")
        with pytest.raises(CheckpointConflictError) as info:
            anyio.run(agent, "b")
        assert info.value.case == "another_conversation"
        assert "another conversation" in str(info.value)
        assert "another writer" not in str(info.value)


def test_two_resumes_of_one_checkpoint_are_named_another_writer(tmp_path: Path) -> None:
    from bindloop.contracts import ToolSuspend
    from bindloop.tools import define_tool
    from bindloop.testing import tool_call, tool_call_turn
    import msgspec

    class Q(msgspec.Struct):
        q: str

    async def ask(args: Q, ctx: object) -> ToolSuspend:
        return ToolSuspend(mode="waiting_for_reply", detail=args.q)

    tool = define_tool(name="ask", description="ask", args=Q, execute=ask)
    with SqliteStore(tmp_path / "s.db") as store:
        async def start(_: None) -> ChatResult:
            from bindloop.agent import equip_tool
            equip_instruction("go")
            equip_tool(tool)
            return await prompt_chat(on_checkpoint=store.save_checkpoint)

        model = scripted_stream_model([tool_call_turn([tool_call("ask", {"q": "?"})])])
        paused = anyio.run(create_agent(id="a", handler=start, model=model), None)
        cp = store.load_checkpoint(paused.checkpoint.execution_id)

        async def resume(_: None) -> ChatResult:
            from bindloop.agent import equip_tool
            equip_tool(tool)
            return await resume_chat(cp, reply="yes", on_checkpoint=store.save_checkpoint)

        model = scripted_stream_model([final_answer("ok"), final_answer("ok")])
        anyio.run(create_agent(id="a", handler=resume, model=model), None)
        with pytest.raises(CheckpointConflictError) as info:
            anyio.run(create_agent(id="a", handler=resume, model=model), None)
        assert info.value.case == "another_writer"


def test_a_bad_port_is_refused_by_name() -> None:
    async def handler(_: None) -> ChatResult:
        equip_instruction("x")
        return await prompt_chat()

    model = scripted_stream_model([final_answer("one")])
    with pytest.raises(PortContractError, match="execution_ids"):
        anyio.run(create_agent(id="a", handler=handler, model=model, execution_ids=lambda: ""),
                  None)
    with pytest.raises(UsageError, match="execution_ids"):
        create_agent(id="a", handler=handler, execution_ids="nope")  # type: ignore[arg-type]
