"""Requests the server sends the client, answered through the host's ports: sampling (a model the
host passes, behind a policy), elicitation (the host's handler; omitted fields get the schema's
defaults), roots (a host-given list), anything else refused; and logging/setLevel."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from bindloop.contracts import Message, ModelTurnResult, SystemMessage, UserMessage
from bindloop.errors import UsageError
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.model import ModelRequest
from bindloop.testing import function_model
from harness.fixtures.scripted_server import ScriptedProviderServer
from bindloop.mcp.server import McpRequestRefused
from bindloop.mcp.server_requests import (
    ElicitationRequest,
    ElicitationResult,
    McpRoot,
    McpSampling,
    SamplingRequest,
    ServerRequestHandlers,
)
from bindloop.mcp.session import (
    McpDiscarded,
    McpElicitationComplete,
)
from test_mcp_hostile import McpScript, client, json_reply, result, sse_reply

pytestmark = pytest.mark.anyio

SAMPLE = {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {
    "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
    "systemPrompt": "Be brief.", "maxTokens": 20}}
ELICIT = {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {
    "message": "Who are you?", "requestedSchema": {"type": "object", "properties": {
        "name": {"type": "string", "default": "Ada"}, "age": {"type": "integer"}}}}}
ROOTS = {"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}
OTHER = {"jsonrpc": "2.0", "id": "x1", "method": "tasks/list"}


def _server(scripted: ScriptedProviderServer, *requests: dict[str, Any]) -> McpScript:
    script = McpScript(tools_call=lambda rpc, _: sse_reply(
        *((None, r) for r in requests),
        (None, result(rpc, {"content": [{"type": "text", "text": "done"}]}))))
    scripted.set_responder("mcp", script)
    return script


def _answers(script: McpScript) -> dict[str, dict[str, Any]]:
    return {b["id"]: b for b in script.bodies() if "method" not in b and "id" in b}


async def test_every_kind_of_server_request_is_answered_through_its_port(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = _server(scripted, SAMPLE, ELICIT, ROOTS, OTHER)
    seen: dict[str, Any] = {}

    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        seen["messages"], seen["tools"] = messages, list(request.tools)
        return ModelTurnResult(text="4", finish_reason="stop")

    async def elicit(request: ElicitationRequest) -> ElicitationResult:
        seen["elicit"] = request
        return ElicitationResult(action="accept", content={"age": 36})

    handlers = ServerRequestHandlers(sampling=McpSampling(function_model(model), model_name="scripted"),
                                     elicitation=elicit,
                                     roots=lambda: [McpRoot(uri="file:///srv", name="srv")])
    mcp = client(transport, handlers=handlers)
    await mcp.connect()
    assert (await mcp.call_tool("add", {"a": 1, "b": 2})).content[0]["text"] == "done"
    capabilities = script.bodies()[0]["params"]["capabilities"]
    assert capabilities == {"roots": {"listChanged": True}, "sampling": {"tools": {}},
                            "elicitation": {"form": {}}}
    answers = _answers(script)
    assert answers["s1"]["result"] == {"role": "assistant", "model": "scripted",
                                       "content": {"type": "text", "text": "4"},
                                       "stopReason": "endTurn"}
    assert seen["messages"] == [SystemMessage(content="Be brief."), UserMessage(content="2+2?")]
    assert seen["tools"] == []
    assert seen["elicit"].message == "Who are you?"
    # The user gave the age; the name they left out is the schema's default.
    assert answers["e1"]["result"] == {"action": "accept", "content": {"age": 36, "name": "Ada"}}
    assert answers["r1"]["result"] == {"roots": [{"uri": "file:///srv", "name": "srv"}]}
    assert answers["x1"]["error"]["code"] == -32601


async def test_a_policy_refuses_sampling_and_a_failing_port_is_an_internal_error(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = _server(scripted, SAMPLE, ELICIT)

    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        raise AssertionError("a refused request never reaches the model")

    async def broken(request: ElicitationRequest) -> ElicitationResult:
        raise RuntimeError("the form crashed with secret sk-live-0123456789abcdef")

    def policy(request: SamplingRequest) -> bool | str:
        return "over budget" if request.max_tokens > 10 else True

    mcp = client(transport, handlers=ServerRequestHandlers(
        sampling=McpSampling(function_model(model), policy=policy), elicitation=broken))
    await mcp.connect()
    await mcp.call_tool("add", {"a": 1, "b": 2})
    answers = _answers(script)
    assert answers["s1"]["error"]["code"] == -1
    assert "over budget" in answers["s1"]["error"]["message"]
    assert answers["e1"]["error"]["code"] == -32603
    assert "RuntimeError" in answers["e1"]["error"]["message"]
    assert "sk-live" not in json.dumps(answers["e1"])  # the server hears the type, not the text


async def test_a_handler_can_refuse_with_its_own_code(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = _server(scripted, ELICIT)

    async def decline(request: ElicitationRequest) -> ElicitationResult:
        raise McpRequestRefused("no forms in batch mode", code=-32000)

    mcp = client(transport, handlers=ServerRequestHandlers(elicitation=decline))
    await mcp.connect()
    await mcp.call_tool("add", {"a": 1, "b": 2})
    assert _answers(script)["e1"]["error"] == {"code": -32000, "message": "no forms in batch mode"}


async def test_a_handler_answering_the_wrong_type_is_an_internal_error(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = _server(scripted, ELICIT)

    async def sloppy(request: ElicitationRequest) -> ElicitationResult:
        return {"action": "accept"}  # type: ignore[return-value]

    mcp = client(transport, handlers=ServerRequestHandlers(elicitation=sloppy))
    await mcp.connect()
    assert (await mcp.call_tool("add", {"a": 1, "b": 2})).content[0]["text"] == "done"
    error = _answers(script)["e1"]["error"]
    assert error["code"] == -32603 and "not an ElicitationResult" in error["message"]


async def test_without_handlers_nothing_is_declared_and_everything_is_refused(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = _server(scripted, SAMPLE, ROOTS)
    mcp = client(transport)
    await mcp.connect()
    await mcp.call_tool("add", {"a": 1, "b": 2})
    assert script.bodies()[0]["params"]["capabilities"] == {}
    assert {a["error"]["code"] for a in _answers(script).values()} == {-32601}


async def test_set_log_level(scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = McpScript(logging_setLevel=lambda rpc, _: json_reply(result(rpc, {})))
    scripted.set_responder("mcp", script)
    mcp = client(transport)
    await mcp.connect()
    await mcp.set_log_level("warning")
    assert script.bodies()[-1]["method"] == "logging/setLevel"
    assert script.bodies()[-1]["params"] == {"level": "warning"}
    with pytest.raises(UsageError, match="verbose"):
        await mcp.set_log_level("verbose")




async def test_a_completion_for_an_elicitation_never_accepted_is_discarded(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    _server(scripted, {"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                       "params": {"elicitationId": "not-mine"}})
    events: list[Any] = []
    mcp = client(transport, on_event=events.append)
    await mcp.connect()
    await mcp.call_tool("add", {"a": 1, "b": 2})
    assert any(isinstance(e, McpDiscarded) and "'not-mine'" in e.reason for e in events)
    assert not any(isinstance(e, McpElicitationComplete) for e in events)
