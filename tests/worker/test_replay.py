"""The Worker's protocol-run continuation (bindloop.hosts.chat.replay and
bindloop.hosts.chat.follow, no Workers API in them) on CPython:
a run lost right after any of its saves, continued by replaying the inputs it had fed into a fresh
encoder and resuming its saved checkpoint, writes byte for byte the stream an uninterrupted run
writes -- for the AI SDK and AG-UI, after a tool round and after an approved call (which does not
run again)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import AssistantMessage, ToolCall, UserMessage
from bindloop.hosts.chat.run import AgUiFrames, ChatInput, Frames, UiFrames, drive_run
from bindloop.hosts.chat.agent import agent_runner
from examples.demos.ui_demo import DemoModel, demo_tools
from bindloop.protocols import AgUiEncoder, ToolApproval, UIStreamEncoder
from bindloop.checkpoints import LoopCheckpoint, parse_loop_checkpoint, serialize_loop_checkpoint

from bindloop.hosts.chat.replay import RecordedFrames, decode_fed, encode_fed, replay
from bindloop.hosts.chat.follow import LogFollower

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "worker" / "src"))
from tools import TOOLS  # noqa: E402  # the template's

DELETE = AssistantMessage(content="", tool_calls=(
    ToolCall(id="call-del", name="delete_note", arguments='{"title":"groceries"}'),))
CHATS = {
    "round": ChatInput(chat_id="c1", protocol="ui", transcript=(
        UserMessage(content="count the words of this sentence please"),)),
    "approved": ChatInput(chat_id="c2", protocol="ui", transcript=(
        UserMessage(content="delete groceries"), DELETE), approvals=(ToolApproval(
            approval_id="approval-call-del", tool_call_id="call-del", tool_name="delete_note",
            arguments='{"title":"groceries"}', approved=True),)),
    # The shared state is sent once, before the save that follows the approvals.
    "approved, with state": ChatInput(chat_id="c3", protocol="ui", transcript=(
        UserMessage(content="delete groceries"), DELETE), state={"notes": ["groceries"]},
        approvals=(ToolApproval(approval_id="approval-call-del", tool_call_id="call-del",
                                tool_name="delete_note", arguments='{"title":"groceries"}',
                                approved=True),)),
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

    # approvals=None, as the Worker's runner: the approvals arrive in a transcript no runner of
    # this test suspended on.
    runner = agent_runner(DemoModel(), tools=demo_tools(deleted), needs_approval=["delete_note"],
                          on_checkpoint=save, approvals=None)
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
        assert deleted == (["groceries"] if name.startswith("approved") else [])
        for save in saves:
            recorder, prefix = replay(frames_for(protocol), decode_fed(save.fed))
            assert prefix == whole[:save.offset]  # the dead run's frames, offset for offset
            again = msgspec.structs.replace(chat, transcript=save.checkpoint.messages,
                                            approvals=(), checkpoint=save.checkpoint)
            rest, _ = await run(again, recorder, deleted, resumed=True)
            assert prefix + rest == whole
        assert deleted == (["groceries"] if name.startswith("approved") else [])  # once

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


# -- what a reconnected client is sent while the run it follows dies and is continued ------------


def _world(n: int, kill: int, save: int, quiet: int) -> list[dict[str, Any]]:
    """The states ``read_log`` passes through, as whole logs: run ``r1`` logging the stream ``E``
    live (renewing its lease as it goes), killed after ``kill`` events (those past its save at
    ``save`` are a dead attempt's, ``D``); ``quiet`` more reads while its lease still looks live,
    then lost; then ``r2`` continuing it -- repeating ``E`` up to the save, then the rest."""
    dead = [[i, "", ("E" if i < save else "D", i)] for i in range(kill)]
    whole = [[i, "", ("E", i)] for i in range(n)]
    cont = {"run": "r1", "offset": save - 1} if save > 0 else None
    states = [dict(run="r1", log=dead[:j], live=True, lost=False, ended=False, saved=save - 1,
                   continues=None, logged=j, expires=1_000 + j) for j in range(kill + 1)]
    states += [dict(states[-1]) for _ in range(quiet)]  # dead, its lease not out yet
    states.append(dict(states[-1], live=False, lost=True))
    states += [dict(run="r2", log=whole[:j], live=True, lost=False, ended=False, saved=save - 1,
                    continues=cont, logged=j, expires=5_000 + j) for j in range(n + 1)]
    states.append(dict(states[-1], live=False, ended=True, expires=0))
    return states


def _read(state: dict[str, Any], after: int, limit: int) -> dict[str, Any]:
    events = [e for e in state["log"] if e[0] > after][:limit]
    return {k: v for k, v in state.items() if k != "log"} | {"events": events}


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_reconnected_stream_is_always_the_start_of_one_run_s_stream(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12), label="events")
    kill = data.draw(st.integers(0, n), label="kill")
    save = data.draw(st.integers(0, kill), label="save")
    states = _world(n, kill, save, data.draw(st.integers(0, 3), label="quiet"))
    at = first = data.draw(st.integers(0, len(states) - 1), label="connect at")
    follower = LogFollower(states[at]["run"], -1)
    sent: list[Any] = []
    then = "more"
    for _ in range(200):
        events, then = follower.take(_read(states[at], follower.after, data.draw(
            st.integers(1, 4), label="batch")))
        sent += [payload for _, _, payload in events]
        if then == "end":
            break
        at = min(len(states) - 1, at + data.draw(st.integers(0, 2), label="world moves"))
    whole = [("E", i) for i in range(n)]
    dead = [("E" if i < save else "D", i) for i in range(kill)]
    assert sent == whole[:len(sent)] or sent == dead[:len(sent)], sent  # never a mix
    if then != "end":
        return  # still waiting (the world stopped moving before the run ended)
    if sent and sent[-1][0] == "D":
        # It streamed the dead attempt while the run was proven alive (so it connected before
        # the kill, and saw it log more): it ended there, and its client reconnects.
        assert len(sent) <= kill and first < kill
    else:
        assert sent == whole, (sent, first)  # connected later: all of the continued run


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_resume_after_the_run_died_under_a_live_lease_gets_the_whole_run(
        data: st.DataObject) -> None:
    """A client that reconnects once the run's isolate died but before its lease ran out (the
    lease looks live, the run logs nothing more) is sent the whole continued run -- never the
    dead attempt's events past the save, never a stream that ends early."""
    n = data.draw(st.integers(1, 12), label="events")
    kill = data.draw(st.integers(1, n), label="kill")
    save = data.draw(st.integers(0, kill - 1), label="save")  # events past the save died
    quiet = data.draw(st.integers(1, 3), label="quiet")
    states = _world(n, kill, save, quiet)
    at = data.draw(st.integers(kill, kill + quiet), label="connect at")  # dead, lease live
    assert states[at]["live"] and states[at]["run"] == "r1"
    follower = LogFollower("r1", -1)
    sent: list[Any] = []
    stays = data.draw(st.integers(0, 12), label="reads of an unchanged world")
    for _ in range(400):
        events, then = follower.take(_read(states[at], follower.after, data.draw(
            st.integers(1, 4), label="batch")))
        sent += [payload for _, _, payload in events]
        if then == "end":
            break
        if stays and data.draw(st.booleans(), label="world stays"):
            stays -= 1
        else:
            at = min(len(states) - 1, at + 1)
    assert then == "end" and sent == [("E", i) for i in range(n)], sent


