"""The Worker's session store keeps a chat's transcript: what it stores after a chat is validated
as storage would validate it, but the stored transcript it was read back from is not checked again
(each request costs what its chat added, not the whole session)."""

from __future__ import annotations

import sys
from typing import Any

import msgspec
import pytest

from bindloop.agent import ChatResult
from bindloop.checkpoints import (
    CheckpointFormatError,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.checkpoints import _codec
from bindloop.contracts import AssistantMessage, RunStats, UserMessage
from bindloop.hosts.workers.agent import settled_checkpoint, stopped_checkpoint


class _Counting:
    """Counts the whole checkpoints the codec rebuilds and the user and assistant messages it
    checks, and keeps the ids of every message it checks (in a batch or in a whole checkpoint).
    ``install`` puts it in place."""

    def __init__(self) -> None:
        self.whole = 0
        self.messages = 0
        self.ids: set[int] = set()
        self.real = msgspec.to_builtins
        self.real_batch = _codec._convert_messages

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(msgspec, "to_builtins", self)
        monkeypatch.setattr(_codec, "_convert_messages", self.batch)

    def batch(self, messages: tuple[Any, ...]) -> Any:
        self.ids.update(map(id, messages))
        self.messages += sum(isinstance(m, (UserMessage, AssistantMessage)) for m in messages)
        return self.real_batch(messages)

    def __call__(self, value: Any, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__") == _codec.__name__:
            if isinstance(value, _codec.LoopCheckpoint) and value.messages:
                self.whole += 1
                self.ids.update(map(id, value.messages))
        return self.real(value, *args, **kwargs)


def _stored(n: int) -> Any:
    past = [UserMessage(content=f"q{i}") if i % 2 == 0 else AssistantMessage(content=f"a{i}")
            for i in range(n)]
    cp = create_loop_checkpoint(execution_id="s", messages=past, max_iterations=50)
    return parse_loop_checkpoint(serialize_loop_checkpoint(cp))  # as a session store reads it


def _chat(*delta: Any) -> ChatResult:
    return ChatResult(data="ok", delta=list(delta), stop_reason="done",
                      stats=RunStats(turns=1))


def test_a_settled_chat_checks_only_its_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = _stored(200)
    counting = _Counting()
    counting.install(monkeypatch)
    cp = settled_checkpoint(stored, _chat(UserMessage(content="next"),
                                          AssistantMessage(content="answer")), resumed=False)
    stopped = stopped_checkpoint(cp)
    body = serialize_loop_checkpoint(cp)  # a store's save of it
    monkeypatch.undo()
    assert counting.whole == 0 and counting.messages == 2
    assert cp.revision == stored.revision + 1 and cp.status == "finished"
    assert len(cp.messages) == 202 and stopped.status == "aborted"
    assert parse_loop_checkpoint(body) == cp


def test_a_settled_chat_with_a_bad_delta_is_refused_as_storage_would() -> None:
    stored = _stored(4)
    with pytest.raises(CheckpointFormatError) as caught:
        settled_checkpoint(stored, _chat(UserMessage(content="\ud800")), resumed=False)
    assert caught.value.field.startswith("messages[4]")


def test_a_chat_over_the_stored_session_saves_without_checking_it_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new message to a stored session: the chat's saves after each tool round check what the
    chat added, never the stored transcript (equip_history(..., source=stored))."""
    import anyio

    from bindloop.hosts.workers.agent import run_session
    from bindloop.testing import final_answer, scripted_model, tool_call, tool_call_turn
    from bindloop.tools import define_tool

    past = [UserMessage(content=f"q{i}") if i % 2 == 0 else AssistantMessage(content=f"a{i}")
            for i in range(201)]  # ends with the request's new user message
    stored = parse_loop_checkpoint(serialize_loop_checkpoint(
        create_loop_checkpoint(execution_id="s", messages=past, max_iterations=50)))

    @define_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = scripted_model([tool_call_turn([tool_call("add", {"a": 1, "b": 2})]),
                            tool_call_turn([tool_call("add", {"a": 3, "b": 4})]),
                            final_answer("7")])
    saves: list[Any] = []
    counting = _Counting()

    async def save(cp: Any) -> None:
        saves.append(cp)

    async def main() -> Any:
        counting.install(monkeypatch)
        try:
            return await run_session(stored, model=model, tools=[add], save=save)
        finally:
            monkeypatch.undo()

    run = anyio.run(main)
    assert run.stop_reason == "done" and run.text == "7"
    assert [cp.revision for cp in saves] == [1, 2]
    assert counting.whole == 0  # no save rebuilt a whole checkpoint
    assert not {id(m) for m in stored.messages} & counting.ids
    assert parse_loop_checkpoint(serialize_loop_checkpoint(saves[-1])) == saves[-1]
