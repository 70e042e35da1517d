"""The Worker's protocol-run continuation (worker/src/replay.py, no Workers API in it) on CPython:
a run lost right after any of its saves, continued by replaying the inputs it had fed into a fresh
encoder and resuming its saved checkpoint, writes byte for byte the stream an uninterrupted run
writes -- for the AI SDK and AG-UI, after a tool round and after an approved call (which does not
run again)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bindloop.contracts import AssistantMessage, ToolCall, UserMessage
from bindloop.hosts.asgi import AgUiFrames, ChatInput, Frames, UiFrames, drive_run
from bindloop.hosts.asgi_agent import agent_runner
from bindloop.hosts.ui_demo import DemoModel, demo_tools
from bindloop.protocols import AgUiEncoder, ToolApproval, UIStreamEncoder
from bindloop.session import LoopCheckpoint, parse_loop_checkpoint, serialize_loop_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "worker" / "src"))
from replay import RecordedFrames, decode_fed, encode_fed, replay  # noqa: E402

DELETE = AssistantMessage(content="", tool_calls=(
    ToolCall(id="call-del", name="delete_note", arguments='{"title":"groceries"}'),))
CHATS = {
    "round": ChatInput(chat_id="c1", protocol="ui", transcript=(
        UserMessage(content="count the words of this sentence please"),)),
    "approved": ChatInput(chat_id="c2", protocol="ui", transcript=(
        UserMessage(content="delete groceries"), DELETE), approvals=(ToolApproval(
            approval_id="approval-call-del", tool_call_id="call-del", tool_name="delete_note",
            arguments='{"title":"groceries"}', approved=True),)),
}


def frames_for(protocol: str) -> Frames:
    if protocol == "ui":
        return UiFrames(UIStreamEncoder("msg-1"))
    return AgUiFrames(AgUiEncoder(thread_id="t1", run_id="run-1"))


class Save(msgspec.Struct):
    checkpoint: LoopCheckpoint
    offset: int
    fed: str


async def run(chat: ChatInput, frames: RecordedFrames, deleted: list[str],
              resumed: bool = False) -> tuple[list[bytes], list[Save]]:
    out: list[bytes] = []
    saves: list[Save] = []

    async def save(_chat: ChatInput, cp: LoopCheckpoint) -> None:
        # What the Worker stores: the checkpoint's JSON, the log's length, the inputs so far.
        saves.append(Save(parse_loop_checkpoint(serialize_loop_checkpoint(cp)), len(out),
                          encode_fed(frames.fed)))

    runner = agent_runner(DemoModel(), tools=demo_tools(deleted), needs_approval=["delete_note"],
                          on_checkpoint=save)
    assert await drive_run(runner, chat, frames, out.extend, resumed=resumed) == "finished"
    return out, saves


@pytest.mark.parametrize("protocol", ["ui", "ag-ui"])
@pytest.mark.parametrize("name", sorted(CHATS))
def test_a_run_lost_after_any_save_continues_to_the_same_bytes(protocol: str, name: str) -> None:
    chat = msgspec.structs.replace(CHATS[name], protocol=protocol)

    async def main() -> None:
        deleted: list[str] = []
        whole, saves = await run(chat, RecordedFrames(frames_for(protocol)), deleted)
        assert saves, "the run saved no boundary"
        assert deleted == (["groceries"] if name == "approved" else [])
        for save in saves:
            recorder, prefix = replay(frames_for(protocol), decode_fed(save.fed))
            assert prefix == whole[:save.offset]  # the dead run's frames, offset for offset
            again = msgspec.structs.replace(chat, transcript=save.checkpoint.messages,
                                            approvals=(), checkpoint=save.checkpoint)
            rest, _ = await run(again, recorder, deleted, resumed=True)
            assert prefix + rest == whole
        assert deleted == (["groceries"] if name == "approved" else [])  # never run again

    anyio.run(main)


def test_encoded_inputs_round_trip_and_concatenate() -> None:
    async def main() -> list[Any]:
        frames = RecordedFrames(frames_for("ui"))
        await run(CHATS["round"], frames, [])
        return frames.fed

    fed = anyio.run(main)
    half = len(fed) // 2
    assert decode_fed(encode_fed(fed[:half]) + encode_fed(fed[half:])) == fed
    with pytest.raises(TypeError):
        encode_fed([(0, UserMessage(content="not an input"))])  # type: ignore[list-item]