def test_liveness_is_proven_by_more_events_or_a_renewed_lease_only_while_live() -> None:
    from bindloop.hosts.chat.follow import Liveness

    seen = Liveness()
    assert not seen.alive("r1", logged=3, lease_until_ms=100, live=True)  # first sight
    assert not seen.alive("r1", logged=3, lease_until_ms=100, live=True)  # nothing moved
    assert seen.alive("r1", logged=3, lease_until_ms=150, live=True)  # renewed
    assert not seen.alive("r1", logged=3, lease_until_ms=150, live=False)  # lease out
    assert not seen.alive("r2", logged=9, lease_until_ms=900, live=True)  # another run: afresh
    assert seen.alive("r2", logged=10, lease_until_ms=900, live=True)  # logged more


def test_the_worker_s_own_model_over_http_continues_to_the_same_bytes() -> None:
    """The same with what the Worker runs: its routed model (agent.build_model, which folds its
    own turns: ``complete``) over a scripted OpenAI-chat provider on 127.0.0.1, its tools."""
    from bindloop.hosts.workers import agent

    from bindloop.agent.middleware import WrappedModel

    from bindloop.hosts.transports.httpx import HttpxTransport
    from harness.fixtures.scripted_server import ScriptedProviderServer, turn_reply
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    def policy(request: Any) -> Any:
        body = msgspec.json.decode(request.body)
        last = body["messages"][-1]
        turn = (final_answer(f"Counted {last['content']} words.") if last["role"] == "tool" else
                tool_call_turn([tool_call("word_count", {"text": "a b c"}, id="wc1")],
                               text="Counting."))
        return turn_reply("openai_chat", turn, stream=True, model=body["model"])

    server = ScriptedProviderServer().start()
    server.set_responder("p", policy)
    try:
        cfg = agent.config_from_env(tools=TOOLS, env=SimpleNamespace(
            PROVIDER_BASE_URL=server.base_url("p"), PROVIDER_MODEL="m", PROVIDER_API_KEY="sk"))

        def model() -> Any:
            return agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(
                p.base_url, headers=h), on_turn_event=lambda _e: None, turn_prefix="t",
                first_turn=0)

        folds: list[str] = []

        class Spy(WrappedModel):
            """The model, noting which of its two ways each turn went through."""

            def stream(self, *args: Any) -> Any:
                folds.append("stream")
                return self._inner.stream(*args)

            def complete(self, *args: Any) -> Any:
                folds.append("complete")
                return self._inner.complete(*args)

        chat = ChatInput(chat_id="w", protocol="ui", transcript=(UserMessage(content="count"),))

        async def go(chat: ChatInput, frames: RecordedFrames,
                     resumed: bool = False) -> tuple[list[bytes], list[Save]]:
            out: list[bytes] = []
            saves: list[Save] = []

            async def save(_c: ChatInput, cp: LoopCheckpoint) -> None:
                saves.append(Save(cp, len(out), encode_fed(frames.fed)))

            runner = agent_runner(Spy(model()), tools=TOOLS, on_checkpoint=save)
            assert await drive_run(runner, chat, frames, out.extend, resumed=resumed) == "finished"
            return out, saves

        async def main() -> None:
            for protocol in ("ui", "ag-ui"):
                ask = msgspec.structs.replace(chat, protocol=protocol)
                whole, saves = await go(ask, RecordedFrames(frames_for(protocol)))
                assert len(saves) == 1
                recorder, prefix = replay(frames_for(protocol), decode_fed(saves[0].fed))
                again = msgspec.structs.replace(ask, transcript=saves[0].checkpoint.messages,
                                                checkpoint=saves[0].checkpoint)
                rest, _ = await go(again, recorder, resumed=True)
                assert prefix == whole[:saves[0].offset] and prefix + rest == whole

        anyio.run(main)
        # The model's own fold served every turn: the turn counter hid nothing of the model.
        assert folds and set(folds) == {"complete"}
    finally:
        server.stop()
