"""2026-07-28 Multi Round-Trip input kept in the run's checkpoint: an agent's MCP tool call that
the server answers ``input_required`` (a form elicitation and a sampling request, with a
``requestState``) suspends the run; a fresh process loads the stored checkpoint, answers the
elicitation, re-issues the call once (the sampling answered through the run's model) and resumes
the run to its end. Against the official SDK's server (``reserve_seat``) over loopback HTTP,
each step a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import msgspec
import pytest

from bindloop.contracts import ToolSuspend
from bindloop.errors import UsageError
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.loop import OpenSuspend
from bindloop.mcp import (
    McpHttpClient,
    load_mcp_tools,
)
from bindloop.mcp.server_requests import (
    ElicitationContentError,
    ElicitationResult,
    McpInputPending,
    PendingElicitations,
    ServerRequestHandlers,
    answer_mcp_input,
    pending_mcp_inputs,
)

PROGRAM = r'''
import sys
import anyio
from bindloop.agent import ChatResult, create_agent, equip_instruction, equip_mcp, prompt_chat, \
    resume_chat
from bindloop.contracts import ToolMessage, tool_outcome_message
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.mcp import McpHttpClient
from bindloop.mcp.server_requests import (
    ElicitationResult,
    McpSampling,
    PendingElicitations,
    ServerRequestHandlers,
    answer_mcp_input,
    claim_mcp_input,
    pending_mcp_inputs,
)
from bindloop.checkpoints import parse_loop_checkpoint, serialize_loop_checkpoint
from bindloop.stores import CheckpointConflictError
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

url, db, step = sys.argv[1], sys.argv[2], sys.argv[3]
seen_file = db + ".seen"
store = SqliteStore(db)
if step == "start":
    model = scripted_stream_model([tool_call_turn([tool_call(
        "seats__reserve_seat", {"flight": "BL7"}, id="call-1")])])
else:  # the sampling input first, then the resumed run's last turn: one model, the run's
    model = scripted_stream_model([final_answer("Welcome aboard!"), final_answer("booked")])

async def main() -> None:
    handlers = ServerRequestHandlers(elicitation=PendingElicitations(durable=True),
                                     sampling=McpSampling(model))
    transport = HttpxTransport(url)
    async with McpHttpClient(transport, server="seats", handlers=handlers) as client:
        async def start(_: None) -> ChatResult:
            equip_instruction("Reserve a seat on BL7.")
            await equip_mcp(client, allow=["reserve_seat"], prefix="seats")
            return await prompt_chat(on_checkpoint=store.save_checkpoint)

        async def answer(_: None) -> ChatResult:
            await equip_mcp(client, allow=["reserve_seat"], prefix="seats")
            if step == "answer":
                (ident,) = store.checkpoint_ids()
                cp = store.load_checkpoint(ident)
                with open(seen_file, "wb") as f:  # what this answerer saw, for a second one
                    f.write(serialize_loop_checkpoint(cp))
            else:  # a second answerer, from the very checkpoint the first one loaded
                with open(seen_file, "rb") as f:
                    cp = parse_loop_checkpoint(f.read())
            (pending,) = pending_mcp_inputs(cp)
            (question,) = pending.elicitations()
            print("question", question.message)
            claimed = claim_mcp_input(cp, pending)
            store.save_checkpoint(claimed)  # revision-fenced: one answerer gets past this line
            outcome = await answer_mcp_input(client, pending, {
                question.id: ElicitationResult(action="accept", content={"seat": "12C"})})
            reply = tool_outcome_message(pending.tool_call_id, outcome).content
            return await resume_chat(claimed, reply=reply, tool_call_id=pending.tool_call_id,
                                     on_checkpoint=store.save_checkpoint)

        try:
            out = await create_agent(id="travel", handler=start if step == "start" else answer,
                                     model=model)(None)
        except CheckpointConflictError as exc:
            print("refused", type(exc).__name__)
            return
        print("status", out.checkpoint.status)
        if step == "start":
            print("pending", len(pending_mcp_inputs(out.checkpoint)))
        else:
            (tool,) = [m for m in out.checkpoint.messages if isinstance(m, ToolMessage)]
            print("tool", tool.content)
            print("left", len(pending_mcp_inputs(out.checkpoint)))
    await transport.aclose()

anyio.run(main)
'''


def _run(script: Path, url: str, db: Path, step: str) -> list[str]:
    done = subprocess.run([sys.executable, str(script), url, str(db), step],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


async def _rounds(url: str) -> dict[str, int]:
    transport = HttpxTransport(url)
    try:
        async with McpHttpClient(transport, server="seats", listen=False) as client:
            result = await client.call_tool("reserve_rounds", {})
    finally:
        await transport.aclose()
    counts: dict[str, int] = json.loads(result.content[0]["text"])
    return counts


def test_the_question_survives_a_restart_and_the_call_is_reissued_once(
        tmp_path: Path, reference_features_url: str) -> None:
    before = anyio.run(_rounds, reference_features_url)
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    db = tmp_path / "store.db"
    assert _run(script, reference_features_url, db, "start") == [
        "status waiting_for_reply", "pending 1"]
    mid = anyio.run(_rounds, reference_features_url)
    assert mid["asked"] == before["asked"] + 1 and mid["reissued"] == before["reissued"]
    out = _run(script, reference_features_url, db, "answer")  # a new process
    assert out == ["question Which seat on BL7?", "status finished",
                   "tool seat 12C on BL7, meal False; greeting: Welcome aboard!", "left 0"]
    after = anyio.run(_rounds, reference_features_url)
    assert after["reissued"] == mid["reissued"] + 1  # exactly once, with the server's state
    assert after["asked"] == mid["asked"] and after["bad_state"] == before["bad_state"]
    # A second process answering the checkpoint the first one loaded: its claim is refused by
    # the store, and the call is not re-issued again.
    assert _run(script, reference_features_url, db, "again") == [
        "question Which seat on BL7?", "refused CheckpointConflictError"]
    assert anyio.run(_rounds, reference_features_url)["reissued"] == after["reissued"]


@pytest.fixture
async def client(reference_features_url: str) -> AsyncIterator[McpHttpClient]:
    transport = HttpxTransport(reference_features_url)
    handlers = ServerRequestHandlers(elicitation=PendingElicitations(durable=True))
    try:
        async with McpHttpClient(transport, server="seats", handlers=handlers,
                                 listen=False) as made:
            yield made
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_the_mcp_tool_suspends_with_the_request_as_its_state(client: McpHttpClient) -> None:
    (tool,) = (await load_mcp_tools(client, allow=["reserve_seat"])).tools
    outcome = await tool.execute('{"flight": "ZZ1"}', None)
    assert isinstance(outcome, ToolSuspend) and outcome.mode == "waiting_for_reply"
    assert outcome.detail == "Which seat on ZZ1?" and outcome.state is not None
    held = OpenSuspend(tool_call_id="c9", tool_name="seats__reserve_seat",
                       mode="waiting_for_reply", detail=outcome.detail, state=outcome.state)

    class _Cp:
        open_suspends = (held,)

    (pending,) = pending_mcp_inputs(_Cp())
    assert pending.tool_call_id == "c9" and pending.arguments == {"flight": "ZZ1"}
    assert pending.request_state and set(pending.input_requests) == {"seat", "greeting"}


@pytest.mark.anyio
async def test_bad_answers_are_refused_before_anything_is_sent(client: McpHttpClient) -> None:
    with pytest.raises(McpInputPending) as waiting:
        await client.call_tool("reserve_seat", {"flight": "ZZ2"})
    pending = waiting.value.pending
    with pytest.raises(ElicitationContentError) as bad:
        await answer_mcp_input(client, pending, {
            "seat": ElicitationResult(action="accept", content={"seat": "row 12"})})
    assert bad.value.pointer == "/seat"
    with pytest.raises(UsageError, match="no answer for"):
        await answer_mcp_input(client, pending, {})
    with pytest.raises(UsageError, match="no elicitation named"):
        await answer_mcp_input(client, pending, {
            "seat": ElicitationResult(action="decline"),
            "other": ElicitationResult(action="decline")})
    other = McpHttpClient(HttpxTransport("http://127.0.0.1:9/mcp"), server="elsewhere")
    with pytest.raises(UsageError, match="'seats'"):
        await answer_mcp_input(other, pending, {"seat": ElicitationResult(action="decline")})


@pytest.mark.anyio
async def test_an_input_without_a_port_is_refused_before_the_reissue(
        reference_features_url: str) -> None:
    # No sampling port in this process: the server's sampling input cannot be answered, which
    # is refused before the call goes again (an input response has no error form).
    from bindloop.mcp import McpProtocolError

    transport = HttpxTransport(reference_features_url)
    handlers = ServerRequestHandlers(elicitation=PendingElicitations(durable=True))
    try:
        async with McpHttpClient(transport, server="seats", handlers=handlers,
                                 listen=False) as client:
            with pytest.raises(McpInputPending) as waiting:
                await client.call_tool("reserve_seat", {"flight": "ZZ3"})
            with pytest.raises(McpProtocolError, match="greeting"):
                await answer_mcp_input(client, waiting.value.pending,
                                       {"seat": ElicitationResult(action="decline")})
    finally:
        await transport.aclose()


def test_a_claim_is_one_revision_on_and_cannot_be_taken_twice() -> None:
    from bindloop.contracts import UserMessage
    from bindloop.mcp.server_requests import PendingMcpInput, claim_mcp_input
    from bindloop.checkpoints import create_loop_checkpoint

    entry = PendingMcpInput(server="seats", tool="reserve_seat", arguments={"flight": "X"},
                            input_requests={}, request_state="s")
    from bindloop.mcp._deferred import encode_pending

    cp = msgspec.structs.replace(
        create_loop_checkpoint(execution_id="e1", max_iterations=5,
                               messages=(UserMessage(content="hi"),)),
        status="waiting_for_reply", open_suspends=(OpenSuspend(
            tool_call_id="c1", tool_name="seats__reserve_seat", mode="waiting_for_reply",
            state=encode_pending(entry)),))
    (pending,) = pending_mcp_inputs(cp)
    claimed = claim_mcp_input(cp, pending)
    assert claimed.revision == cp.revision + 1
    (taken,) = pending_mcp_inputs(claimed)
    assert taken.claimed and not pending.claimed and taken.request_state == "s"
    with pytest.raises(UsageError, match="claimed already"):
        claim_mcp_input(claimed, taken)
    with pytest.raises(UsageError, match="no MCP input for call 'c2'"):
        claim_mcp_input(cp, msgspec.structs.replace(pending, tool_call_id="c2"))
    with pytest.raises(UsageError, match="LoopCheckpoint"):
        claim_mcp_input(object(), pending)  # type: ignore[arg-type]


def test_a_damaged_state_is_a_usage_error() -> None:
    held = OpenSuspend(tool_call_id="c1", tool_name="t", mode="waiting_for_reply",
                       state='{"kind":"mcp-input","server":1}')
    other = OpenSuspend(tool_call_id="c2", tool_name="t", mode="waiting_for_reply",
                        state="not mine")

    class _Cp:
        open_suspends = (held, other)

    with pytest.raises(UsageError, match="'c1'.*does not decode"):
        pending_mcp_inputs(_Cp())

    class _Mine:
        open_suspends = (other,)

    assert pending_mcp_inputs(_Mine()) == ()

    huge = OpenSuspend(tool_call_id="c3", tool_name="t", mode="waiting_for_reply",
                       state='{"kind":"mcp-input"' + " " * (1024 * 1024))

    class _Huge:
        open_suspends = (huge,)

    with pytest.raises(UsageError, match="'c3'.*over"):
        pending_mcp_inputs(_Huge())
