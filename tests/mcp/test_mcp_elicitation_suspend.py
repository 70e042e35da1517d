"""Elicitation surfaced to the host as a pending answer: an agent run whose MCP tool call meets
the server's ``elicitation/create`` waits, in-process, while the host lists the pending
elicitation and answers it (the content checked against the requested schema), and the run goes
on to the tool's result; a timeout answers ``cancel``; an aborted run takes its entry away.
Against the official SDK's server (``book_table``) over loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_instruction,
    equip_mcp,
    prompt_chat,
    run_with,
)
from bindloop.contracts import ToolMessage
from bindloop.errors import RunCancelledError
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.mcp import McpHttpClient
from bindloop.mcp import McpLimits
from bindloop.mcp.server_requests import (
    ElicitationContentError,
    ElicitationNotPendingError,
    PendingElicitation,
    PendingElicitations,
    ServerRequestHandlers,
)
from bindloop.signal import AbortController
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


@pytest.fixture
async def transport(reference_features_url: str) -> AsyncIterator[HttpxTransport]:
    t = HttpxTransport(reference_features_url)
    try:
        yield t
    finally:
        await t.aclose()


def _booker(client: McpHttpClient) -> Any:
    model = scripted_stream_model([
        tool_call_turn([tool_call("ref__book_table", {"restaurant": "Chez Ada"}, id="b1")]),
        final_answer("done")])

    async def handler(_: None) -> ChatResult:
        equip_instruction("Book a table at Chez Ada.")
        await equip_mcp(client, allow=["book_table"], prefix="ref")
        return await prompt_chat(max_turn_steps=3)

    return create_agent(id="booker", handler=handler, model=model)


def _tool_text(result: ChatResult) -> str:
    (answer,) = [m for m in result.delta if isinstance(m, ToolMessage)]
    return str(answer.content)


async def test_the_run_waits_for_the_hosts_answer_checked_against_the_schema(
        transport: HttpxTransport) -> None:
    seen: list[PendingElicitation] = []
    inbox = PendingElicitations(on_pending=seen.append)
    handlers = ServerRequestHandlers(elicitation=inbox)
    outcome: dict[str, Any] = {}
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
        booker = _booker(client)

        async def run() -> None:
            outcome["result"] = await booker(None)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                pending = await inbox.next()
                assert pending is not None and inbox.pending() == (pending,)
                assert (pending.server, pending.tool, pending.agent) == (
                    "ref", "book_table", "booker")
                assert pending.mode == "form" and "Chez Ada" in pending.message
                assert set((pending.requested_schema or {})["properties"]) == {"party", "time"}
                with pytest.raises(ElicitationContentError) as too_many:
                    inbox.accept(pending, {"party": 40, "time": "19:30"})
                assert too_many.value.pointer == "/party"
                with pytest.raises(ElicitationContentError) as missing:
                    inbox.accept(pending, {"party": 4})
                assert "time" in str(missing.value)
                assert inbox.pending() == (pending,)  # refused content sends nothing
                inbox.accept(pending, {"party": 4, "time": "19:30"})
    result = outcome["result"]
    assert result.stop_reason == "done"
    assert "booked Chez Ada for 4 at 19:30" in _tool_text(result)
    assert seen == [pending] and inbox.pending() == ()
    with pytest.raises(ElicitationNotPendingError):
        inbox.decline(pending)


@pytest.mark.parametrize("answer", ["decline", "cancel", "timeout"])
async def test_decline_cancel_and_timeout_reach_the_tool(transport: HttpxTransport,
                                                         answer: str) -> None:
    inbox = PendingElicitations(timeout_ms=150 if answer == "timeout" else None)
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=ServerRequestHandlers(
            elicitation=inbox)) as client:
        booker = _booker(client)
        outcome: dict[str, Any] = {}

        async def run() -> None:
            outcome["result"] = await booker(None)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                pending = await inbox.next()
                assert pending is not None
                if answer == "decline":
                    inbox.decline(pending)
                elif answer == "cancel":
                    inbox.cancel(pending.id)
    expected = "cancel" if answer == "timeout" else answer
    assert f"booking {expected}" in _tool_text(outcome["result"])
    assert inbox.pending() == ()


async def test_an_aborted_run_takes_its_pending_elicitation_away(
        transport: HttpxTransport) -> None:
    inbox = PendingElicitations(timeout_ms=None)
    controller = AbortController()
    outcome: dict[str, Any] = {}
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=ServerRequestHandlers(
            elicitation=inbox)) as client:
        booker = _booker(client)

        async def run() -> None:
            try:
                await run_with(lambda: booker(None), signal=controller.signal)
            except RunCancelledError as exc:
                outcome["error"] = exc

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                pending = await inbox.next()
                assert pending is not None
                controller.abort("the user left")
    assert "aborted" in str(outcome["error"])
    assert inbox.pending() == ()
    with pytest.raises(ElicitationNotPendingError):
        inbox.accept(pending, {"party": 2, "time": "20:00"})


async def test_next_times_out_and_url_entries_take_no_content() -> None:
    from bindloop.mcp.server_requests import ElicitationRequest
    from bindloop.errors import UsageError

    inbox = PendingElicitations()
    assert await inbox.next(timeout_ms=20) is None
    answers: list[Any] = []
    async with anyio.create_task_group() as tg:
        async def ask() -> None:
            answers.append(await inbox(ElicitationRequest(
                message="Connect your bank", mode="url", url="https://bank.example/link",
                elicitation_id="bank-1")))
        tg.start_soon(ask)
        pending = await inbox.next()
        assert pending is not None and (pending.server, pending.tool, pending.agent) == (
            None, None, None)
        with pytest.raises(UsageError, match="URL mode"):
            inbox.accept(pending, {"pin": "1234"})
        inbox.accept(pending)
    assert answers[0].action == "accept" and answers[0].content is None


_FIELD = st.one_of(
    st.fixed_dictionaries({"type": st.just("integer")},
                          optional={"minimum": st.integers(-5, 5), "maximum": st.integers(-5, 5),
                                    "default": st.integers(-9, 9)}),
    st.fixed_dictionaries({"type": st.just("string")},
                          optional={"maxLength": st.integers(0, 4),
                                    "enum": st.lists(st.sampled_from("abc"), min_size=1,
                                                     max_size=3, unique=True),
                                    "default": st.sampled_from(["", "a", "abcdef"])}),
    st.fixed_dictionaries({"type": st.just("boolean")}, optional={"default": st.booleans()}))
_VALUE = st.one_of(st.integers(-9, 9), st.sampled_from(["", "a", "b", "zzzzz"]), st.booleans(),
                   st.none())


@given(fields=st.dictionaries(st.sampled_from(["a", "b", "c"]), _FIELD, min_size=1),
       required=st.lists(st.sampled_from(["a", "b", "c"]), unique=True),
       content=st.dictionaries(st.sampled_from(["a", "b", "c"]), _VALUE))
@settings(max_examples=60, deadline=None)
def test_accept_refuses_exactly_what_the_reference_validator_refuses(
        fields: dict[str, Any], required: list[str], content: dict[str, Any]) -> None:
    """``accept`` raises ElicitationContentError exactly when the content, with the schema's
    defaults filled in, is invalid for the ``jsonschema`` reference validator; what it sends is
    that filled content."""
    from bindloop.mcp.server_requests import ElicitationRequest

    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": fields,
              "required": [r for r in required if r in fields]}
    filled = {**{k: f["default"] for k, f in fields.items() if "default" in f}, **content}
    valid = jsonschema.Draft202012Validator(schema).is_valid(filled)
    outcome: dict[str, Any] = {}

    async def scenario() -> None:
        inbox = PendingElicitations()
        async with anyio.create_task_group() as tg:
            async def ask() -> None:
                outcome["answer"] = await inbox(ElicitationRequest(message="?",
                                                                   requested_schema=schema))
            tg.start_soon(ask)
            pending = await inbox.next()
            assert pending is not None
            try:
                inbox.accept(pending, content)
            except ElicitationContentError:
                outcome["refused"] = True
                inbox.cancel(pending)

    anyio.run(scenario)
    assert outcome.get("refused", False) is (not valid)
    if valid:
        assert outcome["answer"].content == filled


async def test_a_url_elicitation_required_error_becomes_a_pending_url_entry(
        transport: HttpxTransport) -> None:
    import httpx

    inbox = PendingElicitations()
    outcome: dict[str, Any] = {}
    async with McpHttpClient(transport, server="ref", modern_versions=(),
                             handlers=ServerRequestHandlers(url_elicitation=inbox),
                             limits=McpLimits(url_elicitation_wait_ms=20_000)) as client:
        async def call() -> None:
            outcome["result"] = await client.call_tool("link_account", {})

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                pending = await inbox.next()
                assert pending is not None and pending.mode == "url" and pending.url
                assert (pending.server, pending.tool) == ("ref", "link_account")
                async with httpx.AsyncClient() as http:  # the user follows the link
                    (await http.get(pending.url)).raise_for_status()
                inbox.accept(pending)
    assert outcome["result"].content[0]["text"] == "account linked"


async def test_an_abort_while_the_user_is_at_the_url_stops_the_call(
        transport: HttpxTransport) -> None:
    inbox = PendingElicitations()
    controller = AbortController()
    outcome: dict[str, Any] = {}
    async with McpHttpClient(transport, server="ref", modern_versions=(),
                             handlers=ServerRequestHandlers(url_elicitation=inbox)) as client:
        async def call() -> None:
            try:
                await client.call_tool("link_account", {}, signal=controller.signal)
            except RunCancelledError as exc:
                outcome["error"] = exc

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                assert await inbox.next() is not None
                controller.abort("the user closed the tab")
    assert "the user closed the tab" in str(outcome["error"])
    assert inbox.pending() == ()
